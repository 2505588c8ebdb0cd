//! Every key of both tables is built here and nowhere else. Both tables have
//! a string partition key `pk` and a string sort key `sk` (`template.yaml`).
//!
//! # Subscriptions table
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | subscription | `ORG#<org>` | `SUB#<id>` | the subscription, `version` |
//! | uniqueness guard | `ORG#<org>` | `URI#<sha256(uri), hex>` | `subscriptionId`, `uri` |
//! | subscription counter | `ORG#<org>` | `COUNT` | `n`, `listed` |
//! | list entry | `ORG#<org>` | `CREATED#<created ms, 13 digits>#<id>` | none |
//! | filter index entry | `FILTER#<canonical filter, an operational one without ?type=>` | `SUB#<id>` | a copy of the subscription, `ttl` |
//! | expiry entry | `EXPIRY#<UTC day of the expiry, yyyy-mm-dd>` | `<expiry ms, 13 digits>#<org>#<id>` | `orgId`, `id`, `expiresAt`, `ttl` |
//! | API key (HTTP API option) | `APIKEY#<key id>` | `K` | `orgId`, `digest` (SHA-256 of the key), `createdAt`, `revokedAt` |
//!
//! - **Create** is one `TransactWriteItems`: put the guard if absent, add 1
//!   to the counter if below the cap, put the subscription, its list entry
//!   and one index entry per filter. Concurrent creates of one (org, uri) race on the
//!   guard: one wins, the others are cancelled and retry as updates.
//! - **Update** and **delete** read the subscription (strongly consistent),
//!   then write it, its guard, counter and index entries in one transaction
//!   conditioned on its `version` (optimistic concurrency): an index entry can
//!   never outlive or disagree with its subscription. Cancelled transactions
//!   (conflicts, lost races) are retried with jittered backoff.
//! - **Fan-out** ([`Store::subscriptions_for_filter`]) is one `Query` on
//!   `pk = FILTER#<filter>`: the entries carry everything delivery needs
//!   (org, id, uri, status, expiry, secret), so no further reads.
//! - **List** ([`super::listing`]) in creation order (the default) reads
//!   the counter (`totalElements`), one `Query` of the list entries up to
//!   the page's end (entries are ~85 bytes: 1,000 of them are ~21 read
//!   units) and a `BatchGetItem` of the page's subscriptions. Other orders
//!   are one `Query` on `pk = ORG#<org>`, `begins_with(sk, "SUB#")`, the
//!   whole organization, bounded by the per-organization cap, sorted in
//!   memory. The counter's `listed` says every subscription of the
//!   organization has its entry; until then (data from before the entries)
//!   a list reads the whole organization and writes the missing entries.
//! - Reads that decide what to write, and reads right after a write by
//!   another process (lists, lookups, fan-out), are strongly consistent.
//!   Nothing scans.
//! - **Expiry reminders** ([`Store::expiring_subscriptions`]): each
//!   subscription has one expiry entry, for its current expiry, written in
//!   the transaction that creates it; an update to another expiry deletes
//!   the old entry and puts the new one (which re-arms the reminder), a
//!   delete deletes it. The periodic job queries the day partitions of its
//!   window, `sk` between the window's bounds (soonest first), then reads
//!   the subscriptions (`BatchGetItem`, strongly consistent), skipping
//!   entries whose subscription is gone or has another expiry.
//!   [`Store::mark_expiry_reminded`] deletes the entry. Entries carry `ttl`
//!   = the expiry + a day. Subscriptions created before the entries existed
//!   have none, so no reminder, until they are re-posted (a new expiry).
//! - **API keys** ([`super::api_keys`]), for `ApiType=http` only: one item
//!   per key, read by the authorizer with one strongly consistent `GetItem`
//!   (only on a miss of API Gateway's authorizer cache); its IAM policy
//!   allows `GetItem` on `APIKEY#` partitions only. Revoking sets
//!   `revokedAt`, so the item stays as a record.
//! - **TTL**: index entries carry `ttl` = the subscription's expiry (epoch
//!   seconds), so DynamoDB removes entries of expired subscriptions from the
//!   fan-out partitions; posting the uri again writes them anew. Subscription
//!   items, guards and counters carry no `ttl`: an expired subscription stays
//!   listed (as `EXPIRED`) and counted until deleted, as in SQLite.
//!
//! # Messages table: messages and event records
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | message | `MSG#<org>#<id>` | `M` | the [`Message`]'s fields, `receivedAt` (ms), `ttl` |
//! | ingested event | `EVENT#<org>#<event id>` | `E` | `ttl` |
//! | message under its old key (read only) | `ORG#<org>` | `MSG#<id>` | the [`Message`]'s fields |
//! | ingested event under its old key (left to expire) | `ORG#<org>` | `EVENT#<event id>` | `ttl` |
//!
//! - **One item per partition key.** A message and an event record are
//!   looked up by their id, so they are keyed by it: every event writes
//!   partitions of its own instead of one `ORG#<org>` partition per
//!   organization, whose 1,000 write units per second capped a busy
//!   organization (docs/cost.md, "Capacity: what binds first"). Tenancy stays in the
//!   key: the organization is part of `pk`, and organization ids are
//!   `[A-Za-z0-9_-]` (no `#`), so `MSG#<org>#<id>` names one (org, id) pair
//!   whatever the message id holds.
//! - **Retention.** A message carries `receivedAt` (epoch ms of its last
//!   store) and `ttl` = that + `WEBHOOKS_MESSAGE_RETENTION` (epoch s).
//!   DynamoDB deletes expired items only eventually (typically within days),
//!   so a read treats a message received before the retention's start as
//!   absent (`404`), as SQLite does before its purge.
//! - The outbox writes an event record for an event that carries no time of
//!   its own (`POST /events`, a notice), after its notifications are on the
//!   queue, so a repeat is recognised and skipped; it expires after 15 days
//!   (longer than SQS keeps a message). An event of the events queue has
//!   none: its notifications' ids and keys derive from the time it carries
//!   (docs/decisions/event-ingestion.md).
//! - **Upgrading from `ORG#<org>` keys.** Messages written before the per-id keys
//!   are found by a second `GetItem` of their old key when the new one is
//!   missing ([`legacy_msg_sk`]); `webhooks-local migrate-messages` stamps
//!   each of them with `receivedAt` = the migration time and its `ttl`, so
//!   they are removed one retention later like any other. Once that
//!   retention has passed after the migration, no old-key message is left
//!   and the fallback can go. Old event records are left to expire by
//!   their own `ttl`.
//!
//! # Delivery history (messages table)
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | notification summary | `HIST#<org>#<subscription>` | `<created ms, 13 digits>#<uuid>` | `eventId`, `event`, `status`, `attempts`, `lastAttemptAt`, `nextAttemptAt`, `lastHttpStatus`, `lastCode`, `durations`, `inlineAttempts` (up to 2 attempts with answers ≤ 128 B), `ttl`; `payload` and `traceparent` when the uuid carries its time (UUIDv8) |
//! | notification (UUIDv5 ids only) | `NOTIF#<org>#<uuid>` | `N` | `subscriptionId`, `createdAt`, `payload`, `ttl` |
//! | attempt | `NOTIF#<org>#<uuid>` | `A#<at ms, 13 digits>#<random>` | `durationMs`, `httpStatus`, `code`, `responseBody`, `trigger`, `ttl` |
//!
//! - A subscription's list, stats and recover are one `Query` on its
//!   summaries, the window a key condition on `sk` (newest first by
//!   default); the summaries stay small (no payload) so a page of the window
//!   costs little (a UUIDv8's summary holds its payload, ~0.35 KB more). One
//!   notification whose uuid carries its time (UUIDv8: the first 48 bits
//!   are the creation ms) is one `GetItem` of its summary, whose key the uuid
//!   gives, and a `Query` on `NOTIF#<org>#<uuid>` only when it has attempts
//!   not kept inline; a UUIDv5 is one `Query` on `NOTIF#<org>#<uuid>`
//!   (payload and attempts) and one `GetItem` of its summary.
//! - Ingestion of a UUIDv8 puts its summary with the payload if absent (a
//!   redelivery keeps what it finds); of a UUIDv5, the summary and the
//!   notification (`BatchWriteItem`). An attempt with a short answer
//!   (≤ 128 B, the first two) is appended to the summary in its update, a
//!   longer one or a later one writes an attempt item first; both before
//!   the queue message is settled: 2 writes of under 1 KB per UUIDv8
//!   notification delivered at the first try (3 for a UUIDv5).
//! - Everything carries `ttl` = creation + `WEBHOOKS_DELIVERY_RETENTION`.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::Item;
use crate::ids::{NotificationId, OrgId, SubscriptionId};

