//! The [`DeliveryQueue`] port on SQLite: the queue is the delivery history's
//! `notifications` table (one row per notification, written once at
//! ingestion). A notification is queued while its `due_at` is set; a lease
//! pushes `due_at` to the end of the lease, so a crashed consumer's jobs
//! come back by themselves, and nothing leased is lost if the process dies.
//! Completing or dead-lettering clears `due_at`; the row stays as history.

use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension};

use super::{failure, QueueStats, SqliteDb, Write};
use crate::clock::millis;
use crate::health::rate::Reserved;
use crate::history::Trigger;
use crate::queue::{Backlog, DeliveryJob, DeliveryQueue, Lease, QueueError};
use crate::store::StoreError;

/// The matched filter of each job, read before the writer is taken.
pub(super) fn events_of(jobs: &[DeliveryJob]) -> Vec<String> {
    jobs.iter()
        .map(|j| crate::history::event_of(&j.body))
        .collect()
}

/// Queues jobs in the caller's transaction (enqueue, and the outbox's
/// commit, which records the event they come from): each becomes a PENDING
/// notification due now. A notification already recorded stays as it is,
/// unless the new job is a MANUAL resend: then it is due now, with a fresh
/// schedule (a lease in flight can no longer settle it, so the resend goes
/// out too). `events` are the jobs' matched filters ([`events_of`]).
pub(super) fn insert_jobs(
    tx: &rusqlite::Connection,
    event_id: &str,
    jobs: &[DeliveryJob],
    events: &[String],
    now: i64,
) -> Result<(), StoreError> {
    let mut stmt = tx
        .prepare_cached(
            "INSERT INTO notifications (id, org_id, subscription_id, event_id, event, created_at, \
                                        status, next_attempt_at, body, due_at, manual, traceparent) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'PENDING', ?7, ?8, ?7, ?9, ?10) \
             ON CONFLICT (id) DO UPDATE SET due_at = excluded.due_at, lease = 0, leased = 0, deferrals = 0, manual = 1 \
             WHERE excluded.manual = 1",
        )
        .map_err(failure)?;
    for (job, event) in jobs.iter().zip(events) {
        stmt.execute(params![
            job.id,
            job.org_id,
            job.subscription_id,
            event_id,
            event,
            job.created_at,
            now,
            job.body,
            i64::from(job.trigger == Trigger::Manual),
            job.traceparent,
        ])
        .map_err(failure)?;
    }
    Ok(())
}

/// Subscriptions one lease visits, at most: what bounds its cost when
/// many subscriptions have jobs queued that are not due (retries waiting)
/// or hold their cap. The next lease goes on from where this one stopped.
const TURNS_PER_LEASE: usize = 512;

/// Leases held per subscription, from `notifications_leased` (the leases
/// in flight). Named: `notifications_line` would also give the grouping's
/// order, and SQLite (no statistics) took it, reading every queued row.
const HELD: &str =
    "SELECT subscription_id, count(*) FROM notifications INDEXED BY notifications_leased \
     WHERE leased = 1 AND due_at > ?1 GROUP BY subscription_id";

/// The next subscription after `?1` (in id order) with jobs queued: one
/// seek of `notifications_queued`.
const NEXT_QUEUED: &str =
    "SELECT subscription_id FROM notifications INDEXED BY notifications_queued \
     WHERE due_at IS NOT NULL AND subscription_id > ?1 \
     ORDER BY subscription_id LIMIT 1";

/// The oldest due jobs of subscription `?1`, at most `?3`: a range of
/// `notifications_queued`. `LIMIT CAST(?3 …)`, not `LIMIT ?3`: SQLite plans
/// with a bare LIMIT parameter's value, so every new binding re-prepared
/// the statement.
const DUE_OF_ONE: &str = "SELECT rowid FROM notifications INDEXED BY notifications_queued \
     WHERE subscription_id = ?1 AND due_at IS NOT NULL AND due_at <= ?2 \
     ORDER BY due_at LIMIT CAST(?3 AS INTEGER)";

/// Whether subscription `?1` delivers in order, and its rate limit: one
/// seek of its primary key.
const SETTINGS_OF: &str = "SELECT ordered, rate_limit FROM subscriptions WHERE id = ?1";

/// The queued job of subscription `?1` accepted first, leased or not, and
/// when it is due: the first entry of its range of `notifications_line`.
const HEAD_OF_LINE: &str = "SELECT rowid, due_at FROM notifications INDEXED BY notifications_line \
     WHERE subscription_id = ?1 AND due_at IS NOT NULL ORDER BY rowid LIMIT 1";

