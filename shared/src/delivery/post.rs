//! Step 4 of [`deliver`](super): sign and POST the notification, or send
//! it into the subscription's AWS destination.

use std::time::Duration;

use super::found::{Ready, Target};
use super::run::Run;
use crate::callback::post::{Posted, SignedNotification};
use crate::destinations::{external_id, DestinationMessage, Sent, ServiceFault};
use crate::failure::CallFailure;
use crate::signature::signature_header;
use crate::telemetry::trace::TraceParent;

/// Step 4: sign and POST (with the attempt's `trace`), or send into the
/// destination (a refused target is a failed attempt, not a call); or the
/// service's own fault, which is no attempt (docs/decisions/destinations.md,
/// "Whose fault, and destinations that cannot be turned on the service").
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
                headers: ready.subscription.custom_headers.as_ref(),
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
    let message = DestinationMessage {
        id: job.id.as_str(),
        timestamp,
        signature,
        body: &job.body,
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
