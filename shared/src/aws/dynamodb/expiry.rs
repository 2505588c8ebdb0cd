//! Expiry reminders: the expiry entries of the day partitions of a window,
//! then their subscriptions (see [`keys`](super::keys), "Expiry reminders").

use std::collections::HashMap;

use super::codec::{parse_expiry_entry, parse_subscription, s};
use super::keys::{expiry_day, expiry_key, expiry_pk, expiry_sk_bounds, key, org_pk, sub_sk};
use super::{backend, DynamoStore, Item};
use crate::ids::{OrgId, SubscriptionId};
use crate::store::{StoreError, StoredSubscription};

/// One page of expiry entries and where the next one starts.
type EntryPage = (Vec<Item>, Option<Item>);

impl DynamoStore {
    /// Subscriptions with an expiry entry in `(after, until]`, soonest
    /// first, at most `limit`: one `Query` per UTC day of the window (more
    /// when a day has more than `limit` entries), then their subscriptions.
    pub(super) async fn expiring(
        &self,
        after: i64,
        until: i64,
        limit: usize,
    ) -> Result<Vec<StoredSubscription>, StoreError> {
        let mut found = Vec::new();
        if limit == 0 || until <= after {
            return Ok(found);
        }
        let bounds = expiry_sk_bounds(after, until);
        for day in expiry_day(after.saturating_add(1))..=expiry_day(until) {
            let mut start = None;
            loop {
                let want = limit - found.len();
                let (entries, next) = self.expiry_entries(day, &bounds, want, start).await?;
                found.extend(self.live_subscriptions(&entries).await?);
                if found.len() >= limit {
                    return Ok(found);
                }
                match next {
                    Some(next) => start = Some(next),
                    None => break,
                }
            }
        }
        Ok(found)
    }

    /// Deletes the entry of this expiry; nothing when there is none.
    pub(super) async fn delete_expiry_entry(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.tables.subscriptions)
            .set_key(Some(expiry_key(expires_at, org_id, id)))
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }

    /// Up to `want` entries of one day within the bounds, in expiry order.
    /// Strongly consistent, so an entry just deleted by a mark is not read.
    async fn expiry_entries(
        &self,
        day: i64,
        (from, to): &(String, String),
        want: usize,
        start: Option<Item>,
    ) -> Result<EntryPage, StoreError> {
        let output = self
            .client
            .query()
            .table_name(&self.tables.subscriptions)
            .consistent_read(true)
            .key_condition_expression("#pk = :pk AND #sk BETWEEN :from AND :to")
            .expression_attribute_names("#pk", "pk")
            .expression_attribute_names("#sk", "sk")
            .expression_attribute_values(":pk", s(expiry_pk(day)))
            .expression_attribute_values(":from", s(from.clone()))
            .expression_attribute_values(":to", s(to.clone()))
            .limit(i32::try_from(want).unwrap_or(i32::MAX))
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(backend)?;
        let next = output.last_evaluated_key().cloned();
        Ok((output.items.unwrap_or_default(), next))
    }

    /// The subscriptions the entries name, in the entries' order, leaving
    /// out stale entries: the subscription is gone or has another expiry.
    async fn live_subscriptions(
        &self,
        entries: &[Item],
    ) -> Result<Vec<StoredSubscription>, StoreError> {
        let named = entries
            .iter()
            .map(parse_expiry_entry)
            .collect::<Result<Vec<_>, _>>()?;
        // One key each: BatchGetItem refuses duplicates.
        let keys: HashMap<(OrgId, SubscriptionId), Item> = named
            .iter()
            .map(|(org, id, _)| ((org.clone(), id.clone()), key(org_pk(org), sub_sk(id))))
            .collect();
        let table = &self.tables.subscriptions;
        let mut subs: HashMap<(OrgId, SubscriptionId), StoredSubscription> = HashMap::new();
        for item in self
            .batch_get(table, keys.into_values().collect(), "expiring")
            .await?
        {
            let sub = parse_subscription(&item)?;
            subs.insert((sub.org_id.clone(), sub.id.clone()), sub);
        }
        Ok(named
            .into_iter()
            .filter_map(|(org, id, expires_at)| {
                subs.get(&(org, id))
                    .filter(|sub| sub.expires_at == expires_at)
                    .cloned()
            })
            .collect())
    }
}
