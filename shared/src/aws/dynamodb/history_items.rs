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
    let mut item = summary_key(job);
    item.insert("uuid".into(), s(job.id.to_string()));
    item.insert("subscriptionId".into(), s(job.subscription_id.to_string()));
    item.insert("eventId".into(), s(event_id.to_owned()));
    item.insert("event".into(), s(history::event_of(&job.body)));
    item.insert("createdAt".into(), n(job.created_at));
    item.insert(
        "status".into(),
        s(NotificationStatus::Pending.as_str().into()),
    );
    item.insert("attempts".into(), n(0));
    item.insert("nextAttemptAt".into(), n(job.created_at));
    item.insert("ttl".into(), ttl);
    item
}

/// A notification item's mark of an ingestion that failed after writing
/// it ([`DynamoStore::mark_unfinished`](super::DynamoStore::mark_unfinished)).
pub(super) const UNFINISHED: &str = "unfinished";

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
    Ok(NotificationSummary {
        id: text(item, "uuid")?.into(),
        subscription_id: text(item, "subscriptionId")?.into(),
        event_id: text(item, "eventId")?,
        event: text(item, "event")?,
        created_at: number(item, "createdAt")?,
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
