//! Subscription handlers: plain async functions over the ports, called by the
//! Lambda functions and by `webhooks-local` alike.

use http::StatusCode;

use super::problem::store_problem;
pub use super::subscription_request::MAX_FILTERS;
use super::subscription_request::{truncate, unavailable_destinations, validate, Target};
use crate::app::App;
use crate::auth::Caller;
use crate::callback::{CallbackTarget, UriProblem};
use crate::clock::iso_millis;
use crate::custom_headers::CustomHeaders;
use crate::destinations::{
    external_id, foreign_external_id, Destination, DestinationProblem, Refusal, ServiceFault,
};
use crate::error::{ApiError, ErrorCode};
use crate::failure::{CallFailure, Failure};
use crate::ids::SubscriptionId;
use crate::model::{
    DestinationIdentity, DestinationView, DisabledFilter, LastFailure, Page, SigningSecret,
    Subscription, SubscriptionHealth, SubscriptionRequest,
};
use crate::page::PageRequest;
use crate::payload_filter::PayloadFilter;
use crate::retry_schedule::RetrySchedule;
use crate::secret;
use crate::signature::SignatureScheme;
use crate::store::{SecretRotation, StoredSubscription, Upsert, DEFAULT_GRACE_SECONDS};

/// Every `code` a create (`POST /webhooksubscription`) can answer, on every
/// runtime: docs/api.md ("What a create can answer"), openapi.yaml's
/// operation and, for a destination's, docs/destinations.md list each
/// (shared/tests/it/error_codes.rs fails on one missing).
pub const CREATE_CODES: &[ErrorCode] = {
    use ErrorCode::*;
    &[
        // The request: its authentication, body and fields.
        ApiKeyMissing,
        ApiKeyInvalid,
        InvalidToken,
        OrgClaimMissing,
        InsufficientScope,
        PayloadTooLarge,
        UnsupportedMediaType,
        MalformedJson,
        ValidationFailed,
        NoEnabledFilters,
        // A callback's handshake, by failing step (400).
        AddressForbidden,
        DnsFailed,
        ConnectFailed,
        TlsFailed,
        Timeout,
        BadStatus,
        TokenMissing,
        TokenMismatch,
        // A destination's validation: the customer's (400), or to try again (503).
        DestinationForbidden,
        RoleNotAssumable,
        RoleTrustsAnyExternalId,
        DestinationNotFound,
        SendDenied,
        DestinationThrottled,
        DestinationError,
        DestinationsUnavailable,
        // The store.
        SubscriptionLimitReached,
        StoreUnavailable,
        DeadlineExceeded,
        InternalError,
    ]
};
pub use crate::store::order::SORTABLE;
pub use crate::store::rules::visible_status;

/// `POST /webhooksubscription`: validate, run the handshake, then create or
/// update the subscription identified by (organization, uri).
pub async fn create_subscription(
    app: &App,
    caller: &Caller,
    request: SubscriptionRequest,
) -> Result<Subscription, ApiError> {
    let now = app.now_ms();
    let valid = validate(app, caller, request, now)?;
    let callback = match &valid.target {
        Target::Callback => Some(check_callback(app, &valid.uri)?),
        Target::Destination(_) => None,
    };
    if valid.enabled.is_empty() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::NoEnabledFilters,
            format!(
                "none of the event filters belongs to organization {}",
                caller.org_id
            ),
        ));
    }
    match (callback, &valid.target) {
        (Some(target), _) => {
            let headers = valid.custom_headers.clone().flatten();
            callback_handshake(app, caller, &target, headers.as_ref()).await?
        }
        (None, Target::Destination(d)) => {
            destination_outside_service(app, d).await?;
            destination_validation(app, caller, d).await?
        }
        (None, Target::Callback) => {}
    }
    let upsert = Upsert {
        org_id: caller.org_id.clone(),
        uri: valid.uri,
        event_filters: valid.enabled,
        disabled_filters: valid.disabled,
        expires_at: valid.expires_at,
        now,
        // Time-ordered ids: creation order is the id order, even within a millisecond.
        new_id: uuid::Uuid::now_v7().to_string().into(),
        new_secret: valid
            .signature_scheme
            .unwrap_or(SignatureScheme::V1)
            .new_key(),
        max_per_org: app.config.max_subscriptions_per_org,
        ordered: valid.ordered,
        rate_limit: valid.rate_limit,
        payload_filter: valid.payload_filter,
        retry_schedule: valid.retry_schedule,
        custom_headers: valid.custom_headers.clone(),
        external_id: match valid.target {
            Target::Callback => None,
            Target::Destination(_) => {
                Some(external_id(&app.config.external_id_prefix, &caller.org_id))
            }
        },
        role_arn: match valid.target {
            Target::Callback => None,
            Target::Destination(d) => Some(d.role_arn),
        },
    };
    let (stored, created) = app
        .store
        .upsert_subscription(upsert)
        .await
        .map_err(store_problem)?;
    tracing::info!(org_id = %caller.org_id, subscription_id = %stored.id, created, "subscription saved");
    // Another scheme than the current key's: a rotation to a key of it,
    // the old key signing beside it for the default grace period.
    let stored = match valid.signature_scheme {
        Some(scheme) if !created && scheme != SignatureScheme::of_key(&stored.secret) => {
            rotate_key(
                app,
                caller,
                &stored.id,
                scheme.new_key(),
                DEFAULT_GRACE_SECONDS,
            )
            .await?
        }
        _ => stored,
    };
    Ok(render(
        &stored,
        app.now_ms(),
        &app.config.external_id_prefix,
    ))
}

