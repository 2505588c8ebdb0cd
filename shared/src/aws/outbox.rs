//! The outbox on AWS: the message and the notifications' history (PENDING)
//! in DynamoDB, the notifications on SQS.
//!
//! DynamoDB and SQS share no transaction, so the steps are ordered to be
//! safe to repeat: the message, then the history (summary and notification
//! items; a notification is listed from the moment it can be delivered),
//! then the notifications on the queue. A repeat of an event is recognised
//! by its notification items, keyed by the deterministic notification ids:
//! when every one exists, the event was ingested before and nothing is done
//! — unless the try that wrote them did not finish. A failure that is seen
//! (an error) marks them unfinished; a crash leaves no mark, but its SQS
//! record is received again ([`EventCommit::redelivered`]), which completes
//! the event whatever its items say. An event whose caller cannot tell a
//! redelivery (an HTTP request) has its items written unfinished, and
//! marked finished once its jobs are queued: a crash in between leaves
//! them unfinished, and the producer's retry completes it. A completion writes the history under
//! the keys its items name (the time the event was first accepted) and
//! enqueues the notifications again (same `uuid`s, so receivers can drop
//! duplicates): a notification is listed once however often its ingestion
//! was tried, and nothing accepted is lost. No item per event is written:
//! one write unit less per event than an event record (BENCHMARKS.md, "A
//! data model that writes less").
//!
//! A batch of events ([`Outbox::commit_all`]) takes the same steps, each
//! for every event before the next: so the jobs of the whole batch go to
//! SQS together, in as few `SendMessageBatch` calls as its limits allow
//! ([`SqsQueue::send_all`]), and an entry SQS refuses fails only its own event.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::dynamodb::DynamoStore;
use super::sqs::SqsQueue;
use crate::clock::Clock;
use crate::history::DeliveryHistory;
use crate::ids::NotificationId;
use crate::ids::OrgId;
use crate::model::Message;
use crate::queue::{DeliveryJob, EventCommit, Outbox, QueueError, StoreOrQueueError};
use crate::store::{Store, StoreError};

pub struct AwsOutbox {
    store: Arc<DynamoStore>,
    queue: SqsQueue,
    clock: Arc<dyn Clock>,
}

impl AwsOutbox {
    pub fn new(store: Arc<DynamoStore>, queue: SqsQueue, clock: Arc<dyn Clock>) -> Self {
        AwsOutbox {
            store,
            queue,
            clock,
        }
    }
}

#[async_trait]
impl Outbox for AwsOutbox {
    async fn commit(
        &self,
        org_id: &OrgId,
        event_id: &str,
        message: Option<&Message>,
        jobs: Vec<DeliveryJob>,
    ) -> Result<bool, StoreOrQueueError> {
        let event = EventCommit {
            org_id: org_id.clone(),
            event_id: event_id.to_owned(),
            message: message.cloned(),
            jobs,
            redelivered: None,
        };
        let mut outcomes = self.commit_all(vec![event]).await;
        outcomes.pop().expect("one outcome per event")
    }

    async fn commit_all(&self, events: Vec<EventCommit>) -> Vec<Result<bool, StoreOrQueueError>> {
        let mut outcomes: Vec<Option<Result<bool, StoreOrQueueError>>> =
            events.iter().map(|_| None).collect();
        // An event id repeated in the batch waits for its first.
        let mut first: HashMap<(&str, &str), usize> = HashMap::new();
        let repeats: Vec<Option<usize>> = events
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let key = (e.org_id.as_str(), e.event_id.as_str());
                first.get(&key).copied().or_else(|| {
                    first.insert(key, i);
                    None
                })
            })
            .collect();
        // 1. Seen before? The message and the history, event by event.
        let mut prepared: Vec<Option<Prepared>> = events.iter().map(|_| None).collect();
        let mut stopped: Option<StoreOrQueueError> = None;
        for (i, event) in events.iter().enumerate() {
            if repeats[i].is_some() {
                continue;
            }
            let outcome = match &stopped {
                Some(e) => Err(again(e)),
                None => self.prepare(event).await,
            };
            outcomes[i] = Some(match outcome {
                Ok(Some(ready)) => {
                    prepared[i] = Some(ready);
                    Ok(true)
                }
                Ok(None) => Ok(false),
                Err(e) => {
                    if stopped.is_none() && unavailable(&e) {
                        stopped = Some(again(&e));
                    }
                    Err(e)
                }
            });
        }
        // 2. Every job of the events prepared, in as few calls as SQS allows.
        let (owners, jobs): (Vec<usize>, Vec<DeliveryJob>) = prepared
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.as_ref().map(|p| (i, p)))
            .flat_map(|(i, p)| p.jobs.iter().map(move |job| (i, job.clone())))
            .unzip();
        for (owner, sent) in owners
            .into_iter()
            .zip(self.queue.send_all(&jobs, super::sqs::INGEST_SENDS).await)
        {
            if let (Err(e), Some(Ok(_))) = (sent, &outcomes[owner]) {
                outcomes[owner] = Some(Err(e.into()));
            }
        }
        // 3. Each event that failed after it was accepted marks its items
        // unfinished, so its retry completes it; an event written unfinished
        // marks them finished.
        for (i, event) in events.iter().enumerate() {
            let Some(ready) = &prepared[i] else {
                continue;
            };
            match &outcomes[i] {
                Some(Err(_)) => self.mark_unfinished(ready).await,
                _ if event.redelivered.is_none() && !ready.jobs.is_empty() => {
                    if let Err(e) = self.store.mark_finished(&ready.jobs).await {
                        outcomes[i] = Some(Err(e.into()));
                    }
                }
                _ => {}
            }
        }
        let copies: Vec<_> = repeats
            .iter()
            .map(|first| {
                first.map(|f| match &outcomes[f] {
                    Some(Err(e)) => Err(again(e)),
                    _ => Ok(false),
                })
            })
            .collect();
        outcomes
            .into_iter()
            .zip(copies)
            .map(|(outcome, copy)| copy.or(outcome).expect("every event has an outcome"))
            .collect()
    }
}

