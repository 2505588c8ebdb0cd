//! Steps 2 and 4 of [`deliver`](super::deliver): what sending needs (the
//! subscription, deliverable; its signing keys; its callback target under
//! the address policy), or why it is not sent; then the signed POST.

use std::time::Duration;

use super::{Attempt, Reason, Run};
use crate::callback::destination::{
    detail_type, external_id, Destination, DestinationMessage, DestinationProblem, Sent,
    ServiceFault,
};
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
    /// Where it goes: the checked callback or destination, or why it
    /// cannot go there (a failed attempt).
    pub target: Result<Target, CallFailure>,
}

/// Where a notification is sent.
pub enum Target {
    /// POSTed to an HTTPS callback.
    Callback(CallbackTarget),
    /// Sent into an AWS destination (docs/decisions/destinations.md).
    Destination(Destination),
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
    let target = match (
        Destination::kind_of(&subscription.uri),
        &subscription.role_arn,
    ) {
        (Some(kind), Some(role)) => match &app.destinations {
            // A runtime without the SDK cannot send it; another one may.
            None => Err(CallFailure::DestinationError),
            Some(sender) => {
                let (partition, region) = sender.partition_and_region();
                match Destination::parse(kind, &subscription.uri, role, partition, region) {
                    Ok(d) => Ok(Target::Destination(d)),
                    Err(DestinationProblem::Invalid { message, .. })
                    | Err(DestinationProblem::Forbidden(message)) => {
                        return Err(Attempt::Unsendable(Reason::InvalidUri(message)))
                    }
                }
            }
        },
        _ => match app.callbacks.policy.check_uri(&subscription.uri) {
            Ok(target) => Ok(Target::Callback(target)),
            Err(UriProblem::Forbidden(_)) => Err(CallFailure::AddressForbidden),
            Err(UriProblem::Invalid(m)) => return Err(Attempt::Unsendable(Reason::InvalidUri(m))),
        },
    };
    Ok(Ready {
        subscription,
        keys,
        target,
    })
}

/// Step 4: sign and POST, or send into the destination (a refused target
/// is a failed attempt, not a call); or the service's own fault, which is
/// no attempt (docs/decisions/destinations.md, "Whose fault, and
/// destinations that cannot be turned on the service").
pub async fn post(
    run: &Run<'_>,
    ready: &Ready,
    trace: TraceParent,
) -> Result<Posted, ServiceFault> {
    let target = match &ready.target {
        Ok(target) => target,
        Err(failure) => {
            return Ok(Posted::Failed {
                failure: *failure,
                elapsed: Duration::ZERO,
            })
        }
    };
    let job = run.job();
    let timestamp = run.now / 1000;
    let signature = signature_header(&ready.keys, job.id.as_str(), timestamp, job.body.as_bytes());
    let destination = match target {
        Target::Destination(d) => d,
        Target::Callback(target) => {
            let notification = SignedNotification {
                id: job.id.as_str(),
                timestamp,
                signature,
                body: &job.body,
                traceparent: Some(trace.header()),
            };
            return Ok(run
                .app
                .callbacks
                .post(target, notification, run.app.config.delivery_timeout)
                .await);
        }
    };
    let Some(sender) = &run.app.destinations else {
        return Ok(Posted::Failed {
            failure: CallFailure::DestinationError,
            elapsed: Duration::ZERO,
        });
    };
    let external_id = external_id(&run.app.config.external_id_prefix, &job.org_id);
    // The role trusts the id it was validated with: another one now is the
    // service's configuration (its prefix), not the customer's role.
    if ready
        .subscription
        .external_id
        .as_ref()
        .is_some_and(|validated| *validated != external_id)
    {
        return Err(ServiceFault::ExternalIdChanged);
    }
    let event = serde_json::from_str::<serde_json::Value>(&job.body)
        .ok()
        .and_then(|v| v.get("event").and_then(|e| e.as_str()).map(str::to_owned))
        .unwrap_or_default();
    let detail_type = detail_type(&event);
    let message = DestinationMessage {
        id: job.id.as_str(),
        timestamp,
        signature,
        body: &job.body,
        detail_type: &detail_type,
        group: job.subscription_id.as_str(),
        org: &job.org_id,
    };
    let started = std::time::Instant::now();
    let sent = sender
        .send(
            destination,
            &external_id,
            message,
            run.app.config.delivery_timeout,
        )
        .await;
    match sent {
        Sent::Accepted(id) => Ok(Posted::Accepted {
            id,
            elapsed: started.elapsed(),
        }),
        Sent::Failed(failure) => Ok(Posted::Failed {
            failure,
            elapsed: started.elapsed(),
        }),
        Sent::ServiceFault(fault) => Err(fault),
    }
}
