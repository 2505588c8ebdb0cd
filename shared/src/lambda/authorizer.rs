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

use aws_lambda_events::apigw::{
    ApiGatewayCustomAuthorizerPolicy, ApiGatewayCustomAuthorizerRequestTypeRequest,
    ApiGatewayCustomAuthorizerResponse,
};
use aws_lambda_events::iam::{IamPolicyEffect, IamPolicyStatement};
use http::StatusCode;
use lambda_runtime::LambdaEvent;
use serde_json::{Map, Value};

use super::StartError;
use crate::auth::{bearer_token, jwt::Verifier};
use crate::config::{Config, Profile};

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

/// Answers one authorizer invocation.
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
            let mut context = Map::new();
            context.insert("orgId".into(), Value::from(caller.org_id.to_string()));
            if let Some(sub) = &caller.subject {
                context.insert("sub".into(), Value::from(sub.clone()));
            }
            context.insert("scope".into(), Value::from(caller.scopes.join(" ")));
            let principal = caller
                .subject
                .unwrap_or_else(|| caller.org_id.into_string());
            Ok(response(
                principal,
                IamPolicyEffect::Allow,
                resource,
                Value::Object(context),
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
