//! A subscription request (`POST /webhooksubscription`) parsed and
//! checked: every field's error named at once, before anything is called
//! or stored ([`validate`]).

use std::collections::HashMap;

use http::StatusCode;

use crate::app::App;
use crate::auth::Caller;
use crate::custom_headers::{self, CustomHeaders};
use crate::destinations::{Destination, DestinationKind, DestinationProblem};
use crate::error::{ApiError, ErrorCode, FieldError};
use crate::filter::EventFilter;
use crate::model::{DestinationRequest, SubscriptionRequest};
use crate::payload_filter::PayloadFilter;
use crate::retry_schedule::RetrySchedule;
use crate::signature::SignatureScheme;
use crate::store::DisabledEntry;

/// At most this many event filters in one subscription request.
pub const MAX_FILTERS: usize = 20;

pub(super) fn unavailable_destinations() -> ApiError {
    ApiError::field(
        "destination",
        "AWS destinations are not available on this deployment (no AWS SDK in this runtime, or no AWS region in its environment)",
    )
}

/// What a subscription delivers to.
pub(super) enum Target {
    /// An HTTPS callback: `uri`.
    Callback,
    /// An AWS destination, whose ARN is the `uri`.
    Destination(Destination),
}

pub(super) struct Valid {
    pub(super) uri: String,
    pub(super) target: Target,
    pub(super) enabled: Vec<String>,
    pub(super) disabled: Vec<DisabledEntry>,
    pub(super) expires_at: i64,
    pub(super) ordered: Option<bool>,
    pub(super) rate_limit: Option<Option<u32>>,
    pub(super) payload_filter: Option<Option<PayloadFilter>>,
    pub(super) retry_schedule: Option<Option<RetrySchedule>>,
    pub(super) signature_scheme: Option<SignatureScheme>,
    pub(super) custom_headers: Option<Option<CustomHeaders>>,
}

pub(super) fn validate(
    app: &App,
    caller: &Caller,
    request: SubscriptionRequest,
    now: i64,
) -> Result<Valid, ApiError> {
    let mut errors = Vec::new();
    let uri = request
        .uri
        .as_deref()
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_owned);
    let (uri, target) = match request.destination {
        None => match uri {
            Some(uri) => (uri, Target::Callback),
            None => {
                errors.push(FieldError::new("uri", "is required"));
                (String::new(), Target::Callback)
            }
        },
        Some(d) => match destination(app, d, uri.as_deref(), &mut errors)? {
            Some(d) => (d.arn.clone(), Target::Destination(d)),
            None => (String::new(), Target::Callback),
        },
    };
    let mut enabled = Vec::new();
    let mut disabled = Vec::new();
    match request.event_filters {
        None => errors.push(FieldError::new("eventFilters", "is required")),
        Some(f) if f.is_empty() => errors.push(FieldError::new(
            "eventFilters",
            "must hold at least one filter",
        )),
        Some(f) if f.len() > MAX_FILTERS => errors.push(FieldError::new(
            "eventFilters",
            format!("must hold at most {MAX_FILTERS} filters"),
        )),
        Some(filters) => {
            let mut seen: HashMap<String, usize> = HashMap::new();
            for (i, raw) in filters.iter().enumerate() {
                let field = format!("eventFilters[{i}]");
                let filter = match EventFilter::parse(raw) {
                    Ok(f) => f,
                    Err(e) => {
                        errors.push(FieldError::new(
                            field,
                            format!("'{}' is not a valid filter: {e}", truncate(raw)),
                        ));
                        continue;
                    }
                };
                let canonical = filter.to_string();
                // Operational filters are indexed without their `?type=`: one per organization.
                if let Some(j) = seen.insert(crate::filter::index_key(&canonical).to_owned(), i) {
                    let message = if matches!(filter.topic, crate::filter::Topic::Subscription(_)) {
                        format!("repeats the organization of eventFilters[{j}]: list every type in one subscription filter")
                    } else {
                        format!("repeats eventFilters[{j}]")
                    };
                    errors.push(FieldError::new(field, message));
                } else if filter.organization_id == caller.org_id {
                    enabled.push(canonical);
                } else {
                    disabled.push(DisabledEntry {
                        message: format!(
                            "organization {} is not the caller's organization",
                            filter.organization_id
                        ),
                        filter: canonical,
                        reason: "PERMISSION_DENIED".to_owned(),
                    });
                }
            }
        }
    }
    let max_expiry = now.saturating_add(app.config.max_lifetime.as_millis() as i64);
    let expires_at = match request.expires_date_in_millies {
        None | Some(0) => now + app.config.default_lifetime.as_millis() as i64,
        Some(t) if t <= now => {
            errors.push(FieldError::new(
                "expiresDateInMillies",
                "is in the past: give an absolute time in epoch milliseconds, or 0 for the default lifetime",
            ));
            0
        }
        Some(t) => t.min(max_expiry),
    };
    if request.ordered == Some(true) && !app.ordered_delivery {
        errors.push(FieldError::new(
            "ordered",
            "ordered delivery is not available on this deployment: its delivery queue keeps \
             no order (on AWS, WEBHOOKS_ORDERED_QUEUE_URL names none; docs/api.md)",
        ));
    }
    let rate_limit = rate_limit(request.rate_limit, &mut errors);
    let payload_filter = payload_filter(request.payload_filter, &mut errors);
    let retry_schedule = retry_schedule(request.retry_schedule, &mut errors);
    let signature_scheme = signature_scheme(request.signature_scheme.as_deref(), &mut errors);
    let custom_headers = custom_headers(request.custom_headers, &target, &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    Ok(Valid {
        uri,
        target,
        enabled,
        disabled,
        expires_at,
        ordered: request.ordered,
        rate_limit,
        payload_filter,
        retry_schedule,
        signature_scheme,
        custom_headers,
    })
}

