//! Every sample event in `events/` for the subscription, message and authorizer functions,
//! fed to exactly the handler functions the Lambda `main.rs` files call (`lambda::handle`,
//! `authorizer::authorize`), on SQLite, and on DynamoDB Local with
//! `WEBHOOKS_TEST_BACKEND=aws` (scripts/test.sh runs both). The history functions, which
//! enqueue on SQS, are `aws/lambda_history.rs`.

use testkit::lambda::*;
use testkit::sample_events;

use std::time::Duration;

use aws_lambda_events::apigw::ApiGatewayCustomAuthorizerRequestTypeRequest;
use aws_lambda_events::iam::IamPolicyEffect;
use http::StatusCode;
use serde_json::{json, Value};
use webhook_core::auth::jwt::{mint_hs256, Verifier, ALL_SCOPES};
use webhook_core::config::JwtConfig;
use webhook_core::ids::{OrgId, SubscriptionId};
use webhook_core::lambda::{self, authorizer, Endpoint};
use webhook_core::model::Message;
use webhook_core::page::{PageRequest, MAX_SIZE};
use webhook_core::{App, Config, Profile};

#[tokio::test]
async fn create_subscription_ok() {
    let (app, store) = app().await;
    let (uri, _server) = receiver().await;
    let mut event: Value =
        serde_json::from_str(&sample_events::text("create-subscription-ok")).unwrap();
    let body = event["body"]
        .as_str()
        .unwrap()
        .replace("http://127.0.0.1:9/hook", &uri);
    event["body"] = Value::from(body);
    let request = lambda_http::request::from_str(&event.to_string()).unwrap();
    let response = lambda::handle(&app, Endpoint::CreateSubscription, request)
        .await
        .unwrap();
    let (status, body) = split(response);
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "ACTIVE");
    assert_eq!(body["uri"], uri);
    assert_eq!(body["orgId"], "org-1");
    assert_eq!(
        body["eventFilters"],
        json!(["/orgId/org-1/department/dep-1/message?direction=inbound"])
    );
    assert_eq!(body["disabledFilters"], json!([]));
    let stored = store
        .list_subscriptions(&OrgId::from("org-1"), &PageRequest::first(MAX_SIZE), 0)
        .await
        .unwrap()
        .content;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].id, body["id"].as_str().unwrap());
    let fan_out = store
        .subscriptions_for_filter("/orgId/org-1/department/dep-1/message?direction=inbound")
        .await
        .unwrap();
    assert_eq!(fan_out.len(), 1);
}

#[tokio::test]
async fn create_subscription_errors() {
    let (app, store) = app().await;
    for (event, status, code) in [
        (
            "create-subscription-foreign-filter-only",
            StatusCode::FORBIDDEN,
            "NO_ENABLED_FILTERS",
        ),
        (
            "create-subscription-invalid-filter",
            StatusCode::BAD_REQUEST,
            "VALIDATION_FAILED",
        ),
        (
            "create-subscription-malformed-json",
            StatusCode::BAD_REQUEST,
            "MALFORMED_JSON",
        ),
        (
            "create-subscription-wrong-content-type",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UNSUPPORTED_MEDIA_TYPE",
        ),
    ] {
        expect_problem(&app, Endpoint::CreateSubscription, event, status, code).await;
    }
    assert!(store
        .list_subscriptions(&OrgId::from("org-1"), &PageRequest::first(MAX_SIZE), 0)
        .await
        .unwrap()
        .content
        .is_empty());
}

#[tokio::test]
async fn create_subscription_with_the_deployed_policy_refuses_loopback_callbacks() {
    let ([deployed], _) = apps_with(
        [Config::from_lookup(Profile::Lambda, |_| None).unwrap()],
        "deployed",
    )
    .await;
    let (status, body) = invoke(
        &deployed,
        Endpoint::CreateSubscription,
        "create-subscription-ok",
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        matches!(
            body["code"].as_str(),
            Some("VALIDATION_FAILED" | "ADDRESS_FORBIDDEN")
        ),
        "{body}"
    );
}