pub(super) const SUB: &str = "SUB#";
pub(super) const COUNTER_SK: &str = "COUNT";

pub(super) fn org_pk(org_id: &OrgId) -> String {
    format!("ORG#{org_id}")
}

pub(super) fn sub_sk(id: &SubscriptionId) -> String {
    format!("{SUB}{id}")
}

pub(super) const CREATED: &str = "CREATED#";

/// A list entry: creation order is the entries' sort-key order.
pub(super) fn created_sk(created_at: i64, id: &SubscriptionId) -> String {
    format!("{CREATED}{}#{id}", millis_key(created_at))
}

/// The subscription a list entry names.
pub(super) fn created_id(sk: &str) -> Option<SubscriptionId> {
    let rest = sk.strip_prefix(CREATED)?;
    let (ms, id) = rest.split_once('#')?;
    (ms.len() == 13 && !id.is_empty()).then(|| SubscriptionId::from(id))
}

/// URIs can be longer than a sort key: the guard is keyed by their hash.
pub(super) fn uri_sk(uri: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, uri.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("URI#{hex}")
}

pub(super) fn filter_pk(filter: &str) -> String {
    format!("FILTER#{}", crate::filter::index_key(filter))
}

pub(super) fn message_pk(org_id: &OrgId, id: &str) -> String {
    format!("MSG#{org_id}#{id}")
}

