//! The API Gateway REQUEST authorizer: verifies the bearer token with the
//! same [`Verifier`] `webhooks-local` uses and answers with the caller's
//! organization in the policy context (`orgId`, `sub`, `scope`), which the
//! endpoint functions read from `requestContext.authorizer`.
//!
//! - A valid token: `Allow` on the whole API stage (`<apiId>/<stage>/*/*`),
//!   not just the method called, because API Gateway caches the result per
//!   token and reuses it for every route.
//! - A token that is authentic but carries no organization, or none of the
//!   configured scopes (`WEBHOOKS_READ_SCOPES`, `WEBHOOKS_WRITE_SCOPES`; a
//!   token for another API): `Deny` (API Gateway's 403, `ACCESS_DENIED`).
//!   Which scope each route needs is checked by its function, with the same
//!   configuration (`INSUFFICIENT_SCOPE`).
//! - Anything else (no header, malformed, expired, badly signed, unknown
//!   key): the error `Unauthorized`, which API Gateway turns into its 401.
//!
//! Tokens are never logged; failures log their reason only.
//!
//! The same binary is the HTTP API option's authorizer (`ApiType=http`,
//! payload format 2.0, simple responses), told apart by the event's
//! `version`: [`authorize_http`]. HTTP APIs have no API keys of their own,
//! so it checks `x-api-key` against the stored keys
//! ([`crate::auth::tenant_key`]) and the key's organization against the
//! token's. HTTP APIs cannot shape their own 401/403 bodies, so a refusal
//! is not a deny: the request goes on with a context holding only the
//! problem (`refusal`, `status`, `detail`), which [`super::caller`] turns
//! into the same problem+json answer `webhooks-local` gives, before any
//! handler runs. A context without `orgId` authorizes nothing.

use aws_lambda_events::apigw::{
    ApiGatewayCustomAuthorizerPolicy, ApiGatewayCustomAuthorizerRequestTypeRequest,
    ApiGatewayCustomAuthorizerResponse, ApiGatewayV2CustomAuthorizerSimpleResponse,
    ApiGatewayV2CustomAuthorizerV2Request,
};
use aws_lambda_events::iam::{IamPolicyEffect, IamPolicyStatement};
use http::StatusCode;
use lambda_runtime::LambdaEvent;
use serde_json::{Map, Value};
use tokio::sync::OnceCell;

use super::StartError;
use crate::auth::{bearer_token, jwt::Verifier, tenant_key, Caller};
use crate::aws::dynamodb::{DynamoStore, Tables};
use crate::config::{Config, Profile};
use crate::error::{ApiError, ErrorCode};

/// The only error message API Gateway maps to a 401.
pub const UNAUTHORIZED: &str = "Unauthorized";

/// The error a Lambda handler returns to the runtime.
pub type Error = lambda_runtime::Error;

/// The verifier from `WEBHOOKS_JWT_*`, built once at init; fails when no
/// way of verifying tokens is configured.
pub fn verifier_from_env() -> Result<Verifier, StartError> {
    let config = Config::from_env(Profile::Lambda)?;
    let verifier = Verifier::new(&config.jwt).with_jwks_min_refresh(config.jwks_min_refresh);
    if !verifier.is_configured() {
        return Err(
            "WEBHOOKS_JWT_HS256_SECRET or WEBHOOKS_JWT_JWKS_URL: one of them must be set".into(),
        );
    }
    Ok(verifier)
}

/// What the authorizer needs: the token verifier, built at init, and, for
/// the HTTP API's events, the store of API keys, built on the first such
/// event (a REST API's authorizer never builds the SDK).
pub struct Authorizer {
    /// Checks the bearer token (HS256 secret or the provider's JWKS).
    pub verifier: Verifier,
    /// The hashed API keys (`APIKEY#` items) the HTTP API's events are checked against.
    keys: OnceCell<DynamoStore>,
    /// What [`Authorizer::keys`] is built from, when it is not given.
    keys_start: Option<(Config, Tables)>,
}

impl Authorizer {
    /// An authorizer checking the HTTP API's keys against `keys`.
    pub fn with_keys(verifier: Verifier, keys: DynamoStore) -> Authorizer {
        Authorizer {
            verifier,
            keys: OnceCell::from(keys),
            keys_start: None,
        }
    }

    /// The store of API keys, built once.
    async fn keys(&self) -> &DynamoStore {
        self.keys
            .get_or_init(|| async {
                let (config, tables) = self
                    .keys_start
                    .as_ref()
                    .expect("an authorizer without keys has what builds them");
                let sdk =
                    crate::aws::sdk_config_with(&config.aws_calls.api, crate::aws::Roots::Amazon)
                        .await;
                DynamoStore::configured(&sdk, tables.clone(), config)
            })
            .await
    }
}

