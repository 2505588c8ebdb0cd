//! Memory a load freed goes back to the system once the server is idle.
//! mimalloc returns a freed page only when the thread that owns it calls
//! into the allocator again (10 ms after at the soonest), so a worker that
//! goes idle after a burst keeps the burst's pages: after the benchmark's
//! delivery suite that was about a fifth of the RSS
//! (docs/performance-history.md#memory-heaps-collected-when-idle-issue-26;
//! docs/decisions/webhooks-local-memory.md). A worker about to sleep collects its
//! heap, at most once a second (a collection walks the heap's pages); so
//! do SQLite's connection threads (`webhook_core::services::before_sleep`,
//! set by `serve`).

use std::cell::Cell;
use std::time::{Duration, Instant};

/// The least time between two collections by the same worker.
const EVERY: Duration = Duration::from_secs(1);

/// For tokio's `on_thread_park`: collects this thread's mimalloc heap (and
/// any abandoned by ended threads), returning its free pages, when the last
/// collection was at least [`EVERY`] ago.
pub fn collect_when_parking() {
    thread_local! {
        static LAST: Cell<Option<Instant>> = const { Cell::new(None) };
    }
    LAST.with(|last| {
        let now = Instant::now();
        if last.get().is_some_and(|t| now.duration_since(t) < EVERY) {
            return;
        }
        last.set(Some(now));
        collect();
    });
}

/// Collects this thread's mimalloc heap (and any abandoned by ended
/// threads), returning its free pages to the system.
pub fn collect() {
    // SAFETY: `mi_collect` takes no pointers; it is safe to call from any
    // thread at any time (mimalloc's documented API).
    unsafe { libmimalloc_sys::mi_collect(true) };
}
