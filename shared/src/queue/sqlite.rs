//! The embedded delivery queue and outbox, in the same SQLite file as the
//! store: ingesting an event (dedupe record, message, notifications) is one
//! transaction, and nothing leased is lost if the process dies.

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension};
use tokio::sync::oneshot;

use super::{DeliveryJob, DeliveryQueue, Lease, Outbox, QueueError};
use crate::app::now_ms;
use crate::model::Message;
use crate::store::sqlite::{backend, SqliteStore};
use crate::store::StoreError;

fn queue_err(e: StoreError) -> QueueError {
    QueueError(e.to_string())
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn insert_jobs(
    tx: &rusqlite::Transaction<'_>,
    jobs: &[DeliveryJob],
    now: i64,
) -> Result<(), StoreError> {
    let mut stmt = tx
        .prepare_cached(
            "INSERT OR IGNORE INTO delivery_queue (id, org_id, subscription_id, body, due_at, enqueued_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
        )
        .map_err(backend)?;
    for job in jobs {
        stmt.execute(params![
            job.id,
            job.org_id,
            job.subscription_id,
            job.body,
            now
        ])
        .map_err(backend)?;
    }
    Ok(())
}

#[async_trait]
impl DeliveryQueue for SqliteStore {
    async fn enqueue(&self, jobs: Vec<DeliveryJob>) -> Result<(), QueueError> {
        self.with(move |conn| {
            let tx = conn.transaction().map_err(backend)?;
            insert_jobs(&tx, &jobs, now_ms())?;
            tx.commit().map_err(backend)
        })
        .await
        .map_err(queue_err)
    }

    async fn receive(&self, max: usize, visibility: Duration) -> Result<Vec<Lease>, QueueError> {
        self.with(move |conn| {
            let now = now_ms();
            let mut stmt = conn
                .prepare_cached(
                    "UPDATE delivery_queue SET attempts = attempts + 1, due_at = ?1 + ?2, leased = 1 \
                     WHERE id IN (SELECT id FROM delivery_queue WHERE due_at <= ?1 ORDER BY due_at LIMIT ?3) \
                     RETURNING id, org_id, subscription_id, body, attempts",
                )
                .map_err(backend)?;
            let rows = stmt
                .query_map(params![now, ms(visibility), max as i64], |r| {
                    let attempt: u32 = r.get(4)?;
                    Ok(Lease {
                        job: DeliveryJob { id: r.get(0)?, org_id: r.get(1)?, subscription_id: r.get(2)?, body: r.get(3)? },
                        attempt,
                        receipt: attempt.to_string(),
                    })
                })
                .map_err(backend)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(backend)
        })
        .await
        .map_err(queue_err)
    }

    async fn complete(&self, lease: &Lease) -> Result<(), QueueError> {
        let (done, committed) = oneshot::channel();
        let flush = {
            let mut pending = self.completions.lock();
            pending
                .items
                .push((lease.job.id.clone(), lease.receipt.clone(), done));
            !std::mem::replace(&mut pending.flushing, true)
        };
        if flush {
            let store = self.clone();
            tokio::task::spawn_blocking(move || store.flush_completions());
        }
        committed
            .await
            .map_err(|_| QueueError("the completion was not written".into()))?
            .map_err(QueueError)
    }

    async fn retry_after(&self, lease: &Lease, delay: Duration) -> Result<(), QueueError> {
        let (id, receipt) = (lease.job.id.clone(), lease.receipt.clone());
        self.with(move |conn| {
            conn.prepare_cached(
                "UPDATE delivery_queue SET due_at = ?3, leased = 0 WHERE id = ?1 AND attempts = ?2",
            )
            .and_then(|mut s| s.execute(params![id, receipt, now_ms() + ms(delay)]))
            .map_err(backend)?;
            Ok(())
        })
        .await
        .map_err(queue_err)
    }

    async fn dead_letter(&self, lease: &Lease, reason: &str) -> Result<(), QueueError> {
        let (job, attempt, reason) = (lease.job.clone(), lease.attempt, reason.to_owned());
        self.with(move |conn| {
            let tx = conn.transaction().map_err(backend)?;
            tx.execute(
                "INSERT OR REPLACE INTO dead_letters (id, org_id, subscription_id, body, attempts, reason, failed_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![job.id, job.org_id, job.subscription_id, job.body, attempt, reason, now_ms()],
            )
            .map_err(backend)?;
            tx.execute("DELETE FROM delivery_queue WHERE id = ?1", [&job.id]).map_err(backend)?;
            tx.commit().map_err(backend)
        })
        .await
        .map_err(queue_err)
    }
}

#[async_trait]
impl Outbox for SqliteStore {
    async fn commit(
        &self,
        org_id: &str,
        event_id: &str,
        message: Option<&Message>,
        jobs: Vec<DeliveryJob>,
    ) -> Result<bool, StoreError> {
        let (org_id, event_id) = (org_id.to_owned(), event_id.to_owned());
        let message = message
            .map(|m| serde_json::to_string(m).map(|body| (m.id.clone(), body)))
            .transpose()
            .map_err(backend)?;
        self.with(move |conn| {
            let now = now_ms();
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
            insert_jobs(&tx, &jobs, now)?;
            tx.commit().map_err(backend)?;
            Ok(true)
        })
        .await
    }
}

/// Completions waiting to be written. Concurrent `complete` calls are
/// committed together, one transaction for all of them (group commit);
/// each call still returns only once its own delete is committed.
#[derive(Default)]
pub(crate) struct Completions {
    pending: Mutex<Pending>,
}

type Completion = (String, String, oneshot::Sender<Result<(), String>>);

#[derive(Default)]
struct Pending {
    items: Vec<Completion>,
    /// A blocking task is writing batches; new items join its next one.
    flushing: bool,
}

impl Completions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Lets the next `complete` start a writer again if a flush panics.
struct FlushGuard<'a>(&'a Completions);