/// `signatureScheme` (of a subscription or a rotation): `v1` or `v1a`, or
/// absent; anything else is a field error.
pub(super) fn signature_scheme(
    value: Option<&str>,
    errors: &mut Vec<FieldError>,
) -> Option<SignatureScheme> {
    let name = value?;
    let scheme = SignatureScheme::parse(name);
    if scheme.is_none() {
        errors.push(FieldError::new(
            "signatureScheme",
            "must be \"v1\" (HMAC-SHA256) or \"v1a\" (ed25519)",
        ));
    }
    scheme
}

/// `customHeaders`: absent keeps the stored ones (`None`), `null` or `{}`
/// removes them, an object within the limits replaces them; a callback's
/// only (an AWS destination has no HTTP request to carry them).
fn custom_headers(
    value: Option<Option<serde_json::Value>>,
    target: &Target,
    errors: &mut Vec<FieldError>,
) -> Option<Option<CustomHeaders>> {
    let value = match value? {
        None => return Some(None),
        Some(value) => value,
    };
    if matches!(target, Target::Destination(_)) && value != serde_json::json!({}) {
        errors.push(FieldError::new(
            custom_headers::FIELD,
            "custom headers are sent to HTTPS callbacks only, not to AWS destinations",
        ));
        return None;
    }
    match CustomHeaders::parse(&value) {
        Ok(headers) => Some(headers),
        Err(mut e) => {
            errors.append(&mut e);
            None
        }
    }
}

/// `payloadFilter`: absent keeps the stored one (`None`), `null` removes
/// it, a filter within the limits sets it; anything else is a field error.
fn payload_filter(
    value: Option<Option<serde_json::Value>>,
    errors: &mut Vec<FieldError>,
) -> Option<Option<PayloadFilter>> {
    match value? {
        None => Some(None),
        Some(value) => match PayloadFilter::parse(&value) {
            Ok(filter) => Some(Some(filter)),
            Err(e) => {
                errors.push(FieldError::new("payloadFilter", e.to_string()));
                None
            }
        },
    }
}

