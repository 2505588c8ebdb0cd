//! The embedded adapter: one SQLite file (WAL) that holds everything and
//! implements the four ports: [`Store`](crate::store::Store) (`store.rs`,
//! its expiry reminders in `expiry.rs`),
//! [`DeliveryQueue`](crate::queue::DeliveryQueue) (`queue.rs`),
//! [`Outbox`](crate::queue::Outbox) (`outbox.rs`) and
//! [`DeliveryHistory`](crate::history::DeliveryHistory) (`history.rs`), so
//! ingesting an event (dedupe record, message, notifications and their
//! history) is one transaction. This module
//! owns the connections; no call runs on the runtime's worker threads
//! (writes on the writer's thread, reads on the reader threads, both
//! `threads.rs`), so a slow disk or a lock held by another process
//! ([`BUSY_TIMEOUT_MS`]) stalls that one call, not the requests and
//! deliveries sharing its thread.
//!
//! One connection writes; lookups (gets, lists, fan-out) go to a few
//! read-only connections beside it. In WAL mode readers never wait for the
//! writer, so the API's reads and the deliveries' subscription lookups do
//! not queue behind ingestion and queue updates.

use std::path::Path;
use std::sync::Arc;

use rusqlite::hooks::Action;
use rusqlite::{Connection, OpenFlags};

use crate::clock::Clock;
use crate::store::StoreError;
use group_commit::GroupCommit;
use read_cache::ReadCache;
use threads::ConnectionThreads;

pub use threads::before_sleep;

mod expiry;
mod group_commit;
mod history;
mod outbox;
mod queue;
mod read_cache;
mod schema;
mod store;
mod threads;

/// Figures about the embedded queue, for operators and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueStats {
    /// Notifications on the queue, not yet completed or dead-lettered.
    pub pending: u64,
    /// Notifications given up on, kept as dead letters.
    pub dead_letters: u64,
}

/// One small write, group-committed with others (`group_commit.rs`).
enum Write {
    /// An event ingested: its dedupe record, message and notifications (`outbox.rs`).
    Event(outbox::EventWrite),
    /// The queue job is done (`queue.rs`): delete it if the lease is current.
    Complete { id: String, receipt: String },
    /// The history's record of an attempt (`history.rs`).
    Outcome {
        id: crate::ids::NotificationId,
        outcome: crate::history::Outcome,
    },
}

/// What one group-committed write answers: for an event, whether it was
/// new (`false`: a duplicate); an error of its own fails it alone.
type Written = Result<bool, StoreError>;

/// Prepared statements kept per connection: more than any one runs.
const STATEMENT_CACHE: usize = 64;

/// Read connections beside the writer: one per core, at least two and at
/// most four. Reads are CPU work (pages come from the OS's cache), so a
/// reader beyond the cores only adds context switches; on two cores, four
/// readers cost a fifth of a get's throughput
/// (docs/performance-history.md#the-get-path-found-issue-26).
fn readers() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4))
}

/// The SQLite file and its connections: one writer and a few readers.
#[derive(Clone)]
pub struct SqliteDb {
    /// The one write connection, on a thread of its own.
    writer: Arc<ConnectionThreads>,
    readers: Arc<ConnectionThreads>,
    /// The small writes of ingestion and delivery (events, outcomes,
    /// completions), written together: many, one transaction.
    writes: Arc<GroupCommit<Write, Written, Arc<StoreError>>>,
    /// Subscriptions read by id and list pages, until the next write
    /// (`read_cache.rs`).
    reads: Arc<ReadCache>,
    clock: Arc<dyn Clock>,
    /// Where the lease's turn over subscriptions stopped (`queue.rs`).
    turn: Arc<std::sync::Mutex<String>>,
    /// The next free rate slot of each rate-limited subscription, taken by
    /// the lease (`queue.rs`, `health/rate.rs`).
    rates: Arc<std::sync::Mutex<Paces>>,
}

/// Next free rate slots by subscription id.
type Paces = std::collections::HashMap<String, crate::health::rate::Pace>;

/// How long a statement waits for a lock another connection holds before
/// it fails with `SQLITE_BUSY` (answered `503 STORE_UNAVAILABLE`). This
/// process writes through one connection, so only another process (a
/// backup, the `sqlite3` shell, a second server on the same file) holds
/// the lock for long: a request waits this long, not SQLite's 5 s of
/// before, then is told to come back (`Retry-After`).
const BUSY_TIMEOUT_MS: u32 = 1_000;

/// A failure of the SQLite side as a store error, its cause kept: busy or
/// locked (another connection held the lock past [`BUSY_TIMEOUT_MS`]) is
/// [`StoreError::Unavailable`], like a throttled DynamoDB. A stored value found [`unreadable`] is [`StoreError::Corrupt`], named by
/// its row.
fn failure<E: std::error::Error + Send + Sync + 'static>(e: E) -> StoreError {
    let sqlite = (&e as &dyn std::error::Error).downcast_ref::<rusqlite::Error>();
    if let Some(rusqlite::Error::FromSqlConversionFailure(_, _, cause)) = sqlite {
        if let Some(Unreadable { key, problem }) = cause.downcast_ref() {
            return StoreError::corrupt(key.clone(), problem.clone());
        }
    }
    match sqlite.and_then(rusqlite::Error::sqlite_error_code) {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            StoreError::unavailable(e)
        }
        _ => StoreError::backend(e),
    }
}

/// A stored value this version cannot read (an unknown status, malformed
/// JSON), found decoding the row `key` (`table/id`).
#[derive(Debug, thiserror::Error)]
#[error("{problem}")]
struct Unreadable {
    key: String,
    problem: String,
}

