//! One deadline per API request (`webhook_core::deadline`, issue 37): a proxy in front of
//! DynamoDB Local holds every DynamoDB call just under its own bound (the attempt timeout of
//! the API's calls, 2 s), as a dependency thawing from a stall answers, so a request of several
//! calls would take their sum. Twenty `POST /events` and twenty creates, through the same
//! `http::serve` `webhooks-local` serves (and `http::handle`, which the API functions call),
//! must each answer within 5 s: `202`/`200`, or `503` with `Retry-After`; and an event refused
//! so is accepted when sent again, nothing lost. A control request with a deadline of 20 s shows
//! that the held calls do stretch a request past 5 s, so the bound is the deadline's doing.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::StatusCode;
use serde_json::{json, Value};
use testkit::receiver::{Handshake, Receiver};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use webhook_core::auth::{jwt, Authenticator};
use webhook_core::aws::dynamodb::DynamoStore;
use webhook_core::aws::outbox::AwsOutbox;
use webhook_core::aws::sqs::SqsQueue;
use webhook_core::services::Services;
use webhook_core::{App, Config, Profile};

use testkit::dynamodb_local;

/// The acceptance's bound on any answer.
const BOUND: Duration = Duration::from_secs(5);
const TRIES: usize = 20;
const API_KEY: &str = "deadline-test-key";
const JWT_SECRET: &str = "deadline-test-secret";
const ORG: &str = "org-deadline";

/// How long the proxy holds each call, in turn: each under the 2 s attempt timeout, so every
/// call succeeds, and the deadline falls after a different call from one request to the next.
const HOLDS_MS: [u64; 4] = [1_300, 1_500, 1_700, 1_900];

/// A TCP proxy to DynamoDB Local that holds each HTTP request it forwards.
struct HeldProxy {
    url: String,
    /// Whether requests are held (or pass at once).
    holding: Arc<AtomicBool>,
}

impl HeldProxy {
    async fn start(upstream: String) -> HeldProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let holding = Arc::new(AtomicBool::new(true));
        let turn = Arc::new(AtomicUsize::new(0));
        let flag = holding.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let (flag, turn) = (flag.clone(), turn.clone());
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let (from_client, mut to_client) = client.into_split();
                    let (mut from_server, to_server) = server.into_split();
                    let answers = tokio::spawn(async move {
                        tokio::io::copy(&mut from_server, &mut to_client).await
                    });
                    let _ = forward_held(from_client, to_server, flag, turn).await;
                    answers.abort();
                });
            }
        });
        HeldProxy { url, holding }
    }

    fn release(&self) {
        self.holding.store(false, SeqCst);
    }
}

/// Forwards whole HTTP requests (head and `Content-Length` body), each after its hold.
async fn forward_held(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    holding: Arc<AtomicBool>,
    turn: Arc<AtomicUsize>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let len = loop {
            if let Some(len) = request_len(&buf).filter(|len| buf.len() >= *len) {
                break len;
            }
            let n = from.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        if holding.load(SeqCst) {
            let hold = HOLDS_MS[turn.fetch_add(1, SeqCst) % HOLDS_MS.len()];
            tokio::time::sleep(Duration::from_millis(hold)).await;
        }
        to.write_all(&buf[..len]).await?;
        buf.drain(..len);
    }
}

/// The length of the HTTP request at the start of `buf`, once its head is in.
fn request_len(buf: &[u8]) -> Option<usize> {
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&buf[..head_end]).ok()?;
    let body = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    Some(head_end + body)
}

struct World {
    services: Services,
    auth: Authenticator,
    token: String,
    proxy: HeldProxy,
}

