//! The connections, each owned by a thread of its own and fed from one
//! queue: the writer (one connection, one thread) and the readers (a few;
//! a lookup goes to whichever is free). SQLite then never runs on the
//! runtime's threads, and a burst of reads or writes waits in a queue
//! rather than growing tokio's blocking pool into threads that contend for
//! a few connections (which cost a third of the end-to-end throughput on
//! two cores, and each thread kept allocator pages of its own:
//! docs/performance-history.md, "The writer on a thread of its own (issue
//! 26)"). Knows nothing of the store.
//!
//! A job wakes a sleeping thread only when the threads awake have more
//! queued than they can take next (an awake thread takes the next job
//! before it sleeps): each wake-up is a context switch, and a get is only a
//! few of them (docs/performance-history.md, "Readers woken one at a time
//! (issue 26)").
//! A job waits behind a busy thread's current one at most while no second
//! job queues.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::oneshot;

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// What a connection's thread calls before it sleeps after work, set once
/// per process: `webhooks-local` gives its allocator's collection, so the
/// memory a burst of lookups allocated on these threads goes back to the
/// system once they are idle (they would otherwise keep it while they
/// sleep, since an allocator returns a thread's pages only when that thread
/// calls into it). None by default.
static BEFORE_SLEEP: OnceLock<fn()> = OnceLock::new();

/// The least time between two calls of the [`BEFORE_SLEEP`] hook by one thread.
const COLLECT_EVERY: Duration = Duration::from_secs(1);

/// Sets the function the connections' threads call before they sleep after
/// work (at most once a second each, and once more a second after the last
/// work); the first call wins.
pub fn before_sleep(hook: fn()) {
    let _ = BEFORE_SLEEP.set(hook);
}

/// The connection threads; they end, closing their connections, when this
/// is dropped (after the jobs already queued).
pub(super) struct ConnectionThreads {
    queue: Arc<Queue>,
}

/// The jobs waiting for a thread, and whether anyone waits for a job.
struct Queue {
    state: Mutex<State>,
    ready: Condvar,
}

struct State {
    jobs: VecDeque<Job>,
    /// Threads asleep on `ready`.
    idle: usize,
    /// Threads started.
    threads: usize,
    closed: bool,
}

/// One thread's account of its [`BEFORE_SLEEP`] calls.
struct Collection {
    /// Jobs ran since the last call.
    owed: bool,
    last: Option<Instant>,
}

impl Collection {
    /// Calls the hook if work was done since the last call and the last
    /// call is [`COLLECT_EVERY`] ago; otherwise how long until it may.
    fn try_collect(&mut self) -> Option<Duration> {
        if !self.owed {
            return None;
        }
        let Some(hook) = BEFORE_SLEEP.get() else {
            self.owed = false;
            return None;
        };
        let now = Instant::now();
        if let Some(wait) = self
            .last
            .map(|t| COLLECT_EVERY.saturating_sub(now.duration_since(t)))
            .filter(|w| !w.is_zero())
        {
            return Some(wait);
        }
        hook();
        self.owed = false;
        self.last = Some(now);
        None
    }
}

/// The connections' threads are gone (a job panicked, or the process is ending).
#[derive(Debug, thiserror::Error)]
#[error("the SQLite connection stopped before answering")]
pub(super) struct Stopped;

impl Queue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next job, sleeping until there is one; `None` once closed and
    /// drained.
    fn next(&self, collection: &mut Collection) -> Option<Job> {
        let mut state = self.lock();
        let mut yielded = false;
        loop {
            if let Some(job) = state.jobs.pop_front() {
                collection.owed = true;
                return Some(job);
            }
            if state.closed {
                return None;
            }
            if !yielded {
                // Out of jobs: yield the core once before sleeping. Under
                // load the thread yielded to is usually a worker about to
                // queue the next job, found then without a wake-up.
                drop(state);
                std::thread::yield_now();
                yielded = true;
                state = self.lock();
                continue;
            }
            drop(state);
            let due = collection.try_collect();
            state = self.lock();
            if !state.jobs.is_empty() || state.closed {
                continue;
            }
            state.idle += 1;
            state = match due {
                // A collection is owed but too soon: sleep until it is due.
                Some(wait) => {
                    let waited = self.ready.wait_timeout(state, wait);
                    waited.unwrap_or_else(|p| p.into_inner()).0
                }
                None => self.ready.wait(state).unwrap_or_else(|p| p.into_inner()),
            };
            state.idle -= 1;
        }
    }
}

impl ConnectionThreads {
    /// One thread per connection, named `{name}-{i}`.
    pub(super) fn start(connections: Vec<Connection>, name: &str) -> std::io::Result<Self> {
        let queue = Arc::new(Queue {
            state: Mutex::new(State {
                jobs: VecDeque::new(),
                idle: 0,
                threads: connections.len(),
                closed: false,
            }),
            ready: Condvar::new(),
        });
        for (i, mut conn) in connections.into_iter().enumerate() {
            let queue = queue.clone();
            std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || {
                    let mut collection = Collection {
                        owed: false,
                        last: None,
                    };
                    while let Some(job) = queue.next(&mut collection) {
                        // A panicking job loses its answer (its caller sees
                        // `Stopped`), not the thread.
                        let _ = catch_unwind(AssertUnwindSafe(|| job(&mut conn)));
                    }
                })?;
        }
        Ok(ConnectionThreads { queue })
    }

    /// Queues `job` for the next free connection without waiting for it;
    /// `false` when the threads are gone.
    pub(super) fn submit(&self, job: impl FnOnce(&mut Connection) + Send + 'static) -> bool {
        let wake = {
            let mut state = self.queue.lock();
            if state.closed {
                return false;
            }
            state.jobs.push_back(Box::new(job));
            let awake = state.threads - state.idle;
            state.idle > 0 && state.jobs.len() > awake
        };
        if wake {
            self.queue.ready.notify_one();
        }
        true
    }

    /// Runs `f` on the next free connection and waits for its answer.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> T + Send + 'static,
    ) -> Result<T, Stopped> {
        let (done, answer) = oneshot::channel();
        if !self.submit(move |conn| {
            let _ = done.send(f(conn));
        }) {
            return Err(Stopped);
        }
        answer.await.map_err(|_| Stopped)
    }
}

