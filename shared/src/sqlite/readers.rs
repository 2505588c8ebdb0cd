//! The read connections, each owned by a thread of its own, fed from one
//! queue: a lookup goes to whichever reader is free. SQLite then never runs
//! on the runtime's threads, and a burst of reads waits in the queue rather
//! than growing tokio's blocking pool into threads that contend for a few
//! connections (which cost a third of the end-to-end throughput on two
//! cores, BENCHMARKS.md). Knows nothing of the store.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use tokio::sync::oneshot;

type Job = Box<dyn FnOnce(&Connection) + Send>;

/// The reader threads; they end, closing their connections, when this is
/// dropped.
pub(super) struct Readers {
    jobs: mpsc::Sender<Job>,
}

/// The readers are gone (a job panicked, or the process is ending).
#[derive(Debug, thiserror::Error)]
#[error("the SQLite read connection stopped before answering")]
pub(super) struct Stopped;

impl Readers {
    /// One thread per connection.
    pub(super) fn start(connections: Vec<Connection>) -> std::io::Result<Readers> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        for (i, conn) in connections.into_iter().enumerate() {
            let queue = queue.clone();
            std::thread::Builder::new()
                .name(format!("sqlite-reader-{i}"))
                .spawn(move || loop {
                    // The lock is held while waiting: the next free reader
                    // takes the next job.
                    let next = queue.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok(job) = next else {
                        return;
                    };
                    // A panicking job loses its answer (its caller sees
                    // `Stopped`), not the reader.
                    let _ = catch_unwind(AssertUnwindSafe(|| job(&conn)));
                })?;
        }
        Ok(Readers { jobs })
    }

    /// Runs `f` on the next free read connection and waits for its answer.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> T + Send + 'static,
    ) -> Result<T, Stopped> {
        let (done, answer) = oneshot::channel();
        self.jobs
            .send(Box::new(move |conn| {
                let _ = done.send(f(conn));
            }))
            .map_err(|_| Stopped)?;
        answer.await.map_err(|_| Stopped)
    }
}