/// The service on fresh tables reached through a [`HeldProxy`], with the API's call bounds
/// and `deadline`, and moto's SQS for the delivery queue.
async fn world(deadline: &str) -> World {
    testkit::emulators::require(testkit::emulators::SQS);
    let deadline = deadline.to_owned();
    let config = Config::from_lookup(Profile::Lambda, |var| match var {
        "WEBHOOKS_ALLOW_HTTP_CALLBACKS" | "WEBHOOKS_ALLOW_PRIVATE_CALLBACKS" => Some("true".into()),
        "WEBHOOKS_API_DEADLINE" => Some(deadline.clone()),
        _ => None,
    })
    .unwrap();
    let (_, tables) = dynamodb_local::fresh_tables("deadline").await;
    let upstream = std::env::var("AWS_ENDPOINT_URL_DYNAMODB").unwrap();
    let proxy = HeldProxy::start(upstream.trim_start_matches("http://").to_owned()).await;
    let sdk =
        webhook_core::aws::sdk_config_with(&config.aws_calls.api, webhook_core::aws::Roots::System)
            .await;
    let dynamodb = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::config::Builder::from(&sdk)
            .endpoint_url(&proxy.url)
            .build(),
    );
    let store = Arc::new(DynamoStore::new(dynamodb, tables));
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let name = format!("deadline-{}", uuid::Uuid::new_v4().simple());
    let url = sqs.create_queue().queue_name(&name).send().await.unwrap();
    let queue = SqsQueue::new(sqs, url.queue_url().unwrap().to_owned(), None);
    let app = Arc::new(App::new(config, store.clone()));
    let services = Services {
        outbox: Arc::new(AwsOutbox::new(store, queue.clone(), app.clock.clone())),
        queue: Arc::new(queue),
        ordered_queue: None,
        app,
    };
    let mut jwt_config = services.app.config.jwt.clone();
    jwt_config.hs256_secret = Some(JWT_SECRET.into());
    let scopes = jwt_config.scopes.all();
    let token = jwt::mint_hs256(
        JWT_SECRET,
        &jwt_config.org_claim,
        ORG,
        &scopes,
        Duration::from_secs(3_600),
    );
    let auth = Authenticator::new(vec![API_KEY.into()], jwt::Verifier::new(&jwt_config));
    World {
        services,
        auth,
        token,
        proxy,
    }
}

impl World {
    /// One request through `http::serve`: its status, problem code, `Retry-After`, time.
    async fn call(&self, path: &str, body: &Value) -> (StatusCode, String, bool, Duration) {
        let request = http::Request::builder()
            .method("POST")
            .uri(path)
            .header("x-api-key", API_KEY)
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .body(Bytes::from(body.to_string()))
            .unwrap();
        let start = Instant::now();
        let response = webhook_core::http::serve(&self.services, &self.auth, request).await;
        let took = start.elapsed();
        let status = response.status();
        let retry_after = response.headers().contains_key("retry-after");
        let body: Value = serde_json::from_slice(response.body()).unwrap_or(Value::Null);
        let code = body["code"].as_str().unwrap_or("").to_owned();
        (status, code, retry_after, took)
    }
}

fn event(id: &str) -> Value {
    json!({
        "eventId": id, "type": "message.inbound", "organizationId": ORG, "departmentId": "dep-1",
        "occurredAt": 1_700_000_000_000i64,
        "message": {"id": id, "owner": null, "time": "2024-03-10T18:07:52.534Z", "direction": "in",
                    "to": ["+15550100"], "from": "+15550199", "text": "hello", "media": [],
                    "attachments": []},
        "carrierMessageId": "carrier-1", "status": "RECEIVED"
    })
}

fn create(uri: &str) -> Value {
    json!({"uri": uri, "eventFilters": [format!("/orgId/{ORG}/department/dep-1/message?direction=inbound")]})
}