impl Drop for ConnectionThreads {
    fn drop(&mut self) {
        self.queue.lock().closed = true;
        self.queue.ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readers(n: usize) -> ConnectionThreads {
        let conns = (0..n)
            .map(|_| Connection::open_in_memory().expect("in-memory SQLite"))
            .collect();
        ConnectionThreads::start(conns, "sqlite-reader").expect("reader threads start")
    }

    /// More lookups at once than readers: each is answered, by the queue's
    /// readers (a lookup never runs on the caller's thread).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_beyond_the_readers_is_answered() {
        let readers = Arc::new(readers(2));
        let lookups = (0..200i64).map(|i| {
            let readers = readers.clone();
            tokio::spawn(async move {
                readers
                    .run(move |conn| {
                        let on = std::thread::current().name().map(str::to_owned);
                        let sum: i64 = conn.query_row("SELECT ?1 + 1", [i], |r| r.get(0)).unwrap();
                        (sum, on)
                    })
                    .await
            })
        });
        for (i, lookup) in lookups.collect::<Vec<_>>().into_iter().enumerate() {
            let (sum, on) = lookup.await.unwrap().unwrap();
            assert_eq!(sum, i as i64 + 1);
            assert!(on.unwrap().starts_with("sqlite-reader-"));
        }
    }

    /// A lookup that panics loses its own answer, not its reader.
    #[tokio::test]
    async fn a_panicking_lookup_leaves_the_reader_running() {
        let readers = readers(1);
        let lost = readers.run(|_| -> i64 { panic!("a lookup's bug") }).await;
        assert!(lost.is_err());
        let next = readers
            .run(|conn| {
                conn.query_row("SELECT 7", [], |r| r.get::<_, i64>(0))
                    .unwrap()
            })
            .await;
        assert_eq!(next.unwrap(), 7);
    }

    /// Names of the threads that called the before-sleep hook (every test
    /// of this binary shares the one hook; each test reads its own names).
    static SLEPT: Mutex<Vec<String>> = Mutex::new(Vec::new());

    fn record_sleep() {
        let name = std::thread::current().name().unwrap_or("").to_owned();
        SLEPT.lock().unwrap().push(name);
    }

    fn sleeps_of(name: &str) -> usize {
        SLEPT.lock().unwrap().iter().filter(|n| *n == name).count()
    }

    /// A thread that did work calls the hook once before it sleeps, and
    /// not again while it has nothing to do; after more work, again (a
    /// second after the first call at the soonest).
    #[tokio::test]
    async fn a_thread_collects_after_work_not_while_idle() {
        before_sleep(record_sleep);
        let conn = Connection::open_in_memory().expect("in-memory SQLite");
        let threads = ConnectionThreads::start(vec![conn], "hook-test").expect("thread starts");
        let name = "hook-test-0";
        let run = || threads.run(|conn| conn.query_row("SELECT 1", [], |r| r.get::<_, i64>(0)));
        assert_eq!(sleeps_of(name), 0, "no work yet, nothing to collect");
        assert_eq!(run().await.unwrap().unwrap(), 1);
        wait_for(|| sleeps_of(name) == 1).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(sleeps_of(name), 1, "idle: not collected again");
        assert_eq!(run().await.unwrap().unwrap(), 1);
        // Owed, but within a second of the last: it comes when that second is up.
        wait_for(|| sleeps_of(name) == 2).await;
    }

    async fn wait_for(done: impl Fn() -> bool) {
        for _ in 0..300 {
            if done() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("not within 3 s");
    }

    /// One connection, one thread: jobs submitted without waiting run in
    /// the order they were queued, each with the connection to itself.
    #[tokio::test]
    async fn one_thread_runs_its_jobs_in_order() {
        let conn = Connection::open_in_memory().expect("in-memory SQLite");
        let writer = ConnectionThreads::start(vec![conn], "order-test").expect("thread starts");
        assert!(writer.submit(|conn| {
            conn.execute_batch("CREATE TABLE t (n INTEGER)").unwrap();
        }));
        for n in 0..50 {
            assert!(writer.submit(move |conn| {
                conn.execute("INSERT INTO t VALUES (?1)", [n]).unwrap();
            }));
        }
        let (order, on) = writer
            .run(|conn| {
                let mut stmt = conn.prepare("SELECT n FROM t ORDER BY rowid").unwrap();
                let order: Vec<i64> = stmt
                    .query_map([], |r| r.get(0))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                (order, std::thread::current().name().map(str::to_owned))
            })
            .await
            .unwrap();
        assert_eq!(order, (0..50).collect::<Vec<i64>>());
        assert_eq!(on.as_deref(), Some("order-test-0"));
    }
}
