//! Expiry reminders on SQLite: `expiry_reminded_for` holds the expiry a
//! reminder was sent for (a re-post to another expiry clears it), and the
//! partial index `subscriptions_expiring` holds the subscriptions not
//! reminded yet, by expiry (`schema.rs`).

use rusqlite::params;

use super::store::{row_to_subscription, COLUMNS};
use super::{failure, SqliteDb};
use crate::ids::{OrgId, SubscriptionId};
use crate::store::{StoreError, StoredSubscription};

impl SqliteDb {
    /// [`crate::store::Store::expiring_subscriptions`]: a range of the
    /// partial index, up to `limit` rows; on the blocking pool with a read
    /// connection, as it may decode many.
    pub(super) async fn expiring(
        &self,
        after: i64,
        until: i64,
        limit: usize,
    ) -> Result<Vec<StoredSubscription>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&expiring_sql()).map_err(failure)?;
            let rows = stmt
                .query_map(params![after, until, limit], row_to_subscription)
                .map_err(failure)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(failure)
        })
        .await
    }

    /// [`crate::store::Store::mark_expiry_reminded`], only for the expiry
    /// the subscription still has: one re-posted meanwhile stays armed.
    pub(super) async fn mark_reminded(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        let (org_id, id) = (org_id.to_owned(), id.to_owned());
        self.with(move |conn| {
            conn.prepare_cached(
                "UPDATE subscriptions SET expiry_reminded_for = expires_at \
                 WHERE id = ?1 AND org_id = ?2 AND expires_at = ?3",
            )
            .and_then(|mut s| s.execute(params![id, org_id, expires_at]))
            .map_err(failure)?;
            Ok(())
        })
        .await
    }
}

/// Subscriptions not reminded of their expiry, in `(?1, ?2]`, soonest
/// first, at most `?3`. The reminder condition is the partial index's
/// `WHERE`, word for word, so SQLite uses that index (checked below).
fn expiring_sql() -> String {
    format!(
        "SELECT {COLUMNS} FROM subscriptions \
         WHERE expires_at > ?1 AND expires_at <= ?2 \
         AND (expiry_reminded_for IS NULL OR expiry_reminded_for <> expires_at) \
         ORDER BY expires_at LIMIT ?3"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The expiry job's query is a range of the partial index, already in
    /// its order: no scan of the table, no sort.
    #[test]
    fn expiring_subscriptions_read_a_range_of_the_partial_index() {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&mut conn).unwrap();
        let mut stmt = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {}", expiring_sql()))
            .unwrap();
        let plan: Vec<String> = stmt
            .query_map(params![0, 1, 10], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            plan,
            ["SEARCH subscriptions USING INDEX subscriptions_expiring \
                 (expires_at>? AND expires_at<?)"],
            "{plan:?}"
        );
    }

    /// Subscriptions from before the reminders are armed by the upgrade.
    #[test]
    fn subscriptions_from_before_the_upgrade_get_a_reminder() {
        use super::super::schema::{migrate, MIGRATIONS};
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        let before = MIGRATIONS.len() - 1;
        for sql in &MIGRATIONS[..before] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", before).unwrap();
        conn.execute(
            "INSERT INTO subscriptions (id, org_id, uri, event_filters, disabled_filters, \
             expires_at, status, created_at, updated_at, secret) \
             VALUES ('s', 'o', 'u', '[]', '[]', 5, 'ACTIVE', 0, 0, 'x')",
            [],
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        let ids: Vec<String> = conn
            .prepare(&expiring_sql())
            .unwrap()
            .query_map(params![0, 10, 10], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(ids, ["s"]);
    }
}
