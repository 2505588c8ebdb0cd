//! Steps 2 and 4 of [`deliver`](super::deliver): what sending needs (the
//! subscription, deliverable; its signing keys; its callback target under
//! the address policy), or why it is not sent; then the signed POST.

use std::time::Duration;

use super::{Attempt, Reason, Run};
use crate::callback::post::{Posted, SignedNotification};
use crate::callback::{CallbackTarget, UriProblem};
use crate::failure::CallFailure;
use crate::model::SubscriptionStatus;
use crate::signature::{signature_header, SigningKey};
use crate::store::rules::is_deliverable;
use crate::store::StoredSubscription;
use crate::telemetry::trace::TraceParent;

/// A notification ready to be sent.
pub struct Ready {
    /// The subscription the notification goes to, as stored.
    pub subscription: StoredSubscription,
    /// The current secret's key first, then those of the replaced secrets
    /// still in their grace period: the notification is signed with each.
    pub keys: Vec<SigningKey>,
    /// The checked callback, or why the policy refused it (a failed attempt).
    pub target: Result<CallbackTarget, CallFailure>,
}

/// Step 2: what sending needs, or why it is not sent.
pub async fn prepare(run: &Run<'_>) -> Result<Ready, Attempt> {
    let (app, job, now) = (run.app, run.job(), run.now);
    let subscription = match app
        .store
        .get_subscription(&job.org_id, &job.subscription_id)
        .await
    {
        Ok(Some(sub)) => sub,
        Ok(None) => return Err(Attempt::Unwanted(Reason::Deleted)),
        Err(e) => {
            crate::telemetry::metrics::store_error(e.kind());
            return Err(Attempt::StoreUnavailable(Reason::StoreUnavailable(
                e.to_string(),
            )));
        }
    };
    if !is_deliverable(&subscription, now) {
        return Err(Attempt::Unwanted(match subscription.status {
            SubscriptionStatus::Active => Reason::Expired,
            stored => Reason::NotActive(stored),
        }));
    }
    let Ok(key) = SigningKey::from_secret(&subscription.secret) else {
        return Err(Attempt::Unsendable(Reason::SecretUnusable));
    };
    // A replaced secret that cannot be decoded is left out (it could not
    // have been verified either); the current one always signs.
    let keys = std::iter::once(key)
        .chain(
            subscription
                .signing_secrets(now)
                .skip(1)
                .filter_map(|secret| SigningKey::from_secret(secret).ok()),
        )
        .collect();
    let target = match app.callbacks.policy.check_uri(&subscription.uri) {
        Ok(target) => Ok(target),
        Err(UriProblem::Forbidden(_)) => Err(CallFailure::AddressForbidden),
        Err(UriProblem::Invalid(m)) => return Err(Attempt::Unsendable(Reason::InvalidUri(m))),
    };
    Ok(Ready {
        subscription,
        keys,
        target,
    })
}

/// Step 4: sign and POST (a refused target is a failed attempt, not a call).
pub async fn post(run: &Run<'_>, ready: &Ready, trace: TraceParent) -> Posted {
    let target = match &ready.target {
        Ok(target) => target,
        Err(failure) => {
            return Posted::Failed {
                failure: *failure,
                elapsed: Duration::ZERO,
            }
        }
    };
    let job = run.job();
    let timestamp = run.now / 1000;
    let notification = SignedNotification {
        id: job.id.as_str(),
        timestamp,
        signature: signature_header(&ready.keys, job.id.as_str(), timestamp, job.body.as_bytes()),
        body: &job.body,
        traceparent: Some(trace.header()),
    };
    run.app
        .callbacks
        .post(target, notification, run.app.config.delivery_timeout)
        .await
}
