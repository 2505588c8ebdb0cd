//! One error type for the whole API, rendered in one place as RFC 9457
//! `application/problem+json` with a stable upper-snake-case `code`
//! ([`ErrorCode`]). It knows no port: how a store or queue failure is
//! answered is the API's ([`crate::api::problem`]).

use http::StatusCode;
use serde::Serialize;

mod code;

pub use code::ErrorCode;

/// One failed field of a `VALIDATION_FAILED` problem, an item of its `errors`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// The field or query parameter, e.g. `uri` or `eventFilters[0].eventType`.
    pub field: String,
    /// What is wrong with it, for a person to read.
    pub message: String,
}

impl FieldError {
    /// The failure of `field`, explained by `message`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// An answer other than success: status, stable code and detail, rendered as problem+json.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status of the answer.
    pub status: StatusCode,
    /// The problem's `code`, what clients branch on.
    pub code: ErrorCode,
    /// The problem's `detail`: what went wrong, for a person (never a secret or internal cause).
    pub detail: String,
    /// The problem's `errors`: each failed field (empty unless `VALIDATION_FAILED`).
    pub errors: Vec<FieldError>,
    /// Extra response headers (`WWW-Authenticate`, `Allow`, `Retry-After`).
    pub headers: Vec<(http::HeaderName, String)>,
}

/// The body of a problem response.
#[derive(Debug, Serialize)]
pub struct Problem<'a> {
    /// `type`: always `about:blank` (the `code` says what happened).
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `title`: the status's reason phrase, e.g. `Not Found`.
    pub title: &'a str,
    /// `status`: the HTTP status again, as RFC 9457 has it.
    pub status: u16,
    /// `detail`: what went wrong, for a person.
    pub detail: &'a str,
    /// `code`: the stable code.
    pub code: ErrorCode,
    /// `errors`: the failed fields; left out when there are none.
    #[serde(skip_serializing_if = "<[FieldError]>::is_empty")]
    pub errors: &'a [FieldError],
}

/// The media type of every error answer (RFC 9457).
pub const PROBLEM_JSON: &str = "application/problem+json";

/// The `Retry-After` (seconds) of a `503` for an unavailable dependency:
/// longer than one bounded attempt at the store, short enough that a
/// producer's retries follow a recovery closely.
pub const UNAVAILABLE_RETRY_AFTER_SECS: u64 = 5;

impl ApiError {
    /// A problem with `status`, `code` and `detail`, no field errors, no extra header.
    pub fn new(status: StatusCode, code: ErrorCode, detail: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            detail: detail.into(),
            errors: Vec::new(),
            headers: Vec::new(),
        }
    }

    /// The same problem with one more response header.
    pub fn with_header(mut self, name: http::HeaderName, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// `400 VALIDATION_FAILED` listing `errors`; the detail joins them.
    pub fn validation(errors: Vec<FieldError>) -> Self {
        let detail = errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect::<Vec<_>>()
            .join("; ");
        ApiError {
            errors,
            ..ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::ValidationFailed, detail)
        }
    }

    /// `400 VALIDATION_FAILED` for one field.
    pub fn field(field: &str, message: impl Into<String>) -> Self {
        Self::validation(vec![FieldError::new(field, message)])
    }

    /// `400 MALFORMED_JSON`: the body is not JSON; `detail` says where it broke.
    pub fn malformed_json(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorCode::MalformedJson, detail)
    }

    /// `404` with `code` (which resource was not found).
    pub fn not_found(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, detail)
    }

    /// `401 INVALID_TOKEN` with `WWW-Authenticate: Bearer error="invalid_token"`.
    pub fn invalid_token(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, ErrorCode::InvalidToken, detail).with_header(
            http::header::WWW_AUTHENTICATE,
            "Bearer error=\"invalid_token\"",
        )
    }

    /// `503` with `Retry-After`: a dependency (`STORE_UNAVAILABLE`,
    /// `QUEUE_UNAVAILABLE`) timed out, was throttled or is down; the same
    /// request may succeed later. Ingestion is idempotent per event id, so a
    /// producer can send the same event again.
    pub fn unavailable(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, code, detail).with_header(
            http::header::RETRY_AFTER,
            UNAVAILABLE_RETRY_AFTER_SECS.to_string(),
        )
    }

    /// `500 INTERNAL_ERROR`: the cause is logged by the caller, never sent.
    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::InternalError,
            "the service failed to complete the request; it has been logged",
        )
    }

    /// The body to send, borrowing from this error.
    pub fn problem(&self) -> Problem<'_> {
        Problem {
            kind: "about:blank",
            title: self.status.canonical_reason().unwrap_or("Error"),
            status: self.status.as_u16(),
            detail: &self.detail,
            code: self.code,
            errors: &self.errors,
        }
    }

    /// The problem+json body, serialized.
    pub fn to_body(&self) -> Vec<u8> {
        serde_json::to_vec(&self.problem()).expect("problem serialises")
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status.as_u16(), self.code, self.detail)
    }
}

impl std::error::Error for ApiError {}
