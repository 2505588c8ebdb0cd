//! Embedded store: one SQLite file (WAL), schema migrations embedded.
//! Calls run on tokio's blocking pool so SQLite never blocks the runtime.
//!
//! One connection writes; lookups (gets, lists, fan-out) go to a few
//! read-only connections beside it. In WAL mode readers never wait for the
//! writer, so the API's reads and the deliveries' subscription lookups do
//! not queue behind ingestion and queue updates. A lookup of one row by its
//! key takes microseconds on such a connection, less than the hand-off to
//! the blocking pool, so those run in place when a read connection is free.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, Row, TransactionBehavior};

use super::{DeliveryRecord, DisabledEntry, Store, StoreError, StoredSubscription, Upsert};
use crate::model::{Message, SubscriptionStatus};

/// Schema versions, applied in order; `PRAGMA user_version` records progress.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE subscriptions (
    id               TEXT PRIMARY KEY,
    org_id           TEXT NOT NULL,
    uri              TEXT NOT NULL,
    event_filters    TEXT NOT NULL,  -- JSON array of canonical filters
    disabled_filters TEXT NOT NULL,  -- JSON array of DisabledEntry
    expires_at       INTEGER NOT NULL,
    status           TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    secret           TEXT NOT NULL,
    UNIQUE (org_id, uri)
);
-- Filter index: fan-out is a key lookup, whatever the number of subscriptions.
CREATE TABLE subscription_filters (
    filter          TEXT NOT NULL,
    subscription_id TEXT NOT NULL REFERENCES subscriptions (id) ON DELETE CASCADE,
    PRIMARY KEY (filter, subscription_id)
) WITHOUT ROWID;
CREATE INDEX subscription_filters_by_subscription ON subscription_filters (subscription_id);
CREATE TABLE messages (
    org_id TEXT NOT NULL,
    id     TEXT NOT NULL,
    body   TEXT NOT NULL,  -- the Message as JSON
    PRIMARY KEY (org_id, id)
) WITHOUT ROWID;
"#,
    r#"
ALTER TABLE subscriptions ADD COLUMN failing_since INTEGER;
"#,
    r#"
-- Durable delivery queue: a job is due at due_at; a lease pushes due_at to
-- the end of the lease, so a crashed consumer's jobs come back by themselves.
CREATE TABLE delivery_queue (
    id              TEXT PRIMARY KEY,  -- the notification uuid
    org_id          TEXT NOT NULL,
    subscription_id TEXT NOT NULL,
    body            TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    due_at          INTEGER NOT NULL,
    leased          INTEGER NOT NULL DEFAULT 0,
    enqueued_at     INTEGER NOT NULL
);
CREATE INDEX delivery_queue_due ON delivery_queue (due_at);
CREATE TABLE dead_letters (
    id              TEXT PRIMARY KEY,
    org_id          TEXT NOT NULL,
    subscription_id TEXT NOT NULL,
    body            TEXT NOT NULL,
    attempts        INTEGER NOT NULL,
    reason          TEXT NOT NULL,
    failed_at       INTEGER NOT NULL
);
-- Ingested event ids, for deduplication.
CREATE TABLE events (
    org_id      TEXT NOT NULL,
    event_id    TEXT NOT NULL,
    received_at INTEGER NOT NULL,
    PRIMARY KEY (org_id, event_id)
) WITHOUT ROWID;
"#,
];

/// Read connections beside the writer: at least one per runtime worker,
/// so in-place point lookups find one free.
const READERS: usize = 4;

#[derive(Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
    readers: Arc<Readers>,
    pub(crate) completions: Arc<crate::queue::sqlite::Completions>,
}

#[derive(Default)]
struct Readers {
    conns: Vec<Mutex<Connection>>,
    next: AtomicUsize,
}

pub(crate) fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

impl SqliteStore {
    /// Opens (creating if needed) the database file and migrates it.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let conn = Connection::open(path).map_err(backend)?;
        let mut store = Self::init(conn)?;
        // Opened after the migrations, so they see the current schema.
        let readers = (0..READERS)
            .map(|_| open_reader(path).map(Mutex::new))
            .collect::<Result<Vec<_>, _>>()?;
        store.readers = Arc::new(Readers {
            conns: readers,
            next: AtomicUsize::new(0),
        });
        Ok(store)
    }

    fn init(mut conn: Connection) -> Result<Self, StoreError> {
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
             PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000;",
        )
        .map_err(backend)?;
        migrate(&mut conn)?;
        Ok(SqliteStore {
            conn: Arc::new(Mutex::new(conn)),
            readers: Arc::default(),
            completions: Arc::default(),
        })
    }

    /// Runs `f` with the connection on the blocking pool.
    pub(crate) async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            f(&mut guard)
        })
        .await
        .map_err(backend)?
    }

    /// Runs `f` with the writer connection on the calling thread (a
    /// thread of the blocking pool).
    pub(crate) fn with_writer<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut guard = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    /// A point lookup (one row by its key): runs `f` right here on a free
    /// read connection, which never waits for the writer; on the blocking
    /// pool when none is free.
    async fn lookup<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let n = self.readers.conns.len();
        let start = self.readers.next.fetch_add(1, Ordering::Relaxed);
        for k in 0..n {
            if let Ok(guard) = self.readers.conns[(start + k) % n].try_lock() {
                return f(&guard);
            }
        }
        self.read(f).await
    }

    /// Runs a read-only `f` on the blocking pool with a free read connection
    /// (the writer when there is none).
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let readers = self.readers.clone();
        if readers.conns.is_empty() {
            return self.with(move |conn| f(conn)).await;
        }
        tokio::task::spawn_blocking(move || {
            let n = readers.conns.len();
            let start = readers.next.fetch_add(1, Ordering::Relaxed);
            for k in 0..n {
                if let Ok(guard) = readers.conns[(start + k) % n].try_lock() {
                    return f(&guard);
                }
            }
            let guard = readers.conns[start % n]
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            f(&guard)
        })
        .await
        .map_err(backend)?
    }
}

