//! The [`DeliveryHistory`] port on DynamoDB: summaries, notifications and
//! attempts in the messages table ([`keys`](super::keys) has the layout).

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use futures_util::{stream, StreamExt, TryStreamExt};

use super::backoff::Backoff;
use super::codec::{n, number, optional_text, s, text};
use super::history_items::{
    attempt_item, attempts_of, condition_failed, durations, inline_attempt, inline_attempts_of,
    merged, notification_item, parse_summary, status_of, summary_created_at, summary_item,
    summary_key, summary_uuid, timed_summary_item, OutcomeUpdate, INLINE_ATTEMPTS, PAYLOAD,
};
use super::keys::{history_pk, key, millis_key, notification_pk, summary_sk, NOTIFICATION_SK};
use super::{backend, backend_build, DynamoStore, Item};
use crate::history::{
    self, Claim, DeliveryHistory, NotificationDetail, NotificationStatus, NotificationSummary,
    Outcome, StatsRow, Trigger, Window,
};
use crate::ids::{NotificationId, OrgId, SubscriptionId};
use crate::model::Page;
use crate::page::PageRequest;
use crate::queue::DeliveryJob;
use crate::store::StoreError;
use crate::telemetry::trace::TraceParent;

/// `BatchWriteItem` takes at most 25 items, `BatchGetItem` 100 keys.
const WRITE_BATCH: usize = 25;
const GET_BATCH: usize = 100;
/// Conditional writes (a recover's updates, timed summaries) in flight at once.
const MARKS_IN_FLIGHT: usize = 16;

impl DynamoStore {
    /// `ttl` of a notification created at `created_at` (epoch seconds).
    fn history_ttl(&self, created_at: i64) -> AttributeValue {
        n(created_at / 1000 + self.retention.as_secs() as i64)
    }

    /// Every item of a `Query` on `pk` (all pages), `sk` in a range, and
    /// `status` one of `statuses` (when given).
    async fn query_history(
        &self,
        pk: String,
        sk_between: Option<(String, String)>,
        forward: bool,
        statuses: &[NotificationStatus],
        consistent: bool,
    ) -> Result<Vec<Item>, StoreError> {
        let mut q = self
            .client
            .query()
            .table_name(&self.tables.messages)
            .expression_attribute_names("#pk", "pk")
            .expression_attribute_values(":pk", s(pk))
            .scan_index_forward(forward)
            .consistent_read(consistent);
        q = match sk_between {
            Some((from, to)) => q
                .key_condition_expression("#pk = :pk AND #sk BETWEEN :from AND :to")
                .expression_attribute_names("#sk", "sk")
                .expression_attribute_values(":from", s(from))
                .expression_attribute_values(":to", s(to)),
            None => q.key_condition_expression("#pk = :pk"),
        };
        if !statuses.is_empty() {
            let marks: Vec<String> = (0..statuses.len()).map(|i| format!(":s{i}")).collect();
            q = q
                .filter_expression(format!("#st IN ({})", marks.join(", ")))
                .expression_attribute_names("#st", "status");
            for (mark, status) in marks.iter().zip(statuses) {
                q = q.expression_attribute_values(mark, s(status.as_str().into()));
            }
        }
        q.into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(backend)
    }

    /// The summaries of a subscription created in the window.
    async fn summaries(
        &self,
        org_id: &OrgId,
        subscription_id: &SubscriptionId,
        window: &Window,
        forward: bool,
    ) -> Result<Vec<Item>, StoreError> {
        if window.until <= window.since {
            return Ok(Vec::new());
        }
        let range = (
            millis_key(window.since),
            // Every sort key of the last millisecond sorts below "<ms>$".
            format!("{}$", millis_key(window.until.saturating_sub(1))),
        );
        self.query_history(
            history_pk(org_id, subscription_id),
            Some(range),
            forward,
            &window.statuses,
            false,
        )
        .await
    }

