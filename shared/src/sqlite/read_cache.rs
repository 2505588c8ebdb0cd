//! Reads kept while this process writes nothing: subscriptions read by id,
//! and list pages in an order of stored columns. A get or a page found here
//! answers at once, without the hand-off to a reader thread and back that
//! costs a point read a third of its throughput on two cores
//! (docs/performance-history.md#the-point-cache-issue-26), and a page its
//! index walk and the decoding of its rows as well.
//!
//! Every write of this process that changes a subscription's row makes
//! every entry stale (the writer's update hook tells [`ReadCache::row_changed`],
//! the writer counts such writes in a generation, and an entry holds the
//! generation its read started in), so a read after a write sees the write.
//! The writes of deliveries and history (notifications, the queue) leave
//! the entries be: a delivery's read of its subscription is kept across
//! them. A change made by another process on the same file (the
//! `sqlite3` shell, a second server) is seen within [`TTL`]. A page in an
//! order with a rule of the core (`status`, `ignorecase`) is never kept: it
//! is sorted at the time of the request.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::ids::{OrgId, SubscriptionId};
use crate::model::Page;
use crate::page::PageRequest;
use crate::store::StoredSubscription;

/// How long an entry is trusted at most, for changes by other processes.
pub(super) const TTL: Duration = Duration::from_millis(250);

/// Subscriptions kept by id at most; when full, all are forgotten (a burst
/// of distinct reads gains nothing from the cache anyway).
const MAX_ENTRIES: usize = 1024;

/// Subscriptions kept in pages at most, all pages together (a page of the
/// largest size is not kept): pages hold no more memory than the
/// subscriptions kept by id.
const MAX_PAGE_ITEMS: usize = 1024;

struct Entry<T> {
    value: T,
    generation: u64,
    read_at: Instant,
}

impl<T> Entry<T> {
    fn new(value: T, generation: u64) -> Self {
        Entry {
            value,
            generation,
            read_at: Instant::now(),
        }
    }

    /// Read in `generation` less than [`TTL`] ago.
    fn fresh(&self, generation: u64) -> bool {
        self.generation == generation && self.read_at.elapsed() < TTL
    }
}

type PageKey = (OrgId, PageRequest);

struct Pages {
    entries: HashMap<PageKey, Entry<Page<StoredSubscription>>>,
    /// Subscriptions in `entries`' pages.
    items: usize,
}

/// The caches, and the count of this process's writes that changed rows.
pub(super) struct ReadCache {
    generation: AtomicU64,
    /// A subscription's row changed in the writer's current job.
    changed: AtomicBool,
    points: Mutex<HashMap<SubscriptionId, Entry<StoredSubscription>>>,
    pages: Mutex<Pages>,
}

impl Default for ReadCache {
    fn default() -> Self {
        ReadCache {
            generation: AtomicU64::new(0),
            changed: AtomicBool::new(false),
            points: Mutex::default(),
            pages: Mutex::new(Pages {
                entries: HashMap::new(),
                items: 0,
            }),
        }
    }
}