#[tokio::test]
async fn list_subscriptions() {
    let (app, store) = app().await;
    let t = now();
    seed(
        &*store,
        "org-1",
        "00000000-0000-7000-8000-00000000000a",
        "https://example.com/a",
        t,
    )
    .await;
    seed(
        &*store,
        "org-1",
        "00000000-0000-7000-8000-00000000000b",
        "https://example.com/b",
        t + 1,
    )
    .await;
    seed(
        &*store,
        "org-2",
        "00000000-0000-7000-8000-00000000000c",
        "https://example.com/c",
        t,
    )
    .await;

    let (status, page) = invoke(&app, Endpoint::ListSubscriptions, "list-subscriptions-ok").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["totalElements"], 2, "only org-1's");
    let uris: Vec<&str> = page["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        ["https://example.com/b", "https://example.com/a"],
        "createdDateTime,desc"
    );
    assert_eq!(page["sort"][0]["property"], "createdDateTime");
    assert_eq!(page["sort"][0]["direction"], "DESC");

    let (status, page) = invoke(
        &app,
        Endpoint::ListSubscriptions,
        "list-subscriptions-bare-sort",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["sort"], json!([]));
    assert_eq!(
        page["content"][0]["uri"], "https://example.com/a",
        "creation order"
    );

    expect_problem(
        &app,
        Endpoint::ListSubscriptions,
        "list-subscriptions-bad-size",
        StatusCode::BAD_REQUEST,
        "VALIDATION_FAILED",
    )
    .await;

    expect_problem(
        &app,
        Endpoint::ListSubscriptions,
        "list-subscriptions-no-authorizer",
        StatusCode::UNAUTHORIZED,
        "INVALID_TOKEN",
    )
    .await;
}

#[tokio::test]
async fn get_subscription_and_its_secret() {
    let (app, store) = app().await;
    let (status, body) = invoke(&app, Endpoint::GetSubscription, "get-subscription-ok").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("SUBSCRIPTION_NOT_FOUND")),
        "nothing seeded yet"
    );
    // Another organization's subscription with that id is not found either.
    seed(
        &*store,
        "org-2",
        SUBSCRIPTION_ID,
        "https://example.com/x",
        now(),
    )
    .await;
    let (status, _) = invoke(&app, Endpoint::GetSubscription, "get-subscription-ok").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // SQLite's subscription ids are unique across organizations: org-1's is seeded in a
    // store of its own there. DynamoDB keys them by organization: the same store.
    let (app, store) = if testkit::emulators::aws_backend() {
        (app, store)
    } else {
        testkit::lambda::app().await
    };
    seed(
        &*store,
        "org-1",
        SUBSCRIPTION_ID,
        "https://example.com/x",
        now(),
    )
    .await;
    let (status, body) = invoke(&app, Endpoint::GetSubscription, "get-subscription-ok").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["id"], SUBSCRIPTION_ID);
    assert_eq!(body["orgId"], "org-1");
    assert_eq!(body["status"], "ACTIVE");

    let (status, body) = invoke(
        &app,
        Endpoint::GetSubscriptionSecret,
        "get-subscription-secret-ok",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"key": "whsec_c2VlZGVkLXNlY3JldC1mb3ItdGVzdHM="})
    );

    expect_problem(
        &app,
        Endpoint::GetSubscription,
        "get-subscription-not-found",
        StatusCode::NOT_FOUND,
        "SUBSCRIPTION_NOT_FOUND",
    )
    .await;
}