pub(super) const MESSAGE_SK: &str = "M";

/// The sort key of a message stored under `ORG#<org>` before the per-id keys: read
/// on a miss of [`message_pk`] until the upgrade's retention has passed.
pub(super) fn legacy_msg_sk(id: &str) -> String {
    format!("MSG#{id}")
}

pub(super) fn event_pk(org_id: &OrgId, event_id: &str) -> String {
    format!("EVENT#{org_id}#{event_id}")
}

pub(super) const EVENT_SK: &str = "E";

/// Times in sort keys: 13 digits of epoch ms (until the year 2286), so
/// their text order is their time order.
pub(super) fn millis_key(ms: i64) -> String {
    format!("{:013}", ms.clamp(0, 9_999_999_999_999))
}

pub(super) fn history_pk(org_id: &OrgId, subscription_id: &SubscriptionId) -> String {
    format!("HIST#{org_id}#{subscription_id}")
}

pub(super) fn summary_sk(created_at: i64, id: &NotificationId) -> String {
    format!("{}#{id}", millis_key(created_at))
}

pub(super) fn notification_pk(org_id: &OrgId, id: &NotificationId) -> String {
    format!("NOTIF#{org_id}#{id}")
}

pub(super) const NOTIFICATION_SK: &str = "N";
pub(super) const ATTEMPT: &str = "A#";

pub(super) fn attempt_sk(at: i64, random: u32) -> String {
    format!("{ATTEMPT}{}#{random:08x}", millis_key(at))
}

const DAY_MS: i64 = 86_400_000;

/// The UTC day of an expiry (days since the epoch), whose partition holds
/// its entry; clamped like [`millis_key`].
pub(super) fn expiry_day(ms: i64) -> i64 {
    ms.clamp(0, 9_999_999_999_999).div_euclid(DAY_MS)
}

/// The partition of the expiry entries of one UTC day: `EXPIRY#yyyy-mm-dd`.
pub(super) fn expiry_pk(day: i64) -> String {
    let date = chrono::DateTime::from_timestamp(day * 86_400, 0).unwrap_or_default();
    format!("EXPIRY#{}", date.format("%Y-%m-%d"))
}