/// Checks every answer: within [`BOUND`], and `ok` or a `503` with `Retry-After`. Returns how
/// many were cut by the deadline.
fn check(label: &str, ok: StatusCode, answers: &[(StatusCode, String, bool, Duration)]) -> usize {
    let mut codes = std::collections::BTreeMap::<String, usize>::new();
    for (status, code, retry_after, took) in answers {
        *codes
            .entry(format!("{} {code}", status.as_u16()))
            .or_default() += 1;
        assert!(
            *took < BOUND,
            "{label}: an answer took {took:?} (bound {BOUND:?}): {status} {code}"
        );
        if *status == StatusCode::SERVICE_UNAVAILABLE {
            assert!(*retry_after, "{label}: a 503 without Retry-After ({code})");
        } else {
            assert_eq!(*status, ok, "{label}: unexpected answer {status} {code}");
        }
    }
    let slowest = answers.iter().map(|a| a.3).max().unwrap_or_default();
    println!("DEADLINE {label}: {codes:?}, slowest {slowest:?}");
    answers
        .iter()
        .filter(|(_, code, _, _)| code == "DEADLINE_EXCEEDED")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_answer_comes_within_the_bound_while_each_dynamodb_call_is_held() {
    let receiver = Receiver::start(Handshake::Echo).await;
    let world = Arc::new(world("4s").await);

    // Creates: the handshake runs outside the deadline, the store's calls inside it.
    let creates = futures_util::future::join_all((0..TRIES).map(|i| {
        let (world, uri) = (world.clone(), receiver.uri(&format!("/hook/{i}")));
        async move { world.call("/webhooksubscription", &create(&uri)).await }
    }))
    .await;
    let cut_creates = check("create", StatusCode::OK, &creates);

    // Events, once at least one subscription exists to fan out to.
    world.proxy.release();
    let (status, ..) = world
        .call("/webhooksubscription", &create(&receiver.uri("/hook/a")))
        .await;
    assert_eq!(status, StatusCode::OK);
    world.proxy.holding.store(true, SeqCst);
    let ids: Vec<String> = (0..TRIES).map(|i| format!("deadline-event-{i}")).collect();
    let events = futures_util::future::join_all(ids.iter().map(|id| {
        let world = world.clone();
        async move { world.call("/events", &event(id)).await }
    }))
    .await;
    let cut_events = check("POST /events", StatusCode::ACCEPTED, &events);
    assert!(
        cut_creates + cut_events > 0,
        "no request was cut by the deadline: the held calls did not make one run long"
    );

    // Nothing lost: every event refused is accepted when sent again, and every one is
    // readable by its message id.
    world.proxy.release();
    for (id, (status, ..)) in ids.iter().zip(&events) {
        if *status != StatusCode::ACCEPTED {
            let (again, code, ..) = world.call("/events", &event(id)).await;
            assert_eq!(again, StatusCode::ACCEPTED, "{id} sent again: {code}");
        }
    }
    for id in &ids {
        let request = http::Request::builder()
            .uri(format!("/message/getmessagebyid/{id}"))
            .header("x-api-key", API_KEY)
            .header("authorization", format!("Bearer {}", world.token))
            .body(Bytes::new())
            .unwrap();
        let response = webhook_core::http::serve(&world.services, &world.auth, request).await;
        assert_eq!(response.status(), StatusCode::OK, "message {id} is lost");
    }
}

/// The control: with a deadline of 20 s the same held calls make a request run past the
/// bound, so the test above holds because of the deadline, not because requests are short.
#[tokio::test]
async fn without_the_deadline_the_held_calls_run_a_request_past_the_bound() {
    let receiver = Receiver::start(Handshake::Echo).await;
    let world = world("20s").await;
    world.proxy.release();
    let (status, ..) = world
        .call("/webhooksubscription", &create(&receiver.uri("/hook")))
        .await;
    assert_eq!(status, StatusCode::OK);
    world.proxy.holding.store(true, SeqCst);
    let (status, code, _, took) = world.call("/events", &event("control-1")).await;
    println!("DEADLINE control: POST /events answered {status} {code} in {took:?}");
    assert!(
        took > BOUND,
        "POST /events took {took:?} through the held proxy: hold the calls longer, or the \
         deadline test proves nothing"
    );
}
