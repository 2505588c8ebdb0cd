//! The event catalogue on `webhooks-local` (docs/api.md, "Event catalogue"):
//! `GET /event-types` and `GET /event-types/{kind}`, authenticated like every
//! read and the same for every organization; and one notification of each
//! event kind delivered to the real receiver, which checks each body against
//! its kind's schema (`testkit::catalogue`; every other suite's deliveries
//! are checked the same way).

use crate::common::{self, Server};
use http::StatusCode;
use serde_json::{json, Value};
use testkit::{Handshake, Receiver};

#[tokio::test]
async fn the_catalogue_lists_every_kind_the_same_for_every_organization() {
    let server = Server::start();
    let (status, list) = server.get("/event-types", "org-1").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let kinds: Vec<&str> = list["eventTypes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["kind"].as_str().unwrap())
        .collect();
    let catalogue: Vec<&str> = webhooks_catalogue::ALL.iter().map(|t| t.kind).collect();
    assert_eq!(kinds, catalogue);
    for entry in list["eventTypes"].as_array().unwrap() {
        assert_eq!(entry["schema"]["title"], entry["kind"]);
        assert_eq!(entry["description"], entry["schema"]["description"]);
        assert_eq!(
            testkit::catalogue::check_value(&entry["example"]).as_deref(),
            Ok(entry["kind"].as_str().unwrap())
        );
    }
    let (_, other) = server.get("/event-types", "org-2").await;
    assert_eq!(other, list, "one catalogue for every organization");

    let (status, one) = server
        .get("/event-types/notification.exhausted", "org-1")
        .await;
    assert_eq!(status, StatusCode::OK, "{one}");
    assert_eq!(one, list["eventTypes"][8]);
    assert_eq!(one["kind"], "notification.exhausted");

    let (status, missing) = server.get("/event-types/message.sideways", "org-1").await;
    assert_eq!(
        (status, missing["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("EVENT_TYPE_NOT_FOUND")),
        "{missing}"
    );
    let (status, body) = common::send(server.http.get(server.url("/event-types"))).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("API_KEY_MISSING")),
        "a token and a key, like every read: {body}"
    );
}

/// One event of every type ingestion accepts, to subscriptions of every
/// shape: each notification arrives, is of the kind its event says, and
/// matches that kind's schema (the receiver fails the test otherwise).
#[tokio::test]
async fn a_notification_of_every_event_kind_matches_its_schema() {
    let server = Server::start();
    let receiver = Receiver::start(Handshake::Echo).await;
    let org = "org-catalogue";
    let filters = [
        common::inbound(org, "dep"),
        format!("/orgId/{org}/department/dep/message?direction=outbound"),
        common::contact(org, "dep"),
    ];
    let filters: Vec<&str> = filters.iter().map(String::as_str).collect();
    let (status, sub) = server.create(org, &receiver.uri("/hook"), &filters).await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    let events: Vec<(&str, Value)> = vec![
        (
            "message.inbound",
            json!({"message": {"id": "m-in", "from": "+15550199", "to": ["+15550100"], "text": "hi"}, "status": "RECEIVED"}),
        ),
        (
            "message.outbound",
            json!({"message": {"id": "m-out", "from": "+15550100", "to": ["+15550199"], "text": "hello"}, "carrierMessageId": "c-1"}),
        ),
        ("contact.created", json!({"contact": {"id": "c-7"}})),
        ("contact.updated", json!({"contact": {"id": "c-7"}})),
        ("contact.deleted", json!({"contact": {"id": "c-7"}})),
    ];
    for (kind, extra) in &events {
        let mut event = json!({"eventId": format!("e-{kind}"), "type": kind,
                               "organizationId": org, "departmentId": "dep"});
        event
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        assert_eq!(
            common::produce(&server, org, &event).await,
            StatusCode::ACCEPTED
        );
    }
    let got = receiver
        .wait_for_unique(events.len(), std::time::Duration::from_secs(30))
        .await;
    let mut kinds: Vec<String> = got
        .iter()
        .map(|r| testkit::catalogue::check(&r.body).unwrap())
        .collect();
    kinds.sort();
    kinds.dedup();
    let mut expected: Vec<&str> = events.iter().map(|(k, _)| *k).collect();
    expected.sort();
    assert_eq!(kinds, expected);
}
