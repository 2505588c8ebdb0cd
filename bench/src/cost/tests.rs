//! The proxy on real loopback sockets, in front of a stand-in upstream that
//! answers the way DynamoDB and SQS do.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use serde_json::{json, Value};

use super::proxy::{
    batch_get_floor, consumed, sqs_action, sqs_billed, tally_since, transaction_floor, Proxy,
    Service,
};

type Seen = Arc<Mutex<Vec<Value>>>;

/// An upstream that records each JSON body and answers like DynamoDB:
/// capacity only when the request asked for it.
async fn upstream(seen: Seen) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("port");
    let addr = listener.local_addr().expect("bound");
    async fn answer(State(seen): State<Seen>, request: Request) -> Response<Body> {
        let target = request
            .headers()
            .get("x-amz-target")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let body = axum::body::to_bytes(request.into_body(), 1 << 20)
            .await
            .expect("body");
        let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        seen.lock().expect("lock").push(v.clone());
        let answer = match target.as_str() {
            "DynamoDB_20120810.BatchWriteItem" if v["ReturnConsumedCapacity"] == "TOTAL" => {
                json!({"ConsumedCapacity": [{"TableName": "t", "CapacityUnits": 2.0}]})
            }
            t if t.starts_with("DynamoDB") && v["ReturnConsumedCapacity"] == "TOTAL" => {
                json!({"ConsumedCapacity": {"TableName": "t", "CapacityUnits": 0.5}})
            }
            "AmazonSQS.ReceiveMessage" => json!({"Messages": [{"Body": "a"}, {"Body": "b"}]}),
            _ => json!({}),
        };
        Response::builder()
            .header("x-amz-crc32", "1")
            .body(Body::from(answer.to_string()))
            .expect("response")
    }
    let router = axum::Router::new().fallback(answer).with_state(seen);
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}")
}

async fn post(proxy: &Proxy, target: &str, body: Value) -> reqwest::Response {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
        .post(proxy.url())
        .header("x-amz-target", target)
        .header("content-type", "application/x-amz-json-1.0")
        .body(body.to_string())
        .send()
        .await
        .expect("through the proxy")
}

#[tokio::test]
async fn dynamodb_requests_ask_for_capacity_and_it_is_summed_per_action() {
    let seen = Seen::default();
    let proxy = Proxy::start(Service::DynamoDb, &upstream(seen.clone()).await)
        .await
        .expect("proxy");
    let answer = post(
        &proxy,
        "DynamoDB_20120810.GetItem",
        json!({"TableName": "t"}),
    )
    .await;
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["x-amz-crc32"], "1", "headers pass through");
    let before = proxy.tally();
    post(
        &proxy,
        "DynamoDB_20120810.PutItem",
        json!({"TableName": "t"}),
    )
    .await;
    post(
        &proxy,
        "DynamoDB_20120810.PutItem",
        json!({"TableName": "t"}),
    )
    .await;
    let items = json!({"RequestItems": {"t": [{"PutRequest": {}}, {"PutRequest": {}}, {"PutRequest": {}}]}});
    post(&proxy, "DynamoDB_20120810.BatchWriteItem", items).await;
    // Already asked for: left as it is (the upstream then answers no capacity).
    let indexes = json!({"TableName": "t", "ReturnConsumedCapacity": "INDEXES"});
    post(&proxy, "DynamoDB_20120810.Query", indexes).await;
    post(
        &proxy,
        "DynamoDB_20120810.DescribeTable",
        json!({"TableName": "t"}),
    )
    .await;

    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen[0]["ReturnConsumedCapacity"], "TOTAL");
    assert_eq!(seen[0]["TableName"], "t", "the rest of the body is kept");
    assert_eq!(seen[4]["ReturnConsumedCapacity"], "INDEXES");
    assert!(seen[5].get("ReturnConsumedCapacity").is_none());

    let tally = proxy.tally();
    assert_eq!(tally["dynamodb:GetItem"].read_units, 0.5);
    assert_eq!(tally["dynamodb:GetItem"].write_units, 0.0);
    let delta = tally_since(&tally, &before);
    assert!(!delta.contains_key("dynamodb:GetItem"));
    assert_eq!(delta["dynamodb:PutItem"].requests, 2);
    assert_eq!(delta["dynamodb:PutItem"].write_units, 1.0);
    assert_eq!(delta["dynamodb:BatchWriteItem"].entries, 3);
    assert_eq!(delta["dynamodb:BatchWriteItem"].write_units, 2.0);
    assert_eq!(delta["dynamodb:DescribeTable"].requests, 1);
}

