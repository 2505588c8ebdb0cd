//! The delivery history's items (see [`keys`](super::keys) for the layout):
//! written from jobs and attempts, read back into the port's types.

use std::collections::HashMap;

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::AttributeValue;

use super::codec::{keyed, n, number, s, text};
use super::keys::{
    attempt_sk, history_pk, key, notification_pk, summary_sk, ATTEMPT, NOTIFICATION_SK,
};
use super::Item;
use crate::history::{
    self, AttemptRecord, NotificationStatus, NotificationSummary, Outcome, Trigger,
};
use crate::queue::DeliveryJob;
use crate::store::StoreError;

/// The key of a job's notification summary.
pub(super) fn summary_key(job: &DeliveryJob) -> Item {
    key(
        history_pk(&job.org_id, &job.subscription_id),
        summary_sk(job.created_at, &job.id),
    )
}

pub(super) fn summary_item(event_id: &str, job: &DeliveryJob, ttl: AttributeValue) -> Item {
    let mut item = pending_summary(event_id, job, ttl);
    item.insert("uuid".into(), s(job.id.to_string()));
    item.insert("subscriptionId".into(), s(job.subscription_id.to_string()));
    item.insert("event".into(), s(history::event_of(&job.body)));
    item.insert("createdAt".into(), n(job.created_at));
    item
}

/// What every new summary holds: its key, its event, PENDING, no attempt
/// yet, the next one due at creation, its expiry.
fn pending_summary(event_id: &str, job: &DeliveryJob, ttl: AttributeValue) -> Item {
    let mut item = summary_key(job);
    item.insert("eventId".into(), s(event_id.to_owned()));
    item.insert(
        "status".into(),
        s(NotificationStatus::Pending.as_str().into()),
    );
    item.insert("attempts".into(), n(0));
    item.insert("nextAttemptAt".into(), n(job.created_at));
    item.insert("ttl".into(), ttl);
    item
}

/// The payload of a summary whose notification id carries its time.
pub(super) const PAYLOAD: &str = "payload";

/// The summary of a notification whose id carries its time (UUIDv8), which
/// holds its payload: what the key and the payload say (uuid, subscription,
/// creation time, event) is not repeated, so that with its two inline
/// attempts it stays under 1 KB and each write of it costs one unit
/// (`tests::a_delivered_timed_summary_is_one_write_unit`).
pub(super) fn timed_summary_item(event_id: &str, job: &DeliveryJob, ttl: AttributeValue) -> Item {
    let mut item = pending_summary(event_id, job, ttl);
    item.insert(PAYLOAD.into(), s(job.body.clone()));
    if let Some(traceparent) = &job.traceparent {
        item.insert("traceparent".into(), s(traceparent.clone()));
    }
    item
}

/// A summary's uuid: its attribute, or its sort key's (`<ms>#<uuid>`).
pub(super) fn summary_uuid(item: &Item) -> Result<String, StoreError> {
    match opt_text(item, "uuid") {
        Some(uuid) => Ok(uuid),
        None => keyed(item, sort_key_part(item, 1)),
    }
}

/// A summary's creation time: its attribute, or its sort key's.
pub(super) fn summary_created_at(item: &Item) -> Result<i64, StoreError> {
    match opt_number(item, "createdAt")? {
        Some(at) => Ok(at),
        None => keyed(
            item,
            sort_key_part(item, 0)?
                .parse()
                .map_err(|_| super::codec::corrupt("sk")),
        ),
    }
}

fn sort_key_part(item: &Item, part: usize) -> Result<String, StoreError> {
    text(item, "sk")?
        .split('#')
        .nth(part)
        .map(str::to_owned)
        .ok_or_else(|| super::codec::corrupt("sk"))
}

pub(super) fn notification_item(job: &DeliveryJob, ttl: AttributeValue) -> Item {
    let mut item = key(
        notification_pk(&job.org_id, &job.id),
        NOTIFICATION_SK.into(),
    );
    item.insert("subscriptionId".into(), s(job.subscription_id.to_string()));
    item.insert("createdAt".into(), n(job.created_at));
    item.insert("payload".into(), s(job.body.clone()));
    if let Some(traceparent) = &job.traceparent {
        item.insert("traceparent".into(), s(traceparent.clone()));
    }
    item.insert("ttl".into(), ttl);
    item
}

