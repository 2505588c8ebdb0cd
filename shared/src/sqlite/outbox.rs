//! The [`Outbox`] port on SQLite: the event's dedupe record, its message,
//! its notifications and their history (PENDING), written together. Events
//! are group-committed with the deliveries' writes (`mod.rs`): a burst of
//! ingestion is a few transactions, each event in a savepoint of its own.

use async_trait::async_trait;
use rusqlite::{params, Connection, Transaction};

use super::queue::{events_of, insert_jobs};
use super::store::UPSERT_MESSAGE;
use super::{failure, SqliteDb, Write, Written};
use crate::ids::OrgId;
use crate::model::Message;
use crate::queue::{DeliveryJob, Outbox, StoreOrQueueError};
use crate::store::StoreError;

/// One ingested event, ready to write.
pub(super) struct EventWrite {
    org_id: OrgId,
    event_id: String,
    /// The message's id and its JSON.
    message: Option<(String, String)>,
    jobs: Vec<DeliveryJob>,
    /// The jobs' matched filters ([`events_of`]).
    events: Vec<String>,
    now: i64,
}

/// Writes the batch's events in the group commit's transaction; one result
/// per item of the batch (`true` for the other writes). An event that
/// fails is rolled back alone.
pub(super) fn write_events(
    tx: &mut Transaction<'_>,
    batch: &[Write],
) -> rusqlite::Result<Vec<Written>> {
    let mut written = Vec::with_capacity(batch.len());
    for write in batch {
        let Write::Event(event) = write else {
            written.push(Ok(true));
            continue;
        };
        let mut savepoint = tx.savepoint()?;
        match write_event(&savepoint, event) {
            Ok(new) => {
                savepoint.commit()?;
                written.push(Ok(new));
            }
            Err(e) => {
                savepoint.rollback()?;
                written.push(Err(e));
            }
        }
    }
    Ok(written)
}

/// Whether the event is new; a duplicate writes nothing.
fn write_event(tx: &Connection, e: &EventWrite) -> Result<bool, StoreError> {
    let new = tx
        .prepare_cached(
            "INSERT OR IGNORE INTO events (org_id, event_id, received_at) VALUES (?1, ?2, ?3)",
        )
        .and_then(|mut s| s.execute(params![e.org_id, e.event_id, e.now]))
        .map_err(failure)?
        == 1;
    if !new {
        return Ok(false);
    }
    if let Some((id, body)) = &e.message {
        tx.prepare_cached(UPSERT_MESSAGE)
            .and_then(|mut s| s.execute(params![e.org_id, id, body, e.now]))
            .map_err(failure)?;
    }
    insert_jobs(tx, &e.event_id, &e.jobs, &e.events, e.now)?;
    Ok(true)
}

#[async_trait]
impl Outbox for SqliteDb {
    async fn commit(
        &self,
        org_id: &OrgId,
        event_id: &str,
        message: Option<&Message>,
        jobs: Vec<DeliveryJob>,
    ) -> Result<bool, StoreOrQueueError> {
        let message = message
            .map(|m| serde_json::to_string(m).map(|body| (m.id.clone(), body)))
            .transpose()
            .map_err(failure)?;
        let events = events_of(&jobs);
        self.commit_write(Write::Event(EventWrite {
            org_id: org_id.to_owned(),
            event_id: event_id.to_owned(),
            message,
            jobs,
            events,
            now: self.now_ms(),
        }))
        .await
        // The queue is a table of the same file: one transaction, the store's.
        .map_err(StoreOrQueueError::Store)
    }
}
