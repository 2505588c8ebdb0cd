//! The outbox on AWS: the message and the notifications' history (PENDING)
//! in DynamoDB, the notifications on SQS; an event record only for an event
//! that carries no time of its own.
//!
//! An event of the events queue carries the time SQS first accepted it
//! ([`EventCommit::accepted_at`]): its notifications' ids and history keys
//! derive from it, so a retry or a redelivery writes nothing new (a
//! summary is written only where none is) and sends the same notifications
//! again, with the same `uuid`s: no event record is read or written
//! (docs/decisions/event-ingestion.md). What follows is the path of the
//! others (`POST /events`, operational notices), which a record dedupes.
//!
//! DynamoDB and SQS share no transaction, so the steps are ordered to be
//! safe to repeat: the history before the notifications are on the queue
//! (a notification is listed from the moment it can be delivered), the
//! event record last, after every one of the event's notifications is on
//! the queue. A failure in between fails the SQS
//! record; its retry stores the same message again and enqueues the same
//! notifications again (same `uuid`s, so receivers can drop duplicates).
//! A failure that is seen (an error, not a crash) also leaves a partial
//! event record with the time the event was first accepted: the retry
//! writes its history under the same keys, so a notification is listed
//! once however often its ingestion was tried.
//!
//! A batch of events ([`Outbox::commit_all`]) takes the same steps, each
//! for every event before the next: so the jobs of the whole batch go to
//! SQS together, in as few `SendMessageBatch` calls as its limits allow
//! ([`SqsQueue::send_all`]), and an entry SQS refuses fails only its own event.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::dynamodb::events::EventRecord;
use super::dynamodb::DynamoStore;
use super::sqs::SqsQueue;
use crate::clock::Clock;
use crate::history::DeliveryHistory;
use crate::ids::OrgId;
use crate::model::Message;
use crate::notification::{notification_id, restamped};
use crate::queue::{DeliveryJob, EventCommit, Outbox, QueueError, StoreOrQueueError};
use crate::store::{Store, StoreError};

/// Event records are kept this long (DynamoDB TTL): longer than SQS keeps a message.
const EVENT_RECORD_DAYS: i64 = 15;

/// The outbox on DynamoDB and SQS: message and history, then the jobs, then the event record.
pub struct AwsOutbox {
    store: Arc<DynamoStore>,
    queue: SqsQueue,
    clock: Arc<dyn Clock>,
}

impl AwsOutbox {
    /// The outbox writing to `store` and `queue`, timing event records on `clock`.
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
            accepted_at: None,
            redelivered: false,
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
        // 3. The record of each event whose jobs are all queued; a partial
        // record of each that failed after it was accepted.
        let mut stopped: Option<StoreOrQueueError> = None;
        for (i, event) in events.iter().enumerate() {
            let Some(ready) = &prepared[i] else {
                continue;
            };
            if let Some(Err(_)) = &outcomes[i] {
                self.record_partial(event, ready).await;
                continue;
            }
            if !ready.recorded {
                continue;
            }
            let outcome = match &stopped {
                Some(e) => Err(again(e)),
                None => self.record(event).await,
            };
            if let Err(e) = &outcome {
                if stopped.is_none() && unavailable(e) {
                    stopped = Some(again(e));
                }
            }
            outcomes[i] = Some(outcome);
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

/// An event past step 1: when it was first accepted, and its jobs, keyed
/// by that time.
struct Prepared {
    accepted_at: i64,
    /// Whether the event is recorded (it carries no time of its own).
    recorded: bool,
    jobs: Vec<DeliveryJob>,
}

impl AwsOutbox {
    /// An event's first steps: whether it was recorded before (None: a
    /// duplicate, nothing done), then its message and its history. A
    /// failure here leaves a partial record, as one of the later steps does.
    async fn prepare(&self, event: &EventCommit) -> Result<Option<Prepared>, StoreOrQueueError> {
        let record = match (event.accepted_at, event.redelivered) {
            (Some(_), false) => EventRecord::Absent,
            // An event carrying its time is recorded by no try of this
            // version; a redelivered one may have begun on the version
            // before, whose record is honoured (docs/operations.md#upgrades).
            _ => {
                self.store
                    .event_record(&event.org_id, &event.event_id)
                    .await?
            }
        };
        if event.accepted_at.is_some() && record == EventRecord::Absent {
            // Dated and named by a time the event carries: a retry or a
            // redelivery repeats the same steps under the same keys, and
            // nothing needs recording.
            let ready = Prepared {
                accepted_at: 0,
                recorded: false,
                jobs: event.jobs.clone(),
            };
            self.store_first(event, &ready.jobs).await?;
            return Ok(Some(ready));
        }
        let accepted_at = match record {
            EventRecord::Done => return Ok(None),
            // A retry of a failed ingestion: the same history items, not new ones.
            EventRecord::Partial { accepted_at } => accepted_at,
            EventRecord::Absent => event.jobs.first().map_or(0, |j| j.created_at),
        };
        let ready = Prepared {
            accepted_at,
            recorded: true,
            jobs: event
                .jobs
                .iter()
                .map(|job| {
                    // A retry sends the payload its first try dated and
                    // named (a recorded event's ids carry no time).
                    let id = notification_id(&event.event_id, job.subscription_id.as_str());
                    let same = job.created_at == accepted_at && job.id == id.to_string();
                    DeliveryJob {
                        id: id.to_string().into(),
                        created_at: accepted_at,
                        body: match same {
                            true => job.body.clone(),
                            false => restamped(&job.body, &id.to_string(), accepted_at)
                                .unwrap_or_else(|| job.body.clone()),
                        },
                        ..job.clone()
                    }
                })
                .collect(),
        };
        match self.store_first(event, &ready.jobs).await {
            Ok(()) => Ok(Some(ready)),
            Err(e) => {
                self.record_partial(event, &ready).await;
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
        if !jobs.is_empty() {
            self.store.record_enqueued(&event.event_id, jobs).await?;
        }
        Ok(())
    }

    /// Best effort: the error that failed the event is what its caller
    /// needs to hear.
    async fn record_partial(&self, event: &EventCommit, ready: &Prepared) {
        if ready.recorded && ready.accepted_at != 0 {
            let _ = self
                .store
                .record_partial_event(
                    &event.org_id,
                    &event.event_id,
                    ready.accepted_at,
                    self.expires(),
                )
                .await;
        }
    }

    /// The last step, once every job of the event is queued.
    async fn record(&self, event: &EventCommit) -> Result<bool, StoreOrQueueError> {
        self.store
            .record_event(&event.org_id, &event.event_id, self.expires())
            .await?;
        Ok(true)
    }

    /// When an event record may go (DynamoDB TTL, seconds).
    fn expires(&self) -> i64 {
        self.clock.now_ms() / 1000 + EVENT_RECORD_DAYS * 86_400
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