/// [`verifier_from_env`] and the tables of `WEBHOOKS_SUBSCRIPTIONS_TABLE`
/// (checked now, their store built on first use).
pub fn authorizer_from_env() -> Result<Authorizer, StartError> {
    let verifier = verifier_from_env()?;
    let config = Config::from_env(Profile::Lambda)?;
    let tables = Tables::required(&config)?;
    Ok(Authorizer {
        verifier,
        keys: OnceCell::new(),
        keys_start: Some((config, tables)),
    })
}

/// One invocation of either API's authorizer: an HTTP API event (payload
/// format `2.0`) goes to [`authorize_http`], any other to [`authorize`].
pub async fn handle(authorizer: &Authorizer, event: LambdaEvent<Value>) -> Result<Value, Error> {
    let (payload, context) = event.into_parts();
    if payload.get("version").and_then(Value::as_str) == Some("2.0") {
        let request = serde_json::from_value(payload)?;
        let response = authorize_http(
            &authorizer.verifier,
            authorizer.keys().await,
            LambdaEvent::new(request, context),
        )
        .await?;
        Ok(serde_json::to_value(response)?)
    } else {
        let request = serde_json::from_value(payload)?;
        let response = authorize(&authorizer.verifier, LambdaEvent::new(request, context)).await?;
        Ok(serde_json::to_value(response)?)
    }
}

/// Answers one REST API authorizer invocation.
pub async fn authorize(
    verifier: &Verifier,
    event: LambdaEvent<ApiGatewayCustomAuthorizerRequestTypeRequest>,
) -> Result<ApiGatewayCustomAuthorizerResponse, Error> {
    let request = event.payload;
    let Some(resource) = request.method_arn.as_deref().and_then(stage_resource) else {
        tracing::warn!(method_arn = ?request.method_arn, "authorizer event without a usable methodArn");
        return Err(UNAUTHORIZED.into());
    };
    let token = bearer_token(&request.headers)
        .or_else(|_| bearer_token(&request.multi_value_headers))
        .map_err(|e| {
            tracing::info!(reason = %e.detail, "request refused");
            Error::from(UNAUTHORIZED)
        })?;
    match verifier.verify(token).await {
        Ok(caller) if !caller.has_any_scope_of(verifier.scopes()) => {
            tracing::info!(org_id = %caller.org_id, "request denied: the token has none of the configured scopes");
            Ok(response(
                "unknown".into(),
                IamPolicyEffect::Deny,
                resource,
                Value::Object(Map::new()),
            ))
        }
        Ok(caller) => {
            tracing::info!(org_id = %caller.org_id, "request allowed");
            let context = allowed_context(&caller);
            let principal = caller
                .subject
                .unwrap_or_else(|| caller.org_id.into_string());
            Ok(response(
                principal,
                IamPolicyEffect::Allow,
                resource,
                context,
            ))
        }
        Err(e) if e.status == StatusCode::FORBIDDEN => {
            tracing::info!(code = e.code.as_str(), reason = %e.detail, "request denied");
            Ok(response(
                "unknown".into(),
                IamPolicyEffect::Deny,
                resource,
                Value::Object(Map::new()),
            ))
        }
        Err(e) => {
            tracing::info!(code = e.code.as_str(), reason = %e.detail, "request refused");
            Err(UNAUTHORIZED.into())
        }
    }
}

/// Answers one HTTP API authorizer invocation (payload format 2.0, simple
/// responses): the API key, then the token, then that both belong to one
/// organization, in the order `webhooks-local` checks them. Every answer is
/// `isAuthorized: true`; a refusal carries only its problem (module docs).
/// Fails (API Gateway's `500`, not cached) only when the key store does not
/// answer.
pub async fn authorize_http(
    verifier: &Verifier,
    keys: &DynamoStore,
    event: LambdaEvent<ApiGatewayV2CustomAuthorizerV2Request>,
) -> Result<ApiGatewayV2CustomAuthorizerSimpleResponse, Error> {
    let headers = &event.payload.headers;
    let context = match check_key_and_token(verifier, keys, headers).await? {
        Ok(caller) => {
            tracing::info!(org_id = %caller.org_id, "request allowed");
            allowed_context(&caller)
        }
        Err(refusal) => {
            tracing::info!(code = refusal.code.as_str(), reason = %refusal.detail, "request refused");
            let mut context = Map::new();
            context.insert("refusal".into(), Value::from(refusal.code.as_str()));
            context.insert("status".into(), Value::from(refusal.status.as_u16()));
            context.insert("detail".into(), Value::from(refusal.detail));
            Value::Object(context)
        }
    };
    let mut response = ApiGatewayV2CustomAuthorizerSimpleResponse::<Value>::default();
    response.is_authorized = true;
    response.context = context;
    Ok(response)
}

