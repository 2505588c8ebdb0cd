//! Group commit: concurrent writers of small items (events ingested,
//! delivery outcomes, queue completions) are written together, one
//! transaction for all of them; each caller still learns only once its own
//! item is committed, with its own result. Knows nothing of SQL.
//!
//! Besides saving a commit per item, it keeps the writer fair: a burst of
//! ingestion is one waiter on the writer's lock, not one per request, so the
//! delivery queue's reads are not starved while events pour in.

use std::sync::Mutex;

use tokio::sync::oneshot;

type Waiter<R, E> = oneshot::Sender<Result<R, E>>;

/// Items `T` written together; each answers `R`, or the batch's error `E`
/// (cloned for each of its items) when the whole batch failed.
pub(super) struct GroupCommit<T, R, E> {
    pending: Mutex<Pending<T, R, E>>,
}

struct Pending<T, R, E> {
    items: Vec<(T, Waiter<R, E>)>,
    /// A writer is running; new items join its next batch.
    flushing: bool,
}

impl<T, R, E> Default for GroupCommit<T, R, E> {
    fn default() -> Self {
        GroupCommit {
            pending: Mutex::new(Pending {
                items: Vec::new(),
                flushing: false,
            }),
        }
    }
}

impl<T, R, E: Clone> GroupCommit<T, R, E> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending<T, R, E>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `item`. Returns where its result arrives, and whether the
    /// caller must start a writer ([`GroupCommit::flush`]).
    pub(super) fn push(&self, item: T) -> (oneshot::Receiver<Result<R, E>>, bool) {
        let (done, committed) = oneshot::channel();
        let mut pending = self.lock();
        pending.items.push((item, done));
        let start = !std::mem::replace(&mut pending.flushing, true);
        (committed, start)
    }

    /// Writes batches with `write` until nothing is pending (call it on the
    /// blocking pool). `write` answers one result per item, in order; if it
    /// fails, every item of the batch gets its error. If `write` panics,
    /// the next push starts a writer again.
    pub(super) fn flush(&self, write: impl Fn(&[T]) -> Result<Vec<R>, E>) {
        let _guard = FlushGuard(self);
        loop {
            let batch = {
                let mut pending = self.lock();
                if pending.items.is_empty() {
                    pending.flushing = false;
                    return;
                }
                std::mem::take(&mut pending.items)
            };
            let (items, waiters): (Vec<T>, Vec<Waiter<R, E>>) = batch.into_iter().unzip();
            match write(&items) {
                Ok(results) => {
                    // A missing result drops its waiter: "not committed".
                    for (done, result) in waiters.into_iter().zip(results) {
                        let _ = done.send(Ok(result));
                    }
                }
                Err(e) => {
                    for done in waiters {
                        let _ = done.send(Err(e.clone()));
                    }
                }
            }
        }
    }
}

struct FlushGuard<'a, T, R, E>(&'a GroupCommit<T, R, E>);

impl<T, R, E> Drop for FlushGuard<'_, T, R, E> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .flushing = false;
        }
    }
}
