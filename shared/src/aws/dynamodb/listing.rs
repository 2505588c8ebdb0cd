//! Lists paged in the store ([`Store::list_subscriptions`]).
//!
//! - **Creation order** (the default, and `sort=createdDateTime,id` in one
//!   direction): the organization's counter item gives `totalElements`
//!   (`GetItem`); one `Query` reads the list entries (`CREATED#<ms>#<id>`,
//!   keys only, ~85 bytes each) from the start of the order, forwards or
//!   backwards, up to the end of the page; one `BatchGetItem` reads the
//!   page's subscriptions. A page past the end reads the counter only.
//! - **A small organization** (at most [`WHOLE_READ_PER_PAGE_ITEM`] times
//!   the page size) is read whole, as any other order: cheaper in read
//!   units than the page's `BatchGetItem`.
//! - **Any other order** reads the whole organization (one `Query` on
//!   `SUB#`, as before the entries) and sorts it in memory
//!   ([`order::sort_and_page`]): every page costs every subscription of
//!   the organization in read units
//!   (docs/performance-history.md#lists-paged-in-the-store-issue-15).
//! - **Repair.** Subscriptions created before the entries existed have
//!   none. The counter's `listed` says the organization's entries are
//!   complete; until it is set, a list in creation order reads the whole
//!   organization as above, writes the missing entries (each with a
//!   condition that its subscription still exists, so a concurrent delete
//!   leaves no stray entry) and then sets `listed`. So each organization is
//!   repaired by its first list, with no command to run (a failed repair
//!   is logged and tried again by the next list; the answer is the same). Functions of a
//!   version without entries must not create subscriptions after that
//!   (finish the deployment first); removing `listed` from a counter makes
//!   the next list repair the organization again.
//!
//! [`Store::list_subscriptions`]: crate::store::Store::list_subscriptions

use std::collections::{HashMap, HashSet};

use aws_sdk_dynamodb::types::{ConditionCheck, TransactWriteItem};

use super::codec::{n, number, parse_subscription, s, text};
use super::keys::{created_id, created_sk, key, org_pk, sub_sk, COUNTER_SK, CREATED, SUB};
use super::write::{put, Transaction};
use super::{backend, backend_build, DynamoStore, Item};
use crate::ids::{OrgId, SubscriptionId};
use crate::model::Page;
use crate::page::PageRequest;
use crate::store::{order, StoreError, StoredSubscription};

/// A small organization is read whole: a `Query` costs its items' bytes
/// (a subscription is ~0.4 KB, a tenth of a 4 KB read unit), a
/// `BatchGetItem` a whole unit per item, so reading every subscription is
/// cheaper than a page's `BatchGetItem` up to about ten subscriptions per
/// item of the page; eight leaves room for bigger subscriptions.
const WHOLE_READ_PER_PAGE_ITEM: u64 = 8;
/// Entries repaired per transaction: two writes each, 100 at most.
const REPAIR_BATCH: usize = 50;

/// The organization's counter item.
struct Counter {
    exists: bool,
    n: u64,
    /// Every subscription has its list entry.
    listed: bool,
}

impl DynamoStore {
    pub(super) async fn list_page(
        &self,
        org_id: &OrgId,
        page: &PageRequest,
        now: i64,
    ) -> Result<Page<StoredSubscription>, StoreError> {
        // Its entries (`CREATED#<ms>#<id>`) hold creation time and id in one direction.
        let ascending = match order::creation_order(page) {
            Some(o) if o.created_ascending == o.id_ascending => o.created_ascending,
            _ => {
                let all = self.whole_organization(org_id).await?;
                return Ok(order::sort_and_page(all, page, now));
            }
        };
        let counter = self.counter(org_id).await?;
        if !counter.listed {
            let all = self.whole_organization(org_id).await?;
            // The answer does not depend on the repair: a failed one is
            // tried again by the next list.
            if counter.exists {
                if let Err(e) = self.repair_entries(org_id, &all).await {
                    tracing::warn!(org_id = %org_id, error = %e, "list entries not repaired");
                }
            }
            return Ok(order::sort_and_page(all, page, now));
        }
        let total = counter.n;
        if total <= WHOLE_READ_PER_PAGE_ITEM.saturating_mul(page.size) {
            let all = self.whole_organization(org_id).await?;
            return Ok(order::sort_and_page(all, page, now));
        }
        if page.offset() >= total {
            return Ok(page.page_of(Vec::new(), total));
        }
        let ids = self
            .entries(org_id, ascending, page.offset(), page.size)
            .await?;
        let content = self.subscriptions(org_id, &ids).await?;
        Ok(page.page_of(content, total))
    }

