//! The tokio runtime `webhooks-local serve` runs on: its blocking pool's
//! bounds, and what a worker does before it sleeps.

use std::time::Duration;

/// Threads of tokio's blocking pool: DNS lookups of callback hosts
/// (`getaddrinfo`, once per new connection). SQLite's reads and writes have
/// threads of their own. Tokio's default of 512 let a burst grow the pool
/// to dozens of threads, each with its own allocator pages.
const MAX_BLOCKING_THREADS: usize = 64;

/// How long an idle blocking thread is kept (tokio's default is 10 s): a
/// burst's threads end, giving their memory back, soon after it.
const BLOCKING_KEEP_ALIVE: Duration = Duration::from_secs(1);

/// The multi-threaded runtime, one worker per core.
pub fn build() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .thread_keep_alive(BLOCKING_KEEP_ALIVE)
        .on_thread_park(before_park)
        .build()
}

/// A worker out of work first yields its core, then sleeps. Under load the
/// threads it yields to are the ones about to hand it work (a reader
/// thread's answer, the kernel's network processing, a client on the same
/// machine), so it often finds that work ready instead of sleeping in
/// `epoll_wait` and being woken a few microseconds later: a get answered
/// 0.97–1.07 of the reference instead of 0.82–0.91
/// (docs/performance-history.md#threads-that-yield-before-they-sleep-issue-26).
/// With nothing else runnable the yield
/// returns at once: one system call before a sleep.
fn before_park() {
    std::thread::yield_now();
    crate::memory::collect_when_parking();
}
