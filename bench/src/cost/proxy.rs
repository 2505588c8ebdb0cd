//! A recording HTTP proxy on loopback, placed between the service and
//! DynamoDB Local or moto: it counts what AWS would bill for every request
//! that passes.
//!
//! - DynamoDB: `"ReturnConsumedCapacity":"TOTAL"` is added to every request
//!   that takes it, and the `ConsumedCapacity` of the answer is summed per
//!   action (read units for reads, write units for writes).
//! - SQS: requests are counted per action (JSON protocol `X-Amz-Target`, or
//!   the query protocol's `Action`), each 64 KB chunk of a request's or its
//!   answer's payload billed as one request, as SQS bills them; batch
//!   entries are counted beside.
//!
//! Adding a field changes the body after the SDK signed it: real AWS would
//! refuse the signature. DynamoDB Local and moto do not verify signatures,
//! which is what makes this proxy possible; it is a benchmark tool only.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use serde::Serialize;
use serde_json::Value;

/// SQS bills each 64 KB chunk of a request's payload as one request.
pub const SQS_CHUNK: usize = 64 * 1024;

/// The DynamoDB actions that take `ReturnConsumedCapacity`.
const CAPACITY_ACTIONS: [&str; 13] = [
    "GetItem",
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "Query",
    "Scan",
    "BatchGetItem",
    "BatchWriteItem",
    "TransactGetItems",
    "TransactWriteItems",
    "ExecuteStatement",
    "BatchExecuteStatement",
    "ExecuteTransaction",
];

/// What went through the proxy for one action.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Counts {
    /// HTTP requests.
    pub requests: u64,
    /// Requests as billed: SQS's 64 KB chunks (= `requests` for DynamoDB).
    pub billed_requests: u64,
    /// Entries of batch requests (SQS), or items written or keys read in a batch (DynamoDB).
    pub entries: u64,
    /// DynamoDB read and write capacity units, as the answers reported them.
    pub read_units: f64,
    pub write_units: f64,
    /// Answers that were errors (4xx/5xx).
    pub errors: u64,
}

impl Counts {
    fn add(&mut self, other: &Counts) {
        self.requests += other.requests;
        self.billed_requests += other.billed_requests;
        self.entries += other.entries;
        self.read_units += other.read_units;
        self.write_units += other.write_units;
        self.errors += other.errors;
    }

    /// `self - before`, field by field.
    pub fn since(&self, before: &Counts) -> Counts {
        Counts {
            requests: self.requests - before.requests,
            billed_requests: self.billed_requests - before.billed_requests,
            entries: self.entries - before.entries,
            read_units: self.read_units - before.read_units,
            write_units: self.write_units - before.write_units,
            errors: self.errors - before.errors,
        }
    }
}

/// Counts per `"<service>:<action>"` (`dynamodb:PutItem`, `sqs:SendMessageBatch`).
pub type Tally = BTreeMap<String, Counts>;

/// The difference of two tallies (actions with no request left out).
pub fn tally_since(now: &Tally, before: &Tally) -> Tally {
    now.iter()
        .map(|(k, c)| {
            (
                k.clone(),
                c.since(&before.get(k).copied().unwrap_or_default()),
            )
        })
        .filter(|(_, c)| c.requests > 0)
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    DynamoDb,
    Sqs,
    /// STS and EventBridge (AWS destinations): each request counted by its action.
    Destination,
}

impl Service {
    fn name(self) -> &'static str {
        match self {
            Service::DynamoDb => "dynamodb",
            Service::Sqs => "sqs",
            Service::Destination => "destination",
        }
    }
}

struct Inner {
    service: Service,
    upstream: String,
    client: reqwest::Client,
    tally: Mutex<Tally>,
}