impl Drop for FlushGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.lock().flushing = false;
        }
    }
}

impl SqliteStore {
    /// Writes pending completions in batches until none is left (blocking pool).
    fn flush_completions(&self) {
        let _guard = FlushGuard(&self.completions);
        loop {
            let batch = {
                let mut pending = self.completions.lock();
                if pending.items.is_empty() {
                    pending.flushing = false;
                    return;
                }
                std::mem::take(&mut pending.items)
            };
            let result = self
                .with_writer(|conn| {
                    let tx = conn.transaction().map_err(backend)?;
                    {
                        // Only the current lease may complete it (the receipt is the attempt number).
                        let mut delete = tx
                            .prepare_cached(
                                "DELETE FROM delivery_queue WHERE id = ?1 AND attempts = ?2",
                            )
                            .map_err(backend)?;
                        for (id, receipt, _) in &batch {
                            delete.execute(params![id, receipt]).map_err(backend)?;
                        }
                    }
                    tx.commit().map_err(backend)
                })
                .map_err(|e| e.to_string());
            for (_, _, done) in batch {
                let _ = done.send(result.clone());
            }
        }
    }
}

/// Figures about the embedded queue, for operators and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueStats {
    pub pending: u64,
    pub dead_letters: u64,
}

impl SqliteStore {
    /// Makes every leased job due now. Called at start by the one process
    /// that owns the data dir: jobs a killed process had leased are retried
    /// at once instead of after their lease.
    pub async fn release_leases(&self) -> Result<u64, StoreError> {
        self.with(|conn| {
            let n = conn
                .execute("UPDATE delivery_queue SET due_at = min(due_at, ?1), leased = 0 WHERE leased = 1", [now_ms()])
                .map_err(backend)?;
            Ok(n as u64)
        })
        .await
    }

    pub async fn queue_stats(&self) -> Result<QueueStats, StoreError> {
        self.with(|conn| {
            let count = |sql: &str| {
                conn.query_row(sql, [], |r| r.get::<_, u64>(0))
                    .optional()
                    .map(Option::unwrap_or_default)
            };
            Ok(QueueStats {
                pending: count("SELECT count(*) FROM delivery_queue").map_err(backend)?,
                dead_letters: count("SELECT count(*) FROM dead_letters").map_err(backend)?,
            })
        })
        .await
    }

    /// When the next job is due (epoch ms), if any.
    pub async fn next_due(&self) -> Result<Option<i64>, StoreError> {
        self.with(|conn| {
            conn.query_row("SELECT min(due_at) FROM delivery_queue", [], |r| r.get(0))
                .map_err(backend)
        })
        .await
    }
}