pub(super) fn attempt_item(job: &DeliveryJob, a: &AttemptRecord, ttl: AttributeValue) -> Item {
    let random = u32::from_le_bytes(crate::secret::random_bytes::<4>());
    let mut item = key(
        notification_pk(&job.org_id, &job.id),
        attempt_sk(a.at, random),
    );
    item.insert("at".into(), n(a.at));
    item.insert("durationMs".into(), n(a.duration_ms as i64));
    if let Some(status) = a.http_status {
        item.insert("httpStatus".into(), n(i64::from(status)));
    }
    if let Some(code) = &a.code {
        item.insert("code".into(), s(code.clone()));
    }
    if !a.response_body.is_empty() {
        item.insert("responseBody".into(), s(a.response_body.clone()));
    }
    item.insert("trigger".into(), s(a.trigger.as_str().into()));
    item.insert("ttl".into(), ttl);
    item
}

/// The summary's list of attempts kept inline (see [`inline_attempt`]).
pub(super) const INLINE_ATTEMPTS: &str = "inlineAttempts";
/// An attempt whose answer is at most this long is kept inline in its
/// summary, at most [`INLINE_MAX`] of them: with the ~0.4 KB summary they
/// stay under 1 KB, so the update that records an attempt costs 1 write
/// unit instead of 2 (its own item, then the summary's update).
const INLINE_ANSWER: usize = 128;
const INLINE_MAX: i64 = 2;

/// The attempt as an inline entry of its summary, if it is short enough.
pub(super) fn inline_attempt(a: &AttemptRecord) -> Option<AttributeValue> {
    if a.response_body.len() > INLINE_ANSWER || a.code.as_ref().is_some_and(|c| c.len() > 64) {
        return None;
    }
    let mut m = HashMap::from([
        ("at".to_owned(), n(a.at)),
        ("durationMs".to_owned(), n(a.duration_ms as i64)),
        ("trigger".to_owned(), s(a.trigger.as_str().into())),
    ]);
    if let Some(status) = a.http_status {
        m.insert("httpStatus".into(), n(i64::from(status)));
    }
    if let Some(code) = &a.code {
        m.insert("code".into(), s(code.clone()));
    }
    if !a.response_body.is_empty() {
        m.insert("responseBody".into(), s(a.response_body.clone()));
    }
    Some(AttributeValue::M(m))
}

/// The attempts kept inline in a summary item.
pub(super) fn inline_attempts_of(summary: &Item) -> Result<Vec<AttemptRecord>, StoreError> {
    keyed(summary, inline_attempts(summary))
}

fn inline_attempts(summary: &Item) -> Result<Vec<AttemptRecord>, StoreError> {
    match summary.get(INLINE_ATTEMPTS) {
        Some(AttributeValue::L(entries)) => entries
            .iter()
            .map(|e| match e {
                AttributeValue::M(m) => parse_attempt(m),
                _ => Err(super::codec::corrupt(INLINE_ATTEMPTS)),
            })
            .collect(),
        _ => Ok(Vec::new()),
    }
}

/// Attempts of both places, oldest first.
pub(super) fn merged(
    mut items: Vec<AttemptRecord>,
    inline: &[AttemptRecord],
) -> Vec<AttemptRecord> {
    items.extend(inline.iter().cloned());
    items.sort_by_key(|a| a.at);
    items
}

/// The summary's update for an outcome: `SET` and `REMOVE` clauses and values.
pub(super) struct OutcomeUpdate {
    set: Vec<&'static str>,
    remove: Vec<&'static str>,
    values: HashMap<String, AttributeValue>,
}

