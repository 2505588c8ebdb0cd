//! Group commit: concurrent writers of small items (events ingested,
//! delivery outcomes, queue completions) are written together, one
//! transaction for all of them; each caller still learns only once its own
//! item is committed, with its own result. Knows nothing of SQL.
//!
//! Besides saving a commit per item, it keeps the writer fair: a burst of
//! ingestion is one job in the writer's queue, not one per request, so the
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
    /// caller must start a writer ([`GroupCommit::flush_batch`]).
    pub(super) fn push(&self, item: T) -> (oneshot::Receiver<Result<R, E>>, bool) {
        let (done, committed) = oneshot::channel();
        let mut pending = self.lock();
        pending.items.push((item, done));
        let start = !std::mem::replace(&mut pending.flushing, true);
        (committed, start)
    }

    /// Writes one batch, everything pending, with `write` (call it on the
    /// writer's thread); `true` when more items came meanwhile: the caller
    /// queues another flush behind the writer's other work, so a stream of
    /// events does not starve it. `write` answers one result per item, in
    /// order; if it fails, every item of the batch gets its error. If
    /// `write` panics, the next push starts a writer again.
    pub(super) fn flush_batch(&self, write: impl FnOnce(&[T]) -> Result<Vec<R>, E>) -> bool {
        let _guard = FlushGuard(self);
        let batch = {
            let mut pending = self.lock();
            if pending.items.is_empty() {
                pending.flushing = false;
                return false;
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
        let mut pending = self.lock();
        if pending.items.is_empty() {
            pending.flushing = false;
            return false;
        }
        true
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A flush writes what is pending as one batch; items pushed during
    /// the write wait for the next flush, which the flush asks for.
    #[tokio::test]
    async fn items_pushed_during_a_write_ask_for_another_flush() {
        let commits: GroupCommit<u32, u32, String> = GroupCommit::default();
        let (first, start) = commits.push(1);
        assert!(start, "the first push starts a writer");
        let (second, start) = commits.push(2);
        assert!(!start, "the writer is already asked for");
        let mut late = None;
        let more = commits.flush_batch(|batch| {
            assert_eq!(batch, [1, 2]);
            let (rx, start) = commits.push(3);
            assert!(!start, "pushed while flushing: no second writer");
            late = Some(rx);
            Ok(batch.iter().map(|n| n * 10).collect())
        });
        assert!(more, "an item came during the write");
        assert_eq!(first.await.unwrap(), Ok(10));
        assert_eq!(second.await.unwrap(), Ok(20));
        let more = commits.flush_batch(|batch| Ok(batch.iter().map(|n| n * 10).collect()));
        assert!(!more, "nothing pending after the second batch");
        assert_eq!(late.unwrap().await.unwrap(), Ok(30));
        let (_, start) = commits.push(4);
        assert!(start, "after the last flush, a push starts a writer again");
    }

    /// A failed batch gives each of its items the batch's error.
    #[tokio::test]
    async fn a_failed_batch_fails_each_item() {
        let commits: GroupCommit<u32, u32, String> = GroupCommit::default();
        let (a, _) = commits.push(1);
        let (b, _) = commits.push(2);
        assert!(!commits.flush_batch(|_| Err("disk full".to_owned())));
        assert_eq!(a.await.unwrap(), Err("disk full".to_owned()));
        assert_eq!(b.await.unwrap(), Err("disk full".to_owned()));
    }
}
