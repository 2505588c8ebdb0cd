//! Tenancy is absolute: through the real binary, organization B can neither read, change,
//! delete, receive nor infer organization A's subscriptions, secrets, messages and events,
//! over every endpoint and every event type. "Infer" means B's answers about A's resources
//! are byte-for-byte the answers about resources that do not exist at all.

use crate::common;

use std::collections::HashSet;
use std::time::Duration;

use common::*;
use http::StatusCode;
use reqwest::Method;
use serde_json::{json, Value};

const A: &str = "org-a";
const B: &str = "org-b";
const DEP: &str = "dep-1";
const WAIT: Duration = Duration::from_secs(20);
const FAST_RETRIES: (&str, &str) = ("WEBHOOKS_RETRY_SCHEDULE", "100ms,100ms,100ms");
const EVENT_TYPES: [&str; 5] = [
    "message.inbound",
    "message.outbound",
    "contact.created",
    "contact.updated",
    "contact.deleted",
];

fn outbound(org: &str, dep: &str) -> String {
    format!("/orgId/{org}/department/{dep}/message?direction=outbound")
}

/// The same ids in both organizations: only the organization tells them apart.
fn event(kind: &str, org: &str, text: &str) -> Value {
    let n = kind.replace('.', "-");
    let mut e = json!({"eventId": format!("evt-{n}"), "type": kind, "organizationId": org,
                       "departmentId": DEP, "occurredAt": 1_700_000_000_000i64,
                       "carrierMessageId": "carrier-1", "status": "RECEIVED"});
    if kind.starts_with("message.") {
        let direction = if kind == "message.outbound" {
            "out"
        } else {
            "in"
        };
        e["message"] = json!({"id": format!("msg-{n}"), "owner": null, "time": null,
                              "direction": direction, "to": ["+15550100"], "from": "+15550199",
                              "text": text, "media": [], "attachments": []});
    } else {
        e["contact"] = json!({"id": "contact-1"});
    }
    e
}

async fn post_event(server: &Server, caller: &str, event: &Value) -> (StatusCode, Value) {
    send(server.req(Method::POST, "/events", caller).json(event)).await
}

/// An answer with the resource's own id blanked out, to compare answers about different ids.
fn shape(body: &Value, id: &str) -> String {
    body.to_string().replace(id, "<id>")
}

struct Subscribed {
    id: String,
    inbox: Receiver,
    filter: String,
}

async fn subscribe_each_filter(server: &Server, org: &str) -> Vec<Subscribed> {
    let mut out = Vec::new();
    for filter in [inbound(org, DEP), outbound(org, DEP), contact(org, DEP)] {
        let inbox = Receiver::start(Handshake::Echo).await;
        let (status, sub) = server.create(org, &inbox.uri("/hook"), &[&filter]).await;
        assert_eq!(status, StatusCode::OK, "{sub}");
        out.push(Subscribed {
            id: sub["id"].as_str().unwrap().to_owned(),
            inbox,
            filter,
        });
    }
    out
}