/// A running proxy (it stops with the runtime that started it).
#[derive(Clone)]
pub struct Proxy {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream` (`http://host:port`).
    pub async fn start(service: Service, upstream: &str) -> Result<Proxy, String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("proxy: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let client = reqwest::Client::builder()
            .no_proxy()
            .tcp_nodelay(true)
            .build()
            .map_err(|e| e.to_string())?;
        let inner = Arc::new(Inner {
            service,
            upstream: upstream.trim_end_matches('/').to_owned(),
            client,
            tally: Mutex::default(),
        });
        let router = axum::Router::new()
            .fallback(forward)
            .with_state(inner.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Proxy { addr, inner })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What was counted so far.
    pub fn tally(&self) -> Tally {
        self.inner.tally.lock().expect("not poisoned").clone()
    }
}

async fn forward(State(inner): State<Arc<Inner>>, request: Request) -> Response<Body> {
    match relay(&inner, request).await {
        Ok(response) => response,
        Err(e) => Response::builder()
            .status(502)
            .body(Body::from(format!("proxy: {e}")))
            .expect("valid response"),
    }
}

async fn relay(inner: &Inner, request: Request) -> Result<Response<Body>, String> {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 64 << 20)
        .await
        .map_err(|e| e.to_string())?;
    let target = parts
        .headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let (action, body) = match inner.service {
        Service::DynamoDb => {
            let action = target_action(target.as_deref());
            let body = with_consumed_capacity(&action, &body).unwrap_or_else(|| body.to_vec());
            (action, body)
        }
        Service::Sqs | Service::Destination => {
            (sqs_action(target.as_deref(), &body), body.to_vec())
        }
    };
    // A send into a customer's queue (an AWS destination), apart from the service's own.
    let customer = inner.service == Service::Sqs
        && String::from_utf8_lossy(&body).contains(&format!("/{}/", testkit::customer::ACCOUNT));
    let url = format!(
        "{}{}",
        inner.upstream,
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let mut upstream = inner.client.request(parts.method.clone(), url);
    for (name, value) in &parts.headers {
        if !matches!(name.as_str(), "host" | "content-length" | "connection") {
            upstream = upstream.header(name, value);
        }
    }
    let request_len = body.len();
    let sent_entries = match inner.service {
        Service::Sqs | Service::Destination => sqs_entries(&action, &body),
        Service::DynamoDb => dynamodb_entries(&action, &body),
    };
    let answer = upstream
        .body(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = answer.status();
    let headers = answer.headers().clone();
    let answer_body = answer.bytes().await.map_err(|e| e.to_string())?;

    let mut counts = Counts {
        requests: 1,
        billed_requests: 1,
        entries: sent_entries,
        errors: u64::from(!status.is_success()),
        ..Counts::default()
    };
    match inner.service {
        Service::DynamoDb => {
            let (read, write) = consumed(&action, &answer_body);
            (counts.read_units, counts.write_units) =
                transaction_floor(&action, sent_entries, read, write);
        }
        Service::Destination => {}
        Service::Sqs => {
            counts.billed_requests = sqs_billed(request_len.max(answer_body.len()));
            if action == "ReceiveMessage" {
                counts.entries = received_messages(&answer_body);
            }
        }
    }
    inner
        .tally
        .lock()
        .expect("not poisoned")
        .entry(match customer {
            true => format!("{DESTINATION_SQS}{action}"),
            false => format!("{}:{action}", inner.service.name()),
        })
        .or_default()
        .add(&counts);

    let mut response = Response::builder().status(status);
    for (name, value) in &headers {
        if !matches!(
            name.as_str(),
            "content-length" | "transfer-encoding" | "connection"
        ) {
            response = response.header(name, value);
        }
    }
    response
        .body(Body::from(answer_body))
        .map_err(|e| e.to_string())
}

/// Tally keys of the sends into a customer's queue (`destination-sqs:SendMessage`).
pub const DESTINATION_SQS: &str = "destination-sqs:";

/// The action of a JSON-protocol request: `DynamoDB_20120810.PutItem` → `PutItem`.
fn target_action(target: Option<&str>) -> String {
    target
        .and_then(|t| t.rsplit('.').next())
        .unwrap_or("unknown")
        .to_owned()
}

/// The SQS action: `X-Amz-Target: AmazonSQS.SendMessage` (JSON protocol), or
/// `Action=SendMessage` in a query-protocol form body.
pub fn sqs_action(target: Option<&str>, body: &[u8]) -> String {
    if target.is_some() {
        return target_action(target);
    }
    String::from_utf8_lossy(body)
        .split('&')
        .find_map(|pair| pair.strip_prefix("Action="))
        .unwrap_or("unknown")
        .to_owned()
}

/// Requests SQS bills for a payload of `bytes`: one per 64 KB chunk, at least one.
pub fn sqs_billed(bytes: usize) -> u64 {
    bytes.div_ceil(SQS_CHUNK).max(1) as u64
}

/// Entries of an SQS batch request (1 for a single-message request).
fn sqs_entries(action: &str, body: &[u8]) -> u64 {
    if !action.ends_with("Batch") {
        return u64::from(action != "ReceiveMessage");
    }
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return v["Entries"].as_array().map_or(0, |e| e.len() as u64);
    }
    // Query protocol: `<Action>RequestEntry.<n>.Id=` once per entry.
    String::from_utf8_lossy(body)
        .split('&')
        .filter(|pair| {
            pair.split_once('=').is_some_and(|(k, _)| {
                k.ends_with(".Id") && (k.contains("Entry.") || k.contains("Entries."))
            })
        })
        .count() as u64
}

fn received_messages(answer: &[u8]) -> u64 {
    match serde_json::from_slice::<Value>(answer) {
        Ok(v) => v["Messages"].as_array().map_or(0, |m| m.len() as u64),
        Err(_) => String::from_utf8_lossy(answer).matches("<Message>").count() as u64,
    }
}

/// Items a DynamoDB batch or transaction names (1 for the single-item actions).
fn dynamodb_entries(action: &str, body: &[u8]) -> u64 {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return 1;
    };
    match action {
        "BatchWriteItem" | "BatchGetItem" => v["RequestItems"].as_object().map_or(0, |tables| {
            tables
                .values()
                .map(|t| match t {
                    Value::Array(writes) => writes.len() as u64,
                    other => other["Keys"].as_array().map_or(0, |k| k.len() as u64),
                })
                .sum()
        }),
        "TransactWriteItems" | "TransactGetItems" => {
            v["TransactItems"].as_array().map_or(0, |i| i.len() as u64)
        }
        _ => 1,
    }
}

