//! The SQLite schema: migrations applied in order at open, `PRAGMA
//! user_version` recording progress. docs/schemas.md shows the tables.

use rusqlite::Connection;

use super::failure;
use crate::store::StoreError;

/// Schema versions, applied in order; `PRAGMA user_version` records progress.
pub(super) const MIGRATIONS: &[&str] = &[
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
    r#"
-- Delivery history (history/mod.rs), which is also the delivery queue: a
-- notification is a job while `due_at` is set (PENDING, or in a lease); its
-- attempts are kept in `attempt_log`. Kept for WEBHOOKS_DELIVERY_RETENTION.
CREATE TABLE notifications (
    id               TEXT PRIMARY KEY,  -- the notification uuid
    org_id           TEXT NOT NULL,
    subscription_id  TEXT NOT NULL,
    event_id         TEXT NOT NULL,
    event            TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    status           TEXT NOT NULL,     -- PENDING, DELIVERED, FAILED
    attempts         INTEGER NOT NULL DEFAULT 0,
    last_attempt_at  INTEGER,
    next_attempt_at  INTEGER,
    last_http_status INTEGER,
    last_code        TEXT,
    body             TEXT NOT NULL,     -- the payload, as sent
    attempt_log      TEXT NOT NULL DEFAULT '[]',  -- JSON array of the attempts, oldest first
    -- The queue: due at due_at (NULL: not queued); a lease pushes due_at to
    -- its end and counts `lease` (the receipt); `manual` for a resend.
    due_at           INTEGER,
    lease            INTEGER NOT NULL DEFAULT 0,
    leased           INTEGER NOT NULL DEFAULT 0,
    manual           INTEGER NOT NULL DEFAULT 0
);
-- Lists, stats and recover read a subscription's window; the hourly purge scans.
CREATE INDEX notifications_by_subscription ON notifications (subscription_id, created_at);
CREATE INDEX notifications_due ON notifications (due_at) WHERE due_at IS NOT NULL;
-- Jobs queued before the history existed become notifications without an event.
INSERT INTO notifications (id, org_id, subscription_id, event_id, event, created_at, status,
                           next_attempt_at, body, due_at, lease)
    SELECT id, org_id, subscription_id, '', '', enqueued_at, 'PENDING', due_at, body, due_at, attempts
    FROM delivery_queue;
DROP TABLE delivery_queue;
"#,
    r#"
-- Signing-secret rotation: replaced secrets still in their grace period,
-- a JSON array of PreviousSecret ({"secret", "expiresAt"}), oldest first.
ALTER TABLE subscriptions ADD COLUMN previous_secrets TEXT NOT NULL DEFAULT '[]';
"#,
    r#"
-- Message retention (WEBHOOKS_MESSAGE_RETENTION): when each message was
-- last stored, epoch ms. Messages stored before had no such time: they are
-- dated now, so they are kept one retention from the upgrade.
ALTER TABLE messages ADD COLUMN received_at INTEGER NOT NULL DEFAULT 0;
UPDATE messages SET received_at = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER);
-- The purge deletes by age.
CREATE INDEX messages_by_age ON messages (received_at);
"#,
    r#"
-- Lists paged in the store: a page in the default order (creation time,
-- then id) is a range of this index; other orders sort one organization.
CREATE INDEX subscriptions_by_creation ON subscriptions (org_id, created_at, id);
-- totalElements and the per-organization cap, kept by triggers.
CREATE TABLE subscription_counts (
    org_id TEXT PRIMARY KEY,
    n      INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO subscription_counts (org_id, n)
    SELECT org_id, count(*) FROM subscriptions GROUP BY org_id;
CREATE TRIGGER subscription_counted AFTER INSERT ON subscriptions BEGIN
    INSERT INTO subscription_counts (org_id, n) VALUES (new.org_id, 1)
        ON CONFLICT (org_id) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER subscription_uncounted AFTER DELETE ON subscriptions BEGIN
    UPDATE subscription_counts SET n = n - 1 WHERE org_id = old.org_id;
END;
"#,
    r#"
-- Tenant isolation. Each subscription's circuit breaker (health/breaker.rs,
-- JSON) and its compare-and-set revision.
ALTER TABLE subscriptions ADD COLUMN health TEXT;
ALTER TABLE subscriptions ADD COLUMN health_rev INTEGER NOT NULL DEFAULT 0;
-- Leases that were deferred (cap, open breaker) rather than attempted: the
-- attempt number is lease - deferrals.
ALTER TABLE notifications ADD COLUMN deferrals INTEGER NOT NULL DEFAULT 0;
-- Leases held per subscription, for the cap-aware fair lease.
CREATE INDEX notifications_leased ON notifications (subscription_id) WHERE leased = 1;
"#,
    r#"
-- The W3C traceparent of the ingestion that created a notification (issue 23).
ALTER TABLE notifications ADD COLUMN traceparent TEXT;
"#,
    r#"
-- Expiry reminders (issue 22): the expires_at a reminder was sent for; a
-- re-post to another expiry clears it, which re-arms the reminder. The
-- index holds the subscriptions not reminded of their expiry, so the
-- periodic job's window is a range of it, whatever was already reminded.
ALTER TABLE subscriptions ADD COLUMN expiry_reminded_for INTEGER;
CREATE INDEX subscriptions_expiring ON subscriptions (expires_at)
    WHERE expiry_reminded_for IS NULL OR expiry_reminded_for <> expires_at;
"#,
    r#"