#[tokio::test]
async fn organization_b_cannot_read_change_or_delete_organization_a_subscriptions() {
    let server = Server::start_with(&[FAST_RETRIES]);
    let a_subs = subscribe_each_filter(&server, A).await;
    let b_subs = subscribe_each_filter(&server, B).await;
    let unknown = "01a20000-0000-7000-8000-000000000000";

    for a in &a_subs {
        let (_, a_before) = server
            .get(&format!("/webhooksubscription/{}", a.id), A)
            .await;
        let (_, a_secret) = server
            .get(&format!("/webhooksubscription/{}/secret", a.id), A)
            .await;
        for (method, suffix) in [
            (Method::GET, ""),
            (Method::GET, "/secret"),
            (Method::DELETE, ""),
        ] {
            let (status, body) = send(server.req(
                method.clone(),
                &format!("/webhooksubscription/{}{suffix}", a.id),
                B,
            ))
            .await;
            let (unknown_status, unknown_body) = send(server.req(
                method.clone(),
                &format!("/webhooksubscription/{unknown}{suffix}"),
                B,
            ))
            .await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{method} {suffix}: {body}");
            assert_eq!(body["code"], "SUBSCRIPTION_NOT_FOUND");
            assert_eq!(
                (status, shape(&body, &a.id)),
                (unknown_status, shape(&unknown_body, unknown)),
                "B can tell A's subscription from a missing one"
            );
        }
        // Untouched: same subscription, same secret.
        let (status, a_after) = server
            .get(&format!("/webhooksubscription/{}", a.id), A)
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(a_after["eventFilters"], a_before["eventFilters"]);
        assert_eq!(
            a_after["lastUpdateDateTime"],
            a_before["lastUpdateDateTime"]
        );
        let (_, secret_after) = server
            .get(&format!("/webhooksubscription/{}/secret", a.id), A)
            .await;
        assert_eq!(secret_after, a_secret);
    }

    // Posting A's exact uri makes B a subscription of its own; A's is unchanged.
    let a0 = &a_subs[0];
    let (_, a0_before) = server
        .get(&format!("/webhooksubscription/{}", a0.id), A)
        .await;
    let (status, b_same_uri) = server
        .create(B, &a0.inbox.uri("/hook"), &[&contact(B, "dep-9")])
        .await;
    assert_eq!(status, StatusCode::OK, "{b_same_uri}");
    assert_ne!(b_same_uri["id"], a0.id.as_str());
    assert_eq!(b_same_uri["orgId"], B);
    let (_, a0_after) = server
        .get(&format!("/webhooksubscription/{}", a0.id), A)
        .await;
    assert_eq!(a0_after, {
        let mut v = a0_before.clone();
        v["expiresIn"] = a0_after["expiresIn"].clone();
        v
    });
    let (_, b_secret) = server
        .get(
            &format!(
                "/webhooksubscription/{}/secret",
                b_same_uri["id"].as_str().unwrap()
            ),
            B,
        )
        .await;
    let (_, a_secret) = server
        .get(&format!("/webhooksubscription/{}/secret", a0.id), A)
        .await;
    assert_ne!(b_secret["key"], a_secret["key"], "one uri, two secrets");

    // Filters naming A are never enabled for B.
    let a_filters: Vec<&str> = a_subs.iter().map(|s| s.filter.as_str()).collect();
    let receiver = Receiver::start(Handshake::Echo).await;
    let (status, body) = server.create(B, &receiver.uri("/x"), &a_filters).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("NO_ENABLED_FILTERS"))
    );
    let mut mixed = a_filters.clone();
    let b_filter = inbound(B, "dep-2");
    mixed.push(&b_filter);
    let (status, body) = server.create(B, &receiver.uri("/mixed"), &mixed).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["eventFilters"], json!([b_filter]));
    let disabled: Vec<&str> = body["disabledFilters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            assert_eq!(d["reason"], "PERMISSION_DENIED");
            assert_eq!(d["orgId"], B);
            d["filter"].as_str().unwrap()
        })
        .collect();
    assert_eq!(disabled, a_filters);

    // B's list holds only B's subscriptions, in every order.
    for sort in [
        "",
        "&sort=uri",
        "&sort=id,desc",
        "&sort=createdDateTime,desc",
    ] {
        let (status, page) = server
            .get(&format!("/webhooksubscription/all?size=2000{sort}"), B)
            .await;
        assert_eq!(status, StatusCode::OK);
        let ids: HashSet<&str> = page["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                assert_eq!(s["orgId"], B);
                s["id"].as_str().unwrap()
            })
            .collect();
        for a in &a_subs {
            assert!(!ids.contains(a.id.as_str()), "A's subscription in B's list");
        }
        assert_eq!(page["totalElements"], b_subs.len() + 2);
    }
}

#[tokio::test]
async fn organization_b_receives_none_of_organization_a_events() {
    let server = Server::start_with(&[FAST_RETRIES]);
    let a_subs = subscribe_each_filter(&server, A).await;
    let b_subs = subscribe_each_filter(&server, B).await;
    // B also asks for A's filters (disabled) on a receiver of its own, and subscribes A's
    // exact callback uri for its own events.
    let b_spy = Receiver::start(Handshake::Echo).await;
    let a_filters: Vec<String> = a_subs.iter().map(|s| s.filter.clone()).collect();
    let mut spy_filters: Vec<&str> = a_filters.iter().map(String::as_str).collect();
    let b_inbound = inbound(B, DEP);
    spy_filters.push(&b_inbound);
    let (status, _) = server.create(B, &b_spy.uri("/spy"), &spy_filters).await;
    assert_eq!(status, StatusCode::OK);

    // A's events of every type.
    for kind in EVENT_TYPES {
        let (status, body) = post_event(&server, A, &event(kind, A, "for A only")).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        assert_eq!(body["notifications"], 1, "{kind}: exactly A's subscription");
    }
    // 1 inbound + 1 outbound + 3 contact notifications reach A.
    for (sub, expected) in a_subs.iter().zip([1, 1, 3]) {
        let got = sub.inbox.wait_for(expected, WAIT).await;
        for n in &got {
            let n = n.json();
            assert_eq!(n["subscriptionId"], sub.id.as_str());
            assert_eq!(n["event"], sub.filter.as_str());
        }
    }

    // The same event ids, message ids and department in B are B's own: not deduplicated
    // against A's (which would tell B that A had them), and notified only to B.
    for kind in EVENT_TYPES {
        let (status, body) = post_event(&server, B, &event(kind, B, "for B only")).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        // B's subscription for the kind, and the spy for inbound messages.
        let expected = if kind == "message.inbound" { 2 } else { 1 };
        assert_eq!(body["notifications"], expected, "{kind}");
    }
    let b_expected = [1, 1, 3];
    for (sub, expected) in b_subs.iter().zip(b_expected) {
        let got = sub.inbox.wait_for(expected, WAIT).await;
        for n in &got {
            let n = n.json();
            assert_eq!(n["subscriptionId"], sub.id.as_str());
            let info = n
                .get("messageInfo")
                .or_else(|| n.get("contactInfo"))
                .unwrap();
            assert_eq!(info["organizationId"], B);
        }
    }
    b_spy.wait_for(1, WAIT).await;
    server.wait_until_idle().await;
    for n in b_spy.received() {
        assert_eq!(n.json()["messageInfo"]["organizationId"], B);
    }
    assert_eq!(b_spy.count(), 1, "B's spy got only B's inbound message");
    for (sub, expected) in a_subs.iter().zip([1, 1, 3]) {
        assert_eq!(sub.inbox.count(), expected, "A received B's events");
        for n in sub.inbox.received() {
            let n = n.json();
            let info = n
                .get("messageInfo")
                .or_else(|| n.get("contactInfo"))
                .unwrap();
            assert_eq!(info["organizationId"], A);
        }
    }
    for sub in &b_subs {
        for n in sub.inbox.received() {
            assert_ne!(n.json()["subscriptionId"], a_subs[0].id.as_str());
        }
    }

    // B cannot inject events into A, and the answer does not depend on A existing.
    for kind in EVENT_TYPES {
        let (status, into_a) = post_event(&server, B, &event(kind, A, "forged")).await;
        let (_, into_nobody) = post_event(&server, B, &event(kind, "org-nobody", "x")).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert_eq!(into_a["code"], "ORGANIZATION_MISMATCH");
        assert_eq!(into_a, into_nobody);
    }
    server.wait_until_idle().await;
    assert_eq!(a_subs[0].inbox.count(), 1, "a forged event reached A");
}