    async fn counter(&self, org_id: &OrgId) -> Result<Counter, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.subscriptions)
            .set_key(Some(key(org_pk(org_id), COUNTER_SK.into())))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?;
        Ok(match output.item() {
            None => Counter {
                exists: false,
                n: 0,
                listed: false,
            },
            Some(item) => Counter {
                exists: true,
                n: number(item, "n").map_or(0, |n| n.max(0) as u64),
                listed: item.contains_key("listed"),
            },
        })
    }

    /// Every subscription of the organization (one `Query`, paginated).
    async fn whole_organization(
        &self,
        org_id: &OrgId,
    ) -> Result<Vec<StoredSubscription>, StoreError> {
        self.query_all(&self.tables.subscriptions, org_pk(org_id), Some(SUB))
            .await?
            .iter()
            .map(parse_subscription)
            .collect()
    }

    /// The ids of entries `offset..offset + size` in creation order.
    async fn entries(
        &self,
        org_id: &OrgId,
        ascending: bool,
        offset: u64,
        size: u64,
    ) -> Result<Vec<SubscriptionId>, StoreError> {
        let end = usize::try_from(offset.saturating_add(size)).unwrap_or(usize::MAX);
        let mut keys: Vec<String> = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let wanted = end.saturating_sub(keys.len());
            let output = self
                .client
                .query()
                .table_name(&self.tables.subscriptions)
                .consistent_read(true)
                .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
                .expression_attribute_names("#pk", "pk")
                .expression_attribute_names("#sk", "sk")
                .expression_attribute_values(":pk", s(org_pk(org_id)))
                .expression_attribute_values(":prefix", s(CREATED.into()))
                .projection_expression("#sk")
                .scan_index_forward(ascending)
                .limit(i32::try_from(wanted).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(backend)?;
            for item in output.items() {
                keys.push(text(item, "sk")?);
            }
            match output.last_evaluated_key() {
                Some(last) if keys.len() < end => start = Some(last.clone()),
                _ => break,
            }
        }
        Ok(keys
            .iter()
            .skip(usize::try_from(offset).unwrap_or(usize::MAX))
            .filter_map(|sk| created_id(sk))
            .collect())
    }

    /// The subscriptions named by `ids`, in that order (`BatchGetItem`,
    /// strongly consistent); one deleted since its entry was read is left out.
    async fn subscriptions(
        &self,
        org_id: &OrgId,
        ids: &[SubscriptionId],
    ) -> Result<Vec<StoredSubscription>, StoreError> {
        let keys = ids
            .iter()
            .map(|id| key(org_pk(org_id), sub_sk(id)))
            .collect();
        let mut found: HashMap<SubscriptionId, StoredSubscription> = HashMap::new();
        for item in self
            .batch_get(&self.tables.subscriptions, keys, "list batch read")
            .await?
        {
            let sub = parse_subscription(&item)?;
            found.insert(sub.id.clone(), sub);
        }
        Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
    }

    /// Writes the entries `subs` lack, then marks the counter `listed`.
    async fn repair_entries(
        &self,
        org_id: &OrgId,
        subs: &[StoredSubscription],
    ) -> Result<(), StoreError> {
        let table = &self.tables.subscriptions;
        let present: HashSet<String> = self
            .query_all(table, org_pk(org_id), Some(CREATED))
            .await?
            .iter()
            .map(|item| text(item, "sk"))
            .collect::<Result<_, _>>()?;
        let missing: Vec<&StoredSubscription> = subs
            .iter()
            .filter(|sub| !present.contains(&created_sk(sub.created_at, &sub.id)))
            .collect();
        if !missing.is_empty() {
            tracing::info!(
                org_id = %org_id,
                missing = missing.len(),
                "writing the list entries of subscriptions created before them"
            );
        }
        for batch in missing.chunks(REPAIR_BATCH) {
            if let Transaction::Cancelled(_) = self.transact(entry_writes(table, batch)?).await? {
                // One of them was deleted meanwhile: one at a time, skipping it.
                for sub in batch {
                    self.transact(entry_writes(table, &[sub])?).await?;
                }
            }
        }
        self.client
            .update_item()
            .table_name(table)
            .set_key(Some(key(org_pk(org_id), COUNTER_SK.into())))
            .update_expression("SET #listed = :one")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#listed", "listed")
            .expression_attribute_values(":one", n(1))
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }
}

/// For each subscription: its entry, if the subscription still exists.
fn entry_writes(
    table: &str,
    subs: &[&StoredSubscription],
) -> Result<Vec<TransactWriteItem>, StoreError> {
    let mut writes = Vec::with_capacity(subs.len() * 2);
    for sub in subs {
        let check = ConditionCheck::builder()
            .table_name(table)
            .set_key(Some(key(org_pk(&sub.org_id), sub_sk(&sub.id))))
            .condition_expression("attribute_exists(pk)")
            .build()
            .map_err(backend_build)?;
        writes.push(TransactWriteItem::builder().condition_check(check).build());
        writes.push(put(
            table,
            key(org_pk(&sub.org_id), created_sk(sub.created_at, &sub.id)),
            None,
        )?);
    }
    Ok(writes)
}
