//! The `validation-token` handshake that proves a callback belongs to the
//! client: `GET uri` with a fresh token; success only on 200 with the same
//! token echoed in the response header.

use std::time::Duration;

use super::{classify, CallbackClient, CallbackTarget};
use crate::custom_headers::CustomHeaders;
use crate::error::{ApiError, ErrorCode};
use crate::failure::CallFailure;
use http::StatusCode;
use subtle::ConstantTimeEq;

/// The header of the handshake: sent with a random token, which the callback must echo.
pub const HEADER: &str = "validation-token";

/// Why a callback failed the validation handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandshakeError {
    /// No answer: the step of the call that failed.
    Call(CallFailure),
    /// An answer with this status instead of `200`.
    BadStatus(u16),
    /// A `200` without the `validation-token` header.
    TokenMissing,
    /// A `200` whose `validation-token` is not the token sent.
    TokenMismatch,
}

impl HandshakeError {
    /// The problem `code` of the failure (`BAD_STATUS`, `TOKEN_MISMATCH`, the failing step...).
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Call(f) => f.code(),
            Self::BadStatus(_) => ErrorCode::BadStatus,
            Self::TokenMissing => ErrorCode::TokenMissing,
            Self::TokenMismatch => ErrorCode::TokenMismatch,
        }
    }
}

impl From<HandshakeError> for ApiError {
    fn from(e: HandshakeError) -> Self {
        let detail = match &e {
            HandshakeError::Call(CallFailure::DnsFailed) => {
                "the callback host could not be resolved".to_owned()
            }
            HandshakeError::Call(CallFailure::AddressForbidden) => {
                "the callback address is not allowed (private, loopback, link-local or reserved)"
                    .to_owned()
            }
            HandshakeError::Call(CallFailure::ConnectFailed) => {
                "could not connect to the callback".to_owned()
            }
            HandshakeError::Call(CallFailure::TlsFailed) => {
                "the TLS handshake with the callback failed".to_owned()
            }
            HandshakeError::Call(CallFailure::Timeout) => {
                "the callback did not answer in time".to_owned()
            }
            // A destination's steps: a handshake never gets them.
            HandshakeError::Call(other) => format!("the call failed: {}", other.code().as_str()),
            HandshakeError::BadStatus(s) => {
                format!(
                    "the callback answered the validation request with status {s}, expected 200"
                )
            }
            HandshakeError::TokenMissing => {
                "the callback's response has no validation-token header".to_owned()
            }
            HandshakeError::TokenMismatch => {
                "the callback's validation-token header does not match the value sent".to_owned()
            }
        };
        ApiError::new(StatusCode::BAD_REQUEST, e.code(), detail)
    }
}

impl CallbackClient {
    /// Runs the handshake against a checked target, with the
    /// subscription's own `headers` (a gateway that wants them on every
    /// request lets the handshake through too).
    pub async fn handshake(
        &self,
        target: &CallbackTarget,
        token: &str,
        headers: Option<&CustomHeaders>,
        timeout: Duration,
    ) -> Result<(), HandshakeError> {
        let mut request = self.http().get(target.url().clone());
        for (name, value) in headers.iter().flat_map(|h| h.iter()) {
            request = request.header(name, value);
        }
        let response = request
            .header(HEADER, token)
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| HandshakeError::Call(classify(&e)))?;
        if response.status() != StatusCode::OK {
            return Err(HandshakeError::BadStatus(response.status().as_u16()));
        }
        let echoed = response
            .headers()
            .get(HEADER)
            .ok_or(HandshakeError::TokenMissing)?;
        if echoed.as_bytes().ct_eq(token.as_bytes()).into() {
            Ok(())
        } else {
            Err(HandshakeError::TokenMismatch)
        }
    }
}