/// The due jobs to lease: a turn over the subscriptions with queued jobs,
/// in the order of their ids, going on from the subscription where the last
/// lease stopped (`turn`) and wrapping around. Each subscription visited
/// gives its oldest due jobs, as many as it has room for under `cap` (the
/// leases it holds count) and the lease has room for. Each step is an index
/// seek (`notifications_queued`: the next subscription with queued jobs,
/// then a range of its due ones), so the cost is the jobs leased plus the
/// subscriptions visited (at most [`TURNS_PER_LEASE`]), whatever the depth
/// of any subscription's queue; and every subscription with due work is
/// visited within `ceil(subscriptions with queued jobs / TURNS_PER_LEASE)`
/// leases, whatever sits ahead of it. A rate-limited subscription gives at
/// most as many jobs as it has rate slots within the horizon (`rates`, one
/// seek of its row for its settings), each taking the next slot, which its
/// lease carries: the delivery waits for it (`health/rate.rs`).
///
/// An ordered subscription gives at most its head of line (the queued job
/// accepted first), when it is due and nothing of the subscription is
/// leased: a retry waiting, a deferral or a lease in flight holds the line.
fn fair_pick(
    tx: &rusqlite::Transaction<'_>,
    turn: &mut String,
    rates: &mut super::Paces,
    now: i64,
    max: usize,
    cap: usize,
) -> rusqlite::Result<Vec<(i64, Option<i64>)>> {
    let mut chosen = Vec::new();
    if max == 0 || cap == 0 {
        return Ok(chosen);
    }
    // Leases held, per subscription: at most the calls in flight.
    let mut held: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut holding = tx.prepare_cached(HELD)?;
    let mut rows = holding.query([now])?;
    while let Some(r) = rows.next()? {
        held.insert(r.get(0)?, r.get::<_, i64>(1)? as usize);
    }
    let mut next = tx.prepare_cached(NEXT_QUEUED)?;
    let mut due = tx.prepare_cached(DUE_OF_ONE)?;
    let mut settings = tx.prepare_cached(SETTINGS_OF)?;
    let mut head = tx.prepare_cached(HEAD_OF_LINE)?;
    let start = turn.clone();
    let mut wrapped = false;
    let mut visits = 0;
    let mut at = start.clone();
    loop {
        let found: Option<String> = next.query_row([&at], |r| r.get(0)).optional()?;
        let subscription = match found {
            // Past the start after wrapping: every subscription had its turn.
            Some(s) if wrapped && s > start => break,
            Some(s) => s,
            None if wrapped || start.is_empty() => break,
            None => {
                wrapped = true;
                at.clear();
                continue;
            }
        };
        visits += 1;
        let holds = held.get(&subscription).copied().unwrap_or(0);
        let mut room = cap.saturating_sub(holds).min(max - chosen.len());
        let (in_order, limit) = match room {
            0 => (false, None),
            _ => settings
                .query_row([&subscription], |r| {
                    Ok((r.get::<_, bool>(0)?, r.get::<_, Option<u32>>(1)?))
                })
                .optional()?
                .unwrap_or((false, None)),
        };
        if let Some(limit) = limit {
            let pace = rates.get(&subscription).copied().unwrap_or_default();
            room = room.min(pace.room(limit, now) as usize);
        }
        let before = chosen.len();
        if in_order {
            if holds == 0 && room > 0 {
                let (rowid, due_at): (i64, i64) =
                    head.query_row([&subscription], |r| Ok((r.get(0)?, r.get(1)?)))?;
                if due_at <= now {
                    chosen.push((rowid, None));
                }
            }
        } else if room > 0 {
            let mut rows = due.query(params![subscription, now, room as i64])?;
            while let Some(r) = rows.next()? {
                chosen.push((r.get(0)?, None));
            }
        }
        if let Some(limit) = limit {
            let pace = rates.entry(subscription.clone()).or_default();
            for (_, slot) in &mut chosen[before..] {
                // Within the room counted above, so a slot is there.
                if let Reserved::At(at) = pace.reserve(limit, now) {
                    *slot = Some(at);
                }
            }
        }
        turn.clone_from(&subscription);
        if chosen.len() >= max || visits >= TURNS_PER_LEASE {
            break;
        }
        at = subscription;
    }
    Ok(chosen)
}

/// Takes completed jobs off the queue in the group commit's transaction;
/// only the current lease may complete a job (the receipt is its number).
pub(super) fn write_completions(
    tx: &rusqlite::Transaction<'_>,
    batch: &[Write],
) -> rusqlite::Result<()> {
    // Usually a no-op: the delivery's final outcome took it off the queue.
    let mut delete = tx.prepare_cached(
        "UPDATE notifications SET due_at = NULL, leased = 0 \
         WHERE id = ?1 AND lease = ?2 AND due_at IS NOT NULL",
    )?;
    for write in batch {
        if let Write::Complete { id, receipt } = write {
            delete.execute(params![id, receipt])?;
        }
    }
    Ok(())
}

