//! The three runtimes under one interface: `webhooks-local` on SQLite, the
//! same binary with `--backend aws` on DynamoDB Local and moto, and the
//! Lambda handlers (the API functions through `lambda::handle_with_queue`
//! with API Gateway events, `ingest-events` and `deliver-notifications`
//! fed SQS events as the event source mappings would) on the same
//! emulators. Each is fresh: its own data dir, or tables and queues.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http::StatusCode;
use serde_json::{json, Value};
use webhook_core::aws::dynamodb::{self, DynamoStore, Tables};
use webhook_core::aws::sqs::SqsQueue;
use webhook_core::lambda::{self, queues};
use webhook_core::routes::Route;
use webhook_core::{App, Config, Profile};

use crate::common::Server;

/// What every runtime is configured with, so a sequence settles in
/// seconds: two retries a second apart, a 1 s delivery timeout (the slow
/// answer takes longer, `callback::SLOW`), and no circuit breaker (the
/// model leaves it out: its cool-down would make the end state a matter
/// of timing) with a window longer than a sequence, so every failure of
/// a sequence counts.
pub const SETTINGS: [(&str, &str); 5] = [
    ("WEBHOOKS_RETRY_SCHEDULE", "1s,1s"),
    ("WEBHOOKS_DELIVERY_TIMEOUT_MS", "1000"),
    ("WEBHOOKS_BREAKER_FAILURES", "1000"),
    ("WEBHOOKS_BREAKER_WINDOW", "1h"),
    ("WEBHOOKS_HANDSHAKE_TIMEOUT_MS", "3000"),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    Sqlite,
    Aws,
    Lambda,
}

impl Which {
    pub const ALL: [Which; 3] = [Which::Sqlite, Which::Aws, Which::Lambda];

    pub fn name(self) -> &'static str {
        match self {
            Which::Sqlite => "sqlite",
            Which::Aws => "aws",
            Which::Lambda => "lambda",
        }
    }
}

pub enum Runtime {
    Local(Server),
    Lambda(Box<Functions>),
}

impl Runtime {
    pub async fn start(which: Which) -> Runtime {
        match which {
            Which::Sqlite => Runtime::Local(Server::start_on(false, &SETTINGS)),
            Which::Aws => Runtime::Local(Server::start_on(true, &SETTINGS)),
            Which::Lambda => Runtime::Lambda(Box::new(Functions::start().await)),
        }
    }

    /// An API call as org-1: status and body (`Null` when empty).
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call_as("org-1", method, path, body).await
    }

    /// An API call as `org`.
    pub async fn call_as(
        &self,
        org: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        match self {
            Runtime::Local(server) => {
                let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
                let mut request = server.req(method, path, org);
                if let Some(body) = body {
                    request = request.json(&body);
                }
                let request = &request;
                retried(|| async move {
                    let response = request.try_clone().unwrap().send().await.unwrap();
                    let status = response.status().as_u16();
                    let bytes = response.bytes().await.unwrap();
                    (status, parse(&bytes))
                })
                .await
            }
            Runtime::Lambda(functions) => functions.call(org, method, path, body).await,
        }
    }

    /// Events as the platform sends them: `POST /events` one after another
    /// (each answer), or one batch of the events queue to `ingest-events`
    /// (no answer to a producer: `None`).
    pub async fn post_events(&self, events: &[Value]) -> Option<Vec<(u16, Value)>> {
        match self {
            Runtime::Local(_) => {
                let mut answers = Vec::new();
                for event in events {
                    answers.push(self.call("POST", "/events", Some(event.clone())).await);
                }
                Some(answers)
            }
            Runtime::Lambda(functions) => {
                functions.ingest(events).await;
                None
            }
        }
    }

    /// Jobs left on the runtime's delivery queues (for SQLite, the
    /// notifications with a due time: the queue is the history's table).
    pub async fn jobs_left(&self) -> u64 {
        match self {
            Runtime::Local(server) => match server.env_var("WEBHOOKS_SUBSCRIPTIONS_TABLE") {
                None => {
                    let db = rusqlite::Connection::open_with_flags(
                        server.sqlite_file(),
                        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
                    )
                    .unwrap();
                    db.query_row(
                        "SELECT count(*) FROM notifications WHERE due_at IS NOT NULL",
                        [],
                        |r| r.get::<_, u64>(0),
                    )
                    .unwrap()
                }
                Some(prefix) => {
                    // --create-tables names the queues after the subscriptions table.
                    let sqs = sqs_client().await;
                    let mut left = 0;
                    for name in [
                        format!("{prefix}-delivery"),
                        format!("{prefix}-ordered.fifo"),
                    ] {
                        let url = sqs
                            .get_queue_url()
                            .queue_name(name)
                            .send()
                            .await
                            .unwrap()
                            .queue_url
                            .unwrap();
                        left += crate::common::sqs_depth(&sqs, &url).await;
                    }
                    left
                }
            },
            Runtime::Lambda(functions) => {
                crate::common::sqs_depth(&functions.sqs, &functions.queue_url).await
                    + crate::common::sqs_depth(&functions.sqs, &functions.fifo_url).await
            }
        }
    }
}