/// A connection for lookups only (`query_only`), on the same file.
fn open_reader(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(backend)?;
    conn.execute_batch("PRAGMA query_only = 1; PRAGMA busy_timeout = 5000;")
        .map_err(backend)?;
    Ok(conn)
}

fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let version: usize = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(backend)?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version) {
        let tx = conn.transaction().map_err(backend)?;
        tx.execute_batch(sql).map_err(backend)?;
        tx.pragma_update(None, "user_version", i + 1)
            .map_err(backend)?;
        tx.commit().map_err(backend)?;
    }
    Ok(())
}

const COLUMNS: &str =
    "id, org_id, uri, event_filters, disabled_filters, expires_at, status, created_at, updated_at, secret, failing_since";

fn row_to_subscription(row: &Row<'_>) -> rusqlite::Result<StoredSubscription> {
    let json_err = |i: usize, e: serde_json::Error| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
    };
    let filters: String = row.get(3)?;
    let disabled: String = row.get(4)?;
    let status: String = row.get(6)?;
    Ok(StoredSubscription {
        id: row.get(0)?,
        org_id: row.get(1)?,
        uri: row.get(2)?,
        event_filters: serde_json::from_str(&filters).map_err(|e| json_err(3, e))?,
        disabled_filters: serde_json::from_str::<Vec<DisabledEntry>>(&disabled)
            .map_err(|e| json_err(4, e))?,
        expires_at: row.get(5)?,
        status: SubscriptionStatus::parse(&status).unwrap_or(SubscriptionStatus::Active),
        created_at: row.get(7)?,
        updated_at: row.get(8)?,
        secret: row.get(9)?,
        failing_since: row.get(10)?,
    })
}