/// An HTTPS callback's `uri` under the address policy.
fn check_callback(app: &App, uri: &str) -> Result<CallbackTarget, ApiError> {
    match app.callbacks.policy.check_uri(uri) {
        Ok(target) => Ok(target),
        Err(UriProblem::Invalid(m)) => Err(ApiError::field("uri", m)),
        Err(UriProblem::Forbidden(ip)) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::AddressForbidden,
            format!("callbacks to {ip} are not allowed (private, loopback, link-local or reserved address)"),
        )),
    }
}

/// The handshake with an HTTPS callback.
async fn callback_handshake(
    app: &App,
    caller: &Caller,
    target: &CallbackTarget,
    headers: Option<&CustomHeaders>,
) -> Result<(), ApiError> {
    let token = secret::validation_token();
    // Bounded by its own timeout, outside the request's deadline.
    let handshake = app
        .callbacks
        .handshake(target, &token, headers, app.config.handshake_timeout);
    if let Err(e) = crate::deadline::excluded(handshake).await {
        tracing::info!(org_id = %caller.org_id, code = e.code().as_str(), "callback validation failed");
        return Err(e.into());
    }
    Ok(())
}

/// Refuses a destination in the service's own AWS account: the one the
/// deployment names (`WEBHOOKS_AWS_ACCOUNT_ID`), or else the account of its
/// credentials; when neither is known, every destination is refused.
async fn destination_outside_service(app: &App, d: &Destination) -> Result<(), ApiError> {
    let Some(sender) = &app.destinations else {
        return Err(unavailable_destinations());
    };
    let account = match &app.config.aws_account_id {
        Some(account) => account.clone(),
        None => {
            let ask = tokio::time::timeout(app.config.handshake_timeout, sender.caller_account());
            match crate::deadline::excluded(ask).await {
                Ok(Ok(account)) => account,
                Ok(Err(fault)) => return Err(service_fault_problem(&fault)),
                Err(_) => {
                    let fault = ServiceFault::AccountUnknown("STS did not answer in time".into());
                    return Err(service_fault_problem(&fault));
                }
            }
        }
    };
    d.outside(&account).map_err(|problem| match problem {
        DestinationProblem::Forbidden(message) | DestinationProblem::Invalid { message, .. } => {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::DestinationForbidden,
                message,
            )
        }
    })
}

/// The validation of an AWS destination: assume its role with the
/// organization's external id, check that another external id is refused,
/// then send a validation message (docs/decisions/destinations.md). A step
/// that may succeed later (throttled, AWS failed, no answer) or a fault of
/// the service's own is `503` with `Retry-After`; the customer's is `400`.
async fn destination_validation(
    app: &App,
    caller: &Caller,
    destination: &Destination,
) -> Result<(), ApiError> {
    let Some(sender) = &app.destinations else {
        return Err(unavailable_destinations());
    };
    let prefix = &app.config.external_id_prefix;
    let external_id = external_id(prefix, &caller.org_id);
    let token = secret::validation_token();
    let foreign = foreign_external_id(prefix);
    let validation = sender.validate(
        destination,
        &external_id,
        &foreign,
        &token,
        &caller.org_id,
        app.config.handshake_timeout,
    );
    let failure = match crate::deadline::excluded(validation).await {
        Ok(()) => return Ok(()),
        Err(Refusal::Service(fault)) => return Err(service_fault_problem(&fault)),
        Err(Refusal::TrustsAnyExternalId) => {
            tracing::info!(org_id = %caller.org_id, code = ErrorCode::RoleTrustsAnyExternalId.as_str(), "destination validation failed");
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::RoleTrustsAnyExternalId,
                format!(
                    "the role {} can be assumed with an external id that is not this organization's: \
                     its trust policy must allow sts:AssumeRole only with the condition \
                     StringEquals sts:ExternalId {external_id} (docs/destinations.md, \"2. The role\")",
                    destination.role_arn
                ),
            ));
        }
        Err(Refusal::Step(failure)) => failure,
    };
    tracing::info!(org_id = %caller.org_id, code = failure.code().as_str(), "destination validation failed");
    let detail = validation_detail(failure, destination, &external_id);
    Err(match failure.disables() {
        true => ApiError::new(StatusCode::BAD_REQUEST, failure.code(), detail),
        false => ApiError::unavailable(failure.code(), detail),
    })
}

