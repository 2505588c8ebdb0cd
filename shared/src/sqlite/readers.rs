//! The read connections, each owned by a thread of its own, fed from one
//! queue: a lookup goes to whichever reader is free. SQLite then never runs
//! on the runtime's threads, and a burst of reads waits in the queue rather
//! than growing tokio's blocking pool into threads that contend for a few
//! connections (which cost a third of the end-to-end throughput on two
//! cores, BENCHMARKS.md). Knows nothing of the store.
//!
//! A lookup wakes at most one reader, and none when every reader is busy
//! (a busy reader takes the next job before it sleeps): each thread wake-up
//! is a context switch, and a get is only a few of them (BENCHMARKS.md,
//! "Issue 26: the get path and memory, again").

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
    /// Readers asleep on `ready`: a job wakes one only if there is one.
    idle: usize,
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
        loop {
            if let Some(job) = state.jobs.pop_front() {
                return Some(job);
            }
            if state.closed {
                return None;
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
            state.idle > 0
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