    async fn batch_write(&self, items: Vec<Item>) -> Result<(), StoreError> {
        let requests = items
            .into_iter()
            .map(|item| {
                PutRequest::builder()
                    .set_item(Some(item))
                    .build()
                    .map(|put| WriteRequest::builder().put_request(put).build())
                    .map_err(backend_build)
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.write_messages_table(requests, "history batch write")
            .await
    }

    /// `BatchWriteItem`s of the messages table, 25 requests each; what
    /// DynamoDB leaves unprocessed (throttling) is sent again with backoff.
    pub(super) async fn write_messages_table(
        &self,
        requests: Vec<WriteRequest>,
        operation: &'static str,
    ) -> Result<(), StoreError> {
        for chunk in requests.chunks(WRITE_BATCH) {
            let mut requests = chunk.to_vec();
            let mut backoff = Backoff::default();
            loop {
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(&self.tables.messages, requests)
                    .send()
                    .await
                    .map_err(backend)?;
                requests = out
                    .unprocessed_items()
                    .and_then(|m| m.get(&self.tables.messages))
                    .cloned()
                    .unwrap_or_default();
                if requests.is_empty() {
                    break;
                }
                backoff.wait(operation).await?;
            }
        }
        Ok(())
    }
}

#[async_trait]
impl DeliveryHistory for DynamoStore {
    async fn record_enqueued(
        &self,
        event_id: &str,
        jobs: &[DeliveryJob],
    ) -> Result<(), StoreError> {
        // A notification whose id carries its time: one summary holding
        // the payload, written only where none is (a redelivery keeps the
        // history it finds).
        let (timed, named): (Vec<&DeliveryJob>, Vec<&DeliveryJob>) = jobs.iter().partition(|job| {
            crate::notification::created_at_of(job.id.as_str()) == Some(job.created_at)
        });
        let puts: Vec<_> = timed
            .into_iter()
            .map(|job| self.put_timed_summary(event_id, job))
            .collect();
        stream::iter(puts)
            .buffer_unordered(MARKS_IN_FLIGHT)
            .try_collect::<Vec<()>>()
            .await?;
        let items = named
            .into_iter()
            .flat_map(|job| {
                let ttl = self.history_ttl(job.created_at);
                [
                    summary_item(event_id, job, ttl.clone()),
                    notification_item(job, ttl),
                ]
            })
            .collect();
        self.batch_write(items).await
    }

    async fn record_outcome(&self, job: &DeliveryJob, outcome: &Outcome) -> Result<(), StoreError> {
        let update = OutcomeUpdate::of(outcome);
        // A short attempt goes in the summary's own update: one write, and
        // the state and the attempt that led to it land together.
        if let Some(inline) = outcome.attempt.as_ref().and_then(inline_attempt) {
            let (expression, values) = update.with_inline(inline);
            let result = self
                .client
                .update_item()
                .table_name(&self.tables.messages)
                .set_key(Some(summary_key(job)))
                .condition_expression(
                    "attribute_exists(pk) AND (attribute_not_exists(#ia) OR size(#ia) < :cap)",
                )
                .update_expression(expression)
                .expression_attribute_names("#st", "status")
                .expression_attribute_names("#ia", INLINE_ATTEMPTS)
                .set_expression_attribute_values(Some(values))
                .send()
                .await;
            match result {
                Ok(_) => return Ok(()),
                // No summary, or its inline attempts are full: an item of its own.
                Err(e) if condition_failed(&e) => {}
                Err(e) => return Err(backend(e)),
            }
        }
        let (expression, values) = update.plain();
        let update = self
            .client
            .update_item()
            .table_name(&self.tables.messages)
            .set_key(Some(summary_key(job)))
            // No summary (purged, or a job from before the history): nothing to update.
            .condition_expression("attribute_exists(pk)")
            .update_expression(expression)
            .expression_attribute_names("#st", "status")
            .set_expression_attribute_values(Some(values))
            .send();
        let put = async {
            match &outcome.attempt {
                Some(a) => self
                    .client
                    .put_item()
                    .table_name(&self.tables.messages)
                    .set_item(Some(attempt_item(job, a, self.history_ttl(job.created_at))))
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(backend),
                None => Ok(()),
            }
        };
        // The attempt first: a reader never sees a state without the
        // attempt that led to it.
        put.await?;
        match update.await {
            Ok(_) => Ok(()),
            Err(e) if condition_failed(&e) => Ok(()),
            Err(e) => Err(backend(e)),
        }
    }

    async fn list(
        &self,
        org_id: &OrgId,
        subscription_id: &SubscriptionId,
        window: &Window,
        page: &PageRequest,
    ) -> Result<Page<NotificationSummary>, StoreError> {
        let summaries = self
            .summaries(org_id, subscription_id, window, false)
            .await?
            .iter()
            .map(parse_summary)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(page.apply(summaries, history::DEFAULT_ORDER, history::compare))
    }

    async fn get(
        &self,
        org_id: &OrgId,
        subscription_id: &SubscriptionId,
        id: &NotificationId,
    ) -> Result<Option<NotificationDetail>, StoreError> {
        if let Some(created_at) = crate::notification::created_at_of(id.as_str()) {
            return self
                .timed_detail(org_id, subscription_id, id, created_at)
                .await;
        }
        let items = self
            .query_history(notification_pk(org_id, id), None, true, &[], true)
            .await?;
        let Some(notification) = items
            .iter()
            .find(|i| matches!(i.get("sk"), Some(AttributeValue::S(sk)) if sk == NOTIFICATION_SK))
        else {
            return Ok(None);
        };
        if text(notification, "subscriptionId")? != subscription_id.as_str() {
            return Ok(None);
        }
        let created_at = number(notification, "createdAt")?;
        let summary = self
            .summary_by_key(org_id, subscription_id, id, created_at)
            .await?;
        let Some(summary) = &summary else {
            return Ok(None);
        };
        let inline = inline_attempts_of(summary)?;
        let summary = parse_summary(summary)?;
        let mut attempts = merged(attempts_of(&items)?, &inline);
        // The attempts were read before the summary; a delivery that finished
        // in between wrote its attempt before the summary counted it, so a
        // second read finds every attempt the summary counts.
        if attempts.len() < summary.attempts as usize {
            let again = self
                .query_history(notification_pk(org_id, id), None, true, &[], true)
                .await?;
            attempts = merged(attempts_of(&again)?, &inline);
        }
        Ok(Some(NotificationDetail {
            summary,
            payload: text(notification, "payload")?,
            attempts,
            trace_id: optional_text(notification, "traceparent")?
                .and_then(|t| TraceParent::parse(&t))
                .map(|t| t.trace_id_hex()),
        }))
    }

    /// One strongly consistent `GetItem` of the summary (its key is the job's).
    async fn summary_of(
        &self,
        job: &DeliveryJob,
    ) -> Result<Option<NotificationSummary>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.tables.messages)
            .set_key(Some(summary_key(job)))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?;
        out.item().map(parse_summary).transpose()
    }