#[async_trait]
impl DeliveryQueue for SqliteDb {
    async fn enqueue(&self, jobs: Vec<DeliveryJob>) -> Result<(), QueueError> {
        let now = self.now_ms();
        let events = events_of(&jobs);
        self.with(move |conn| {
            let tx = conn.transaction().map_err(failure)?;
            insert_jobs(&tx, "", &jobs, &events, now)?;
            tx.commit().map_err(failure)
        })
        .await
        .map_err(QueueError::from)
    }

    async fn receive(
        &self,
        max: usize,
        per_subscription: usize,
        visibility: Duration,
    ) -> Result<Vec<Lease>, QueueError> {
        let now = self.now_ms();
        let (turn, rates) = (self.turn.clone(), self.rates.clone());
        self.with(move |conn| {
            let tx = conn.transaction().map_err(failure)?;
            let chosen = {
                let mut turn = turn.lock().unwrap_or_else(|e| e.into_inner());
                let mut rates = rates.lock().unwrap_or_else(|e| e.into_inner());
                // Only slots that can still matter are kept.
                if rates.len() > 10_000 {
                    let now_us = now.saturating_mul(1_000);
                    rates.retain(|_, pace| pace.next > now_us);
                }
                fair_pick(&tx, &mut turn, &mut rates, now, max, per_subscription).map_err(failure)?
            };
            let mut leases = Vec::with_capacity(chosen.len());
            {
                let mut lease = tx
                    .prepare_cached(
                        "UPDATE notifications SET lease = lease + 1, due_at = ?2 + ?3, leased = 1 \
                         WHERE rowid = ?1 \
                         RETURNING id, org_id, subscription_id, body, lease, created_at, manual, deferrals, traceparent",
                    )
                    .map_err(failure)?;
                for (rowid, slot) in chosen {
                    let leased = lease
                        .query_row(params![rowid, now, millis(visibility)], |r| {
                            let lease: u32 = r.get(4)?;
                            let deferrals: u32 = r.get(7)?;
                            let attempt = lease.saturating_sub(deferrals).max(1);
                            Ok(Lease {
                                job: DeliveryJob {
                                    id: r.get(0)?,
                                    org_id: r.get(1)?,
                                    subscription_id: r.get(2)?,
                                    body: r.get(3)?,
                                    created_at: r.get(5)?,
                                    trigger: if r.get::<_, i64>(6)? == 1 {
                                        Trigger::Manual
                                    } else {
                                        Trigger::Scheduled
                                    },
                                    attempts: 0,
                                    not_before: None,
                                    traceparent: r.get(8)?,
                                    ordered: false,
                                    history_attempts: 0,
                                },
                                attempt,
                                receipt: lease.to_string(),
                                slot,
                            })
                        })
                        .map_err(failure)?;
                    leases.push(leased);
                }
            }
            tx.commit().map_err(failure)?;
            Ok(leases)
        })
        .await
        .map_err(QueueError::from)
    }

    async fn complete(&self, lease: &Lease) -> Result<(), QueueError> {
        // Usually a no-op: the delivery's final outcome, group-committed
        // just before, has already taken the job off the queue
        // (`history::write_outcomes`). Written with the next group commit
        // rather than checked first: a read is a hand-off to a reader
        // thread, dearer than a no-op row update in a batch.
        self.commit_write(Write::Complete {
            id: lease.job.id.to_string(),
            receipt: lease.receipt.clone(),
        })
        .await
        .map(drop)
        .map_err(QueueError::from)
    }

    async fn retry_after(&self, lease: &Lease, delay: Duration) -> Result<(), QueueError> {
        let (id, receipt) = (lease.job.id.clone(), lease.receipt.clone());
        let due = self.now_ms() + millis(delay);
        self.with(move |conn| {
            conn.prepare_cached(
                "UPDATE notifications SET due_at = ?3, leased = 0 WHERE id = ?1 AND lease = ?2",
            )
            .and_then(|mut s| s.execute(params![id, receipt, due]))
            .map_err(failure)?;
            Ok(())
        })
        .await
        .map_err(QueueError::from)
    }

    fn caps_leases(&self) -> bool {
        true
    }

    fn limits_rate(&self) -> bool {
        true
    }

