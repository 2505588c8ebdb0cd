//! The rate limit's window counts on DynamoDB
//! ([`Store::take_rate_slot`](crate::store::Store::take_rate_slot)):
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | rate window | `RATE#<subscription>#<window, epoch s>` | `W` | `n` (deliveries started in it), `ttl` |
//!
//! In the messages table. One conditional `UpdateItem` per attempt of a
//! rate-limited subscription: `ADD n 1` if `n < limit`; a refused one (the
//! window full) costs a write unit too. Each window is a partition key of
//! its own, so no item outlives its second by more than its `ttl` (a
//! minute; DynamoDB deletes expired items for free) and a busy subscription
//! writes a new partition every second. Only subscriptions with a
//! `rateLimit` write here: an unlimited one costs nothing more.
//! docs/decisions/rate-limit.md.

use super::codec::n;
use super::keys::{key, rate_pk};
use super::DynamoStore;
use crate::ids::SubscriptionId;
use crate::store::StoreError;

/// How long a window's item is kept past its second (s).
const WINDOW_TTL_S: i64 = 60;

impl DynamoStore {
    /// Counts one delivery in `window` if fewer than `limit` were.
    pub(super) async fn count_in_window(
        &self,
        subscription: &SubscriptionId,
        window: i64,
        limit: u32,
    ) -> Result<bool, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.tables.messages)
            .set_key(Some(key(rate_pk(subscription, window), "W".into())))
            .update_expression("ADD #n :one SET #ttl = :ttl")
            .condition_expression("attribute_not_exists(#n) OR #n < :limit")
            .expression_attribute_names("#n", "n")
            .expression_attribute_names("#ttl", "ttl")
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":limit", n(i64::from(limit)))
            .expression_attribute_values(":ttl", n(window + WINDOW_TTL_S))
            .send()
            .await;
        super::conditional(result)
    }
}
