//! The Cognito pre-token-generation sample event, fed to the handler the
//! `pre-token-generation` function calls.

use aws_lambda_events::event::cognito::CognitoEventUserPoolsPreTokenGenV2;
use serde_json::{json, Value};
use webhook_core::lambda::pre_token::add_org_claim;

fn sample() -> CognitoEventUserPoolsPreTokenGenV2 {
    let path = format!(
        "{}/../events/pre-token-generation-v2.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap())
        .expect("a Cognito V2 trigger event")
}

#[test]
fn the_organization_goes_into_the_access_token() {
    let out = serde_json::to_value(add_org_claim(sample(), "org_id")).unwrap();
    let details = &out["response"]["claimsAndScopeOverrideDetails"];
    assert_eq!(
        details["accessTokenGeneration"]["claimsToAddOrOverride"],
        json!({"org_id": "org-1"})
    );
    assert!(
        details["idTokenGeneration"].is_null(),
        "ID tokens are not bearer tokens: left alone"
    );
    // The rest of the event goes back as Cognito sent it.
    assert_eq!(out["userName"], "alice");
    assert_eq!(
        out["request"]["scopes"],
        json!(["openid", "webhooks/read", "webhooks/write"])
    );
}

#[test]
fn a_custom_claim_name_reads_its_own_attribute() {
    let mut event = sample();
    event
        .request
        .user_attributes
        .insert("custom:tenant".into(), "org-9".into());
    let out = serde_json::to_value(add_org_claim(event, "tenant")).unwrap();
    assert_eq!(
        out["response"]["claimsAndScopeOverrideDetails"]["accessTokenGeneration"]
            ["claimsToAddOrOverride"],
        json!({"tenant": "org-9"})
    );
}

#[test]
fn users_without_a_valid_organization_get_no_claim() {
    for value in [None, Some("bad org/with slash")] {
        let mut event = sample();
        event.request.user_attributes.remove("custom:org_id");
        if let Some(v) = value {
            event
                .request
                .user_attributes
                .insert("custom:org_id".into(), v.into());
        }
        let out = serde_json::to_value(add_org_claim(event, "org_id")).unwrap();
        assert_eq!(
            out["response"]["claimsAndScopeOverrideDetails"],
            Value::Null,
            "{value:?}"
        );
    }
}