    async fn stats_rows(
        &self,
        org_id: &OrgId,
        subscription_id: &SubscriptionId,
        since: i64,
        until: i64,
    ) -> Result<Vec<StatsRow>, StoreError> {
        let window = Window {
            statuses: Vec::new(),
            since,
            until,
        };
        self.summaries(org_id, subscription_id, &window, true)
            .await?
            .iter()
            .map(|item| {
                Ok(StatsRow {
                    created_at: summary_created_at(item)?,
                    status: status_of(item)?,
                    attempts: number(item, "attempts")?.max(0) as u32,
                    durations_ms: durations(item),
                })
            })
            .collect()
    }

    async fn claims(
        &self,
        org_id: &OrgId,
        subscription_id: &SubscriptionId,
        window: &Window,
        max: usize,
    ) -> Result<Vec<Claim>, StoreError> {
        let mut summaries = self
            .summaries(org_id, subscription_id, window, true)
            .await?;
        summaries.truncate(max);
        let mut claims = Vec::with_capacity(summaries.len());
        for chunk in summaries.chunks(GET_BATCH) {
            // A summary holds its payload since ids carry their time; older
            // ones have it in their notification item.
            let keys: Vec<Item> = chunk
                .iter()
                .filter(|item| !item.contains_key(PAYLOAD))
                .map(|item| {
                    Ok(key(
                        notification_pk(org_id, &summary_uuid(item)?.into()),
                        NOTIFICATION_SK.into(),
                    ))
                })
                .collect::<Result<_, StoreError>>()?;
            let payloads = match keys.is_empty() {
                true => HashMap::new(),
                false => self.payloads(keys).await?,
            };
            for item in chunk {
                let id: NotificationId = summary_uuid(item)?.into();
                let own = optional_text(item, PAYLOAD)?;
                let Some(body) = own.as_ref().or_else(|| payloads.get(id.as_str())) else {
                    continue; // expired between the two reads
                };
                claims.push(Claim {
                    job: DeliveryJob {
                        org_id: org_id.clone(),
                        subscription_id: subscription_id.clone(),
                        body: body.clone(),
                        created_at: summary_created_at(item)?,
                        trigger: Trigger::Manual,
                        attempts: 0,
                        not_before: None,
                        id,
                        traceparent: None,
                        ordered: false,
                        history_attempts: 0,
                    },
                    status: status_of(item)?,
                    attempts: number(item, "attempts")?.max(0) as u32,
                });
            }
        }
        Ok(claims)
    }

