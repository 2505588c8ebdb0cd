//! The stable `code` of every problem answer: one enum, so a code cannot be
//! misspelt, and [`ErrorCode::ALL`] lists them for the test that checks
//! each is documented in openapi.yaml.

use serde::Serialize;

/// Declares the codes with their wire names (SCREAMING_SNAKE_CASE, as sent
/// since the first version), `as_str` and `ALL` from one list.
macro_rules! codes {
    ($($(#[$doc:meta])* $variant:ident = $wire:literal,)*) => {
        /// The stable `code` of a problem answer, sent as its SCREAMING_SNAKE_CASE wire name.
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
    /// `400`: the body is not JSON.
    MalformedJson = "MALFORMED_JSON",
    /// The callback's address is private, loopback, link-local or reserved.
    AddressForbidden = "ADDRESS_FORBIDDEN",
    // The handshake with the callback failed (also the codes of failed attempts).
    /// The callback's host name did not resolve.
    DnsFailed = "DNS_FAILED",
    /// No TCP connection to the callback could be opened.
    ConnectFailed = "CONNECT_FAILED",
    /// The TLS handshake with the callback failed (certificate or protocol).
    TlsFailed = "TLS_FAILED",
    /// The callback did not answer within the handshake or delivery timeout.
    Timeout = "TIMEOUT",
    /// The callback answered with a status that does not count as success.
    BadStatus = "BAD_STATUS",
    /// The handshake answer has no `validation-token` header.
    TokenMissing = "TOKEN_MISSING",
    /// The handshake answer's `validation-token` is not the value sent.
    TokenMismatch = "TOKEN_MISMATCH",
    // The validation of an AWS destination failed (also the codes of failed attempts).
    /// The destination's ARN is not of this deployment's partition and region, or its role is
    /// not in the destination's account.
    DestinationForbidden = "DESTINATION_FORBIDDEN",
    /// The customer's role could not be assumed with the organization's external id.
    RoleNotAssumable = "ROLE_NOT_ASSUMABLE",
    /// The destination's queue or event bus does not exist.
    DestinationNotFound = "DESTINATION_NOT_FOUND",
    /// The assumed role may not send to the destination.
    SendDenied = "SEND_DENIED",
    /// The destination's service throttled the send.
    DestinationThrottled = "DESTINATION_THROTTLED",
    /// The destination's service failed.
    DestinationError = "DESTINATION_ERROR",
    /// `400`: the customer's role can be assumed with an external id that is not the
    /// organization's: its trust policy lacks the external-id condition.
    RoleTrustsAnyExternalId = "ROLE_TRUSTS_ANY_EXTERNAL_ID",
    /// `503`: the service cannot reach AWS destinations now, by its own fault (its credentials,
    /// its configuration, its account unknown); its operators are told (`Retry-After`).
    DestinationsUnavailable = "DESTINATIONS_UNAVAILABLE",
    /// `403`: the request has no `x-api-key` header.
    ApiKeyMissing = "API_KEY_MISSING",
    /// `403`: the `x-api-key` is not one of the configured keys.
    ApiKeyInvalid = "API_KEY_INVALID",
    /// `401`: the bearer token is missing, malformed, expired, not yet valid or badly signed.
    InvalidToken = "INVALID_TOKEN",
    /// `403`: a valid token without the organization claim.
    OrgClaimMissing = "ORG_CLAIM_MISSING",
    /// `403`: the token lacks the read scope (GET) or write scope (POST, DELETE).
    InsufficientScope = "INSUFFICIENT_SCOPE",
    /// `403`: every filter of a create belongs to another organization.
    NoEnabledFilters = "NO_ENABLED_FILTERS",
    /// `403`: `POST /events` for another organization than the caller's.
    OrganizationMismatch = "ORGANIZATION_MISMATCH",
    /// `404`: no such path.
    RouteNotFound = "ROUTE_NOT_FOUND",
    /// `404`: no such subscription in the caller's organization.
    SubscriptionNotFound = "SUBSCRIPTION_NOT_FOUND",
    /// `404`: no such notification in the caller's organization, or past the history's retention.
    NotificationNotFound = "NOTIFICATION_NOT_FOUND",
    /// `404`: no such message in the caller's organization, or past its retention.
    MessageNotFound = "MESSAGE_NOT_FOUND",
    /// `404`: no such kind in the event catalogue (`GET /event-types/{kind}`).
    EventTypeNotFound = "EVENT_TYPE_NOT_FOUND",
    /// `405`: the path exists, the method does not (`Allow` lists those that do).
    MethodNotAllowed = "METHOD_NOT_ALLOWED",
    /// `409`: the organization has `WEBHOOKS_MAX_SUBSCRIPTIONS_PER_ORG` subscriptions already.
    SubscriptionLimitReached = "SUBSCRIPTION_LIMIT_REACHED",
    /// `409`: 10 replaced signing secrets are still in their grace period.
    SecretRotationLimitReached = "SECRET_ROTATION_LIMIT_REACHED",
    /// `409`: resend or recover for a `BLACKLISTED` or `EXPIRED` subscription.
    SubscriptionNotActive = "SUBSCRIPTION_NOT_ACTIVE",
    /// `413`: the body is over 64 KiB.
    PayloadTooLarge = "PAYLOAD_TOO_LARGE",
    /// `415`: the body is not `application/json` (or `application/*+json`).
    UnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE",
    /// `500`: an unexpected failure inside the service, logged; the body carries no details.
    InternalError = "INTERNAL_ERROR",
    /// The data store timed out, was throttled, busy or locked (`Retry-After`).
    StoreUnavailable = "STORE_UNAVAILABLE",
    /// The delivery queue likewise (`Retry-After`).
    QueueUnavailable = "QUEUE_UNAVAILABLE",
    /// `503`: the request's store and queue calls took longer in all than
    /// `WEBHOOKS_API_DEADLINE`, each within its own bound (`Retry-After`).
    DeadlineExceeded = "DEADLINE_EXCEEDED",
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
