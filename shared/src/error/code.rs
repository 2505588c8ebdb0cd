//! The stable `code` of every problem answer: one enum, so a code cannot be
//! misspelt, and [`ErrorCode::ALL`] lists them for the test that checks
//! each is documented in openapi.yaml.

use serde::Serialize;

/// Declares the codes with their wire names (SCREAMING_SNAKE_CASE, as sent
/// since the first version), `as_str` and `ALL` from one list.
macro_rules! codes {
    ($($(#[$doc:meta])* $variant:ident = $wire:literal,)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
        pub enum ErrorCode {
            $($(#[$doc])* #[serde(rename = $wire)] $variant,)*
        }

        impl ErrorCode {
            /// Every code, in declaration order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The code as it appears in a problem's `code`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $wire,)*
                }
            }
        }
    };
}

codes! {
    /// The request's fields failed validation (`errors` lists them).
    ValidationFailed = "VALIDATION_FAILED",
    MalformedJson = "MALFORMED_JSON",
    /// The callback's address is private, loopback, link-local or reserved.
    AddressForbidden = "ADDRESS_FORBIDDEN",
    // The handshake with the callback failed (also the codes of failed attempts).
    DnsFailed = "DNS_FAILED",
    ConnectFailed = "CONNECT_FAILED",
    TlsFailed = "TLS_FAILED",
    Timeout = "TIMEOUT",
    BadStatus = "BAD_STATUS",
    TokenMissing = "TOKEN_MISSING",
    TokenMismatch = "TOKEN_MISMATCH",
    ApiKeyMissing = "API_KEY_MISSING",
    ApiKeyInvalid = "API_KEY_INVALID",
    InvalidToken = "INVALID_TOKEN",
    OrgClaimMissing = "ORG_CLAIM_MISSING",
    InsufficientScope = "INSUFFICIENT_SCOPE",
    NoEnabledFilters = "NO_ENABLED_FILTERS",
    OrganizationMismatch = "ORGANIZATION_MISMATCH",
    RouteNotFound = "ROUTE_NOT_FOUND",
    SubscriptionNotFound = "SUBSCRIPTION_NOT_FOUND",
    NotificationNotFound = "NOTIFICATION_NOT_FOUND",
    MessageNotFound = "MESSAGE_NOT_FOUND",
    MethodNotAllowed = "METHOD_NOT_ALLOWED",
    SubscriptionLimitReached = "SUBSCRIPTION_LIMIT_REACHED",
    SecretRotationLimitReached = "SECRET_ROTATION_LIMIT_REACHED",
    SubscriptionNotActive = "SUBSCRIPTION_NOT_ACTIVE",
    PayloadTooLarge = "PAYLOAD_TOO_LARGE",
    UnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE",
    InternalError = "INTERNAL_ERROR",
    /// The data store timed out, was throttled, busy or locked (`Retry-After`).
    StoreUnavailable = "STORE_UNAVAILABLE",
    /// The delivery queue likewise (`Retry-After`).
    QueueUnavailable = "QUEUE_UNAVAILABLE",
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Tests and logs compare codes with their wire names.
impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;

    #[test]
    fn wire_names_are_the_serialised_form_and_distinct() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert_eq!(
                serde_json::to_string(code).unwrap(),
                format!("\"{}\"", code.as_str())
            );
            assert!(seen.insert(code.as_str()), "{code} twice");
        }
    }
}
