//! Every key of both tables is built here and nowhere else. Both tables have
//! a string partition key `pk` and a string sort key `sk` (`template.yaml`).
//!
//! # Subscriptions table
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | subscription | `ORG#<org>` | `SUB#<id>` | the subscription, `version` |
//! | uniqueness guard | `ORG#<org>` | `URI#<sha256(uri), hex>` | `subscriptionId`, `uri` |
//! | subscription counter | `ORG#<org>` | `COUNT` | `n` |
//! | filter index entry | `FILTER#<canonical filter>` | `SUB#<id>` | a copy of the subscription, `ttl` |
//!
//! - **Create** is one `TransactWriteItems`: put the guard if absent, add 1
//!   to the counter if below the cap, put the subscription and one index
//!   entry per filter. Concurrent creates of one (org, uri) race on the
//!   guard: one wins, the others are cancelled and retry as updates.
//! - **Update** and **delete** read the subscription (strongly consistent),
//!   then write it, its guard, counter and index entries in one transaction
//!   conditioned on its `version` (optimistic concurrency): an index entry can
//!   never outlive or disagree with its subscription. Cancelled transactions
//!   (conflicts, lost races) are retried with jittered backoff.
//! - **Fan-out** ([`Store::subscriptions_for_filter`]) is one `Query` on
//!   `pk = FILTER#<filter>`: the entries carry everything delivery needs
//!   (org, id, uri, status, expiry, secret), so no further reads.
//! - **List** is one `Query` on `pk = ORG#<org>`, `begins_with(sk, "SUB#")`,
//!   bounded by the per-organization cap.
//! - Reads that decide what to write, and reads right after a write by
//!   another process (lists, lookups, fan-out), are strongly consistent.
//!   Nothing scans.
//! - **TTL**: index entries carry `ttl` = the subscription's expiry (epoch
//!   seconds), so DynamoDB removes entries of expired subscriptions from the
//!   fan-out partitions; posting the uri again writes them anew. Subscription
//!   items, guards and counters carry no `ttl`: an expired subscription stays
//!   listed (as `EXPIRED`) and counted until deleted, as in SQLite.
//!
//! # Messages table
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | message | `ORG#<org>` | `MSG#<id>` | the [`Message`]'s fields |
//!
//! Messages carry no `ttl` (kept like in SQLite); the table has TTL enabled
//! on `ttl` so a retention can be added without a migration.
//!
//! # Event records (messages table)
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | ingested event | `ORG#<org>` | `EVENT#<event id>` | `ttl` |
//!
//! The outbox writes one per ingested event, after its notifications are on
//! the queue, so a redelivered SQS event is recognised and skipped.
//!
//! # Delivery history (messages table)
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | notification summary | `HIST#<org>#<subscription>` | `<created ms, 13 digits>#<uuid>` | `eventId`, `event`, `status`, `attempts`, `lastAttemptAt`, `nextAttemptAt`, `lastHttpStatus`, `lastCode`, `durations`, `ttl` |
//! | notification | `NOTIF#<org>#<uuid>` | `N` | `subscriptionId`, `createdAt`, `payload`, `ttl` |
//! | attempt | `NOTIF#<org>#<uuid>` | `A#<at ms, 13 digits>#<random>` | `durationMs`, `httpStatus`, `code`, `responseBody`, `trigger`, `ttl` |
//!
//! - A subscription's list, stats and recover are one `Query` on its
//!   summaries, the window a key condition on `sk` (newest first by
//!   default); the summaries stay small (no payload) so a page of the window
//!   costs little. One notification is one `Query` on `NOTIF#<org>#<uuid>`
//!   (payload and attempts) and one `GetItem` of its summary.
//! - Ingestion writes the summary and the notification (`BatchWriteItem`);
//!   an attempt writes the attempt item and updates the summary, both before
//!   the queue message is settled: 4 writes of under 1 KB per notification
//!   delivered at the first try.
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

/// URIs can be longer than a sort key: the guard is keyed by their hash.
pub(super) fn uri_sk(uri: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, uri.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("URI#{hex}")
}

pub(super) fn filter_pk(filter: &str) -> String {
    format!("FILTER#{filter}")
}

pub(super) fn msg_sk(id: &str) -> String {
    format!("MSG#{id}")
}

pub(super) fn event_sk(event_id: &str) -> String {
    format!("EVENT#{event_id}")
}

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
    }
}
