//! One error type for the whole API, rendered in one place as RFC 9457
//! `application/problem+json` with a stable upper-snake-case `code`
//! ([`ErrorCode`]). How a store or queue failure is answered: [`ports`].

use http::StatusCode;
use serde::Serialize;

mod code;
pub mod ports;

pub use code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ErrorCode,
    pub detail: String,
    pub errors: Vec<FieldError>,
    /// Extra response headers (`WWW-Authenticate`, `Allow`, `Retry-After`).
    pub headers: Vec<(http::HeaderName, String)>,
}

/// The body of a problem response.
#[derive(Debug, Serialize)]
pub struct Problem<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub title: &'a str,
    pub status: u16,
    pub detail: &'a str,
    pub code: ErrorCode,
    #[serde(skip_serializing_if = "<[FieldError]>::is_empty")]
    pub errors: &'a [FieldError],
}

pub const PROBLEM_JSON: &str = "application/problem+json";

/// The `Retry-After` (seconds) of a `503` for an unavailable dependency:
/// longer than one bounded attempt at the store, short enough that a
/// producer's retries follow a recovery closely.
pub const UNAVAILABLE_RETRY_AFTER_SECS: u64 = 5;

impl ApiError {
    pub fn new(status: StatusCode, code: ErrorCode, detail: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            detail: detail.into(),
            errors: Vec::new(),
            headers: Vec::new(),
        }
    }

    pub fn with_header(mut self, name: http::HeaderName, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

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

    pub fn field(field: &str, message: impl Into<String>) -> Self {
        Self::validation(vec![FieldError::new(field, message)])
    }

    pub fn malformed_json(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorCode::MalformedJson, detail)
    }

    pub fn not_found(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, detail)
    }

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

    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::InternalError,
            "the service failed to complete the request; it has been logged",
        )
    }

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
