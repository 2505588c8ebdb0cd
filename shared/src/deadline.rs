//! One deadline per API request, shared by every store and queue call the
//! request makes (`WEBHOOKS_API_DEADLINE`). Each call keeps its own bound
//! (`WEBHOOKS_AWS_API_*`, SQLite's busy timeout); the deadline bounds their
//! sum: the call in flight when it passes is dropped, and the request is
//! answered `503 DEADLINE_EXCEEDED` with `Retry-After`. So a dependency that
//! answers each call just inside its bound cannot stretch a request of
//! several calls past what a client (or API Gateway's 29 s) waits.
//!
//! Dropping a call is safe because a request is already safe to cut at any
//! await: every write is one atomic commit, ingestion is idempotent per event
//! id, a create is an upsert on (organization, uri), and the outbox sends what
//! a cut request committed (ARCHITECTURE.md, "An event to the callback").
//!
//! The create's handshake runs outside the budget ([`excluded`]): it has its
//! own bound (`WEBHOOKS_HANDSHAKE_TIMEOUT_MS`), so a create answers within the
//! deadline plus the handshake's time.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

tokio::task_local! {
    static BUDGET: Arc<Budget>;
}

/// The request's work did not finish before its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

struct Budget {
    state: Mutex<State>,
    /// Wakes [`within`] when the deadline moves or a pause starts.
    changed: Notify,
}

struct State {
    deadline: Instant,
    /// Since when the work runs outside the budget, if it does.
    paused_since: Option<Instant>,
}

impl Budget {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the state half-written.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Runs `work` with `budget` to finish; the time [`excluded`] work takes is
/// not counted. Past the deadline `work` is dropped (cancelled at its await).
pub async fn within<F: Future>(budget: Duration, work: F) -> Result<F::Output, Elapsed> {
    let shared = Arc::new(Budget {
        state: Mutex::new(State {
            deadline: Instant::now() + budget,
            paused_since: None,
        }),
        changed: Notify::new(),
    });
    let work = BUDGET.scope(shared.clone(), work);
    tokio::pin!(work);
    loop {
        let deadline = {
            let state = shared.state();
            state.paused_since.is_none().then_some(state.deadline)
        };
        let expiry = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            out = &mut work => return Ok(out),
            // `notify_one` keeps a permit: a change made before this await is not missed.
            () = shared.changed.notified() => continue,
            () = expiry => return Err(Elapsed),
        }
    }
}

/// Runs `work` outside the budget of the request it is part of (none: as is).
pub async fn excluded<F: Future>(work: F) -> F::Output {
    let Ok(budget) = BUDGET.try_with(Arc::clone) else {
        return work.await;
    };
    budget.state().paused_since = Some(Instant::now());
    budget.changed.notify_one();
    // Resumed on drop, so a cancelled `work` resumes the budget too.
    let _resume = Resume(budget);
    work.await
}

struct Resume(Arc<Budget>);

impl Drop for Resume {
    fn drop(&mut self) {
        let mut state = self.0.state();
        if let Some(since) = state.paused_since.take() {
            state.deadline += since.elapsed();
        }
        drop(state);
        self.0.changed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Outcomes, not timings: each case fails (the other result) if the
    // deadline is not kept, or kept wrongly; a loaded machine cannot flip them.
    const MS: Duration = Duration::from_millis(1);

    #[tokio::test]
    async fn work_inside_the_budget_finishes() {
        let out = within(1_000 * MS, async {
            tokio::time::sleep(10 * MS).await;
            7
        })
        .await;
        assert_eq!(out, Ok(7));
    }

    #[tokio::test]
    async fn calls_that_each_fit_their_own_bound_are_cut_at_the_deadline() {
        let out = within(50 * MS, async {
            for _ in 0..3 {
                tokio::time::sleep(40 * MS).await;
            }
        })
        .await;
        assert_eq!(out, Err(Elapsed));
    }

    #[tokio::test]
    async fn excluded_work_moves_the_deadline_by_its_time_only() {
        let handshake = |ms| excluded(tokio::time::sleep(ms * MS));
        let out = within(200 * MS, async {
            tokio::time::sleep(10 * MS).await;
            handshake(600).await;
            tokio::time::sleep(10 * MS).await;
        })
        .await;
        assert_eq!(out, Ok(()));

        let out = within(100 * MS, async {
            tokio::time::sleep(10 * MS).await;
            handshake(50).await;
            tokio::time::sleep(150 * MS).await;
        })
        .await;
        assert_eq!(out, Err(Elapsed));
    }

    #[tokio::test]
    async fn excluded_work_outside_a_request_runs_as_is() {
        assert_eq!(excluded(async { 3 }).await, 3);
    }
}