#[tokio::test]
async fn organization_b_cannot_read_or_overwrite_organization_a_messages() {
    let server = Server::start();
    for kind in ["message.inbound", "message.outbound"] {
        let a_event = event(kind, A, "A's secret text");
        let message_id = a_event["message"]["id"].as_str().unwrap().to_owned();
        assert_eq!(
            post_event(&server, A, &a_event).await.0,
            StatusCode::ACCEPTED
        );
        let path = format!("/message/getmessagebyid/{message_id}");
        let (status, body) = server.get(&path, B).await;
        let (_, missing) = server.get("/message/getmessagebyid/msg-missing", B).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(body["code"], "MESSAGE_NOT_FOUND");
        assert_eq!(
            shape(&body, &message_id),
            shape(&missing, "msg-missing"),
            "B can tell A's message from a missing one"
        );
        assert!(!body.to_string().contains("secret text"));

        // B storing a message with the same id keeps both apart.
        assert_eq!(
            post_event(&server, B, &event(kind, B, "B's text")).await.0,
            StatusCode::ACCEPTED
        );
        assert_eq!(server.get(&path, A).await.1["text"], "A's secret text");
        assert_eq!(server.get(&path, B).await.1["text"], "B's text");
    }
}

#[tokio::test]
async fn one_organization_at_its_subscription_limit_does_not_limit_another() {
    let server = Server::start_with(&[("WEBHOOKS_MAX_SUBSCRIPTIONS_PER_ORG", "2")]);
    let receiver = Receiver::start(Handshake::Echo).await;
    for i in 0..2 {
        let (status, _) = server
            .create(A, &receiver.uri(&format!("/a{i}")), &[&contact(A, DEP)])
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    let (status, full) = server
        .create(A, &receiver.uri("/a2"), &[&contact(A, DEP)])
        .await;
    assert_eq!(
        (status, full["code"].as_str()),
        (StatusCode::CONFLICT, Some("SUBSCRIPTION_LIMIT_REACHED"))
    );
    for i in 0..2 {
        let (status, body) = server
            .create(B, &receiver.uri(&format!("/b{i}")), &[&contact(B, DEP)])
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
}

#[tokio::test]
async fn a_token_for_one_organization_never_acts_for_another() {
    // Scopes, keys and organizations are independent: a read-only token of A cannot
    // write, and no header or query parameter can change the organization.
    let server = Server::start();
    let receiver = Receiver::start(Handshake::Echo).await;
    let (_, sub) = server
        .create(A, &receiver.uri("/a"), &[&contact(A, DEP)])
        .await;
    let id = sub["id"].as_str().unwrap();
    for (name, value) in [
        ("x-org-id", A),
        ("x-organization-id", A),
        ("orgId", A),
        ("x-amzn-oidc-data", A),
    ] {
        let (status, _) = send(
            server
                .req(Method::GET, &format!("/webhooksubscription/{id}"), B)
                .header(name, value),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "header {name}");
    }
    for query in ["?orgId=org-a", "?org_id=org-a", "?organizationId=org-a"] {
        let (status, _) = server
            .get(&format!("/webhooksubscription/{id}{query}"), B)
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "query {query}");
        let (_, page) = server
            .get(&format!("/webhooksubscription/all{query}"), B)
            .await;
        assert_eq!(page["totalElements"], 0, "query {query}");
    }
    let read_only = server.token_with(A, &["webhooks/read"]);
    let (status, body) = send(
        server
            .http
            .delete(server.url(&format!("/webhooksubscription/{id}")))
            .header("x-api-key", &server.key)
            .bearer_auth(read_only),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("INSUFFICIENT_SCOPE"))
    );
    assert_eq!(
        server.get(&format!("/webhooksubscription/{id}"), A).await.0,
        StatusCode::OK
    );
}
