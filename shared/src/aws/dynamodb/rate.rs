//! The rate limit's next free slot on DynamoDB
//! ([`Store::reserve_rate_slot`](crate::store::Store::reserve_rate_slot)):
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | rate slots | `RATE#<subscription>` | `P` | `next` (the next free slot, epoch µs), `ttl` |
//!
//! In the messages table. A slot is `max(next, now)` (`health/rate.rs`),
//! which an update expression cannot compute, so one of two conditional
//! `UpdateItem`s takes it, each atomic:
//!
//! - **busy** (`next` ahead of now, within the horizon): `SET next = next +
//!   spacing`, the slot being the old `next`;
//! - **idle** (no item, or `next` not after now): `SET next = now +
//!   spacing`, the slot being now.
//!
//! The caller's guess says which goes first; a refused one answers the item
//! as it is (`ReturnValuesOnConditionCheckFailure`), which says whether the
//! other one can succeed or the next slot is past the horizon. So a backlog
//! drained at the limit costs one write unit a delivery, a first delivery
//! after a quiet spell two when guessed busy, and a refusal one (a failed
//! condition is billed). Only subscriptions with a `rateLimit` write here.
//! docs/decisions/rate-limit.md.

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{ReturnValue, ReturnValuesOnConditionCheckFailure};

use super::codec::n;
use super::keys::{key, rate_pk, RATE_SK};
use super::{backend, DynamoStore};
use crate::health::rate::{spacing_us, Reserved, HORIZON_MS};
use crate::ids::SubscriptionId;
use crate::store::StoreError;

/// How long the item is kept past its next slot (s): a subscription that
/// stops delivering leaves nothing behind for long.
const SLOTS_TTL_S: i64 = 3_600;

/// Attempts of the two writes before giving up on a contended item: each
/// refusal tells which write can succeed, so more are needed only when
/// other processes take slots in between.
const TRIES: usize = 4;

/// What one conditional write found.
enum Took {
    /// The slot (epoch µs).
    Slot(i64),
    /// Refused: the item's `next` as it is (None: no item).
    Refused(Option<i64>),
}

impl DynamoStore {
    /// Takes `subscription`'s next slot at `now` (epoch ms) if it is
    /// within the horizon.
    pub(super) async fn reserve_slot(
        &self,
        subscription: &SubscriptionId,
        limit: u32,
        now: i64,
        busy: bool,
    ) -> Result<Reserved, StoreError> {
        let now_us = now.saturating_mul(1_000);
        let horizon = now_us + HORIZON_MS * 1_000;
        let mut busy = busy;
        for _ in 0..TRIES {
            match self.take(subscription, limit, now_us, busy).await? {
                Took::Slot(slot) => return Ok(Reserved::At(crate::health::rate::ms_of(slot))),
                Took::Refused(Some(next)) if next > horizon => return Ok(Reserved::Full(next)),
                Took::Refused(next) => busy = next.is_some_and(|next| next > now_us),
            }
        }
        // Contended past the tries: no slot this time, as if full.
        Ok(Reserved::Full(horizon))
    }

    /// One of the two writes: `busy`, the slot after the stored one; else
    /// the slot now.
    async fn take(
        &self,
        subscription: &SubscriptionId,
        limit: u32,
        now_us: i64,
        busy: bool,
    ) -> Result<Took, StoreError> {
        let spacing = spacing_us(limit);
        let horizon = now_us + HORIZON_MS * 1_000;
        let update = self
            .client
            .update_item()
            .table_name(&self.tables.messages)
            .set_key(Some(key(rate_pk(subscription), RATE_SK.into())))
            .expression_attribute_names("#next", "next")
            .expression_attribute_names("#ttl", "ttl")
            .expression_attribute_values(":now", n(now_us))
            .expression_attribute_values(":ttl", n(horizon / 1_000_000 + SLOTS_TTL_S))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        let update = if busy {
            update
                .update_expression("SET #next = #next + :spacing, #ttl = :ttl")
                .condition_expression("#next > :now AND #next <= :horizon")
                .expression_attribute_values(":spacing", n(spacing))
                .expression_attribute_values(":horizon", n(horizon))
                .return_values(ReturnValue::UpdatedOld)
        } else {
            update
                .update_expression("SET #next = :after, #ttl = :ttl")
                .condition_expression("attribute_not_exists(#next) OR #next <= :now")
                .expression_attribute_values(":after", n(now_us + spacing))
        };
        match update.send().await {
            Ok(out) if busy => {
                let old = out.attributes().and_then(|a| a.get("next"));
                let slot = old.and_then(|v| v.as_n().ok()).and_then(|v| v.parse().ok());
                match slot {
                    Some(slot) => Ok(Took::Slot(slot)),
                    None => Err(StoreError::backend("rate slots item without `next`")),
                }
            }
            Ok(_) => Ok(Took::Slot(now_us)),
            Err(e) => match e.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                    let next = failed
                        .item()
                        .and_then(|item| item.get("next"))
                        .and_then(|v| v.as_n().ok())
                        .and_then(|v| v.parse().ok());
                    Ok(Took::Refused(next))
                }
                _ => Err(backend(e)),
            },
        }
    }
}
