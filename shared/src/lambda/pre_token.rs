//! Cognito's pre-token-generation trigger (event version 2): copies the
//! user's organization (custom attribute `custom:<claim>`) into the access
//! token as the claim the authorizer reads, so a deployed user pool needs
//! no manual step. A user without an organization gets no claim, and their
//! tokens are refused with `ORG_CLAIM_MISSING`.

use aws_lambda_events::event::cognito::{
    CognitoAccessTokenGenerationV2, CognitoEventUserPoolsPreTokenGenV2,
};
use serde_json::Value;

/// Adds `claim` = the user's `custom:<claim>` attribute to the access token.
pub fn add_org_claim(
    mut event: CognitoEventUserPoolsPreTokenGenV2,
    claim: &str,
) -> CognitoEventUserPoolsPreTokenGenV2 {
    let org = event
        .request
        .user_attributes
        .get(&format!("custom:{claim}"))
        .filter(|org| crate::filter::id("organization", org).is_ok())
        .cloned();
    let Some(org) = org else {
        tracing::warn!("the user has no valid organization attribute; no organization claim added");
        return event;
    };
    let mut access = CognitoAccessTokenGenerationV2::default();
    access
        .claims_to_add_or_override
        .insert(claim.to_owned(), Value::String(org));
    let mut details = event
        .response
        .claims_and_scope_override_details
        .take()
        .unwrap_or_default();
    details.access_token_generation = Some(access);
    event.response.claims_and_scope_override_details = Some(details);
    event
}

/// The claim name, as the authorizer reads it (`WEBHOOKS_JWT_ORG_CLAIM`, default `org_id`).
pub fn org_claim_from_env() -> String {
    std::env::var("WEBHOOKS_JWT_ORG_CLAIM")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .unwrap_or_else(|| "org_id".to_owned())
}