#[tokio::test]
async fn rotate_subscription_secret() {
    let (app, store) = app().await;
    expect_problem(
        &app,
        Endpoint::RotateSubscriptionSecret,
        "rotate-subscription-secret-ok",
        StatusCode::NOT_FOUND,
        "SUBSCRIPTION_NOT_FOUND",
    )
    .await;
    // Another organization's subscription with that id is not found either.
    seed(
        &*store,
        "org-2",
        SUBSCRIPTION_ID,
        "https://example.com/x",
        now(),
    )
    .await;
    expect_problem(
        &app,
        Endpoint::RotateSubscriptionSecret,
        "rotate-subscription-secret-ok",
        StatusCode::NOT_FOUND,
        "SUBSCRIPTION_NOT_FOUND",
    )
    .await;

    // SQLite's subscription ids are unique across organizations: org-1's is seeded in a
    // store of its own there. DynamoDB keys them by organization: the same store.
    let (app, store) = if testkit::emulators::aws_backend() {
        (app, store)
    } else {
        testkit::lambda::app().await
    };
    seed(
        &*store,
        "org-1",
        SUBSCRIPTION_ID,
        "https://example.com/x",
        now(),
    )
    .await;
    let before = now();
    let (status, body) = invoke(
        &app,
        Endpoint::RotateSubscriptionSecret,
        "rotate-subscription-secret-ok",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let new_key = "whsec_cm90YXRlZC1zZWNyZXQtZm9yLXNhbXBsZS1ldmVudHM=";
    assert_eq!(body, json!({ "key": new_key }));
    let (_, secret) = invoke(
        &app,
        Endpoint::GetSubscriptionSecret,
        "get-subscription-secret-ok",
    )
    .await;
    assert_eq!(
        secret,
        json!({ "key": new_key }),
        "GET secret: the current key"
    );
    let stored = store
        .get_subscription(
            &OrgId::from("org-1"),
            &SubscriptionId::from(SUBSCRIPTION_ID),
        )
        .await
        .unwrap()
        .unwrap();
    let signing: Vec<&str> = stored.signing_secrets(now()).collect();
    assert_eq!(
        signing,
        [new_key, "whsec_c2VlZGVkLXNlY3JldC1mb3ItdGVzdHM="],
        "the old key signs during its grace period (3600 s)"
    );
    let grace_end = stored.previous_secrets[0].expires_at;
    assert!((before + 3_600_000..=now() + 3_600_000).contains(&grace_end));
    // The other organization's subscription with the same id (DynamoDB) is untouched.
    if testkit::emulators::aws_backend() {
        let other = store
            .get_subscription(
                &OrgId::from("org-2"),
                &SubscriptionId::from(SUBSCRIPTION_ID),
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(other.secret, "whsec_c2VlZGVkLXNlY3JldC1mb3ItdGVzdHM=");
        assert!(other.previous_secrets.is_empty());
    }

    // The same key again is refused (it is the current one).
    let (status, body) = invoke(
        &app,
        Endpoint::RotateSubscriptionSecret,
        "rotate-subscription-secret-ok",
    )
    .await;
    assert_code(status, &body, StatusCode::BAD_REQUEST, "VALIDATION_FAILED");
    assert_eq!(body["errors"][0]["field"], "key");
    let (status, body) = invoke(
        &app,
        Endpoint::RotateSubscriptionSecret,
        "rotate-subscription-secret-invalid",
    )
    .await;
    assert_code(status, &body, StatusCode::BAD_REQUEST, "VALIDATION_FAILED");
    let fields: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["gracePeriodSeconds", "key"]);
    assert!(!body.to_string().contains("dG9vLXNob3J0"), "{body}");
    // A read-only token cannot rotate.
    let read_only = edited_request("rotate-subscription-secret-ok", |e| {
        e["requestContext"]["authorizer"]["scope"] = json!("webhooks/read");
    });
    let response = lambda::handle(&app, Endpoint::RotateSubscriptionSecret, read_only)
        .await
        .unwrap();
    let (status, body) = split(response);
    assert_code(status, &body, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
}

#[tokio::test]
async fn delete_subscription() {
    let (app, store) = app().await;
    seed(
        &*store,
        "org-1",
        SUBSCRIPTION_ID,
        "https://example.com/x",
        now(),
    )
    .await;
    let (status, body) = invoke(&app, Endpoint::DeleteSubscription, "delete-subscription-ok").await;
    assert_eq!((status, body), (StatusCode::NO_CONTENT, Value::Null));
    assert_eq!(
        store
            .get_subscription(
                &OrgId::from("org-1"),
                &SubscriptionId::from(SUBSCRIPTION_ID)
            )
            .await
            .unwrap(),
        None
    );
    expect_problem(
        &app,
        Endpoint::DeleteSubscription,
        "delete-subscription-ok",
        StatusCode::NOT_FOUND,
        "SUBSCRIPTION_NOT_FOUND",
    )
    .await;
    let (status, _) = invoke(
        &app,
        Endpoint::DeleteSubscription,
        "delete-subscription-not-found",
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn get_message() {
    let (app, store) = app().await;
    let message = Message {
        id: "msg-1".into(),
        owner: None,
        time: Some("2024-03-10T18:07:52.534Z".into()),
        direction: "in".into(),
        to: vec!["+15550100".into()],
        from: "".into(),
        text: "hello".into(),
        media: vec![],
        attachments: vec![],
    };
    store
        .put_message(&OrgId::from("org-1"), &message, app.now_ms())
        .await
        .unwrap();
    let (status, body) = invoke(&app, Endpoint::GetMessage, "get-message-ok").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, serde_json::to_value(&message).unwrap());
    expect_problem(
        &app,
        Endpoint::GetMessage,
        "get-message-not-found",
        StatusCode::NOT_FOUND,
        "MESSAGE_NOT_FOUND",
    )
    .await;
}

#[tokio::test]
async fn a_function_answers_only_its_own_method() {
    let (app, _) = app().await;
    expect_problem(
        &app,
        Endpoint::DeleteSubscription,
        "get-subscription-ok",
        StatusCode::METHOD_NOT_ALLOWED,
        "METHOD_NOT_ALLOWED",
    )
    .await;
}

// ---------------------------------------------------------------------------
// Authorizer

fn verifier() -> Verifier {
    Verifier::new(&JwtConfig {
        hs256_secret: Some(JWT_SECRET.into()),
        jwks_url: None,
        issuer: None,
        audience: None,
        org_claim: "org_id".into(),
        scopes: Default::default(),
    })
}

fn authorizer_event(
    name: &str,
    token: Option<&str>,
) -> ApiGatewayCustomAuthorizerRequestTypeRequest {
    let mut text = sample_events::text(name);
    if let Some(token) = token {
        text = text.replace("TOKEN_PLACEHOLDER", token);
    }
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("events/{name}.json is not an authorizer event: {e}"))
}

async fn authorize(
    event: ApiGatewayCustomAuthorizerRequestTypeRequest,
) -> Result<aws_lambda_events::apigw::ApiGatewayCustomAuthorizerResponse, String> {
    authorizer::authorize(
        &verifier(),
        lambda_runtime::LambdaEvent::new(event, lambda_runtime::Context::default()),
    )
    .await
    .map_err(|e| e.to_string())
}

#[tokio::test]
async fn authorizer_allows_a_valid_token_for_the_whole_stage() {
    let token = mint_hs256(
        JWT_SECRET,
        "org_id",
        "org-1",
        &ALL_SCOPES,
        Duration::from_secs(300),
    );
    let response = authorize(authorizer_event("authorizer-request", Some(&token)))
        .await
        .unwrap();
    let statement = &response.policy_document.statement[0];
    assert_eq!(statement.effect, IamPolicyEffect::Allow);
    assert_eq!(statement.action, ["execute-api:Invoke"]);
    assert_eq!(
        statement.resource,
        ["arn:aws:execute-api:us-east-1:123456789012:abcdef123/prod/*/*"]
    );
    assert_eq!(
        response.context,
        json!({"orgId": "org-1", "sub": "local:org-1", "scope": "webhooks/read webhooks/write"})
    );
    assert_eq!(response.principal_id.as_deref(), Some("local:org-1"));
    // The JSON API Gateway reads.
    let wire = serde_json::to_value(&response).unwrap();
    assert_eq!(wire["policyDocument"]["Statement"][0]["Effect"], "Allow");
    assert_eq!(wire["context"]["orgId"], "org-1");
}

#[tokio::test]
async fn authorizer_refuses_missing_bad_and_expired_tokens() {
    let expired = {
        // exp one hour ago, beyond the verifier's leeway.
        use base64::Engine;
        let b64 = |v: Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(&v).unwrap())
        };
        let past = chrono::Utc::now().timestamp() - 3600;
        let signing_input = format!(
            "{}.{}",
            b64(json!({"alg": "HS256", "typ": "JWT"})),
            b64(json!({"org_id": "org-1", "exp": past, "scope": "webhooks/read"}))
        );
        let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, JWT_SECRET.as_bytes());
        let tag = aws_lc_rs::hmac::sign(&key, signing_input.as_bytes());
        format!(
            "{signing_input}.{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tag.as_ref())
        )
    };
    let wrong_key = mint_hs256(
        "another-secret",
        "org_id",
        "org-1",
        &ALL_SCOPES,
        Duration::from_secs(300),
    );
    for (what, event) in [
        (
            "no token",
            authorizer_event("authorizer-request-no-token", None),
        ),
        ("placeholder", authorizer_event("authorizer-request", None)),
        (
            "garbage",
            authorizer_event("authorizer-request", Some("not.a.jwt")),
        ),
        (
            "wrong key",
            authorizer_event("authorizer-request", Some(&wrong_key)),
        ),
        (
            "expired",
            authorizer_event("authorizer-request", Some(&expired)),
        ),
    ] {
        assert_eq!(
            authorize(event).await.unwrap_err(),
            "Unauthorized",
            "{what}"
        );
    }
}

