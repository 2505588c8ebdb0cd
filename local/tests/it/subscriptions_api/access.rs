//! Who may read what: the API key and a token are required, and organizations never see each
//! other's subscriptions or messages.

use crate::common::*;
use http::StatusCode;
use serde_json::{json, Value};
use webhook_core::ids::OrgId;

#[tokio::test]
async fn organizations_never_see_each_other() {
    let server = Server::start();
    let rx = Receiver::start(Handshake::Echo).await;
    let (_, sub) = server
        .create("org-1", &rx.uri("/a"), &[&inbound("org-1", "d")])
        .await;
    let id = sub["id"].as_str().unwrap();
    for path in [
        format!("/webhooksubscription/{id}"),
        format!("/webhooksubscription/{id}/secret"),
    ] {
        let (status, body) = server.get(&path, "org-2").await;
        assert_eq!(
            (status, body["code"].as_str()),
            (StatusCode::NOT_FOUND, Some("SUBSCRIPTION_NOT_FOUND"))
        );
    }
    let (status, _) = server
        .delete(&format!("/webhooksubscription/{id}"), "org-2")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, page) = server.get("/webhooksubscription/all", "org-2").await;
    assert_eq!(
        (page["totalElements"].as_u64(), page["empty"].as_bool()),
        (Some(0), Some(true))
    );
    // The same uri in another organization is another subscription.
    let (status, other) = server
        .create("org-2", &rx.uri("/a"), &[&inbound("org-2", "d")])
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_ne!(other["id"], sub["id"]);
    let (status, still) = server
        .get(&format!("/webhooksubscription/{id}"), "org-1")
        .await;
    assert_eq!(
        (status, &still["eventFilters"]),
        (StatusCode::OK, &json!([inbound("org-1", "d")]))
    );
}

#[tokio::test]
async fn api_key_and_token_are_required() {
    let server = Server::start();
    let list = server.url("/webhooksubscription/all");
    let token = server.token("org-1");
    let (status, body) = send(server.http.get(&list).bearer_auth(&token)).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("API_KEY_MISSING"))
    );
    let (status, body) = send(
        server
            .http
            .get(&list)
            .header("x-api-key", "wk_wrong")
            .bearer_auth(&token),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("API_KEY_INVALID"))
    );

    let expired = {
        let now = chrono::Utc::now().timestamp();
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &json!({"org_id": "org-1", "scope": "webhooks/read", "exp": now - 3600}),
            &jsonwebtoken::EncodingKey::from_secret(server.jwt_secret().as_bytes()),
        )
        .unwrap()
    };
    let b64 = |v: Value| {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(&v).unwrap())
    };
    let alg_none = format!(
        "{}.{}.",
        b64(json!({"alg": "none", "typ": "JWT"})),
        b64(json!({"org_id": "org-1", "scope": "webhooks/read", "exp": 9_999_999_999u64}))
    );
    let wrong_key = webhook_core::auth::jwt::mint_hs256(
        "not-the-secret",
        "org_id",
        "org-1",
        &webhook_core::auth::jwt::ALL_SCOPES,
        std::time::Duration::from_secs(60),
    );
    for (auth, why) in [
        (None, "missing"),
        (Some("Bearer".to_owned()), "empty"),
        (Some("Basic dXNlcjpwdw==".to_owned()), "not bearer"),
        (Some("Bearer not.a.jwt".to_owned()), "garbage"),
        (Some(format!("Bearer {expired}")), "expired"),
        (Some(format!("Bearer {alg_none}")), "alg none"),
        (Some(format!("Bearer {wrong_key}")), "wrong key"),
    ] {
        let mut req = server.http.get(&list).header("x-api-key", &server.key);
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 401, "{why}");
        assert_eq!(
            resp.headers()["www-authenticate"],
            "Bearer error=\"invalid_token\"",
            "{why}"
        );
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["code"], "INVALID_TOKEN", "{why}");
    }

    // A valid token without the organization claim, and one without the scope.
    let no_org = webhook_core::auth::jwt::mint_hs256(
        server.jwt_secret(),
        "tenant",
        "org-1",
        &["webhooks/read"],
        std::time::Duration::from_secs(60),
    );
    let (status, body) = send(
        server
            .http
            .get(&list)
            .header("x-api-key", &server.key)
            .bearer_auth(no_org),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("ORG_CLAIM_MISSING"))
    );
    let read_only = server.token_with("org-1", &["webhooks/read"]);
    let (status, _) = send(
        server
            .http
            .get(&list)
            .header("x-api-key", &server.key)
            .bearer_auth(&read_only),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let body = json!({"uri": "http://127.0.0.1:9/x", "eventFilters": [inbound("org-1", "d")]});
    let (status, body) = send(
        server
            .http
            .post(server.url("/webhooksubscription"))
            .header("x-api-key", &server.key)
            .bearer_auth(&read_only)
            .json(&body),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("INSUFFICIENT_SCOPE"))
    );
}

#[tokio::test]
async fn messages_are_served_to_their_organization_only() {
    let server = Server::start();
    let message = webhook_core::model::Message {
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
    // Seeded through the store port on the server's own store.
    let store = server.store().await;
    store
        .put_message(
            &OrgId::from("org-1"),
            &message,
            chrono::Utc::now().timestamp_millis(),
        )
        .await
        .unwrap();
    let (status, body) = server.get("/message/getmessagebyid/msg-1", "org-1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"id": "msg-1", "owner": null, "time": "2024-03-10T18:07:52.534Z", "direction": "in",
               "to": ["+15550100"], "from": "", "text": "hello", "media": [], "attachments": []})
    );
    let (status, body) = server.get("/message/getmessagebyid/msg-1", "org-2").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("MESSAGE_NOT_FOUND"))
    );
    let (status, _) = server.get("/message/getmessagebyid/nope", "org-1").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
