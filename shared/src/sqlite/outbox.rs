//! The [`Outbox`] port on SQLite: the event's dedupe record, its message,
//! its notifications and their history (PENDING) in one transaction.

use async_trait::async_trait;
use rusqlite::params;

use super::queue::{events_of, insert_jobs};
use super::{backend, SqliteDb};
use crate::ids::OrgId;
use crate::model::Message;
use crate::queue::{DeliveryJob, Outbox};
use crate::store::StoreError;

#[async_trait]
impl Outbox for SqliteDb {
    async fn commit(
        &self,
        org_id: &OrgId,
        event_id: &str,
        message: Option<&Message>,
        jobs: Vec<DeliveryJob>,
    ) -> Result<bool, StoreError> {
        let (org_id, event_id) = (org_id.to_owned(), event_id.to_owned());
        let message = message
            .map(|m| serde_json::to_string(m).map(|body| (m.id.clone(), body)))
            .transpose()
            .map_err(backend)?;
        let now = self.now_ms();
        let events = events_of(&jobs);
        self.with(move |conn| {
            let tx = conn.transaction().map_err(backend)?;
            let new = tx
                .execute(
                    "INSERT OR IGNORE INTO events (org_id, event_id, received_at) VALUES (?1, ?2, ?3)",
                    params![org_id, event_id, now],
                )
                .map_err(backend)?
                == 1;
            if !new {
                return Ok(false);
            }
            if let Some((id, body)) = message {
                tx.execute(
                    "INSERT INTO messages (org_id, id, body) VALUES (?1, ?2, ?3) \
                     ON CONFLICT (org_id, id) DO UPDATE SET body = excluded.body",
                    params![org_id, id, body],
                )
                .map_err(backend)?;
            }
            insert_jobs(&tx, &event_id, &jobs, &events, now)?;
            tx.commit().map_err(backend)?;
            Ok(true)
        })
        .await
    }
}