/// The request body with `"ReturnConsumedCapacity":"TOTAL"`, when the action
/// takes it and the request did not ask already; `None` to send it unchanged.
pub fn with_consumed_capacity(action: &str, body: &[u8]) -> Option<Vec<u8>> {
    if !CAPACITY_ACTIONS.contains(&action) {
        return None;
    }
    let mut v: Value = serde_json::from_slice(body).ok()?;
    let object = v.as_object_mut()?;
    if object.contains_key("ReturnConsumedCapacity") {
        return None;
    }
    object.insert("ReturnConsumedCapacity".into(), "TOTAL".into());
    serde_json::to_vec(&v).ok()
}

/// DynamoDB bills each item of a transaction twice (2 units per KB written,
/// 2 per 4 KB read), but DynamoDB Local answers 2 units for a whole
/// transaction whatever its items (checked on 2026-11-22: 3 puts of a few
/// bytes, 2.0 reported; on AWS 6). A transaction is therefore counted at no
/// less than 2 units per item; items over 1 KB (4 KB read) would cost more.
pub fn transaction_floor(action: &str, entries: u64, read: f64, write: f64) -> (f64, f64) {
    let floor = 2.0 * entries as f64;
    match action {
        "TransactWriteItems" => (read, write.max(floor)),
        "TransactGetItems" => (read.max(floor), write),
        _ => (read, write),
    }
}

fn is_read(action: &str) -> bool {
    matches!(
        action,
        "GetItem" | "Query" | "Scan" | "BatchGetItem" | "TransactGetItems"
    )
}

/// (read units, write units) of a DynamoDB answer: its `ConsumedCapacity`
/// (one object, or one per table for batches and transactions). Where only
/// `CapacityUnits` is given, the action says which kind they are.
pub fn consumed(action: &str, answer: &[u8]) -> (f64, f64) {
    let Ok(v) = serde_json::from_slice::<Value>(answer) else {
        return (0.0, 0.0);
    };
    let entries: Vec<&Value> = match &v["ConsumedCapacity"] {
        Value::Array(all) => all.iter().collect(),
        Value::Object(_) => vec![&v["ConsumedCapacity"]],
        _ => return (0.0, 0.0),
    };
    let (mut read, mut write) = (0.0, 0.0);
    for c in entries {
        let (r, w) = (
            c["ReadCapacityUnits"].as_f64(),
            c["WriteCapacityUnits"].as_f64(),
        );
        if r.is_some() || w.is_some() {
            read += r.unwrap_or(0.0);
            write += w.unwrap_or(0.0);
        } else {
            let units = c["CapacityUnits"].as_f64().unwrap_or(0.0);
            match is_read(action) {
                true => read += units,
                false => write += units,
            }
        }
    }
    (read, write)
}