/// A fault of the service's own, at a create: logged at error level and
/// counted for its operators, answered `503` with `Retry-After`.
fn service_fault_problem(fault: &ServiceFault) -> ApiError {
    tracing::error!(part = "destinations", kind = fault.kind(), error = %fault, "the service's own fault reaching AWS destinations");
    crate::telemetry::metrics::service_fault(fault.kind());
    ApiError::unavailable(
        ErrorCode::DestinationsUnavailable,
        "the service cannot reach AWS destinations now (its own credentials or configuration); \
         its operators are told; try again later",
    )
}

/// Why a destination's validation failed, for a person.
fn validation_detail(failure: CallFailure, d: &Destination, external_id: &str) -> String {
    match failure {
        CallFailure::RoleNotAssumable => format!(
            "the role {} could not be assumed: it does not exist, does not trust this service, \
             or its trust policy requires another external id than this organization's, {external_id} \
             (docs/destinations.md)",
            d.role_arn
        ),
        CallFailure::DestinationNotFound => format!("{} does not exist", d.arn),
        CallFailure::SendDenied => format!(
            "the role {} may not send to {} (sqs:SendMessage or events:PutEvents)",
            d.role_arn, d.arn
        ),
        CallFailure::DestinationThrottled => "AWS throttled the validation; try again later".to_owned(),
        CallFailure::DestinationError => "AWS failed to take the validation; try again later".to_owned(),
        CallFailure::Timeout => "AWS did not answer in time; try again later".to_owned(),
        CallFailure::ConnectFailed => "AWS could not be reached; try again later".to_owned(),
        other => format!("the validation message could not be sent: {}", other.code().as_str()),
    }
}

/// Makes `new_secret` the subscription's current key, the replaced one
/// valid for `grace_seconds` more.
pub(super) async fn rotate_key(
    app: &App,
    caller: &Caller,
    id: &SubscriptionId,
    new_secret: String,
    grace_seconds: i64,
) -> Result<StoredSubscription, ApiError> {
    let rotation = SecretRotation {
        new_secret,
        grace_ms: grace_seconds * 1000,
        now: app.now_ms(),
    };
    let rotated = app
        .store
        .rotate_secret(&caller.org_id, id, rotation)
        .await
        .map_err(store_problem)?
        .ok_or_else(|| not_found(id.as_str()))?;
    // Never the secret itself: ids and counts only.
    tracing::info!(
        org_id = %caller.org_id,
        subscription_id = %rotated.id,
        grace_seconds,
        scheme = SignatureScheme::of_key(&rotated.secret).as_str(),
        valid_previous = rotated.previous_secrets.len(),
        "signing secret rotated"
    );
    Ok(rotated)
}

/// `GET /webhooksubscription/all`: the store sorts and cuts the page.
pub async fn list_subscriptions(
    app: &App,
    caller: &Caller,
    page: &PageRequest,
) -> Result<Page<Subscription>, ApiError> {
    let now = app.now_ms();
    let page = app
        .store
        .list_subscriptions(&caller.org_id, page, now)
        .await
        .map_err(store_problem)?;
    let prefix = &app.config.external_id_prefix;
    Ok(page.map_content(|s| render_owned(s, now, prefix)))
}

/// `GET /webhooksubscription/{id}`.
pub async fn get_subscription(
    app: &App,
    caller: &Caller,
    id: &SubscriptionId,
) -> Result<Subscription, ApiError> {
    let stored = find(app, caller, id).await?;
    Ok(render(
        &stored,
        app.now_ms(),
        &app.config.external_id_prefix,
    ))
}

/// `DELETE /webhooksubscription/{id}`.
pub async fn delete_subscription(
    app: &App,
    caller: &Caller,
    id: &SubscriptionId,
) -> Result<(), ApiError> {
    if app
        .store
        .delete_subscription(&caller.org_id, id)
        .await
        .map_err(store_problem)?
    {
        tracing::info!(org_id = %caller.org_id, subscription_id = %id, "subscription deleted");
        Ok(())
    } else {
        Err(not_found(id.as_str()))
    }
}

