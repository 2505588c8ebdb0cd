//! The subscriptions API end to end: the real binary over HTTP, real callback receivers.

use crate::common;

use std::collections::HashSet;
use webhook_core::ids::OrgId;

use common::*;
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

async fn create_many(server: &Server, rx: &Receiver, org: &str, paths: &[String]) -> Vec<Value> {
    let mut out = Vec::new();
    for p in paths {
        let (status, s) = server.create(org, &rx.uri(p), &[&inbound(org, "d")]).await;
        assert_eq!(status, StatusCode::OK, "{s}");
        out.push(s);
        // Distinct creation times, so sorting by them is fully determined.
        server.advance_clock(std::time::Duration::from_millis(2));
    }
    out
}

#[tokio::test]
async fn pages_of_45() {
    let server = Server::start();
    let rx = Receiver::start(Handshake::Echo).await;
    let paths: Vec<String> = (0..45).map(|i| format!("/hook/{i:02}")).collect();
    let created = create_many(&server, &rx, "org-1", &paths).await;
    let mut seen = Vec::new();
    for (page, expected, first, last) in [
        (0, 20, true, false),
        (1, 20, false, false),
        (2, 5, false, true),
    ] {
        let (status, body) = server
            .get(
                &format!("/webhooksubscription/all?page={page}&size=20"),
                "org-1",
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["totalElements"], 45);
        assert_eq!(body["totalPages"], 3);
        assert_eq!(body["numberOfElements"], expected);
        assert_eq!(body["content"].as_array().unwrap().len(), expected);
        assert_eq!(
            (body["first"].as_bool(), body["last"].as_bool()),
            (Some(first), Some(last))
        );
        assert_eq!(body["number"], page);
        assert_eq!(body["size"], 20);
        assert_eq!(body["empty"], false);
        let pageable = &body["pageable"];
        assert_eq!(pageable["offset"], page * 20);
        assert_eq!(pageable["pageNumber"], page);
        assert_eq!(pageable["pageSize"], 20);
        assert_eq!(
            (pageable["paged"].as_bool(), pageable["unpaged"].as_bool()),
            (Some(true), Some(false))
        );
        assert_eq!(body["sort"], json!([]));
        seen.extend(
            body["content"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["id"].clone()),
        );
    }
    // Default order is creation order: the pages partition the subscriptions.
    let ids: Vec<Value> = created.iter().map(|s| s["id"].clone()).collect();
    assert_eq!(seen, ids);
    let (_, beyond) = server
        .get("/webhooksubscription/all?page=3&size=20", "org-1")
        .await;
    assert_eq!(
        (
            beyond["empty"].as_bool(),
            beyond["numberOfElements"].as_u64()
        ),
        (Some(true), Some(0))
    );
    let (_, default) = server.get("/webhooksubscription/all", "org-1").await;
    assert_eq!(
        (
            default["size"].as_u64(),
            default["numberOfElements"].as_u64()
        ),
        (Some(20), Some(20))
    );
}