#[tokio::test]
async fn sqs_requests_are_counted_per_action_and_billed_per_64_kb() {
    let proxy = Proxy::start(Service::Sqs, &upstream(Seen::default()).await)
        .await
        .expect("proxy");
    let small: Vec<Value> = (0..10)
        .map(|i| json!({"Id": i.to_string(), "MessageBody": "x".repeat(600)}))
        .collect();
    post(
        &proxy,
        "AmazonSQS.SendMessageBatch",
        json!({"Entries": small}),
    )
    .await;
    // 10 × 10 KB: 100 KB of payload, two 64 KB chunks.
    let large: Vec<Value> = (0..10)
        .map(|i| json!({"Id": i.to_string(), "MessageBody": "x".repeat(10_000)}))
        .collect();
    post(
        &proxy,
        "AmazonSQS.SendMessageBatch",
        json!({"Entries": large}),
    )
    .await;
    post(&proxy, "AmazonSQS.ReceiveMessage", json!({"QueueUrl": "q"})).await;

    let tally = proxy.tally();
    let batch = tally["sqs:SendMessageBatch"];
    assert_eq!(batch.requests, 2);
    assert_eq!(batch.billed_requests, 1 + 2);
    assert_eq!(batch.entries, 20);
    assert_eq!(tally["sqs:ReceiveMessage"].entries, 2);
    assert_eq!(tally["sqs:ReceiveMessage"].billed_requests, 1);
}

#[test]
fn query_protocol_actions_and_billing_chunks() {
    assert_eq!(
        sqs_action(None, b"Action=DeleteMessageBatch&QueueUrl=q"),
        "DeleteMessageBatch"
    );
    assert_eq!(
        sqs_action(Some("AmazonSQS.SendMessage"), b"{}"),
        "SendMessage"
    );
    assert_eq!(sqs_billed(0), 1);
    assert_eq!(sqs_billed(64 * 1024), 1);
    assert_eq!(sqs_billed(64 * 1024 + 1), 2);
    assert_eq!(sqs_billed(256 * 1024), 4);
}

#[test]
fn capacity_with_read_and_write_units_is_split_as_given() {
    let answer = br#"{"ConsumedCapacity":[{"TableName":"a","CapacityUnits":3,"ReadCapacityUnits":1,"WriteCapacityUnits":2},{"TableName":"b","CapacityUnits":2}]}"#;
    assert_eq!(consumed("TransactWriteItems", answer), (1.0, 4.0));
    assert_eq!(
        consumed("Query", br#"{"ConsumedCapacity":{"CapacityUnits":1.5}}"#),
        (1.5, 0.0)
    );
    assert_eq!(consumed("GetItem", b"not json"), (0.0, 0.0));
}

#[test]
fn a_transaction_costs_at_least_two_units_per_item() {
    // DynamoDB Local's 2.0 for four items is raised to AWS's 8.
    assert_eq!(
        transaction_floor("TransactWriteItems", 4, 0.0, 2.0),
        (0.0, 8.0)
    );
    // A larger figure (items over 1 KB) is kept.
    assert_eq!(
        transaction_floor("TransactWriteItems", 2, 0.0, 6.0),
        (0.0, 6.0)
    );
    assert_eq!(
        transaction_floor("TransactGetItems", 3, 2.0, 0.0),
        (6.0, 0.0)
    );
    assert_eq!(transaction_floor("PutItem", 1, 0.0, 1.0), (0.0, 1.0));
}

#[test]
fn a_batch_get_costs_at_least_a_get_per_key() {
    let strong = br#"{"RequestItems":{"t":{"Keys":[{"pk":{"S":"a"}},{"pk":{"S":"b"}}],"ConsistentRead":true}}}"#;
    // DynamoDB Local's 0.0 for two missing keys is raised to AWS's 2.
    assert_eq!(batch_get_floor(strong, 0.0), 2.0);
    // A larger figure (items over 4 KB) is kept.
    assert_eq!(batch_get_floor(strong, 5.0), 5.0);
    let eventual = br#"{"RequestItems":{"t":{"Keys":[{"pk":{"S":"a"}}]}}}"#;
    assert_eq!(batch_get_floor(eventual, 0.0), 0.5);
}