/// `GET /webhooksubscription/destination-identity`: the caller's
/// organization's external id, and the account its roles trust. Derived:
/// no store call.
pub fn destination_identity(app: &App, caller: &Caller) -> DestinationIdentity {
    DestinationIdentity {
        external_id: external_id(&app.config.external_id_prefix, &caller.org_id),
        account_id: app.config.aws_account_id.clone(),
    }
}

/// `GET /webhooksubscription/{id}/secret`.
pub async fn get_subscription_secret(
    app: &App,
    caller: &Caller,
    id: &SubscriptionId,
) -> Result<SigningSecret, ApiError> {
    let stored = find(app, caller, id).await?;
    Ok(SigningSecret::of_key(stored.secret))
}

pub(crate) async fn find(
    app: &App,
    caller: &Caller,
    id: &SubscriptionId,
) -> Result<StoredSubscription, ApiError> {
    app.store
        .get_subscription(&caller.org_id, id)
        .await
        .map_err(store_problem)?
        .ok_or_else(|| not_found(id.as_str()))
}

pub(crate) fn not_found(id: &str) -> ApiError {
    ApiError::not_found(
        ErrorCode::SubscriptionNotFound,
        format!("no subscription '{}'", truncate(id)),
    )
}

/// [`render`], moving the strings out of `s` (a list renders its page this way).
fn render_owned(s: StoredSubscription, now: i64, prefix: &str) -> Subscription {
    let status = visible_status(&s, now);
    let destination = match (Destination::kind_of(&s.uri), s.role_arn) {
        (Some(kind), Some(role_arn)) => Some(DestinationView {
            kind: kind.as_str().to_owned(),
            arn: s.uri.clone(),
            role_arn,
            external_id: external_id(prefix, &s.org_id),
        }),
        _ => None,
    };
    let (org_id, id) = (s.org_id.into_string(), s.id.into_string());
    Subscription {
        disabled_filters: s
            .disabled_filters
            .into_iter()
            .map(|d| DisabledFilter {
                filter: d.filter,
                reason: d.reason,
                message: d.message,
                org_id: org_id.clone(),
                id: id.clone(),
            })
            .collect(),
        expiration_time: iso_millis(s.expires_at),
        expires_in: (s.expires_at - now).max(0),
        status,
        created_date_time: iso_millis(s.created_at),
        last_update_date_time: iso_millis(s.updated_at),
        id,
        uri: s.uri,
        event_filters: s.event_filters,
        org_id,
        health: render_health(&s.health, now),
        ordered: s.ordered,
        rate_limit: s.rate_limit,
        destination,
        payload_filter: s.payload_filter.as_ref().map(PayloadFilter::to_value),
        retry_schedule: s.retry_schedule.as_ref().map(RetrySchedule::texts),
        signature_scheme: match SignatureScheme::of_key(&s.secret) {
            SignatureScheme::V1a => Some(SignatureScheme::V1a.as_str().to_owned()),
            SignatureScheme::V1 => None,
        },
        custom_headers: s.custom_headers.as_ref().map(CustomHeaders::masked),
    }
}

fn render_health(h: &crate::health::Health, now: i64) -> SubscriptionHealth {
    let state = h.state(now);
    let open = state != crate::health::BreakerState::Closed;
    SubscriptionHealth {
        state: state.as_str().to_owned(),
        open_since: h.opened_at.filter(|_| open).map(iso_millis),
        open_until: h.open_until.filter(|_| open).map(iso_millis),
        paused_until: h.paused(now).map(iso_millis),
        consecutive_failures: h.failures,
        last_failure: h.last_failure_at.map(|at| LastFailure {
            timestamp: iso_millis(at),
            code: h.last_failure.map_or("", |f| f.code().as_str()).to_owned(),
            http_status: h.last_failure.and_then(Failure::http_status),
        }),
    }
}

/// The public view of a stored subscription at time `now`.
pub fn render(s: &StoredSubscription, now: i64, prefix: &str) -> Subscription {
    render_owned(s.clone(), now, prefix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::DisabledEntry;

    #[test]
    fn a_listed_subscription_renders_as_a_got_one() {
        let s = StoredSubscription {
            disabled_filters: vec![DisabledEntry {
                filter: "/orgId/org-2/department/d/contact".into(),
                reason: "PERMISSION_DENIED".into(),
                message: "not yours".into(),
            }],
            rate_limit: Some(50),
            ..StoredSubscription::example("id-1", "org-1")
        };
        for now in [0, 5_000] {
            assert_eq!(render_owned(s.clone(), now, "w"), render(&s, now, "w"));
        }
    }
}