#[tokio::test]
async fn sorting_on_two_properties_both_directions() {
    let server = Server::start();
    let rx = Receiver::start(Handshake::Echo).await;
    // Created in an order that differs from their uri order.
    let paths: Vec<String> = ["/c", "/A", "/b", "/e", "/D"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    create_many(&server, &rx, "org-1", &paths).await;
    let order = |body: &Value| -> Vec<String> {
        body["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                s["uri"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    };
    let list = |q: &str| {
        let q = q.to_owned();
        let server = &server;
        async move {
            server
                .get(&format!("/webhooksubscription/all?{q}"), "org-1")
                .await
        }
    };
    let (_, b) = list("sort=uri,asc").await;
    assert_eq!(order(&b), ["A", "D", "b", "c", "e"]);
    assert_eq!(
        b["sort"],
        json!([{"direction": "ASC", "nullHandling": "NATIVE", "ascending": true, "property": "uri", "ignoreCase": false}])
    );
    assert_eq!(b["pageable"]["sort"], b["sort"]);
    let (_, b) = list("sort=uri,desc").await;
    assert_eq!(order(&b), ["e", "c", "b", "D", "A"]);
    let (_, b) = list("sort=uri,asc,ignorecase").await;
    assert_eq!(order(&b), ["A", "b", "c", "D", "e"]);
    let (_, b) = list("sort=createdDateTime,desc").await;
    assert_eq!(order(&b), ["D", "e", "b", "A", "c"]);
    let (_, b) = list("sort=createdDateTime,asc").await;
    assert_eq!(order(&b), ["c", "A", "b", "e", "D"]);
    // Two properties: status ties everywhere, so uri decides, in either direction.
    let (_, b) = list("sort=status,asc&sort=uri,desc").await;
    assert_eq!(order(&b), ["e", "c", "b", "D", "A"]);
    assert_eq!(b["sort"].as_array().unwrap().len(), 2);
    let (_, b) = list("sort=status,uri,desc,ignorecase").await;
    assert_eq!(order(&b), ["e", "D", "c", "b", "A"]);
    // A bare sort is the default order.
    let (status, b) = list("page=0&size=20&sort").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(order(&b), ["c", "A", "b", "e", "D"]);
    assert_eq!(b["sort"], json!([]));
}

#[tokio::test]
async fn bad_paging_parameters_are_400() {
    let server = Server::start();
    for q in [
        "page=-1",
        "page=abc",
        "size=0",
        "size=-5",
        "size=x",
        "sort=password",
        "sort=uri,up",
        "sort=desc",
    ] {
        let (status, body) = server
            .get(&format!("/webhooksubscription/all?{q}"), "org-1")
            .await;
        assert_eq!(
            (status, body["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("VALIDATION_FAILED")),
            "{q}"
        );
        assert!(!body["errors"].as_array().unwrap().is_empty());
    }
    let (status, body) = server
        .get("/webhooksubscription/all?size=100000", "org-1")
        .await;
    assert_eq!(
        (status, body["size"].as_u64()),
        (StatusCode::OK, Some(2000)),
        "size is clamped"
    );
}

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

#[tokio::test]
async fn bad_requests_get_problem_json() {
    let server = Server::start();
    let post = |body: reqwest::Body, ct: &str| {
        send(
            server
                .req(Method::POST, "/webhooksubscription", "org-1")
                .header("content-type", ct)
                .body(body),
        )
    };
    let (status, b) = post("{\"uri\":".into(), "application/json").await;
    assert_eq!(
        (status, b["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("MALFORMED_JSON"))
    );
    let (status, b) = post("uri=x".into(), "application/x-www-form-urlencoded").await;
    assert_eq!(
        (status, b["code"].as_str()),
        (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Some("UNSUPPORTED_MEDIA_TYPE")
        )
    );
    let big = format!("{{\"uri\":\"{}\"}}", "a".repeat(70 * 1024));
    let (status, b) = post(big.into(), "application/json").await;
    assert_eq!(
        (status, b["code"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("PAYLOAD_TOO_LARGE"))
    );
    let (status, b) = post("{}".into(), "application/json").await;
    assert_eq!(
        (status, b["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("VALIDATION_FAILED"))
    );
    let fields: Vec<&str> = b["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["uri", "eventFilters"]);
    let (status, b) = post(
        r#"{"uri": 42, "eventFilters": []}"#.into(),
        "application/json",
    )
    .await;
    assert_eq!(
        (status, b["errors"][0]["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("uri"))
    );
    let (status, b) = post(
        r#"{"uri": "http://127.0.0.1:9/", "eventFilters": ["/orgId/org-1/department/d/contact", "/orgId/org-1/dept/d/contact"]}"#.into(),
        "application/json",
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(b["errors"][0]["field"], "eventFilters[1]");
    assert!(
        b["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("/orgId/org-1/dept/d/contact"),
        "{b}"
    );
    let many: Vec<String> = (0..21)
        .map(|i| contact("org-1", &format!("d{i}")))
        .collect();
    let (status, b) = post(
        json!({"uri": "http://127.0.0.1:9/", "eventFilters": many})
            .to_string()
            .into(),
        "application/json",
    )
    .await;
    assert_eq!(
        (status, b["errors"][0]["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("eventFilters"))
    );
    let (status, b) = post(
        json!({"uri": "ftp://example.com/", "eventFilters": [contact("org-1", "d")]})
            .to_string()
            .into(),
        "application/json",
    )
    .await;
    assert_eq!(
        (status, b["errors"][0]["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("uri"))
    );

    let (status, b) = server.get("/nothing/here", "org-1").await;
    assert_eq!(
        (status, b["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("ROUTE_NOT_FOUND"))
    );
    let resp = server
        .req(Method::PUT, "/webhooksubscription", "org-1")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 405);
    assert_eq!(resp.headers()["allow"], "POST");
    let (status, b) = send(server.req(Method::PATCH, "/webhooksubscription/x", "org-1")).await;
    assert_eq!(
        (status, b["code"].as_str()),
        (StatusCode::METHOD_NOT_ALLOWED, Some("METHOD_NOT_ALLOWED"))
    );
}

#[tokio::test]
async fn no_client_input_causes_a_server_error() {
    let server = Server::start();
    let bodies = [
        "", "null", "[]", "0", "\"x\"", "{\"uri\":null,\"eventFilters\":null}", "{\"eventFilters\":[1,2]}",
        "{\"uri\":\"\",\"eventFilters\":[\"\"]}", "{\"uri\":\"http://[::1\",\"eventFilters\":[\"/\"]}",
        "{\"uri\":\"x\",\"expiresDateInMillies\":1e400}", "{\"expiresDateInMillies\":-9223372036854775808}",
        "{\"expiresDateInMillies\":9223372036854775807,\"uri\":\"http://127.0.0.1:1/\",\"eventFilters\":[\"/orgId/org-1/department/d/contact\"]}",
        "{\"expiresDateInMillies\":\"soon\"}", "\u{0}\u{1}", "{\"uri\":\"\u{202e}\"}",
    ];
    for body in bodies {
        let (status, _) = send(
            server
                .req(Method::POST, "/webhooksubscription", "org-1")
                .header("content-type", "application/json")
                .body(body),
        )
        .await;
        assert!(
            status.is_client_error() || status.is_success(),
            "{body}: {status}"
        );
    }
    for path in [
        "/webhooksubscription/%ff%fe",
        "/webhooksubscription/..%2f..%2fetc",
        "/webhooksubscription//secret",
        "/message/getmessagebyid/%00",
        "/webhooksubscription/all/extra",
        "/webhooksubscription/all?page=99999999999999999999",
        "/webhooksubscription/all?page=18446744073709551615&size=2000",
        "/webhooksubscription/all?sort=,,,",
    ] {
        let (status, _) = server.get(path, "org-1").await;
        assert!(
            status.is_client_error() || status.is_success(),
            "{path}: {status}"
        );
    }
}

/// Sorting by `status` uses the status each subscription is shown with: an
/// expired one sorts as `EXPIRED`, not as the `ACTIVE` it is stored as.
#[tokio::test]
async fn sorting_by_status_uses_the_status_the_client_sees() {
    let server = Server::start();
    let rx = Receiver::start(Handshake::Echo).await;
    let soon = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        + 60_000;
    let mut ids = std::collections::HashMap::new();
    for (name, expires) in [("expiring", soon), ("active", 0), ("blacklisted", 0)] {
        let body = json!({"uri": rx.uri(&format!("/{name}")),
                          "eventFilters": [inbound("org-1", "d")], "expiresDateInMillies": expires});
        let (status, sub) = send(
            server
                .req(reqwest::Method::POST, "/webhooksubscription", "org-1")
                .json(&body),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{sub}");
        ids.insert(name, sub["id"].as_str().unwrap().to_owned());
    }
    server
        .store()
        .await
        .record_delivery(
            &"org-1".into(),
            &ids["blacklisted"].as_str().into(),
            webhook_core::store::DeliveryRecord::Gone,
        )
        .await
        .unwrap();
    server.advance_clock(std::time::Duration::from_secs(61));
    let shown = |body: &Value| -> Vec<(String, String)> {
        body["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let name = s["uri"].as_str().unwrap().rsplit('/').next().unwrap();
                (name.to_owned(), s["status"].as_str().unwrap().to_owned())
            })
            .collect()
    };
    let pair = |n: &str, s: &str| (n.to_owned(), s.to_owned());
    let (status, body) = server
        .get("/webhooksubscription/all?sort=status,asc", "org-1")
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        shown(&body),
        [
            pair("active", "ACTIVE"),
            pair("blacklisted", "BLACKLISTED"),
            pair("expiring", "EXPIRED")
        ]
    );
    let (_, body) = server
        .get("/webhooksubscription/all?sort=status,desc", "org-1")
        .await;
    assert_eq!(
        shown(&body),
        [
            pair("expiring", "EXPIRED"),
            pair("blacklisted", "BLACKLISTED"),
            pair("active", "ACTIVE")
        ]
    );
}

/// `POST /events` data checks: 400 naming the field; `null` lists are empty.
#[tokio::test]
async fn ingested_messages_are_checked() {
    let server = Server::start();
    let event = |kind: &str, message: Value| {
        let id = message["id"].as_str().unwrap_or_default().to_owned();
        json!({"eventId": format!("evt-{id}"), "type": kind,
               "organizationId": "org-1", "departmentId": "d", "message": message})
    };
    for (kind, message, field) in [
        (
            "message.inbound",
            json!({"id": "m1", "direction": "out"}),
            "message.direction",
        ),
        (
            "message.outbound",
            json!({"id": "m2", "direction": "in"}),
            "message.direction",
        ),
        (
            "message.inbound",
            json!({"id": "m3", "time": "10 March 2024"}),
            "message.time",
        ),
        (
            "message.inbound",
            json!({"id": "m4", "media": {"url": "x"}}),
            "message.media",
        ),
    ] {
        let (status, body) = send(
            server
                .req(Method::POST, "/events", "org-1")
                .json(&event(kind, message.clone())),
        )
        .await;
        assert_invalid(status, &body, field, &message.to_string());
        let id = message["id"].as_str().unwrap();
        let (status, _) = server
            .get(&format!("/message/getmessagebyid/{id}"), "org-1")
            .await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "a refused event stores nothing"
        );
    }
    let ok = json!({"id": "m5", "time": "2024-03-10T20:07:52.534+02:00",
                    "media": null, "attachments": null});
    let (status, body) = send(
        server
            .req(Method::POST, "/events", "org-1")
            .json(&event("message.outbound", ok)),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let (status, message) = server.get("/message/getmessagebyid/m5", "org-1").await;
    assert_eq!(status, StatusCode::OK, "{message}");
    assert_eq!(
        (
            message["direction"].clone(),
            message["media"].clone(),
            message["attachments"].clone()
        ),
        (json!("out"), json!([]), json!([]))
    );
}
