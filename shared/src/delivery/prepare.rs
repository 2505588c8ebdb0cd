//! Step 2 of [`deliver`](super): what sending needs (the subscription,
//! deliverable; its signing keys; its callback target under the address
//! policy), or why it is not sent.

use super::found::{Attempt, Ready, Target};
use super::reason::Reason;
use super::run::Run;
use crate::callback::UriProblem;
use crate::destinations::{Destination, DestinationProblem};
use crate::failure::CallFailure;
use crate::model::SubscriptionStatus;
use crate::signature::SigningKey;
use crate::store::rules::is_deliverable;

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