/// The caller, or the problem to answer; `Err` only when the store failed.
async fn check_key_and_token(
    verifier: &Verifier,
    keys: &DynamoStore,
    headers: &http::HeaderMap,
) -> Result<Result<Caller, ApiError>, Error> {
    let forbidden = |code, detail: &str| ApiError::new(StatusCode::FORBIDDEN, code, detail);
    // API Gateway itself answers 401 when a header of the cache's identity
    // source is missing; without a cache the authorizer sees every request.
    let Some(presented) = headers.get("x-api-key").and_then(|v| v.to_str().ok()) else {
        return Ok(Err(forbidden(
            ErrorCode::ApiKeyMissing,
            "the x-api-key header is required",
        )));
    };
    let invalid = || {
        forbidden(
            ErrorCode::ApiKeyInvalid,
            "the x-api-key header does not hold a known API key",
        )
    };
    let Some(key_id) = tenant_key::key_id(presented) else {
        return Ok(Err(invalid()));
    };
    let stored = keys.api_key(key_id).await.map_err(|e| {
        tracing::error!(error = %e, "the API key store failed");
        Error::from("the API key store failed")
    })?;
    let Some(stored) = stored.filter(|k| tenant_key::matches(&k.digest, presented)) else {
        return Ok(Err(invalid()));
    };
    if stored.revoked_at.is_some() {
        return Ok(Err(forbidden(
            ErrorCode::ApiKeyInvalid,
            "the API key has been revoked",
        )));
    }
    let token = match bearer_token(headers) {
        Ok(token) => token,
        Err(e) => return Ok(Err(e)),
    };
    let caller = match verifier.verify(token).await {
        Ok(caller) => caller,
        Err(e) => return Ok(Err(e)),
    };
    if !caller.has_any_scope_of(verifier.scopes()) {
        let needed = verifier.scopes().all().join(" ");
        return Ok(Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::InsufficientScope,
            format!("the token carries none of the scopes '{needed}'"),
        )));
    }
    if caller.org_id != stored.org_id {
        return Ok(Err(forbidden(
            ErrorCode::OrganizationMismatch,
            "the API key belongs to another organization than the token",
        )));
    }
    Ok(Ok(caller))
}

/// `orgId`, `sub`, `scope`: what the functions read as the caller.
fn allowed_context(caller: &Caller) -> Value {
    let mut context = Map::new();
    context.insert("orgId".into(), Value::from(caller.org_id.to_string()));
    if let Some(sub) = &caller.subject {
        context.insert("sub".into(), Value::from(sub.clone()));
    }
    context.insert("scope".into(), Value::from(caller.scopes.join(" ")));
    Value::Object(context)
}

/// `arn:aws:execute-api:<region>:<account>:<apiId>/<stage>/<METHOD>/<path>`
/// → `arn:aws:execute-api:<region>:<account>:<apiId>/<stage>/*/*`.
pub fn stage_resource(method_arn: &str) -> Option<String> {
    let mut parts = method_arn.splitn(3, '/');
    let (api, stage) = (parts.next()?, parts.next()?);
    let valid = api.starts_with("arn:")
        && api.split(':').count() == 6
        && !stage.is_empty()
        && !stage.contains('*');
    valid.then(|| format!("{api}/{stage}/*/*"))
}

fn response(
    principal: String,
    effect: IamPolicyEffect,
    resource: String,
    context: Value,
) -> ApiGatewayCustomAuthorizerResponse {
    let mut statement = IamPolicyStatement::default();
    statement.action = vec!["execute-api:Invoke".into()];
    statement.effect = effect;
    statement.resource = vec![resource];
    let mut policy = ApiGatewayCustomAuthorizerPolicy::default();
    policy.version = Some("2012-10-17".into());
    policy.statement = vec![statement];
    let mut response = ApiGatewayCustomAuthorizerResponse::<Value>::default();
    response.principal_id = Some(principal);
    response.policy_document = policy;
    response.context = context;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_covers_the_whole_stage() {
        assert_eq!(
            stage_resource(
                "arn:aws:execute-api:us-east-1:123456789012:abcdef123/prod/GET/webhooksubscription/all"
            )
            .as_deref(),
            Some("arn:aws:execute-api:us-east-1:123456789012:abcdef123/prod/*/*")
        );
        for bad in [
            "",
            "arn:aws:execute-api",
            "nonsense/prod/GET",
            "arn:a:b:c:d:e/",
        ] {
            assert_eq!(stage_resource(bad), None, "{bad}");
        }
    }
}
