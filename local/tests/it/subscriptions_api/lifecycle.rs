//! A subscription's life: created (after its handshake, to an allowed address), updated by a
//! create of the same uri, capped per organization, expired and deleted.

use std::collections::HashSet;

use crate::common::*;
use http::StatusCode;
use reqwest::Method;
use serde_json::{json, Value};

#[tokio::test]
async fn create_then_update_the_same_uri_keeps_the_id() {
    let server = Server::start();
    let rx = Receiver::start(Handshake::Echo).await;
    let uri = rx.uri("/hook");
    let (status, first) = server
        .create("org-1", &uri, &[&inbound("org-1", "dep-1")])
        .await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["status"], "ACTIVE");
    assert_eq!(first["uri"], uri);
    assert_eq!(first["orgId"], "org-1");
    assert_eq!(first["eventFilters"], json!([inbound("org-1", "dep-1")]));
    assert_eq!(first["disabledFilters"], json!([]));
    let exp = first["expirationTime"].as_str().unwrap();
    assert!(
        exp.len() == 24 && exp.ends_with('Z') && exp.as_bytes()[19] == b'.',
        "{exp}"
    );
    let expires_in = first["expiresIn"].as_i64().unwrap();
    let ninety_days = 90 * 86_400_000i64;
    assert!(
        expires_in <= ninety_days && expires_in > ninety_days - 60_000,
        "{expires_in}"
    );
    assert_eq!(rx.hits(), 1, "exactly one handshake");

    let (status, second) = server
        .create(
            "org-1",
            &uri,
            &[&contact("org-1", "dep-2"), &inbound("org-1", "dep-1")],
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(second["id"], first["id"]);
    assert_eq!(
        second["eventFilters"],
        json!([contact("org-1", "dep-2"), inbound("org-1", "dep-1")])
    );
    assert_eq!(second["createdDateTime"], first["createdDateTime"]);
    assert!(second["lastUpdateDateTime"].as_str() >= first["lastUpdateDateTime"].as_str());
    assert_eq!(rx.hits(), 2, "the update re-runs the handshake");

    let (_, page) = server.get("/webhooksubscription/all", "org-1").await;
    assert_eq!(page["totalElements"], 1);

    let id = first["id"].as_str().unwrap();
    let (status, got) = server
        .get(&format!("/webhooksubscription/{id}"), "org-1")
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["eventFilters"], second["eventFilters"]);
}

#[tokio::test]
async fn expiry_rules() {
    let server = Server::start();
    let rx = Receiver::start(Handshake::Echo).await;
    let now = chrono::Utc::now().timestamp_millis();
    let post = |body: Value| {
        send(
            server
                .req(Method::POST, "/webhooksubscription", "org-1")
                .json(&body),
        )
    };
    let f = [inbound("org-1", "d")];
    let at = now + 3_600_000;
    let (status, s) =
        post(json!({"uri": rx.uri("/a"), "eventFilters": f, "expiresDateInMillis": at})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(s["expirationTime"], webhook_core::clock::iso_millis(at));
    let (status, e) =
        post(json!({"uri": rx.uri("/b"), "eventFilters": f, "expiresDateInMillies": now - 1000}))
            .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(e["errors"][0]["field"], "expiresDateInMillies");
    let far = now + 100 * 365 * 86_400_000i64;
    let (status, s) =
        post(json!({"uri": rx.uri("/c"), "eventFilters": f, "expiresDateInMillies": far})).await;
    assert_eq!(status, StatusCode::OK);
    let ten_years = 3650 * 86_400_000i64;
    assert!(
        s["expiresIn"].as_i64().unwrap() <= ten_years,
        "clamped to the maximum lifetime"
    );
}

#[tokio::test]
async fn every_handshake_failure_has_its_code_and_stores_nothing() {
    let server = Server::start_with(&[("WEBHOOKS_HANDSHAKE_TIMEOUT_MS", "400")]);
    let filters = [inbound("org-1", "d")];
    let f: Vec<&str> = filters.iter().map(String::as_str).collect();

    for (mode, code) in [
        (Handshake::WrongToken, "TOKEN_MISMATCH"),
        (Handshake::NoToken, "TOKEN_MISSING"),
        (Handshake::Status(500), "BAD_STATUS"),
        (Handshake::Status(302), "BAD_STATUS"),
        (Handshake::Hang, "TIMEOUT"),
    ] {
        let rx = Receiver::start(mode).await;
        let (status, body) = server.create("org-1", &rx.uri("/hook"), &f).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some(code)),
            "{mode:?}: {body}"
        );
        assert_eq!(rx.hits(), 1);
        if let Handshake::Status(s) = mode {
            assert!(
                body["detail"].as_str().unwrap().contains(&s.to_string()),
                "{body}"
            );
        }
    }

    // Connection refused: a port nobody listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (status, body) = server
        .create("org-1", &format!("http://{closed}/hook"), &f)
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("CONNECT_FAILED"))
    );

    // https to a plain-http receiver: the TLS handshake fails.
    let rx = Receiver::start(Handshake::Echo).await;
    let (status, body) = server
        .create("org-1", &format!("https://{}/hook", rx.addr), &f)
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("TLS_FAILED")),
        "{body}"
    );

    // A name that does not resolve.
    let (status, body) = server
        .create("org-1", "https://no-such-host.invalid/hook", &f)
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("DNS_FAILED")),
        "{body}"
    );

    let (_, page) = server.get("/webhooksubscription/all", "org-1").await;
    assert_eq!(page["totalElements"], 0, "failed handshakes store nothing");
}

