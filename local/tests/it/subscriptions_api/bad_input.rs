//! Bad input gets problem+json with its code, never a server error: requests, and the events
//! `POST /events` ingests.

use crate::common::*;
use http::StatusCode;
use reqwest::Method;
use serde_json::{json, Value};

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
