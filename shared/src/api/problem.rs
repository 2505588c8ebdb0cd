//! The one mapping from a port's failure (the store, the delivery queue, an
//! outbox commit across both) to the API's problem answer, the one log line
//! that names the failing part, and its count. Every handler, and
//! ingestion, answers through these.

use http::StatusCode;

use crate::error::{ApiError, ErrorCode};
use crate::queue::{QueueError, StoreOrQueueError};
use crate::store::StoreError;

/// A store error as the API answers it: a refusal the client can act on
/// (`409`, `400`), `503 STORE_UNAVAILABLE` with `Retry-After` when the same
/// request may succeed later, `500` otherwise. Failures are logged and
/// counted; refusals are answers, not failures.
pub fn store_problem(e: StoreError) -> ApiError {
    match e {
        StoreError::LimitReached(n) => ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::SubscriptionLimitReached,
            format!(
                "the organization already has {n} subscriptions, the maximum; delete one first"
            ),
        ),
        StoreError::TooManySecrets(n) => ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::SecretRotationLimitReached,
            format!(
                "{n} replaced signing secrets are still in their grace period, the maximum; \
                 wait until one expires or rotate with gracePeriodSeconds 0"
            ),
        ),
        StoreError::SecretReused => ApiError::field(
            "key",
            "is the subscription's current signing secret or one still in its grace period",
        ),
        e => {
            tracing::error!(part = "store", error = %e, "store failure");
            crate::telemetry::metrics::store_error(e.kind());
            if e.is_unavailable() {
                store_unavailable()
            } else {
                ApiError::internal()
            }
        }
    }
}

/// A delivery queue error as the API answers it: `503 QUEUE_UNAVAILABLE`
/// with `Retry-After` when the same request may succeed later, `500`
/// otherwise; logged as a queue failure.
pub fn queue_problem(e: QueueError) -> ApiError {
    tracing::error!(part = "queue", error = %e, "delivery queue failure");
    if e.is_unavailable() {
        ApiError::unavailable(
            ErrorCode::QueueUnavailable,
            "the delivery queue is unavailable or slow to answer; try again later",
        )
    } else {
        ApiError::internal()
    }
}

/// An outbox commit's error, answered as the part that failed.
pub fn store_or_queue_problem(e: StoreOrQueueError) -> ApiError {
    match e {
        StoreOrQueueError::Store(e) => store_problem(e),
        StoreOrQueueError::Queue(e) => queue_problem(e),
    }
}

fn store_unavailable() -> ApiError {
    ApiError::unavailable(
        ErrorCode::StoreUnavailable,
        "the data store is unavailable or slow to answer; try again later",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retry_after(e: &ApiError) -> Option<&str> {
        e.headers
            .iter()
            .find(|(name, _)| name == http::header::RETRY_AFTER)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn what_may_succeed_later_is_a_503_with_retry_after_naming_the_part() {
        let busy = store_problem(StoreError::unavailable("database is locked"));
        let conflict = store_problem(StoreError::Conflict("cancelled 10 times".into()));
        let queue = store_or_queue_problem(StoreOrQueueError::Queue(QueueError::unavailable(
            "SQS timed out",
        )));
        let queue_store =
            store_or_queue_problem(StoreOrQueueError::Store(StoreError::unavailable("x")));
        for (e, code) in [
            (&busy, ErrorCode::StoreUnavailable),
            (&conflict, ErrorCode::StoreUnavailable),
            (&queue, ErrorCode::QueueUnavailable),
            (&queue_store, ErrorCode::StoreUnavailable),
        ] {
            assert_eq!((e.status, e.code), (StatusCode::SERVICE_UNAVAILABLE, code));
            assert!(retry_after(e).is_some(), "{e}");
        }
    }

    #[test]
    fn other_failures_are_500_and_refusals_are_the_clients() {
        let corrupt = store_problem(StoreError::corrupt("sub-1", "unknown status 'X'"));
        let backend = queue_problem(QueueError::backend("refused"));
        for e in [&corrupt, &backend] {
            assert_eq!(
                (e.status, e.code),
                (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::InternalError)
            );
            assert!(retry_after(e).is_none());
        }
        assert_eq!(
            store_problem(StoreError::LimitReached(3)).code,
            ErrorCode::SubscriptionLimitReached
        );
        assert_eq!(
            store_problem(StoreError::TooManySecrets(5)).code,
            ErrorCode::SecretRotationLimitReached
        );
        assert_eq!(
            store_problem(StoreError::SecretReused).code,
            ErrorCode::ValidationFailed
        );
    }
}