#[tokio::test]
async fn authorizer_denies_a_valid_token_without_an_organization() {
    let token = mint_hs256(
        JWT_SECRET,
        "tenant",
        "org-1",
        &ALL_SCOPES,
        Duration::from_secs(300),
    );
    let response = authorize(authorizer_event("authorizer-request", Some(&token)))
        .await
        .unwrap();
    assert_eq!(
        response.policy_document.statement[0].effect,
        IamPolicyEffect::Deny
    );
    assert_eq!(response.context, json!({}));
}

/// An identity provider's own scope names (`WEBHOOKS_READ_SCOPES`,
/// `WEBHOOKS_WRITE_SCOPES`): accepted by the authorizer and the functions
/// only when configured; the default names are then not enough.
#[tokio::test]
async fn custom_scope_names_are_honoured_only_when_configured() {
    const READ: &str = "https://com.beetexting.scopes/ReadContact";
    const WRITE: &str = "https://com.beetexting.scopes/WriteContact";
    let lookup = |custom: bool| {
        move |var: &str| match var {
            "WEBHOOKS_JWT_HS256_SECRET" => Some(JWT_SECRET.to_owned()),
            "WEBHOOKS_READ_SCOPES" if custom => Some(READ.to_owned()),
            "WEBHOOKS_WRITE_SCOPES" if custom => Some(WRITE.to_owned()),
            _ => None,
        }
    };
    let custom = Config::from_lookup(Profile::Lambda, lookup(true)).unwrap();
    let default = Config::from_lookup(Profile::Lambda, lookup(false)).unwrap();
    let token = |scopes: &[&str]| {
        mint_hs256(
            JWT_SECRET,
            "org_id",
            "org-1",
            scopes,
            Duration::from_secs(300),
        )
    };
    let effect = |config: &Config, token: String| {
        let verifier = Verifier::new(&config.jwt);
        async move {
            let event = authorizer_event("authorizer-request", Some(&token));
            let response = authorizer::authorize(
                &verifier,
                lambda_runtime::LambdaEvent::new(event, lambda_runtime::Context::default()),
            )
            .await
            .unwrap();
            (
                response.policy_document.statement[0].effect.clone(),
                response.context["scope"].clone(),
            )
        }
    };
    assert_eq!(
        effect(&custom, token(&[READ, WRITE])).await,
        (IamPolicyEffect::Allow, json!(format!("{READ} {WRITE}")))
    );
    assert_eq!(
        effect(&custom, token(&ALL_SCOPES)).await.0,
        IamPolicyEffect::Deny
    );
    assert_eq!(
        effect(&default, token(&[READ, WRITE])).await.0,
        IamPolicyEffect::Deny
    );
    assert_eq!(
        effect(&default, token(&ALL_SCOPES)).await.0,
        IamPolicyEffect::Allow
    );

    // The function checks the route's scope with the same configuration.
    let ([custom_app, default_app], store) = apps_with([custom, default], "scopes").await;
    seed(
        &*store,
        "org-1",
        SUBSCRIPTION_ID,
        "https://example.com/s",
        now(),
    )
    .await;
    assert_eq!(get(&custom_app, READ).await.0, StatusCode::OK);
    let (status, body) = get(&custom_app, "webhooks/read webhooks/write").await;
    assert_code(status, &body, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
    assert!(body["detail"].as_str().unwrap().contains(READ), "{body}");
    let (status, body) = get(&custom_app, WRITE).await;
    assert_code(status, &body, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
    let (status, body) = get(&default_app, READ).await;
    assert_code(status, &body, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
    assert_eq!(get(&default_app, "webhooks/read").await.0, StatusCode::OK);
}

/// `get-subscription-ok` with the authorizer context's `scope` replaced.
async fn get(app: &App, scope: &str) -> (StatusCode, Value) {
    let request = edited_request("get-subscription-ok", |e| {
        e["requestContext"]["authorizer"]["scope"] = json!(scope);
    });
    split(
        lambda::handle(app, Endpoint::GetSubscription, request)
            .await
            .unwrap(),
    )
}

/// `get-destination-identity` also serves the event catalogue, chosen by the
/// path API Gateway matched (REST's `resourcePath`, the HTTP API's
/// `routeKey`): one kind, the list, a stable 404 for an unknown kind, and
/// ROUTE_NOT_FOUND for a path it does not serve.
#[tokio::test]
async fn the_event_catalogue_through_the_identity_function() {
    let (app, _store) = app().await;
    let serve = |request| lambda::handle_one_of(&app, &lambda::READS_WITHOUT_CALLS, request);
    let (status, body) = split(
        serve(sample_events::request("get-event-type-ok"))
            .await
            .unwrap(),
    );
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["kind"], "message.inbound");
    assert_eq!(body["schema"]["title"], "message.inbound");
    assert_eq!(body["example"]["messageInfo"]["messageId"], "msg-1");

    let request = edited_request("get-event-type-ok", |e| {
        e["pathParameters"]["kind"] = json!("message.sideways");
    });
    let (status, body) = split(serve(request).await.unwrap());
    assert_code(status, &body, StatusCode::NOT_FOUND, "EVENT_TYPE_NOT_FOUND");

    let request = edited_request("get-event-type-ok", |e| {
        e["requestContext"]["resourcePath"] = json!("/event-types");
        e["pathParameters"] = Value::Null;
    });
    let (status, body) = split(serve(request).await.unwrap());
    assert_eq!(status, StatusCode::OK, "{body}");
    let kinds: Vec<&str> = body["eventTypes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.len(), webhooks_catalogue::ALL.len());
    assert!(kinds.contains(&"subscription.failing"), "{kinds:?}");

    // Behind the HTTP API option: the route key names the path.
    let request = edited_request("get-subscription-http-ok", |e| {
        e["routeKey"] = json!("GET /event-types/{kind}");
        e["requestContext"]["routeKey"] = json!("GET /event-types/{kind}");
        e["pathParameters"] = json!({"kind": "contact.deleted"});
    });
    let (status, body) = split(serve(request).await.unwrap());
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["example"]["contactInfo"]["action"], "DELETED");

    let request = edited_request("get-event-type-ok", |e| {
        e["requestContext"]["resourcePath"] = json!("/webhooksubscription/{id}");
    });
    let (status, body) = split(serve(request).await.unwrap());
    assert_code(status, &body, StatusCode::NOT_FOUND, "ROUTE_NOT_FOUND");
}

/// `get-destination-identity`: the caller's organization's external id for
/// AWS destinations (the one its destination subscriptions show), derived
/// without a store call; no `accountId` where the deployment names none.
#[tokio::test]
async fn get_destination_identity() {
    let (app, _store) = app().await;
    let (status, body) = invoke(
        &app,
        Endpoint::GetDestinationIdentity,
        "get-destination-identity-ok",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let expected = webhook_core::destinations::external_id("webhooks", &OrgId::from("org-1"));
    assert_eq!(body, json!({"externalId": expected}));
}