impl OutcomeUpdate {
    pub(super) fn of(outcome: &Outcome) -> OutcomeUpdate {
        let mut set = vec!["#st = :st"];
        let mut remove = Vec::new();
        let mut values: HashMap<String, AttributeValue> =
            HashMap::from([(":st".to_owned(), s(outcome.status.as_str().into()))]);
        match outcome.next_attempt_at {
            Some(at) => {
                set.push("nextAttemptAt = :next");
                values.insert(":next".into(), n(at));
            }
            None => remove.push("nextAttemptAt"),
        }
        let code = match &outcome.attempt {
            Some(a) => {
                set.push("attempts = attempts + :one");
                set.push("lastAttemptAt = :at");
                set.push("durations = list_append(if_not_exists(durations, :none), :d)");
                values.insert(":one".into(), n(1));
                values.insert(":at".into(), n(a.at));
                values.insert(":none".into(), AttributeValue::L(Vec::new()));
                values.insert(
                    ":d".into(),
                    AttributeValue::L(vec![n(a.duration_ms as i64)]),
                );
                match a.http_status {
                    Some(status) => {
                        set.push("lastHttpStatus = :hs");
                        values.insert(":hs".into(), n(i64::from(status)));
                    }
                    None => remove.push("lastHttpStatus"),
                }
                a.code.clone()
            }
            None => outcome.code.clone(),
        };
        match code {
            Some(code) => {
                set.push("lastCode = :code");
                values.insert(":code".into(), s(code));
            }
            None => remove.push("lastCode"),
        }
        OutcomeUpdate {
            set,
            remove,
            values,
        }
    }

    fn expression(&self, set: &[&str]) -> String {
        let mut expression = format!("SET {}", set.join(", "));
        if !self.remove.is_empty() {
            expression.push_str(&format!(" REMOVE {}", self.remove.join(", ")));
        }
        expression
    }

    /// The update alone (the attempt, if any, in an item of its own).
    pub(super) fn plain(&self) -> (String, HashMap<String, AttributeValue>) {
        (self.expression(&self.set), self.values.clone())
    }

    /// The update appending `inline` to the summary's inline attempts
    /// (names `#ia`; the caller's condition uses `:cap`).
    pub(super) fn with_inline(
        &self,
        inline: AttributeValue,
    ) -> (String, HashMap<String, AttributeValue>) {
        let mut set = self.set.clone();
        set.push("#ia = list_append(if_not_exists(#ia, :none), :ia)");
        let mut values = self.values.clone();
        values.insert(":none".into(), AttributeValue::L(Vec::new()));
        values.insert(":ia".into(), AttributeValue::L(vec![inline]));
        values.insert(":cap".into(), n(INLINE_MAX));
        (self.expression(&set), values)
    }
}

pub(super) fn condition_failed<R>(e: &SdkError<UpdateItemError, R>) -> bool {
    matches!(
        e.as_service_error(),
        Some(UpdateItemError::ConditionalCheckFailedException(_))
    )
}

fn opt_number(item: &Item, name: &str) -> Result<Option<i64>, StoreError> {
    match item.get(name) {
        None | Some(AttributeValue::Null(_)) => Ok(None),
        Some(_) => number(item, name).map(Some),
    }
}

fn opt_text(item: &Item, name: &str) -> Option<String> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Some(v.clone()),
        _ => None,
    }
}

pub(super) fn status_of(item: &Item) -> Result<NotificationStatus, StoreError> {
    let status = text(item, "status").and_then(|status| {
        NotificationStatus::parse(&status).ok_or_else(|| super::codec::corrupt("status"))
    });
    keyed(item, status)
}

pub(super) fn parse_summary(item: &Item) -> Result<NotificationSummary, StoreError> {
    keyed(item, summary_of(item))
}

fn summary_of(item: &Item) -> Result<NotificationSummary, StoreError> {
    // A timed summary has these in its key (`HIST#<org>#<sub>`) and payload.
    let subscription_id = match opt_text(item, "subscriptionId") {
        Some(id) => id,
        None => text(item, "pk")?
            .rsplit('#')
            .next()
            .unwrap_or_default()
            .to_owned(),
    };
    let event = match opt_text(item, "event") {
        Some(event) => event,
        None => history::event_of(&text(item, PAYLOAD)?),
    };
    Ok(NotificationSummary {
        id: summary_uuid(item)?.into(),
        subscription_id: subscription_id.into(),
        event_id: text(item, "eventId")?,
        event,
        created_at: summary_created_at(item)?,
        status: status_of(item)?,
        attempts: number(item, "attempts")?.max(0) as u32,
        last_attempt_at: opt_number(item, "lastAttemptAt")?,
        next_attempt_at: opt_number(item, "nextAttemptAt")?,
        last_http_status: opt_number(item, "lastHttpStatus")?.map(|v| v as u16),
        last_code: opt_text(item, "lastCode"),
    })
}

/// The attempts among a notification partition's items, oldest first.
pub(super) fn attempts_of(items: &[Item]) -> Result<Vec<AttemptRecord>, StoreError> {
    items
        .iter()
        .filter(|i| matches!(i.get("sk"), Some(AttributeValue::S(sk)) if sk.starts_with(ATTEMPT)))
        .map(|item| keyed(item, parse_attempt(item)))
        .collect()
}

