//! The Cognito pre-token-generation sample events (V2 and V3 user tokens,
//! V3 client-credentials tokens), fed to the handler the
//! `pre-token-generation` function calls.

use testkit::sample_events;

use aws_lambda_events::event::cognito::CognitoEventUserPoolsPreTokenGenV2;
use serde_json::{json, Value};
use webhook_core::lambda::pre_token::{add_org_claim, handle, MachineClients};

fn sample() -> CognitoEventUserPoolsPreTokenGenV2 {
    serde_json::from_str(&sample_events::text("pre-token-generation-v2"))
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

fn machines() -> MachineClients {
    MachineClients::parse("4machineclient567example=org-m2m,7otherclient=org-2").unwrap()
}

#[test]
fn a_machine_client_gets_its_organization() {
    let out = handle(
        sample_events::json("pre-token-generation-v3-client-credentials"),
        "org_id",
        &machines(),
    )
    .unwrap();
    assert_eq!(
        out["response"],
        json!({"claimsAndScopeOverrideDetails": {
            "accessTokenGeneration": {"claimsToAddOrOverride": {"org_id": "org-m2m"}}
        }})
    );
    // The request goes back as Cognito sent it.
    assert_eq!(out["triggerSource"], "TokenGeneration_ClientCredentials");
    assert_eq!(out["callerContext"]["clientId"], "4machineclient567example");
    assert_eq!(
        out["request"]["scopes"],
        json!(["webhooks/read", "webhooks/write"])
    );
    // The claim name is the configured one.
    let out = handle(
        sample_events::json("pre-token-generation-v3-client-credentials"),
        "tenant",
        &machines(),
    )
    .unwrap();
    assert_eq!(
        out["response"]["claimsAndScopeOverrideDetails"]["accessTokenGeneration"]
            ["claimsToAddOrOverride"],
        json!({"tenant": "org-m2m"})
    );
}

#[test]
fn an_unlisted_machine_client_gets_no_token() {
    let err = handle(
        sample_events::json("pre-token-generation-v3-unknown-client"),
        "org_id",
        &machines(),
    )
    .unwrap_err();
    assert!(err.contains("9unlistedclient000example"), "{err}");
    // Nor does any client when none is configured, nor an event without a client id.
    assert!(handle(
        sample_events::json("pre-token-generation-v3-client-credentials"),
        "org_id",
        &MachineClients::default(),
    )
    .is_err());
    let mut no_client = sample_events::json("pre-token-generation-v3-client-credentials");
    no_client["callerContext"]
        .as_object_mut()
        .unwrap()
        .remove("clientId");
    assert!(handle(no_client, "org_id", &machines()).is_err());
}

#[test]
fn user_tokens_work_the_same_with_v2_and_v3_events() {
    for name in ["pre-token-generation-v2", "pre-token-generation-v3-user"] {
        let out = handle(sample_events::json(name), "org_id", &machines()).unwrap();
        assert_eq!(
            out["response"]["claimsAndScopeOverrideDetails"]["accessTokenGeneration"]
                ["claimsToAddOrOverride"],
            json!({"org_id": "org-1"}),
            "{name}"
        );
        assert_eq!(out["userName"], "alice", "{name}");
    }
    // A user's token never takes a machine client's organization, even
    // when the user signs in through a listed client id.
    let mut user = sample_events::json("pre-token-generation-v3-user");
    user["callerContext"]["clientId"] = json!("4machineclient567example");
    user["request"]["userAttributes"]
        .as_object_mut()
        .unwrap()
        .remove("custom:org_id");
    let out = handle(user, "org_id", &machines()).unwrap();
    assert_eq!(
        out["response"]["claimsAndScopeOverrideDetails"],
        Value::Null
    );
}