/// An expiry entry's key: its day's partition; sorted by expiry in it.
pub(super) fn expiry_key(expires_at: i64, org_id: &OrgId, id: &SubscriptionId) -> Item {
    key(
        expiry_pk(expiry_day(expires_at)),
        format!("{}#{org_id}#{id}", millis_key(expires_at)),
    )
}

/// The `sk` bounds (both inclusive) of the entries expiring in `(after,
/// until]`: ms are whole, so after the first is from `after + 1`; `$`
/// sorts after the `#` that follows the last one's digits.
pub(super) fn expiry_sk_bounds(after: i64, until: i64) -> (String, String) {
    (
        millis_key(after.saturating_add(1)),
        format!("{}$", millis_key(until)),
    )
}

/// The jobs a subscription's open breaker parked (`parking.rs`).
pub(super) fn parked_pk(subscription_id: &SubscriptionId) -> String {
    format!("PARKED#{subscription_id}")
}

/// A subscription's rate slots: its next free one (`rate.rs`).
pub(super) fn rate_pk(subscription_id: &SubscriptionId) -> String {
    format!("RATE#{subscription_id}")
}

pub(super) const RATE_SK: &str = "P";

pub(super) fn api_key_pk(key_id: &str) -> String {
    format!("APIKEY#{key_id}")
}

pub(super) const API_KEY_SK: &str = "K";

pub(super) fn key(pk: String, sk: String) -> Item {
    HashMap::from([
        ("pk".to_owned(), AttributeValue::S(pk)),
        ("sk".to_owned(), AttributeValue::S(sk)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert_eq!(org_pk(&"org-1".into()), "ORG#org-1");
        assert_eq!(sub_sk(&"abc".into()), "SUB#abc");
        let guard = uri_sk(&format!("https://example.com/{}", "x".repeat(2048)));
        assert_eq!(guard.len(), 4 + 64, "a hash whatever the uri's length");
        assert_ne!(uri_sk("https://a"), uri_sk("https://b"));
        assert_eq!(summary_sk(5, &"u".into()), "0000000000005#u");
        assert!(summary_sk(999, &"z".into()) < summary_sk(1000, &"a".into()));
        assert_eq!(millis_key(i64::MAX), "9999999999999");
        assert_eq!(attempt_sk(1, 255), "A#0000000000001#000000ff");
        assert_eq!(message_pk(&"org-1".into(), "m#1"), "MSG#org-1#m#1");
        assert_eq!(event_pk(&"org-1".into(), "e-1"), "EVENT#org-1#e-1");
        assert_eq!(legacy_msg_sk("m-1"), "MSG#m-1");
        let entry = created_sk(5, &"a#b".into());
        assert_eq!(entry, "CREATED#0000000000005#a#b");
        assert_eq!(created_id(&entry), Some("a#b".into()));
        assert!(created_sk(999, &"z".into()) < created_sk(1000, &"a".into()));
        assert_eq!(created_id("SUB#x"), None);

        let org: OrgId = "org-1".into();
        let entry = expiry_key(1_700_000_000_123, &org, &"s-1".into());
        assert_eq!(entry["pk"].as_s().unwrap(), "EXPIRY#2023-11-14");
        assert_eq!(entry["sk"].as_s().unwrap(), "1700000000123#org-1#s-1");
        assert_eq!(expiry_pk(expiry_day(0)), "EXPIRY#1970-01-01");
        assert_eq!(expiry_day(DAY_MS - 1), 0);
        assert_eq!(expiry_day(DAY_MS), 1);
        let (from, to) = expiry_sk_bounds(1_700_000_000_122, 1_700_000_000_123);
        let sk = entry["sk"].as_s().unwrap().as_str();
        assert!(from.as_str() <= sk && sk <= to.as_str());
        let (from, to) = expiry_sk_bounds(1_700_000_000_123, 1_700_000_000_200);
        assert!(sk < from.as_str(), "after is excluded");
        let (_, to_before) = expiry_sk_bounds(0, 1_700_000_000_122);
        assert!(sk > to_before.as_str() && sk < to.as_str());
    }
}