    async fn mark_pending(&self, claims: &[Claim], now: i64) -> Result<usize, StoreError> {
        let marks: Vec<_> = claims.iter().map(|c| self.mark_one(c, now)).collect();
        stream::iter(marks)
            .buffer_unordered(MARKS_IN_FLIGHT)
            .try_fold(0, |total, n| async move { Ok(total + n) })
            .await
    }

    async fn purge(&self, _before: i64) -> Result<u64, StoreError> {
        Ok(0) // DynamoDB's TTL removes expired history by itself.
    }
}

impl DynamoStore {
    /// The summary of a notification whose id carries its time, with its
    /// payload, unless one is there already (`PutItem` conditional on its
    /// absence: a refused put costs a write unit, only on a redelivery).
    async fn put_timed_summary(&self, event_id: &str, job: &DeliveryJob) -> Result<(), StoreError> {
        let item = timed_summary_item(event_id, job, self.history_ttl(job.created_at));
        let result = self
            .client
            .put_item()
            .table_name(&self.tables.messages)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        // Already there (a redelivery): the history keeps the first.
        super::conditional(result).map(|_| ())
    }

    /// A notification's summary item, read strongly.
    async fn summary_by_key(
        &self,
        org_id: &OrgId,
        subscription_id: &SubscriptionId,
        id: &NotificationId,
        created_at: i64,
    ) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.tables.messages)
            .set_key(Some(key(
                history_pk(org_id, subscription_id),
                summary_sk(created_at, id),
            )))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?;
        Ok(out.item)
    }

    /// A notification whose id carries its time: its summary (which holds
    /// the payload) by key, then, only when the summary counts attempts it
    /// does not hold inline, their items. An attempt's item is written
    /// before the summary counts it, so reading the summary first finds
    /// every attempt it counts.
    async fn timed_detail(
        &self,
        org_id: &OrgId,
        subscription_id: &SubscriptionId,
        id: &NotificationId,
        created_at: i64,
    ) -> Result<Option<NotificationDetail>, StoreError> {
        let item = self
            .summary_by_key(org_id, subscription_id, id, created_at)
            .await?;
        let Some(item) = &item else {
            return Ok(None);
        };
        let inline = inline_attempts_of(item)?;
        let summary = parse_summary(item)?;
        let stored = match summary.attempts as usize > inline.len() {
            true => {
                let items = self
                    .query_history(notification_pk(org_id, id), None, true, &[], true)
                    .await?;
                attempts_of(&items)?
            }
            false => Vec::new(),
        };
        Ok(Some(NotificationDetail {
            payload: text(item, PAYLOAD)?,
            attempts: merged(stored, &inline),
            trace_id: optional_text(item, "traceparent")?
                .and_then(|t| TraceParent::parse(&t))
                .map(|t| t.trace_id_hex()),
            summary,
        }))
    }

    /// Marks one claimed summary PENDING if it is still as read: 1 if it was.
    /// A mark already made at `now` also counts: the SDK may send the write
    /// again after an attempt timed out that DynamoDB had applied.
    async fn mark_one(&self, claim: &Claim, now: i64) -> Result<usize, StoreError> {
        let job = &claim.job;
        let result = self
            .client
            .update_item()
            .table_name(&self.tables.messages)
            .set_key(Some(summary_key(job)))
            .condition_expression(
                "(#st = :was AND attempts = :n) OR (#st = :pending AND nextAttemptAt = :now)",
            )
            .update_expression("SET #st = :pending, nextAttemptAt = :now")
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":was", s(claim.status.as_str().into()))
            .expression_attribute_values(":n", n(i64::from(claim.attempts)))
            .expression_attribute_values(":pending", s(NotificationStatus::Pending.as_str().into()))
            .expression_attribute_values(":now", n(now))
            .send()
            .await;
        match result {
            Ok(_) => Ok(1),
            Err(e) if condition_failed(&e) => Ok(0),
            Err(e) => Err(backend(e)),
        }
    }

    /// Payloads of notification items by uuid (`BatchGetItem`, strongly consistent).
    async fn payloads(&self, keys: Vec<Item>) -> Result<HashMap<String, String>, StoreError> {
        let mut found = HashMap::new();
        for item in self
            .batch_get(&self.tables.messages, keys, "history batch read")
            .await?
        {
            let pk = text(&item, "pk")?;
            if let Some(uuid) = pk.rsplit('#').next() {
                found.insert(uuid.to_owned(), text(&item, "payload")?);
            }
        }
        Ok(found)
    }
}