-- Newest first (`sort=createdDateTime,desc`) breaks ties by the id ascending
-- (the default order's tie-break), which subscriptions_by_creation cannot
-- give: SQLite sorted the whole organization for every page (issue 26).
-- Read forwards this index is that order (backwards, its reverse).
CREATE INDEX subscriptions_by_creation_desc ON subscriptions (org_id, created_at DESC, id);
"#,
    r#"
-- Per-subscription due queues (issue 36): a lease turns over the
-- subscriptions with queued jobs (a seek each) and takes each one's oldest
-- due jobs (a range), so its cost does not grow with the backlog
-- (sqlite/queue.rs, docs/decisions/tenant-isolation.md).
CREATE INDEX notifications_queued ON notifications (subscription_id, due_at) WHERE due_at IS NOT NULL;
"#,
    r#"
-- Ordered delivery (issue 36): an ordered subscription's next job is its
-- queued one accepted first. Every index ends with the rowid (the order
-- notifications were accepted in), so the head is the first entry of the
-- subscription's range here, a seek however deep its line.
ALTER TABLE subscriptions ADD COLUMN ordered INTEGER NOT NULL DEFAULT 0;
CREATE INDEX notifications_line ON notifications (subscription_id) WHERE due_at IS NOT NULL;
"#,
    r#"
-- A subscription's rate limit, notifications per second (issue 36); NULL:
-- unlimited. The lease reads it by primary key for each subscription it
-- visits (sqlite/queue.rs, docs/decisions/rate-limit.md).
ALTER TABLE subscriptions ADD COLUMN rate_limit INTEGER;
"#,
    r#"
-- The role assumed to reach an AWS destination (issue 38), whose ARN is the
-- subscription's uri; NULL for an HTTPS callback (docs/decisions/destinations.md).
ALTER TABLE subscriptions ADD COLUMN role_arn TEXT;
"#,
    r#"
-- The external id an AWS destination was validated with (issue 44): one
-- that differs from the service's now is the service's fault, not the
-- customer's (docs/decisions/destinations.md).
ALTER TABLE subscriptions ADD COLUMN external_id TEXT;
"#,
    r#"
-- A subscription's payload filter (issue 46), its compact JSON; NULL: none.
-- Fan-out reads it with the subscription (docs/decisions/payload-filter.md).
ALTER TABLE subscriptions ADD COLUMN payload_filter TEXT;
"#,
    r#"
-- A subscription's own retry schedule (issue 46), as WEBHOOKS_RETRY_SCHEDULE
-- writes one ("5s,2m,1h"); NULL: the deployment's.
ALTER TABLE subscriptions ADD COLUMN retry_schedule TEXT;
"#,
    r#"
-- A subscription's custom headers (issue 46), a JSON object of names to
-- values (secrets, like `secret`); NULL: none (docs/decisions/custom-headers.md).
ALTER TABLE subscriptions ADD COLUMN custom_headers TEXT;
"#,
];

pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let version: usize = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(failure)?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version) {
        let tx = conn.transaction().map_err(failure)?;
        tx.execute_batch(sql).map_err(failure)?;
        tx.pragma_update(None, "user_version", i + 1)
            .map_err(failure)?;
        tx.commit().map_err(failure)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages stored before the retention existed are dated at the
    /// upgrade, so they are kept one retention from then, not purged at once.
    #[test]
    fn messages_from_before_the_retention_are_dated_at_the_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = Connection::open(dir.path().join("upgrade.db")).unwrap();
        for sql in &MIGRATIONS[..5] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 5).unwrap();
        conn.execute(
            "INSERT INTO messages (org_id, id, body) VALUES ('org', 'm', '{}')",
            [],
        )
        .unwrap();
        let before = chrono::Utc::now().timestamp_millis();
        migrate(&mut conn).unwrap();
        let after = chrono::Utc::now().timestamp_millis();
        let dated: i64 = conn
            .query_row("SELECT received_at FROM messages", [], |r| r.get(0))
            .unwrap();
        assert!(
            (before - 1..=after + 1).contains(&dated),
            "{before} <= {dated} <= {after}"
        );
    }

    /// The per-organization counts start from the rows already there and
    /// follow inserts and deletes.
    #[test]
    fn subscription_counts_start_from_existing_rows_and_follow_changes() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = Connection::open(dir.path().join("counts.db")).unwrap();
        for sql in &MIGRATIONS[..6] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 6).unwrap();
        let insert = |conn: &Connection, id: &str, org: &str| {
            conn.execute(
                "INSERT INTO subscriptions (id, org_id, uri, event_filters, disabled_filters, \
                 expires_at, status, created_at, updated_at, secret) \
                 VALUES (?1, ?2, ?1, '[]', '[]', 0, 'ACTIVE', 0, 0, 's')",
                [id, org],
            )
            .unwrap();
        };
        for (id, org) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
            insert(&conn, id, org);
        }
        migrate(&mut conn).unwrap();
        let count = |conn: &Connection, org: &str| -> i64 {
            conn.query_row(
                "SELECT coalesce((SELECT n FROM subscription_counts WHERE org_id = ?1), 0)",
                [org],
                |r| r.get(0),
            )
            .unwrap()
        };
        assert_eq!((count(&conn, "a"), count(&conn, "b")), (2, 1));
        insert(&conn, "c1", "c");
        insert(&conn, "a3", "a");
        conn.execute("DELETE FROM subscriptions WHERE id IN ('a1', 'b1')", [])
            .unwrap();
        assert_eq!(
            (count(&conn, "a"), count(&conn, "b"), count(&conn, "c")),
            (2, 0, 1)
        );
    }
}