fn parse_attempt(item: &HashMap<String, AttributeValue>) -> Result<AttemptRecord, StoreError> {
    Ok(AttemptRecord {
        at: number(item, "at")?,
        duration_ms: number(item, "durationMs")?.max(0) as u64,
        http_status: opt_number(item, "httpStatus")?.map(|v| v as u16),
        code: opt_text(item, "code"),
        response_body: opt_text(item, "responseBody").unwrap_or_default(),
        trigger: Trigger::parse(&text(item, "trigger")?)
            .ok_or_else(|| super::codec::corrupt("trigger"))?,
    })
}

pub(super) fn durations(item: &Item) -> Vec<u64> {
    match item.get("durations") {
        Some(AttributeValue::L(values)) => values
            .iter()
            .filter_map(|v| match v {
                AttributeValue::N(d) => d.parse().ok(),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Trigger;

    /// An item's size as DynamoDB bills it (its documentation, "Item sizes
    /// and formats"): names and values in UTF-8, a number about one byte
    /// per two significant digits plus one, a list or map 3 bytes plus 1
    /// per element.
    fn size(value: &AttributeValue) -> usize {
        match value {
            AttributeValue::S(v) => v.len(),
            AttributeValue::N(v) => v.trim_start_matches('-').len().div_ceil(2) + 1,
            AttributeValue::L(items) => 3 + items.iter().map(|v| size(v) + 1).sum::<usize>(),
            AttributeValue::M(m) => 3 + m.iter().map(|(k, v)| k.len() + size(v) + 1).sum::<usize>(),
            _ => 1,
        }
    }

    fn item_size(item: &Item) -> usize {
        item.iter().map(|(k, v)| k.len() + size(v)).sum()
    }

    /// Issue 39: a timed summary holds its payload; delivered at the first
    /// try (one short attempt inline) it must stay under 1 KB, or the
    /// delivery's update would cost two write units. Ids as long as
    /// production's (36 characters), a traceparent, a message payload.
    #[test]
    fn a_delivered_timed_summary_is_one_write_unit() {
        let long = "0192f3a4-5b6c-7d8e-9f01-23456789abcd";
        let at = 1_764_237_600_123;
        let id = crate::notification::notification_id_at(long, long, at).to_string();
        let filter = format!("/orgId/{long}/department/{long}/message?direction=inbound");
        let body = serde_json::to_string(&crate::notification::Notification {
            uuid: id.clone(),
            timestamp: at,
            event: filter,
            subscription_id: long.into(),
            message_info: Some(crate::notification::MessageInfo {
                organization_id: long.into(),
                department_id: long.into(),
                last_updated: at,
                message_id: long.into(),
                carrier_message_id: long.into(),
                status: "RECEIVED".into(),
            }),
            contact_info: None,
            subscription_info: None,
        })
        .unwrap();
        let job = DeliveryJob {
            traceparent: Some(format!("00-{}-{}-01", "a".repeat(32), "b".repeat(16))),
            ..DeliveryJob::new(id.into(), long.into(), long.into(), body, at)
        };
        let mut item = timed_summary_item(long, &job, n(at / 1000 + 30 * 86_400));
        let pending = item_size(&item);
        let attempt = AttemptRecord {
            at: at + 250,
            duration_ms: 120,
            http_status: Some(204),
            code: None,
            response_body: String::new(),
            trigger: Trigger::Scheduled,
        };
        item.insert("status".into(), s("DELIVERED".into()));
        item.remove("nextAttemptAt");
        item.insert("lastAttemptAt".into(), n(attempt.at));
        item.insert("lastHttpStatus".into(), n(204));
        item.insert("durations".into(), AttributeValue::L(vec![n(120)]));
        let inline = inline_attempt(&attempt).expect("a short attempt is kept inline");
        item.insert(INLINE_ATTEMPTS.into(), AttributeValue::L(vec![inline]));
        let delivered = item_size(&item);
        assert!(
            delivered < 1024,
            "PENDING {pending} B, delivered {delivered} B"
        );
        // 953 B when written: a change that grows it shows here.
        assert!((900..1000).contains(&delivered), "{pending} {delivered} B");
    }
}
