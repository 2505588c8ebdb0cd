//! Subscriptions read by id, kept while this process writes nothing: a get
//! found here answers at once, without the hand-off to a reader thread and
//! back that costs a point read a third of its throughput on two cores
//! (docs/performance-history.md#the-point-cache-issue-26).
//!
//! Every write of this process that changes a row, any row, makes every
//! entry stale (the writer counts its writes in a generation, and an entry
//! holds the generation its read started in), so a read after a write sees
//! the write. A change made by another process on the same file (the
//! `sqlite3` shell, a second server) is seen within [`TTL`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::ids::{OrgId, SubscriptionId};
use crate::store::StoredSubscription;

/// How long an entry is trusted at most, for changes by other processes.
pub(super) const TTL: Duration = Duration::from_millis(250);

/// Entries kept at most; when full, all are forgotten (a burst of distinct
/// reads gains nothing from the cache anyway).
const MAX_ENTRIES: usize = 1024;

struct Entry {
    subscription: StoredSubscription,
    generation: u64,
    read_at: Instant,
}

/// The cache, and the count of this process's writes that changed rows.
#[derive(Default)]
pub(super) struct PointCache {
    generation: AtomicU64,
    entries: Mutex<HashMap<SubscriptionId, Entry>>,
}

impl PointCache {
    fn lock(&self) -> MutexGuard<'_, HashMap<SubscriptionId, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The generation to read in: taken before the read starts, so a write
    /// committed while it runs makes what it read stale.
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Called by the writer after a write that changed rows, before the
    /// write is answered.
    pub(super) fn written(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The organization's subscription `id`, when read in the current
    /// generation less than [`TTL`] ago.
    pub(super) fn get(&self, org_id: &OrgId, id: &SubscriptionId) -> Option<StoredSubscription> {
        let generation = self.generation();
        let entries = self.lock();
        let entry = entries.get(id)?;
        (entry.generation == generation
            && entry.read_at.elapsed() < TTL
            && entry.subscription.org_id == *org_id)
            .then(|| entry.subscription.clone())
    }

    /// Keeps a subscription read in `generation`.
    pub(super) fn insert(&self, subscription: &StoredSubscription, generation: u64) {
        let mut entries = self.lock();
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(
            subscription.id.clone(),
            Entry {
                subscription: subscription.clone(),
                generation,
                read_at: Instant::now(),
            },
        );
    }
}
