//! Who is calling: API key check, bearer token verification, organization
//! and scopes. API Gateway does the same checks in AWS (usage plan + the
//! `authorizer` function, which uses [`jwt::Verifier`]); `webhooks-local`
//! calls [`Authenticator::authenticate`] in-process.

pub mod cache;
pub mod jwt;
pub mod tenant_key;

use http::{HeaderMap, Method, StatusCode};
use subtle::ConstantTimeEq;

use crate::error::{ApiError, ErrorCode};

pub use crate::config::ScopeConfig;

/// The default scope names (`WEBHOOKS_READ_SCOPES`, `WEBHOOKS_WRITE_SCOPES`
/// configure others).
pub const SCOPE_READ: &str = crate::config::DEFAULT_READ_SCOPE;
/// The default scope of POST and DELETE (`WEBHOOKS_WRITE_SCOPES` configures others).
pub const SCOPE_WRITE: &str = crate::config::DEFAULT_WRITE_SCOPE;

/// The authenticated caller: everything a handler may know about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The organization the caller acts for: every read and write is confined to it.
    pub org_id: crate::ids::OrgId,
    /// The token's `sub`, when it has one (the authorizer's principal; never used to authorize).
    pub subject: Option<String>,
    /// The scopes the token grants (its `scope` or `scp` claim).
    pub scopes: Vec<String>,
}

impl Caller {
    /// A caller of `org_id` holding `scopes`, with no subject.
    pub fn new(org_id: impl Into<crate::ids::OrgId>, scopes: &[&str]) -> Self {
        Caller {
            org_id: org_id.into(),
            subject: None,
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// One of the configured read scopes (default `webhooks/read`) for GET,
    /// one of the write scopes (default `webhooks/write`) for POST and DELETE.
    pub fn require_scope_for(&self, method: &Method, scopes: &ScopeConfig) -> Result<(), ApiError> {
        let needed = if method == Method::GET || method == Method::HEAD {
            &scopes.read
        } else {
            &scopes.write
        };
        if self.scopes.iter().any(|s| needed.contains(s)) {
            return Ok(());
        }
        let names = needed.join(" ");
        let detail = match needed.as_slice() {
            [one] => format!("this operation needs the scope '{one}'"),
            _ => format!(
                "this operation needs one of the scopes '{}'",
                needed.join("', '")
            ),
        };
        Err(
            ApiError::new(StatusCode::FORBIDDEN, ErrorCode::InsufficientScope, detail).with_header(
                http::header::WWW_AUTHENTICATE,
                format!("Bearer error=\"insufficient_scope\", scope=\"{names}\""),
            ),
        )
    }

    /// Whether the caller holds any configured scope at all (the authorizer
    /// denies a token that can do nothing here).
    pub fn has_any_scope_of(&self, scopes: &ScopeConfig) -> bool {
        self.scopes
            .iter()
            .any(|s| scopes.read.contains(s) || scopes.write.contains(s))
    }
}

/// API keys plus token verifier, for callers that are not behind API Gateway.
pub struct Authenticator {
    api_keys: Vec<String>,
    verifier: jwt::Verifier,
}

impl Authenticator {
    /// Checks `x-api-key` against `api_keys`, then the bearer token with `verifier`.
    pub fn new(api_keys: Vec<String>, verifier: jwt::Verifier) -> Self {
        Authenticator { api_keys, verifier }
    }

    /// The bearer token verifier.
    pub fn verifier(&self) -> &jwt::Verifier {
        &self.verifier
    }

    /// The caller of a request: its API key is checked, then its bearer token verified.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, ApiError> {
        self.check_api_key(headers)?;
        let token = bearer_token(headers)?;
        self.verifier.verify(token).await
    }

    fn check_api_key(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let Some(key) = headers.get("x-api-key") else {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                ErrorCode::ApiKeyMissing,
                "the x-api-key header is required",
            ));
        };
        let key = key.as_bytes();
        // Compare against every key so timing does not tell which one is close.
        let known = self
            .api_keys
            .iter()
            .fold(0u8, |acc, k| acc | k.as_bytes().ct_eq(key).unwrap_u8());
        if known == 1 {
            Ok(())
        } else {
            Err(ApiError::new(
                StatusCode::FORBIDDEN,
                ErrorCode::ApiKeyInvalid,
                "the x-api-key header does not hold a known API key",
            ))
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header.
pub fn bearer_token(headers: &HeaderMap) -> Result<&str, ApiError> {
    let value = headers
        .get(http::header::AUTHORIZATION)
        .ok_or_else(|| ApiError::invalid_token("the Authorization header is required"))?;
    let value = value
        .to_str()
        .map_err(|_| ApiError::invalid_token("the Authorization header is not valid text"))?;
    parse_bearer(value)
}

/// The token of an `Authorization` header's value `Bearer <token>`; `401 INVALID_TOKEN` otherwise.
pub fn parse_bearer(value: &str) -> Result<&str, ApiError> {
    let value = value.trim();
    match value.split_once(' ') {
        Some((scheme, token))
            if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() =>
        {
            Ok(token.trim())
        }
        _ => Err(ApiError::invalid_token(
            "the Authorization header must be 'Bearer <token>'",
        )),
    }
}
