//! Listing subscriptions: pages, sorting (on two properties, and on the status a client
//! sees) and bad paging parameters.

use crate::common::*;
use http::StatusCode;
use serde_json::{json, Value};

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