/// Sends again after a `503` with `Retry-After` (a busy emulator), as a
/// client that honours it does; at most about a minute.
async fn retried<F, Fut>(call: F) -> (u16, Value)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = (u16, Value)>,
{
    for _ in 0..12 {
        let (status, body) = call().await;
        if status != StatusCode::SERVICE_UNAVAILABLE.as_u16() {
            return (status, body);
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    panic!("still 503 after a minute of retries");
}

fn parse(bytes: &[u8]) -> Value {
    if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(bytes).expect("a JSON body")
    }
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn sqs_client() -> aws_sdk_sqs::Client {
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    aws_sdk_sqs::Client::new(&sdk)
}

/// The Lambda functions of one stack on fresh tables and queues: the API
/// functions' app and queue (as `create-`, `get-`, ..., `resend-` and
/// `recover-` build them), the queue functions' (as `ingest-events` and
/// `deliver-notifications` build them), and the event source mappings of
/// the two delivery queues, running until dropped.
pub struct Functions {
    api: App,
    api_queue: SqsQueue,
    queues: Arc<queues::QueueFunctions>,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    fifo_url: String,
    mappings: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Functions {
    fn drop(&mut self) {
        self.mappings.iter().for_each(|m| m.abort());
    }
}

/// The stack's account and region, as the event source ARNs carry them.
const ARN: &str = "arn:aws:sqs:us-east-1:123456789012";

impl Functions {
    async fn start() -> Functions {
        testkit::emulators::require(testkit::emulators::DYNAMODB);
        testkit::emulators::require(testkit::emulators::SQS);
        let prefix = testkit::emulators::unique_name("differential");
        let tables = Tables {
            subscriptions: format!("{prefix}-subscriptions"),
            messages: format!("{prefix}-messages"),
        };
        let store = DynamoStore::from_env(tables.clone()).await;
        dynamodb::create_tables(store.client(), &tables)
            .await
            .expect("tables in DynamoDB Local");
        let sqs = sqs_client().await;
        SqsQueue::create(sqs.clone(), &tables.subscriptions)
            .await
            .expect("queues on moto");
        let url = |name: String| {
            let sqs = sqs.clone();
            async move {
                sqs.get_queue_url()
                    .queue_name(name)
                    .send()
                    .await
                    .unwrap()
                    .queue_url
                    .unwrap()
            }
        };
        let prefix = &tables.subscriptions;
        let environment = [
            ("WEBHOOKS_SUBSCRIPTIONS_TABLE", tables.subscriptions.clone()),
            ("WEBHOOKS_MESSAGES_TABLE", tables.messages.clone()),
            (
                "WEBHOOKS_DELIVERY_QUEUE_URL",
                url(format!("{prefix}-delivery")).await,
            ),
            (
                "WEBHOOKS_DELIVERY_DLQ_URL",
                url(format!("{prefix}-delivery-dlq")).await,
            ),
            (
                "WEBHOOKS_ORDERED_QUEUE_URL",
                url(format!("{prefix}-ordered.fifo")).await,
            ),
            (
                "WEBHOOKS_ORDERED_DLQ_URL",
                url(format!("{prefix}-ordered-dlq.fifo")).await,
            ),
            // The receivers are on loopback, over http.
            ("WEBHOOKS_ALLOW_HTTP_CALLBACKS", "true".into()),
            ("WEBHOOKS_ALLOW_PRIVATE_CALLBACKS", "true".into()),
        ];
        let config = || {
            Config::from_lookup(Profile::Lambda, |var| {
                environment
                    .iter()
                    .find(|(k, _)| *k == var)
                    .map(|(_, v)| v.clone())
                    .or_else(|| {
                        SETTINGS
                            .iter()
                            .find(|(k, _)| *k == var)
                            .map(|(_, v)| v.to_string())
                    })
            })
            .unwrap()
        };
        let (api, api_queue) = webhook_core::services::aws::api_app_with_queue(config())
            .await
            .unwrap();
        let queues = Arc::new(queues::queue_functions(config()).await.unwrap());
        let queue_url = environment[2].1.clone();
        let fifo_url = environment[4].1.clone();
        let mappings = vec![
            tokio::spawn(mapping(
                queues.clone(),
                sqs.clone(),
                queue_url.clone(),
                false,
            )),
            tokio::spawn(mapping(queues.clone(), sqs.clone(), fifo_url.clone(), true)),
        ];
        Functions {
            api,
            api_queue,
            queues,
            sqs,
            queue_url,
            fifo_url,
            mappings,
        }
    }

    /// An API Gateway (REST) request through the endpoint's function, with
    /// the authorizer's context for `org`.
    async fn call(&self, org: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        let method_ = http::Method::from_bytes(method.as_bytes()).unwrap();
        let endpoint = Route::resolve(&method_, path)
            .unwrap_or_else(|e| panic!("{method} {path}: {e:?}"))
            .endpoint();
        let mut event: Value =
            serde_json::from_str(include_str!("../../../../events/get-subscription-ok.json"))
                .unwrap();
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let mut parameters = serde_json::Map::new();
        if parts.len() > 1 && parts[0] == "webhooksubscription" && parts[1] != "all" {
            parameters.insert("id".into(), parts[1].into());
        }
        if parts.len() > 3 && parts[2] == "notifications" {
            parameters.insert("uuid".into(), parts[3].into());
        }
        let mut single = serde_json::Map::new();
        let mut multi = serde_json::Map::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            single.insert(k.into(), v.into());
            multi.insert(k.into(), json!([v]));
        }
        event["path"] = path.into();
        event["httpMethod"] = method.into();
        event["requestContext"]["authorizer"]["orgId"] = org.into();
        event["requestContext"]["httpMethod"] = method.into();
        event["requestContext"]["path"] = format!("/prod{path}").into();
        event["pathParameters"] = if parameters.is_empty() {
            Value::Null
        } else {
            parameters.into()
        };
        event["queryStringParameters"] = if single.is_empty() {
            Value::Null
        } else {
            single.into()
        };
        event["multiValueQueryStringParameters"] = if multi.is_empty() {
            Value::Null
        } else {
            multi.into()
        };
        if let Some(body) = body {
            event["body"] = body.to_string().into();
            event["headers"]["Content-Type"] = "application/json".into();
            event["multiValueHeaders"]["Content-Type"] = json!(["application/json"]);
        }
        let event = &event;
        retried(|| async move {
            let response = lambda::handle_with_queue(
                &self.api,
                Some(&self.api_queue),
                endpoint,
                request_copy(event),
            )
            .await
            .unwrap();
            let status = response.status().as_u16();
            let body = match response.body() {
                lambda_http::Body::Empty => Value::Null,
                lambda_http::Body::Text(text) => parse(text.as_bytes()),
                other => panic!("API Gateway REST needs text bodies: {other:?}"),
            };
            (status, body)
        })
        .await
    }

    /// One batch of the events queue to `ingest-events`: every record
    /// committed (none reported failed).
    async fn ingest(&self, events: &[Value]) {
        let records: Vec<Value> = events
            .iter()
            .map(|event| {
                json!({
                    "messageId": record_id(),
                    "receiptHandle": record_id(),
                    "body": event.to_string(),
                    "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": now_ms().to_string()},
                    "messageAttributes": {},
                    "eventSource": "aws:sqs",
                    "eventSourceARN": format!("{ARN}:webhooks-EventsQueue"),
                    "awsRegion": "us-east-1",
                })
            })
            .collect();
        let batch = serde_json::from_value(json!({ "Records": records })).unwrap();
        let response = queues::ingest_events(&self.queues.app, &self.queues.outbox, batch).await;
        assert!(
            response.batch_item_failures.is_empty(),
            "ingest-events reported records failed: {:?}",
            response.batch_item_failures
        );
    }
}

fn request_copy(event: &Value) -> lambda_http::Request {
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

/// A record id of the events queue, unique in the test process.
fn record_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("record-{}", NEXT.fetch_add(1, Ordering::SeqCst))
}

/// An event source mapping: receives from `url` (a batch of up to 10 from
/// the standard queue, one from the FIFO queue, as the stack's mappings
/// are configured), hands the batch to `deliver-notifications`, and
/// deletes the records not reported failed, as Lambda does.
async fn mapping(
    functions: Arc<queues::QueueFunctions>,
    sqs: aws_sdk_sqs::Client,
    url: String,
    fifo: bool,
) {
    let name = url.rsplit('/').next().unwrap().to_owned();
    loop {
        let out = match sqs
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(if fifo { 1 } else { 10 })
            .visibility_timeout(30)
            .wait_time_seconds(1)
            .message_system_attribute_names(
                aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount,
            )
            .send()
            .await
        {
            Ok(out) => out,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let messages = out.messages.unwrap_or_default();
        if messages.is_empty() {
            continue;
        }
        let records: Vec<Value> = messages
            .iter()
            .map(|m| {
                let count = m
                    .attributes()
                    .and_then(|a| {
                        a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount)
                    })
                    .cloned()
                    .unwrap_or_else(|| "1".into());
                json!({
                    "messageId": m.message_id(),
                    "receiptHandle": m.receipt_handle(),
                    "body": m.body(),
                    "attributes": {"ApproximateReceiveCount": count},
                    "messageAttributes": {},
                    "eventSource": "aws:sqs",
                    "eventSourceARN": format!("{ARN}:{name}"),
                    "awsRegion": "us-east-1",
                })
            })
            .collect();
        let batch = serde_json::from_value(json!({ "Records": records })).unwrap();
        let response = queues::deliver_notifications(
            &functions.app,
            &functions.queue,
            &functions.outbox,
            batch,
        )
        .await;
        let failed: Vec<&str> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        for m in &messages {
            if !failed.contains(&m.message_id().unwrap_or_default()) {
                let _ = sqs
                    .delete_message()
                    .queue_url(&url)
                    .receipt_handle(m.receipt_handle().unwrap())
                    .send()
                    .await;
            }
        }
    }
}

/// Waits until `done` holds, at most `limit`; false if it never did.
pub async fn within<F, Fut>(limit: Duration, done: F) -> bool
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if done().await {
            return true;
        }
        if started.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