#[async_trait]
impl Store for SqliteStore {
    async fn upsert_subscription(
        &self,
        u: Upsert,
    ) -> Result<(StoredSubscription, bool), StoreError> {
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(backend)?;
            let existing: Option<String> = tx
                .query_row(
                    "SELECT id FROM subscriptions WHERE org_id = ?1 AND uri = ?2",
                    params![u.org_id, u.uri],
                    |r| r.get(0),
                )
                .optional()
                .map_err(backend)?;
            let filters = serde_json::to_string(&u.event_filters).map_err(backend)?;
            let disabled = serde_json::to_string(&u.disabled_filters).map_err(backend)?;
            let created = existing.is_none();
            let id = match existing {
                Some(id) => {
                    tx.execute(
                        "UPDATE subscriptions SET event_filters = ?2, disabled_filters = ?3, \
                         expires_at = ?4, status = 'ACTIVE', updated_at = ?5, failing_since = NULL WHERE id = ?1",
                        params![id, filters, disabled, u.expires_at, u.now],
                    )
                    .map_err(backend)?;
                    tx.execute("DELETE FROM subscription_filters WHERE subscription_id = ?1", [&id])
                        .map_err(backend)?;
                    id
                }
                None => {
                    let count: usize = tx
                        .query_row("SELECT count(*) FROM subscriptions WHERE org_id = ?1", [&u.org_id], |r| r.get(0))
                        .map_err(backend)?;
                    if count >= u.max_per_org {
                        return Err(StoreError::LimitReached(count));
                    }
                    tx.execute(
                        "INSERT INTO subscriptions (id, org_id, uri, event_filters, disabled_filters, \
                         expires_at, status, created_at, updated_at, secret) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'ACTIVE', ?7, ?7, ?8)",
                        params![u.new_id, u.org_id, u.uri, filters, disabled, u.expires_at, u.now, u.new_secret],
                    )
                    .map_err(backend)?;
                    u.new_id.clone()
                }
            };
            for filter in &u.event_filters {
                tx.execute(
                    "INSERT INTO subscription_filters (filter, subscription_id) VALUES (?1, ?2)",
                    params![filter, id],
                )
                .map_err(backend)?;
            }
            let stored = tx
                .query_row(&format!("SELECT {COLUMNS} FROM subscriptions WHERE id = ?1"), [&id], row_to_subscription)
                .map_err(backend)?;
            tx.commit().map_err(backend)?;
            Ok((stored, created))
        })
        .await
    }

    async fn get_subscription(
        &self,
        org_id: &str,
        id: &str,
    ) -> Result<Option<StoredSubscription>, StoreError> {
        let (org_id, id) = (org_id.to_owned(), id.to_owned());
        self.lookup(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM subscriptions WHERE id = ?1 AND org_id = ?2"
            ))
            .and_then(|mut s| {
                s.query_row(params![id, org_id], row_to_subscription)
                    .optional()
            })
            .map_err(backend)
        })
        .await
    }

    async fn list_subscriptions(
        &self,
        org_id: &str,
    ) -> Result<Vec<StoredSubscription>, StoreError> {
        let org_id = org_id.to_owned();
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM subscriptions WHERE org_id = ?1"
                ))
                .map_err(backend)?;
            let rows = stmt
                .query_map([org_id], row_to_subscription)
                .map_err(backend)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(backend)
        })
        .await
    }

    async fn delete_subscription(&self, org_id: &str, id: &str) -> Result<bool, StoreError> {
        let (org_id, id) = (org_id.to_owned(), id.to_owned());
        self.with(move |conn| {
            // Filter index rows go with it (ON DELETE CASCADE).
            let n = conn
                .execute(
                    "DELETE FROM subscriptions WHERE id = ?1 AND org_id = ?2",
                    params![id, org_id],
                )
                .map_err(backend)?;
            Ok(n > 0)
        })
        .await
    }

    async fn subscriptions_for_filter(
        &self,
        filter: &str,
    ) -> Result<Vec<StoredSubscription>, StoreError> {
        let filter = filter.to_owned();
        self.read(move |conn| {
            let cols = COLUMNS.split(", ").map(|c| format!("s.{c}")).collect::<Vec<_>>().join(", ");
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {cols} FROM subscription_filters f JOIN subscriptions s ON s.id = f.subscription_id \
                     WHERE f.filter = ?1"
                ))
                .map_err(backend)?;
            let rows = stmt.query_map([filter], row_to_subscription).map_err(backend)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(backend)
        })
        .await
    }

    async fn record_delivery(
        &self,
        org_id: &str,
        id: &str,
        record: DeliveryRecord,
    ) -> Result<Option<SubscriptionStatus>, StoreError> {
        let (org_id, id) = (org_id.to_owned(), id.to_owned());
        self.with(move |conn| {
            let sql = match record {
                DeliveryRecord::Succeeded => "UPDATE subscriptions SET failing_since = NULL \
                     WHERE id = ?1 AND org_id = ?2 AND failing_since IS NOT NULL",
                DeliveryRecord::Failed { .. } => "UPDATE subscriptions SET \
                     failing_since = coalesce(failing_since, ?3), \
                     status = CASE WHEN status = 'ACTIVE' AND failing_since IS NOT NULL AND ?3 - failing_since >= ?4 \
                                   THEN 'BLACKLISTED' ELSE status END \
                     WHERE id = ?1 AND org_id = ?2",
                DeliveryRecord::Gone => "UPDATE subscriptions SET status = 'BLACKLISTED' WHERE id = ?1 AND org_id = ?2",
            };
            let (now, after) = match record {
                DeliveryRecord::Failed { now, blacklist_after_ms } => (now, blacklist_after_ms),
                _ => (0, 0),
            };
            let mut stmt = conn.prepare_cached(sql).map_err(backend)?;
            let params: &[&dyn rusqlite::ToSql] = match record {
                DeliveryRecord::Failed { .. } => &[&id, &org_id, &now, &after],
                _ => &[&id, &org_id],
            };
            stmt.execute(params).map_err(backend)?;
            let status: Option<String> = conn
                .query_row("SELECT status FROM subscriptions WHERE id = ?1 AND org_id = ?2", params![id, org_id], |r| {
                    r.get(0)
                })
                .optional()
                .map_err(backend)?;
            Ok(status.and_then(|s| SubscriptionStatus::parse(&s)))
        })
        .await
    }

    async fn put_message(&self, org_id: &str, message: &Message) -> Result<(), StoreError> {
        let org_id = org_id.to_owned();
        let id = message.id.clone();
        let body = serde_json::to_string(message).map_err(backend)?;
        self.with(move |conn| {
            conn.execute(
                "INSERT INTO messages (org_id, id, body) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (org_id, id) DO UPDATE SET body = excluded.body",
                params![org_id, id, body],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn get_message(&self, org_id: &str, id: &str) -> Result<Option<Message>, StoreError> {
        let (org_id, id) = (org_id.to_owned(), id.to_owned());
        self.lookup(move |conn| {
            let body: Option<String> = conn
                .prepare_cached("SELECT body FROM messages WHERE org_id = ?1 AND id = ?2")
                .and_then(|mut s| s.query_row(params![org_id, id], |r| r.get(0)).optional())
                .map_err(backend)?;
            body.map(|b| serde_json::from_str(&b).map_err(backend))
                .transpose()
        })
        .await
    }
}