#[tokio::test]
async fn forbidden_addresses_are_refused_before_any_connection() {
    let server = Server::start_with(&[("WEBHOOKS_ALLOW_PRIVATE_CALLBACKS", "false")]);
    let rx = Receiver::start(Handshake::Echo).await;
    let f = [inbound("org-1", "d")];
    let f: Vec<&str> = f.iter().map(String::as_str).collect();
    let port = rx.addr.port();
    for uri in [
        format!("http://127.0.0.1:{port}/hook"),
        format!("http://localhost:{port}/hook"),
        format!("http://2130706433:{port}/hook"),
        format!("http://[::ffff:127.0.0.1]:{port}/hook"),
        "http://169.254.169.254/latest/meta-data".to_owned(),
        "http://10.0.0.1/hook".to_owned(),
        "http://[::1]/hook".to_owned(),
    ] {
        let (status, body) = server.create("org-1", &uri, &f).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("ADDRESS_FORBIDDEN")),
            "{uri}: {body}"
        );
    }
    assert_eq!(rx.hits(), 0, "no connection was made");
}

#[tokio::test]
async fn foreign_filters_are_disabled_not_errors() {
    let server = Server::start();
    let rx = Receiver::start(Handshake::Echo).await;
    let (status, sub) = server
        .create(
            "org-1",
            &rx.uri("/a"),
            &[&inbound("org-1", "d"), &contact("org-2", "d")],
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(sub["eventFilters"], json!([inbound("org-1", "d")]));
    let disabled = &sub["disabledFilters"][0];
    assert_eq!(disabled["filter"], contact("org-2", "d"));
    assert_eq!(disabled["reason"], "PERMISSION_DENIED");
    assert_eq!(disabled["orgId"], "org-1");
    assert_eq!(disabled["id"], sub["id"]);
    assert!(disabled["message"].as_str().unwrap().contains("org-2"));

    let (status, body) = server
        .create("org-1", &rx.uri("/b"), &[&contact("org-2", "d")])
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("NO_ENABLED_FILTERS"))
    );
    assert_eq!(rx.hits(), 1, "no handshake for a refused request");
}

#[tokio::test]
async fn concurrent_posts_of_one_uri_make_one_subscription() {
    let server = std::sync::Arc::new(Server::start());
    let rx = Receiver::start(Handshake::Echo).await;
    let uri = rx.uri("/same");
    let mut posts = tokio::task::JoinSet::new();
    for i in 0..20 {
        let (server, uri) = (server.clone(), uri.clone());
        posts.spawn(async move {
            server
                .create("org-1", &uri, &[&inbound("org-1", &format!("dep-{i}"))])
                .await
        });
    }
    let mut ids = HashSet::new();
    while let Some(result) = posts.join_next().await {
        let (status, s) = result.unwrap();
        assert_eq!(status, StatusCode::OK, "{s}");
        ids.insert(s["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(ids.len(), 1, "one id for every post");
    let (_, page) = server.get("/webhooksubscription/all", "org-1").await;
    assert_eq!(page["totalElements"], 1);
}

#[tokio::test]
async fn delete_then_get_is_404_and_secret_is_whsec() {
    let server = Server::start();
    let rx = Receiver::start(Handshake::Echo).await;
    let (_, sub) = server
        .create("org-1", &rx.uri("/a"), &[&inbound("org-1", "d")])
        .await;
    let id = sub["id"].as_str().unwrap();
    let (status, secret) = server
        .get(&format!("/webhooksubscription/{id}/secret"), "org-1")
        .await;
    assert_eq!(status, StatusCode::OK);
    let key = secret["key"].as_str().unwrap();
    use base64::Engine;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(key.strip_prefix("whsec_").unwrap())
        .unwrap();
    assert_eq!(raw.len(), 24);
    let (_, again) = server
        .create("org-1", &rx.uri("/a"), &[&inbound("org-1", "e")])
        .await;
    let (_, same) = server
        .get(&format!("/webhooksubscription/{id}/secret"), "org-1")
        .await;
    assert_eq!(
        (again["id"].as_str(), same["key"].as_str()),
        (Some(id), Some(key)),
        "an update keeps the secret"
    );

    let (status, body) = server
        .delete(&format!("/webhooksubscription/{id}"), "org-1")
        .await;
    assert_eq!((status, body), (StatusCode::NO_CONTENT, Value::Null));
    let (status, _) = server
        .get(&format!("/webhooksubscription/{id}"), "org-1")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = server
        .delete(&format!("/webhooksubscription/{id}"), "org-1")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, page) = server.get("/webhooksubscription/all", "org-1").await;
    assert_eq!(page["totalElements"], 0);
}

#[tokio::test]
async fn subscriptions_per_organization_are_capped() {
    let server = Server::start_with(&[("WEBHOOKS_MAX_SUBSCRIPTIONS_PER_ORG", "2")]);
    let rx = Receiver::start(Handshake::Echo).await;
    for p in ["/1", "/2"] {
        assert_eq!(
            server
                .create("org-1", &rx.uri(p), &[&inbound("org-1", "d")])
                .await
                .0,
            StatusCode::OK
        );
    }
    let (status, body) = server
        .create("org-1", &rx.uri("/3"), &[&inbound("org-1", "d")])
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::CONFLICT, Some("SUBSCRIPTION_LIMIT_REACHED"))
    );
    // Updating an existing one is still allowed, and other organizations are not affected.
    assert_eq!(
        server
            .create("org-1", &rx.uri("/1"), &[&contact("org-1", "d")])
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        server
            .create("org-2", &rx.uri("/3"), &[&inbound("org-2", "d")])
            .await
            .0,
        StatusCode::OK
    );
}
