//! The [`DeliveryQueue`] port on SQLite: a job is due at `due_at`; a lease
//! pushes `due_at` to the end of the lease, so a crashed consumer's jobs
//! come back by themselves, and nothing leased is lost if the process dies.

use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension};

use super::{backend, DeliveryWrite, QueueStats, SqliteDb};
use crate::clock::millis;
use crate::history::Trigger;
use crate::queue::{DeliveryJob, DeliveryQueue, Lease, QueueError};
use crate::store::StoreError;

fn queue_err(e: StoreError) -> QueueError {
    QueueError(e.to_string())
}

/// Inserts jobs in the caller's transaction (enqueue, and the outbox's
/// commit). A job already queued stays as it is, unless the new one is a
/// MANUAL resend: then it is due now, with a fresh schedule (a lease in
/// flight can no longer complete it, so the resend goes out too).
pub(super) fn insert_jobs(
    tx: &rusqlite::Transaction<'_>,
    jobs: &[DeliveryJob],
    now: i64,
) -> Result<(), StoreError> {
    let mut stmt = tx
        .prepare_cached(
            "INSERT INTO delivery_queue (id, org_id, subscription_id, body, due_at, enqueued_at, created_at, manual) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7) \
             ON CONFLICT (id) DO UPDATE SET due_at = excluded.due_at, attempts = 0, leased = 0, manual = 1 \
             WHERE excluded.manual = 1",
        )
        .map_err(backend)?;
    for job in jobs {
        stmt.execute(params![
            job.id,
            job.org_id,
            job.subscription_id,
            job.body,
            now,
            job.created_at,
            i64::from(job.trigger == Trigger::Manual),
        ])
        .map_err(backend)?;
    }
    Ok(())
}

/// Deletes completed jobs in the group commit's transaction; only the
/// current lease may complete a job (the receipt is the attempt number).
pub(super) fn write_completions(
    tx: &rusqlite::Transaction<'_>,
    batch: &[DeliveryWrite],
) -> rusqlite::Result<()> {
    let mut delete =
        tx.prepare_cached("DELETE FROM delivery_queue WHERE id = ?1 AND attempts = ?2")?;
    for write in batch {
        if let DeliveryWrite::Complete { id, receipt } = write {
            delete.execute(params![id, receipt])?;
        }
    }
    Ok(())
}

#[async_trait]
impl DeliveryQueue for SqliteDb {
    async fn enqueue(&self, jobs: Vec<DeliveryJob>) -> Result<(), QueueError> {
        let now = self.now_ms();
        self.with(move |conn| {
            let tx = conn.transaction().map_err(backend)?;
            insert_jobs(&tx, &jobs, now)?;
            tx.commit().map_err(backend)
        })
        .await
        .map_err(queue_err)
    }

    async fn receive(&self, max: usize, visibility: Duration) -> Result<Vec<Lease>, QueueError> {
        let now = self.now_ms();
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "UPDATE delivery_queue SET attempts = attempts + 1, due_at = ?1 + ?2, leased = 1 \
                     WHERE id IN (SELECT id FROM delivery_queue WHERE due_at <= ?1 ORDER BY due_at LIMIT ?3) \
                     RETURNING id, org_id, subscription_id, body, attempts, created_at, manual",
                )
                .map_err(backend)?;
            let rows = stmt
                .query_map(params![now, millis(visibility), max as i64], |r| {
                    let attempt: u32 = r.get(4)?;
                    Ok(Lease {
                        job: DeliveryJob {
                            id: r.get(0)?,
                            org_id: r.get(1)?,
                            subscription_id: r.get(2)?,
                            body: r.get(3)?,
                            created_at: r.get(5)?,
                            trigger: if r.get::<_, i64>(6)? == 1 { Trigger::Manual } else { Trigger::Scheduled },
                        },
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
        self.commit_delivery_write(DeliveryWrite::Complete {
            id: lease.job.id.to_string(),
            receipt: lease.receipt.clone(),
        })
        .await
        .map_err(queue_err)
    }

    async fn retry_after(&self, lease: &Lease, delay: Duration) -> Result<(), QueueError> {
        let (id, receipt) = (lease.job.id.clone(), lease.receipt.clone());
        let due = self.now_ms() + millis(delay);
        self.with(move |conn| {
            conn.prepare_cached(
                "UPDATE delivery_queue SET due_at = ?3, leased = 0 WHERE id = ?1 AND attempts = ?2",
            )
            .and_then(|mut s| s.execute(params![id, receipt, due]))
            .map_err(backend)?;
            Ok(())
        })
        .await
        .map_err(queue_err)
    }

    async fn dead_letter(&self, lease: &Lease, reason: &str) -> Result<(), QueueError> {
        let (job, attempt, reason) = (lease.job.clone(), lease.attempt, reason.to_owned());
        let receipt = lease.receipt.clone();
        let now = self.now_ms();
        self.with(move |conn| {
            let tx = conn.transaction().map_err(backend)?;
            tx.execute(
                "INSERT OR REPLACE INTO dead_letters (id, org_id, subscription_id, body, attempts, reason, failed_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![job.id, job.org_id, job.subscription_id, job.body, attempt, reason, now],
            )
            .map_err(backend)?;
            // Only the current lease: a resend queued meanwhile stays.
            tx.execute(
                "DELETE FROM delivery_queue WHERE id = ?1 AND attempts = ?2",
                params![job.id, receipt],
            )
            .map_err(backend)?;
            tx.commit().map_err(backend)
        })
        .await
        .map_err(queue_err)
    }
}

impl SqliteDb {
    /// Makes every leased job due now. Called at start by the one process
    /// that owns the data dir: jobs a killed process had leased are retried
    /// at once instead of after their lease.
    pub async fn release_leases(&self) -> Result<u64, StoreError> {
        let now = self.now_ms();
        self.with(move |conn| {
            let n = conn
                .execute("UPDATE delivery_queue SET due_at = min(due_at, ?1), leased = 0 WHERE leased = 1", [now])
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