    async fn defer(&self, lease: &Lease, delay: Duration) -> Result<(), QueueError> {
        let (id, receipt) = (lease.job.id.clone(), lease.receipt.clone());
        let due = self.now_ms() + millis(delay);
        self.with(move |conn| {
            conn.prepare_cached(
                "UPDATE notifications SET due_at = ?3, leased = 0, deferrals = deferrals + 1 \
                 WHERE id = ?1 AND lease = ?2",
            )
            .and_then(|mut s| s.execute(params![id, receipt, due]))
            .map_err(failure)?;
            Ok(())
        })
        .await
        .map_err(QueueError::from)
    }

    async fn dead_letter(&self, lease: &Lease, reason: &str) -> Result<(), QueueError> {
        let (job, attempt, reason) = (lease.job.clone(), lease.attempt, reason.to_owned());
        let receipt = lease.receipt.clone();
        let now = self.now_ms();
        self.with(move |conn| {
            let tx = conn.transaction().map_err(failure)?;
            tx.execute(
                "INSERT OR REPLACE INTO dead_letters (id, org_id, subscription_id, body, attempts, reason, failed_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![job.id, job.org_id, job.subscription_id, job.body, attempt, reason, now],
            )
            .map_err(failure)?;
            // Only the current lease: a resend queued meanwhile stays.
            tx.execute(
                "UPDATE notifications SET due_at = NULL, leased = 0 WHERE id = ?1 AND lease = ?2",
                params![job.id, receipt],
            )
            .map_err(failure)?;
            tx.commit().map_err(failure)
        })
        .await
        .map_err(QueueError::from)
    }

    async fn backlog(&self) -> Result<Option<Backlog>, QueueError> {
        // Due and not leased (a lease pushes `due_at` past now), on the
        // partial index of queued notifications.
        let now = self.now_ms();
        let (due, oldest): (i64, Option<i64>) = self
            .read(move |conn| {
                conn.prepare_cached(
                    "SELECT count(*), min(due_at) FROM notifications WHERE due_at IS NOT NULL AND due_at <= ?1",
                )
                .and_then(|mut s| s.query_row([now], |r| Ok((r.get(0)?, r.get(1)?))))
                .map_err(failure)
            })
            .await
            .map_err(QueueError::from)?;
        Ok(Some(Backlog {
            due: u64::try_from(due).unwrap_or(0),
            oldest_due_age: Duration::from_millis(
                oldest.map_or(0, |at| u64::try_from(now - at).unwrap_or(0)),
            ),
        }))
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
                .execute(
                    "UPDATE notifications SET due_at = min(due_at, ?1), leased = 0 \
                     WHERE leased = 1 AND due_at IS NOT NULL",
                    [now],
                )
                .map_err(failure)?;
            Ok(n as u64)
        })
        .await
    }

    /// How many notifications are queued and how many are dead letters.
    pub async fn queue_stats(&self) -> Result<QueueStats, StoreError> {
        self.with(|conn| {
            let count = |sql: &str| {
                conn.query_row(sql, [], |r| r.get::<_, u64>(0))
                    .optional()
                    .map(Option::unwrap_or_default)
            };
            Ok(QueueStats {
                pending: count("SELECT count(*) FROM notifications WHERE due_at IS NOT NULL")
                    .map_err(failure)?,
                dead_letters: count("SELECT count(*) FROM dead_letters").map_err(failure)?,
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lease's two statements are index seeks and ranges of
    /// `notifications_queued`, never a scan or a sort: what makes a
    /// lease's cost independent of the backlog's depth.
    #[test]
    fn the_lease_seeks_the_per_subscription_queues() {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&mut conn).unwrap();
        let next: &[&dyn rusqlite::ToSql] = params!["sub"];
        let due: &[&dyn rusqlite::ToSql] = params!["sub", 0, 10];
        for (sql, bound) in [(NEXT_QUEUED, next), (DUE_OF_ONE, due)] {
            let plan: Vec<String> = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap()
                .query_map(bound, |r| r.get::<_, String>(3))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let plan = plan.join("; ");
            assert!(
                plan.contains("INDEX notifications_queued (subscription_id"),
                "{sql}: {plan}"
            );
            assert!(!plan.contains("TEMP B-TREE"), "{sql} sorts: {plan}");
        }
        let plan: String = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {HELD}"))
            .unwrap()
            .query_map([0], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
            .join("; ");
        assert!(plan.contains("INDEX notifications_leased"), "{plan}");
        let plan: String = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {HEAD_OF_LINE}"))
            .unwrap()
            .query_map(["sub"], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
            .join("; ");
        assert!(
            plan.contains("INDEX notifications_line (subscription_id"),
            "{plan}"
        );
        assert!(
            !plan.contains("TEMP B-TREE"),
            "the head of line sorts: {plan}"
        );
    }
}