/// A lock whose holder panicked still guards a consistent map (each
/// change is one call): take it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ReadCache {
    /// The generation to read in: taken before the read starts, so a write
    /// committed while it runs makes what it read stale.
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Called by the writer's update hook for each row a statement changes,
    /// in `table`. The table counted is `subscriptions`: each of its rows
    /// is a [`StoredSubscription`], and the only tables kept beside them
    /// (filters, counts) change with them.
    pub(super) fn row_changed(&self, table: &str) {
        if table == "subscriptions" {
            self.changed.store(true, Ordering::Release);
        }
    }

    /// Called by the writer after each of its jobs (committed or not),
    /// before it is answered: a job that changed a subscription's row
    /// makes every entry stale.
    pub(super) fn written(&self) {
        if self.changed.swap(false, Ordering::AcqRel) {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The organization's subscription `id`, when read in the current
    /// generation less than [`TTL`] ago.
    pub(super) fn get(&self, org_id: &OrgId, id: &SubscriptionId) -> Option<StoredSubscription> {
        let generation = self.generation();
        let points = lock(&self.points);
        let entry = points.get(id)?;
        (entry.fresh(generation) && entry.value.org_id == *org_id).then(|| entry.value.clone())
    }

    /// Keeps a subscription read in `generation`.
    pub(super) fn insert(&self, subscription: &StoredSubscription, generation: u64) {
        let mut points = lock(&self.points);
        if points.len() >= MAX_ENTRIES {
            points.clear();
        }
        points.insert(
            subscription.id.clone(),
            Entry::new(subscription.clone(), generation),
        );
    }

    /// The organization's page `request`, when read in the current
    /// generation less than [`TTL`] ago.
    pub(super) fn page(
        &self,
        org_id: &OrgId,
        request: &PageRequest,
    ) -> Option<Page<StoredSubscription>> {
        let generation = self.generation();
        let pages = lock(&self.pages);
        let entry = pages.entries.get(&(org_id.clone(), request.clone()))?;
        entry.fresh(generation).then(|| entry.value.clone())
    }

    /// Keeps the organization's page `request`, read in `generation`.
    pub(super) fn insert_page(
        &self,
        org_id: &OrgId,
        request: &PageRequest,
        page: &Page<StoredSubscription>,
        generation: u64,
    ) {
        let size = page.content.len();
        if size > MAX_PAGE_ITEMS {
            return;
        }
        let mut pages = lock(&self.pages);
        if pages.items + size > MAX_PAGE_ITEMS {
            pages.entries.clear();
            pages.items = 0;
        }
        let key = (org_id.clone(), request.clone());
        let old = pages
            .entries
            .insert(key, Entry::new(page.clone(), generation));
        pages.items = pages.items + size - old.map_or(0, |o| o.value.content.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page_of(n: usize) -> Page<StoredSubscription> {
        let request = PageRequest {
            page: 0,
            size: 20,
            sort: Vec::new(),
        };
        let subscription = StoredSubscription::example("id-1", "org-a");
        request.page_of(vec![subscription; n], n as u64)
    }

    fn request(page: u64) -> PageRequest {
        PageRequest {
            page,
            size: 20,
            sort: Vec::new(),
        }
    }

    #[test]
    fn a_page_is_kept_until_a_write_and_only_for_its_organization() {
        let cache = ReadCache::default();
        let (org, other) = (OrgId::from("org-a"), OrgId::from("org-b"));
        let generation = cache.generation();
        cache.insert_page(&org, &request(0), &page_of(3), generation);
        assert_eq!(
            cache.page(&org, &request(0)).map(|p| p.content.len()),
            Some(3)
        );
        assert!(
            cache.page(&other, &request(0)).is_none(),
            "another organization's page"
        );
        assert!(cache.page(&org, &request(1)).is_none(), "another page");
        cache.row_changed("notifications");
        cache.written();
        assert!(
            cache.page(&org, &request(0)).is_some(),
            "kept across other tables' writes"
        );
        cache.row_changed("subscriptions");
        cache.written();
        assert!(
            cache.page(&org, &request(0)).is_none(),
            "stale after a subscription's write"
        );
    }

    #[test]
    fn a_page_read_before_a_write_is_not_kept_as_fresh() {
        let cache = ReadCache::default();
        let org = OrgId::from("org-a");
        let generation = cache.generation();
        cache.row_changed("subscriptions"); // committed while the page was read
        cache.written();
        cache.insert_page(&org, &request(0), &page_of(1), generation);
        assert!(cache.page(&org, &request(0)).is_none());
    }

    #[test]
    fn pages_hold_at_most_their_item_count() {
        let cache = ReadCache::default();
        let org = OrgId::from("org-a");
        let generation = cache.generation();
        cache.insert_page(&org, &request(0), &page_of(MAX_PAGE_ITEMS + 1), generation);
        assert!(cache.page(&org, &request(0)).is_none(), "too large to keep");
        cache.insert_page(&org, &request(0), &page_of(MAX_PAGE_ITEMS - 1), generation);
        cache.insert_page(&org, &request(0), &page_of(MAX_PAGE_ITEMS - 1), generation);
        assert_eq!(
            lock(&cache.pages).items,
            MAX_PAGE_ITEMS - 1,
            "a page kept again replaces itself"
        );
        cache.insert_page(&org, &request(1), &page_of(2), generation);
        assert_eq!(lock(&cache.pages).items, 2, "full: the others forgotten");
        assert!(cache.page(&org, &request(0)).is_none());
        assert!(cache.page(&org, &request(1)).is_some());
    }
}