/// Column `column` of the row `key` holds what this version cannot read:
/// an error a row mapping can return, which [`failure`] turns into
/// [`StoreError::Corrupt`] (never a default in its place).
fn unreadable(key: String, column: usize, problem: impl std::fmt::Display) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        column,
        rusqlite::types::Type::Text,
        Box::new(Unreadable {
            key,
            problem: problem.to_string(),
        }),
    )
}

/// A batch's failure as each of its writes reports it (the batch shares
/// one error; the variant and cause are kept).
fn unshare(e: Arc<StoreError>) -> StoreError {
    match Arc::try_unwrap(e) {
        Ok(e) => e,
        Err(shared) if shared.is_unavailable() => StoreError::Unavailable(Box::new(Shared(shared))),
        Err(shared) => StoreError::Backend(Box::new(Shared(shared))),
    }
}

/// A store error shared by the writes of a failed batch, shown as its cause.
#[derive(Debug)]
struct Shared(Arc<StoreError>);

impl Shared {
    fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        match &*self.0 {
            StoreError::Unavailable(c) | StoreError::Backend(c) => Some(c.as_ref()),
            _ => None,
        }
    }
}

impl std::fmt::Display for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.cause() {
            Some(cause) => std::fmt::Display::fmt(cause, f),
            None => std::fmt::Display::fmt(&self.0, f),
        }
    }
}

impl std::error::Error for Shared {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause().and_then(|c| c.source())
    }
}

impl SqliteDb {
    /// Opens (creating if needed) the database file and migrates it.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let mut conn = Connection::open(path).map_err(failure)?;
        Self::prepare_writer(&mut conn)?;
        // The read cache learns of the writer's changes to subscriptions
        // row by row; other tables' writes (history, queue) leave it be.
        let reads = Arc::new(ReadCache::default());
        let seen = reads.clone();
        conn.update_hook(Some(move |_: Action, _: &str, table: &str, _: i64| {
            seen.row_changed(table)
        }));
        // Opened after the migrations, so they see the current schema.
        let readers = (0..readers())
            .map(|_| open_reader(path))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SqliteDb {
            writer: Arc::new(
                ConnectionThreads::start(vec![conn], "sqlite-writer").map_err(failure)?,
            ),
            readers: Arc::new(ConnectionThreads::start(readers, "sqlite-reader").map_err(failure)?),
            writes: Arc::default(),
            reads,
            clock: crate::clock::system(),
            turn: Arc::default(),
            rates: Arc::default(),
        })
    }

    /// The same database on another clock (tests move a manual one).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// The writer's settings, then the migrations.
    fn prepare_writer(conn: &mut Connection) -> Result<(), StoreError> {
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
             PRAGMA foreign_keys = ON;",
        )
        .map_err(failure)?;
        conn.pragma_update(None, "busy_timeout", BUSY_TIMEOUT_MS)
            .map_err(failure)?;
        // rusqlite keeps 16 prepared statements by default; the writer runs
        // more kinds than that, and an evicted one is prepared again.
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        schema::migrate(conn)
    }

    /// Runs `f` with the write connection, on the writer's thread.
    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let reads = self.reads.clone();
        self.writer
            .run(move |conn| write(conn, &reads, f))
            .await
            .map_err(failure)?
    }

    /// Runs a read-only `f` on a free read connection.
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.readers
            .run(move |conn| f(conn))
            .await
            .map_err(failure)?
    }
}

/// Runs `f` with the write connection (on the writer's thread). A write
/// that changed a subscription makes the read cache's entries stale before
/// it is answered.
fn write<T>(
    conn: &mut Connection,
    reads: &ReadCache,
    f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let result = f(conn);
    reads.written();
    result
}

impl SqliteDb {
    /// Queues a write and waits until it is committed; the first writer of
    /// a batch queues its flush on the writer's thread.
    async fn commit_write(&self, write: Write) -> Result<bool, StoreError> {
        let (committed, start_writer) = self.writes.push(write);
        if start_writer {
            self.queue_flush();
        }
        committed
            .await
            .map_err(|_| StoreError::backend("the write was not committed"))?
            .map_err(unshare)?
    }

    /// Writes the pending batch on the writer's thread, and queues the next
    /// flush behind the writer's other work while more are pending.
    fn queue_flush(&self) {
        let db = self.clone();
        self.writer.submit(move |conn| {
            let more = db.writes.flush_batch(|batch| {
                write(conn, &db.reads, |conn| {
                    let mut tx = conn.transaction().map_err(failure)?;
                    let written = outbox::write_events(&mut tx, batch).map_err(failure)?;
                    queue::write_completions(&tx, batch).map_err(failure)?;
                    history::write_outcomes(&tx, batch).map_err(failure)?;
                    tx.commit().map_err(failure)?;
                    Ok(written)
                })
                .map_err(Arc::new)
            });
            if more {
                db.queue_flush();
            }
        });
    }
}

/// A connection for lookups only (`query_only`), on the same file.
fn open_reader(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(failure)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    conn.execute_batch("PRAGMA query_only = 1;")
        .map_err(failure)?;
    conn.pragma_update(None, "busy_timeout", BUSY_TIMEOUT_MS)
        .map_err(failure)?;
    Ok(conn)
}

/// Ids are TEXT columns.
macro_rules! text_column {
    ($($id:ty),*) => {$(
        impl rusqlite::types::ToSql for $id {
            fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
                self.as_str().to_sql()
            }
        }

        impl rusqlite::types::FromSql for $id {
            fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
                String::column_result(value).map(<$id>::from)
            }
        }
    )*};
}

text_column!(
    crate::ids::OrgId,
    crate::ids::SubscriptionId,
    crate::ids::NotificationId
);