/// An event past step 1: its jobs, keyed by the time it was first accepted.
struct Prepared {
    jobs: Vec<DeliveryJob>,
}

impl AwsOutbox {
    /// An event's first steps: whether it was ingested before (None: a
    /// duplicate, nothing done), then its message and its history. A
    /// failure here marks its items unfinished, as one of the later steps does.
    async fn prepare(&self, event: &EventCommit) -> Result<Option<Prepared>, StoreOrQueueError> {
        let written = self.store.written_notifications(&event.jobs).await?;
        let finished = |id: &NotificationId| written.get(id).is_some_and(|w| !w.unfinished);
        if !event.jobs.is_empty()
            && event.redelivered != Some(true)
            && event.jobs.iter().all(|j| finished(&j.id))
        {
            return Ok(None);
        }
        // A retry: the same history items, not new ones.
        let accepted_at = written
            .values()
            .map(|w| w.created_at)
            .min()
            .or_else(|| event.jobs.first().map(|j| j.created_at))
            .unwrap_or(0);
        // Unless a crash may hide behind them (a redelivery), the finished
        // notifications are left as they are (their history too): only a
        // subscriber added since is new.
        let redo = |id: &NotificationId| event.redelivered == Some(true) || !finished(id);
        let ready = Prepared {
            jobs: event
                .jobs
                .iter()
                .filter(|job| redo(&job.id))
                .map(|job| DeliveryJob {
                    created_at: written.get(&job.id).map_or(accepted_at, |w| w.created_at),
                    ..job.clone()
                })
                .collect(),
        };
        match self.store_first(event, &ready.jobs).await {
            Ok(()) => Ok(Some(ready)),
            Err(e) => {
                self.mark_unfinished(&ready).await;
                Err(e)
            }
        }
    }

    /// The message, then the history.
    async fn store_first(
        &self,
        event: &EventCommit,
        jobs: &[DeliveryJob],
    ) -> Result<(), StoreOrQueueError> {
        if let Some(message) = &event.message {
            let received_at = self.clock.now_ms();
            self.store
                .put_message(&event.org_id, message, received_at)
                .await?;
        }
        if jobs.is_empty() {
        } else if event.redelivered.is_none() {
            self.store
                .record_enqueued_unfinished(&event.event_id, jobs)
                .await?;
        } else {
            self.store.record_enqueued(&event.event_id, jobs).await?;
        }
        Ok(())
    }

    /// Best effort: the error that failed the event is what its caller
    /// needs to hear (and a crash leaves no mark either: see the module).
    async fn mark_unfinished(&self, ready: &Prepared) {
        let _ = self.store.mark_unfinished(&ready.jobs).await;
    }
}

/// Whether the rest of a step is left undone: the same call would fail too.
fn unavailable(e: &StoreOrQueueError) -> bool {
    match e {
        StoreOrQueueError::Store(e) => e.is_unavailable(),
        StoreOrQueueError::Queue(e) => e.is_unavailable(),
    }
}

/// The same failure, for another event it stops or repeats.
fn again(e: &StoreOrQueueError) -> StoreOrQueueError {
    let cause = e.to_string();
    match e {
        StoreOrQueueError::Store(s) if s.is_unavailable() => StoreError::unavailable(cause).into(),
        StoreOrQueueError::Store(_) => StoreError::backend(cause).into(),
        StoreOrQueueError::Queue(q) if q.is_unavailable() => QueueError::unavailable(cause).into(),
        StoreOrQueueError::Queue(_) => QueueError::backend(cause).into(),
    }
}
