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

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::Item;
use crate::ids::{OrgId, SubscriptionId};

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
    }
}
