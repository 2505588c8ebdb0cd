//! Why a call to a callback failed, typed once: the step of the call that
//! failed ([`CallFailure`]), or, for a delivery, the status the callback
//! answered instead of a 2xx ([`Failure`]). What an attempt found, what a
//! verdict gives as its reason, what a subscription's health keeps of its
//! last failure and what an outage signals are all a [`Failure`], shown and
//! stored as it always was: the step's code (`TIMEOUT`, ...) or `status <n>`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::ErrorCode;

/// Why a call to a callback did not produce a response: the step that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFailure {
    /// The host name did not resolve.
    DnsFailed,
    /// The host is or resolves to an address the policy refuses.
    AddressForbidden,
    /// No TCP connection could be opened.
    ConnectFailed,
    /// The TLS handshake failed.
    TlsFailed,
    /// No answer within the timeout.
    Timeout,
    // The steps of a send to an AWS destination (docs/decisions/destinations.md).
    /// STS refused to let the service assume the customer's role.
    RoleNotAssumable,
    /// The destination's queue or bus does not exist.
    DestinationNotFound,
    /// The assumed role may not send to the destination.
    SendDenied,
    /// The destination's service throttled the send.
    DestinationThrottled,
    /// The destination's service failed (a 5xx).
    DestinationError,
}

impl CallFailure {
    /// Every step that can fail.
    pub const ALL: [CallFailure; 10] = [
        Self::DnsFailed,
        Self::AddressForbidden,
        Self::ConnectFailed,
        Self::TlsFailed,
        Self::Timeout,
        Self::RoleNotAssumable,
        Self::DestinationNotFound,
        Self::SendDenied,
        Self::DestinationThrottled,
        Self::DestinationError,
    ];

    /// Whether the failure is the customer's configuration of an AWS
    /// destination (its role, its queue or bus), which disables the
    /// subscription at once, as a `410` does.
    pub fn disables(self) -> bool {
        matches!(
            self,
            Self::RoleNotAssumable | Self::DestinationNotFound | Self::SendDenied
        )
    }

    /// The code of a failed attempt (the history's `code`) and of a
    /// failed handshake (the problem's `code`).
    pub fn code(self) -> ErrorCode {
        match self {
            Self::DnsFailed => ErrorCode::DnsFailed,
            Self::AddressForbidden => ErrorCode::AddressForbidden,
            Self::ConnectFailed => ErrorCode::ConnectFailed,
            Self::TlsFailed => ErrorCode::TlsFailed,
            Self::Timeout => ErrorCode::Timeout,
            Self::RoleNotAssumable => ErrorCode::RoleNotAssumable,
            Self::DestinationNotFound => ErrorCode::DestinationNotFound,
            Self::SendDenied => ErrorCode::SendDenied,
            Self::DestinationThrottled => ErrorCode::DestinationThrottled,
            Self::DestinationError => ErrorCode::DestinationError,
        }
    }
}

/// Why a delivery attempt failed: the callback answered a status other than
/// a 2xx, or the call failed at a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The callback answered this status.
    Status(u16),
    /// No answer: the step of the call that failed.
    Call(CallFailure),
}

impl Failure {
    /// The status the callback answered, if it answered.
    pub fn http_status(self) -> Option<u16> {
        match self {
            Failure::Status(status) => Some(status),
            Failure::Call(_) => None,
        }
    }

    /// `BAD_STATUS` for an answer, else the failing step's code.
    pub fn code(self) -> ErrorCode {
        match self {
            Failure::Status(_) => ErrorCode::BadStatus,
            Failure::Call(step) => step.code(),
        }
    }
}

impl From<CallFailure> for Failure {
    fn from(step: CallFailure) -> Self {
        Failure::Call(step)
    }
}

/// `status <n>`, or the failing step's code: the text logs, dead letters
/// and stored health have always held.
impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Status(status) => write!(f, "status {status}"),
            Failure::Call(step) => f.write_str(step.code().as_str()),
        }
    }
}

/// A text that is not a [`Failure`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a failure reason: {0:?}")]
pub struct UnknownFailure(String);

impl FromStr for Failure {
    type Err = UnknownFailure;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(status) = s.strip_prefix("status ") {
            return status
                .parse()
                .map(Failure::Status)
                .map_err(|_| UnknownFailure(s.to_owned()));
        }
        CallFailure::ALL
            .into_iter()
            .find(|step| step.code().as_str() == s)
            .map(Failure::Call)
            .ok_or_else(|| UnknownFailure(s.to_owned()))
    }
}

/// Stored as its text (a subscription's health keeps its last failure so).
impl Serialize for Failure {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Failure {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_reads_back_from_the_text_it_was_stored_as() {
        let cases = [
            (Failure::Status(503), "status 503"),
            (Failure::Call(CallFailure::Timeout), "TIMEOUT"),
            (Failure::Call(CallFailure::DnsFailed), "DNS_FAILED"),
            (
                Failure::Call(CallFailure::AddressForbidden),
                "ADDRESS_FORBIDDEN",
            ),
            (Failure::Call(CallFailure::ConnectFailed), "CONNECT_FAILED"),
            (Failure::Call(CallFailure::TlsFailed), "TLS_FAILED"),
            (Failure::Call(CallFailure::SendDenied), "SEND_DENIED"),
        ];
        for (failure, text) in cases {
            assert_eq!(failure.to_string(), text);
            assert_eq!(text.parse::<Failure>(), Ok(failure));
            let json = serde_json::to_string(&failure).unwrap();
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(serde_json::from_str::<Failure>(&json).unwrap(), failure);
        }
        for bad in ["", "status", "status x", "BAD_STATUS", "timeout"] {
            assert!(bad.parse::<Failure>().is_err(), "{bad:?}");
        }
        assert_eq!(Failure::Status(500).code(), ErrorCode::BadStatus);
        assert_eq!(Failure::Status(500).http_status(), Some(500));
        assert_eq!(Failure::Call(CallFailure::Timeout).http_status(), None);
    }
}
