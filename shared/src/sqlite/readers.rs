//! The read connections, each owned by a thread of its own, fed from one
//! queue: a lookup goes to whichever reader is free. SQLite then never runs
//! on the runtime's threads, and a burst of reads waits in the queue rather
//! than growing tokio's blocking pool into threads that contend for a few
//! connections (which cost a third of the end-to-end throughput on two
//! cores, BENCHMARKS.md). Knows nothing of the store.
//!
//! A lookup wakes a sleeping reader only when the readers awake have more
//! queued than they can take next (an awake reader takes the next job before
//! it sleeps): each wake-up is a context switch, and a get is only a few of
//! them (BENCHMARKS.md, "Issue 26: the get path and memory, again"). A job
//! waits behind a busy reader's current one at most while no second job
//! queues.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use rusqlite::Connection;
use tokio::sync::oneshot;

type Job = Box<dyn FnOnce(&Connection) + Send>;

/// The reader threads; they end, closing their connections, when this is
/// dropped (after the jobs already queued).
pub(super) struct Readers {
    queue: Arc<Queue>,
}

/// The jobs waiting for a reader, and whether anyone waits for a job.
struct Queue {
    state: Mutex<State>,
    ready: Condvar,
}

struct State {
    jobs: VecDeque<Job>,
    /// Readers asleep on `ready`.
    idle: usize,
    /// Readers started.
    readers: usize,
    closed: bool,
}

/// The readers are gone (a job panicked, or the process is ending).
#[derive(Debug, thiserror::Error)]
#[error("the SQLite read connection stopped before answering")]
pub(super) struct Stopped;

impl Queue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next job, sleeping until there is one; `None` once closed and
    /// drained.
    fn next(&self) -> Option<Job> {
        let mut state = self.lock();
        let mut yielded = false;
        loop {
            if let Some(job) = state.jobs.pop_front() {
                return Some(job);
            }
            if state.closed {
                return None;
            }
            if !yielded {
                // Out of jobs: yield the core once before sleeping. Under
                // load the thread yielded to is usually a worker about to
                // queue the next lookup, found then without a wake-up.
                drop(state);
                std::thread::yield_now();
                yielded = true;
                state = self.lock();
                continue;
            }
            state.idle += 1;
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
            state.idle -= 1;
        }
    }
}

impl Readers {
    /// One thread per connection.
    pub(super) fn start(connections: Vec<Connection>) -> std::io::Result<Readers> {
        let queue = Arc::new(Queue {
            state: Mutex::new(State {
                jobs: VecDeque::new(),
                idle: 0,
                readers: connections.len(),
                closed: false,
            }),
            ready: Condvar::new(),
        });
        for (i, conn) in connections.into_iter().enumerate() {
            let queue = queue.clone();
            std::thread::Builder::new()
                .name(format!("sqlite-reader-{i}"))
                .spawn(move || {
                    while let Some(job) = queue.next() {
                        // A panicking job loses its answer (its caller sees
                        // `Stopped`), not the reader.
                        let _ = catch_unwind(AssertUnwindSafe(|| job(&conn)));
                    }
                })?;
        }
        Ok(Readers { queue })
    }

    /// Runs `f` on the next free read connection and waits for its answer.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> T + Send + 'static,
    ) -> Result<T, Stopped> {
        let (done, answer) = oneshot::channel();
        let wake = {
            let mut state = self.queue.lock();
            if state.closed {
                return Err(Stopped);
            }
            state.jobs.push_back(Box::new(move |conn| {
                let _ = done.send(f(conn));
            }));
            let awake = state.readers - state.idle;
            state.idle > 0 && state.jobs.len() > awake
        };
        if wake {
            self.queue.ready.notify_one();
        }
        answer.await.map_err(|_| Stopped)
    }
}

impl Drop for Readers {
    fn drop(&mut self) {
        self.queue.lock().closed = true;
        self.queue.ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readers(n: usize) -> Readers {
        let conns = (0..n)
            .map(|_| Connection::open_in_memory().expect("in-memory SQLite"))
            .collect();
        Readers::start(conns).expect("reader threads start")
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
}