/// `retrySchedule`: absent keeps the stored one (`None`), `null` removes it
/// (the deployment's again), a list within the limits sets it; anything
/// else is a field error, on the wait at fault (`retrySchedule[2]`) or on
/// the list.
fn retry_schedule(
    value: Option<Option<serde_json::Value>>,
    errors: &mut Vec<FieldError>,
) -> Option<Option<RetrySchedule>> {
    match value? {
        None => Some(None),
        Some(value) => match RetrySchedule::parse(&value) {
            Ok(schedule) => Some(Some(schedule)),
            Err(e) => {
                let field = match e.item {
                    Some(i) => format!("retrySchedule[{i}]"),
                    None => "retrySchedule".to_owned(),
                };
                errors.push(FieldError::new(field, e.message));
                None
            }
        },
    }
}

/// `destination`: its fields checked (field errors in `errors`), then its
/// ARNs against the service's partition and region (`DESTINATION_FORBIDDEN`).
/// `uri`, when given too, must be the destination's ARN.
fn destination(
    app: &App,
    d: DestinationRequest,
    uri: Option<&str>,
    errors: &mut Vec<FieldError>,
) -> Result<Option<Destination>, ApiError> {
    let kind = match d.kind.as_deref() {
        None => {
            errors.push(FieldError::new("destination.type", "is required"));
            None
        }
        Some(k) => match DestinationKind::parse(k) {
            Some(kind) => Some(kind),
            None => {
                errors.push(FieldError::new(
                    "destination.type",
                    "must be sqs or eventbridge",
                ));
                None
            }
        },
    };
    let mut required = |field: &str, value: Option<String>| match value {
        Some(v) if !v.trim().is_empty() => Some(v.trim().to_owned()),
        _ => {
            errors.push(FieldError::new(field, "is required"));
            None
        }
    };
    let arn = required("destination.arn", d.arn);
    let role = required("destination.roleArn", d.role_arn);
    let (Some(kind), Some(arn), Some(role)) = (kind, arn, role) else {
        return Ok(None);
    };
    let Some(sender) = &app.destinations else {
        return Err(unavailable_destinations());
    };
    let (partition, region) = sender.partition_and_region();
    match Destination::parse(kind, &arn, &role, partition, region) {
        Ok(d) => {
            if uri.is_some_and(|u| u != d.arn) {
                errors.push(FieldError::new(
                    "uri",
                    "must be absent, or the destination's arn, when destination is given",
                ));
            }
            Ok(Some(d))
        }
        Err(DestinationProblem::Invalid { field, message }) => {
            errors.push(FieldError::new(field, message));
            Ok(None)
        }
        Err(DestinationProblem::Forbidden(message)) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::DestinationForbidden,
            message,
        )),
    }
}

/// `rateLimit`: absent (or `null`) keeps the stored one (`None`), `0`
/// removes it (as `expiresDateInMillies: 0` asks for the default), an
/// integer from 1 to 1000 sets it; anything else is a field error.
fn rate_limit(
    value: Option<serde_json::Value>,
    errors: &mut Vec<FieldError>,
) -> Option<Option<u32>> {
    use crate::health::rate::{MAX_RATE_LIMIT, MIN_RATE_LIMIT};
    let value = value?;
    // An integral number (50 or 50.0), as JSON Schema's integer.
    let whole = value.as_i64().or_else(|| {
        value
            .as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 1e15)
            .map(|f| f as i64)
    });
    match whole.and_then(|v| u32::try_from(v).ok()) {
        Some(0) => Some(None),
        Some(limit) if (MIN_RATE_LIMIT..=MAX_RATE_LIMIT).contains(&limit) => Some(Some(limit)),
        _ => {
            errors.push(FieldError::new(
                "rateLimit",
                format!("must be an integer from {MIN_RATE_LIMIT} to {MAX_RATE_LIMIT} (notifications per second), or 0 for no limit"),
            ));
            None
        }
    }
}

pub(super) fn truncate(s: &str) -> String {
    if s.chars().count() > 100 {
        format!("{}…", s.chars().take(100).collect::<String>())
    } else {
        s.to_owned()
    }
}
