//! Group commit: concurrent writers of small items (queue completions) are
//! written together, one transaction for all of them; each caller still
//! learns only once its own item is committed. Knows nothing of SQL.

use std::sync::Mutex;

use tokio::sync::oneshot;

type Waiter = oneshot::Sender<Result<(), String>>;

pub(super) struct GroupCommit<T> {
    pending: Mutex<Pending<T>>,
}

struct Pending<T> {
    items: Vec<(T, Waiter)>,
    /// A writer is running; new items join its next batch.
    flushing: bool,
}

impl<T> Default for GroupCommit<T> {
    fn default() -> Self {
        GroupCommit {
            pending: Mutex::new(Pending {
                items: Vec::new(),
                flushing: false,
            }),
        }
    }
}

impl<T> GroupCommit<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending<T>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `item`. Returns where its result arrives, and whether the
    /// caller must start a writer ([`GroupCommit::flush`]).
    pub(super) fn push(&self, item: T) -> (oneshot::Receiver<Result<(), String>>, bool) {
        let (done, committed) = oneshot::channel();
        let mut pending = self.lock();
        pending.items.push((item, done));
        let start = !std::mem::replace(&mut pending.flushing, true);
        (committed, start)
    }

    /// Writes batches with `write` until nothing is pending (call it on the
    /// blocking pool). If `write` panics, the next push starts a writer again.
    pub(super) fn flush(&self, write: impl Fn(&[T]) -> Result<(), String>) {
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
            let (items, waiters): (Vec<T>, Vec<Waiter>) = batch.into_iter().unzip();
            let result = write(&items);
            for done in waiters {
                let _ = done.send(result.clone());
            }
        }
    }
}

struct FlushGuard<'a, T>(&'a GroupCommit<T>);

impl<T> Drop for FlushGuard<'_, T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.lock().flushing = false;
        }
    }
}
