//! Cognito's pre-token-generation trigger (event version 3, which is
//! version 2 plus machine-to-machine tokens):
//!
//! - A user's token (`TokenGeneration_HostedAuth`, `_Authentication`, …):
//!   copies the user's organization (custom attribute `custom:<claim>`) into
//!   the access token as the claim the authorizer reads, so a deployed user
//!   pool needs no manual step. A user without an organization gets no
//!   claim, and their tokens are refused with `ORG_CLAIM_MISSING`.
//! - A client-credentials token (`TokenGeneration_ClientCredentials`, only
//!   sent with trigger version `V3_0`): the calling app client
//!   (`callerContext.clientId`) is looked up in [`MachineClients`]
//!   (`WEBHOOKS_MACHINE_CLIENTS`, `clientId=org,…`) and its organization goes
//!   into the access token. An unlisted client is an error, so Cognito
//!   issues no token at all.

use std::collections::HashMap;

use aws_lambda_events::event::cognito::{
    CognitoAccessTokenGenerationV2, CognitoEventUserPoolsPreTokenGenV2,
};
use serde_json::{json, Value};

/// The trigger source of a machine-to-machine (client-credentials) token.
pub const CLIENT_CREDENTIALS: &str = "TokenGeneration_ClientCredentials";

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

/// The app clients allowed to get client-credentials tokens, each with the
/// organization its tokens act for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MachineClients(HashMap<String, String>);

impl MachineClients {
    /// Parses `clientId=org[,clientId=org…]` (spaces around items ignored;
    /// empty means no machine client). A client listed twice, an empty
    /// client id or an invalid organization id is an error.
    pub fn parse(value: &str) -> Result<Self, String> {
        let mut clients = HashMap::new();
        for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let Some((client, org)) = item.split_once('=') else {
                return Err(format!("'{item}' is not clientId=org"));
            };
            let (client, org) = (client.trim(), org.trim());
            let client_ok = !client.is_empty()
                && client.len() <= 128
                && client.chars().all(|c| c.is_ascii_alphanumeric());
            if !client_ok {
                return Err(format!(
                    "'{client}' is not an app client id (letters and digits)"
                ));
            }
            crate::filter::id("organization", org)
                .map_err(|_| format!("'{org}' (client {client}) is not a valid organization id"))?;
            if clients.insert(client.to_owned(), org.to_owned()).is_some() {
                return Err(format!("the client '{client}' is listed twice"));
            }
        }
        Ok(MachineClients(clients))
    }

    /// From `WEBHOOKS_MACHINE_CLIENTS` (unset or empty: none).
    pub fn from_env() -> Result<Self, crate::config::ConfigError> {
        let var = "WEBHOOKS_MACHINE_CLIENTS";
        let value = std::env::var(var).unwrap_or_default();
        Self::parse(&value).map_err(|message| crate::config::ConfigError { var, message })
    }

    /// The organization of an app client, if it is listed.
    pub fn org_of(&self, client_id: &str) -> Option<&str> {
        self.0.get(client_id).map(String::as_str)
    }

    /// No app client is listed (`WEBHOOKS_MACHINE_CLIENTS` unset or empty).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Answers one trigger event, user or machine token. Errors make Cognito
/// refuse the token.
pub fn handle(event: Value, claim: &str, machines: &MachineClients) -> Result<Value, String> {
    if event.get("triggerSource").and_then(Value::as_str) == Some(CLIENT_CREDENTIALS) {
        return add_machine_org_claim(event, claim, machines);
    }
    let event: CognitoEventUserPoolsPreTokenGenV2 = serde_json::from_value(event)
        .map_err(|e| format!("not a pre-token-generation event: {e}"))?;
    serde_json::to_value(add_org_claim(event, claim)).map_err(|e| e.to_string())
}

/// A client-credentials event: `claim` = the calling client's organization,
/// or an error for a client not in `machines`.
pub fn add_machine_org_claim(
    mut event: Value,
    claim: &str,
    machines: &MachineClients,
) -> Result<Value, String> {
    let client = event
        .pointer("/callerContext/clientId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(org) = machines.org_of(client) else {
        tracing::warn!(client_id = %client, "client-credentials token refused: the app client has no organization (WEBHOOKS_MACHINE_CLIENTS)");
        return Err(format!(
            "the app client '{client}' has no organization: no token"
        ));
    };
    tracing::info!(client_id = %client, org_id = %org, "organization claim added to a client-credentials token");
    let Some(object) = event.as_object_mut() else {
        return Err("the event is not a JSON object".into());
    };
    object.insert(
        "response".into(),
        json!({"claimsAndScopeOverrideDetails": {
            "accessTokenGeneration": {"claimsToAddOrOverride": {claim: org}}
        }}),
    );
    Ok(event)
}

/// The claim name, as the authorizer reads it (`WEBHOOKS_JWT_ORG_CLAIM`, default `org_id`).
pub fn org_claim_from_env() -> String {
    std::env::var("WEBHOOKS_JWT_ORG_CLAIM")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .unwrap_or_else(|| "org_id".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_client_to_organization_map() {
        let m = MachineClients::parse(" 4abc123=org-1, 5def456 = org-2 ,").unwrap();
        assert_eq!(m.org_of("4abc123"), Some("org-1"));
        assert_eq!(m.org_of("5def456"), Some("org-2"));
        assert_eq!(m.org_of("other"), None);
        assert!(MachineClients::parse("").unwrap().is_empty());
        assert!(MachineClients::parse(" , ").unwrap().is_empty());
    }

    #[test]
    fn refuses_a_malformed_map() {
        for bad in [
            "4abc123",
            "=org-1",
            "4abc123=",
            "4abc123=bad org/x",
            "4abc 123=org-1",
            "4abc123=org-1,4abc123=org-2",
        ] {
            assert!(MachineClients::parse(bad).is_err(), "{bad}");
        }
    }
}
