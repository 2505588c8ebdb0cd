//! Lambda init and invoke: a fake Lambda Runtime API that starts each
//! function binary (native release build) with `AWS_LAMBDA_RUNTIME_API`
//! pointing at it, measures exec → first `GET .../invocation/next` (init),
//! feeds it the sample events of `events/`, and reads its peak RSS. The
//! no-op `lambda_runtime` function of this crate is the reference.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, Notify};
use webhook_core::auth::jwt::{mint_hs256, ALL_SCOPES};
use webhook_core::aws::dynamodb::{client_from_env, create_tables, DynamoStore, Tables};
use webhook_core::clock::{Clock, SystemClock};
use webhook_core::ids::OrgId;
use webhook_core::model::Message;
use webhook_core::store::{Store, Upsert};

use crate::load::{histogram, micros};
use crate::receiver::Receiver;
use crate::report::{fmt_us, left, mib, right, Section, Table, Target};
use crate::Settings;

const SUBSCRIPTION_ID: &str = "00000000-0000-4000-8000-000000000001";
const SECRET: &str = "whsec_c2VlZGVkLXNlY3JldC1mb3ItdGVzdHM=";
const JWT_SECRET: &str = "bench-hs256-secret";
pub const NOOP: &str = "noop-lambda";
/// The one binary of every function (`functions/`), told which by `WEBHOOKS_FUNCTION`.
pub const LAMBDA_BINARY: &str = "webhooks-lambda";

/// The binary a function's processes run: the deployed one, or the no-op.
pub fn binary_of(function: &str) -> &'static str {
    if function == NOOP {
        NOOP
    } else {
        LAMBDA_BINARY
    }
}

// ---------------------------------------------------------------------------
// The fake Runtime API (one per process started).

struct Invocation {
    id: String,
    body: String,
    done: oneshot::Sender<Outcome>,
}

#[derive(Debug)]
struct Outcome {
    handed_out: Instant,
    answered: Instant,
    ok: bool,
    body: Bytes,
}

#[derive(Default)]
struct ApiState {
    first_next: Mutex<Option<Instant>>,
    init_error: Mutex<Option<String>>,
    changed: Notify,
    queue: tokio::sync::Mutex<Option<mpsc::UnboundedReceiver<Invocation>>>,
    inflight: Mutex<HashMap<String, (Instant, oneshot::Sender<Outcome>)>>,
}

struct RuntimeApi {
    addr: SocketAddr,
    state: Arc<ApiState>,
    send: mpsc::UnboundedSender<Invocation>,
    server: tokio::task::JoinHandle<()>,
}

impl RuntimeApi {
    async fn start() -> Result<RuntimeApi, String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("runtime API: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let (send, receive) = mpsc::unbounded_channel();
        let state = Arc::new(ApiState {
            queue: tokio::sync::Mutex::new(Some(receive)),
            ..ApiState::default()
        });
        let router = axum::Router::new()
            .fallback(runtime_api)
            .with_state(state.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(RuntimeApi {
            addr,
            state,
            send,
            server,
        })
    }

    /// Waits for the first `next` (the end of init); fails on an init error,
    /// an exit, or after 30 s.
    async fn wait_ready(&self, child: &mut Child) -> Result<Instant, String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(at) = *self.state.first_next.lock().expect("not poisoned") {
                return Ok(at);
            }
            if let Some(e) = self.state.init_error.lock().expect("not poisoned").clone() {
                return Err(format!("init error: {e}"));
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("exited during init: {status}"));
            }
            if Instant::now() > deadline {
                return Err("no `next` request within 30 s".into());
            }
            let _ = tokio::time::timeout(Duration::from_millis(20), self.state.changed.notified())
                .await;
        }
    }

    async fn invoke(&self, body: String) -> Result<Outcome, String> {
        let (done, answer) = oneshot::channel();
        let id = uuid::Uuid::new_v4().to_string();
        self.send
            .send(Invocation { id, body, done })
            .map_err(|_| "the runtime API stopped".to_owned())?;
        match tokio::time::timeout(Duration::from_secs(30), answer).await {
            Ok(Ok(outcome)) => Ok(outcome),
            Ok(Err(_)) => Err("the invocation was dropped".into()),
            Err(_) => Err("no response within 30 s".into()),
        }
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn runtime_api(State(state): State<Arc<ApiState>>, request: Request) -> Response<Body> {
    let now = Instant::now();
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    let body = axum::body::to_bytes(body, 8 << 20)
        .await
        .unwrap_or_default();
    let status = |code: u16, text: &'static str| {
        Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .body(Body::from(text))
            .expect("valid response")
    };
    if parts.method == http::Method::GET && path == "/2018-06-01/runtime/invocation/next" {
        {
            let mut first = state.first_next.lock().expect("not poisoned");
            if first.is_none() {
                *first = Some(now);
                state.changed.notify_one();
            }
        }
        let next = {
            let mut queue = state.queue.lock().await;
            match queue.as_mut() {
                Some(q) => q.recv().await,
                None => None,
            }
        };
        let Some(inv) = next else {
            return status(500, r#"{"errorMessage":"shutting down"}"#);
        };
        let handed_out = Instant::now();
        state
            .inflight
            .lock()
            .expect("not poisoned")
            .insert(inv.id.clone(), (handed_out, inv.done));
        let deadline = SystemClock.now_ms() + 30_000;
        return Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .header("lambda-runtime-aws-request-id", &inv.id)
            .header("lambda-runtime-deadline-ms", deadline.to_string())
            .header(
                "lambda-runtime-invoked-function-arn",
                "arn:aws:lambda:us-east-1:123456789012:function:bench",
            )
            .header(
                "lambda-runtime-trace-id",
                "Root=1-5e1b4151-5ac6c58f5b5daa6532e4f2e7;Parent=1;Sampled=0",
            )
            .body(Body::from(inv.body))
            .expect("valid response");
    }
    if parts.method == http::Method::POST && path == "/2018-06-01/runtime/init/error" {
        *state.init_error.lock().expect("not poisoned") =
            Some(String::from_utf8_lossy(&body).into_owned());
        state.changed.notify_one();
        return status(202, r#"{"status":"OK"}"#);
    }
    if parts.method == http::Method::POST {
        if let Some(rest) = path.strip_prefix("/2018-06-01/runtime/invocation/") {
            let (id, ok) = match rest.rsplit_once('/') {
                Some((id, "response")) => (id, true),
                Some((id, "error")) => (id, false),
                _ => return status(404, r#"{"errorMessage":"unknown path"}"#),
            };
            let entry = state.inflight.lock().expect("not poisoned").remove(id);
            if let Some((handed_out, done)) = entry {
                let _ = done.send(Outcome {
                    handed_out,
                    answered: now,
                    ok,
                    body,
                });
                return status(202, r#"{"status":"OK"}"#);
            }
            return status(400, r#"{"errorMessage":"unknown request id"}"#);
        }
    }
    status(404, r#"{"errorMessage":"unknown path"}"#)
}

// ---------------------------------------------------------------------------
// The functions and what they are fed.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `lambda_http`: the answer is an API Gateway proxy response.
    Http,
    /// SQS batch: the answer lists `batchItemFailures`.
    Sqs,
    Authorizer,
    /// Any other answer: counted as `ok`.
    Plain,
}

struct Function {
    name: &'static str,
    kind: Kind,
    events: &'static [&'static str],
    /// Needs the DynamoDB tables (and possibly SQS).
    store: bool,
    /// Re-create the seeded subscription before each invocation (delete).
    reseed: bool,
}

const FUNCTIONS: &[Function] = &[
    Function {
        name: NOOP,
        kind: Kind::Plain,
        events: &["get-message-ok"],
        store: false,
        reseed: false,
    },
    Function {
        name: "authorizer",
        kind: Kind::Authorizer,
        events: &["authorizer-request"],
        store: false,
        reseed: false,
    },
    Function {
        name: "create-subscription",
        kind: Kind::Http,
        events: &["create-subscription-ok"],
        store: true,
        reseed: false,
    },
    Function {
        name: "list-subscriptions",
        kind: Kind::Http,
        events: &["list-subscriptions-ok"],
        store: true,
        reseed: false,
    },
    Function {
        name: "get-subscription",
        kind: Kind::Http,
        events: &["get-subscription-ok"],
        store: true,
        reseed: false,
    },
    Function {
        name: "delete-subscription",
        kind: Kind::Http,
        events: &["delete-subscription-ok"],
        store: true,
        reseed: true,
    },
    Function {
        name: "get-subscription-secret",
        kind: Kind::Http,
        events: &["get-subscription-secret-ok"],
        store: true,
        reseed: false,
    },
    Function {
        name: "get-message",
        kind: Kind::Http,
        events: &["get-message-ok"],
        store: true,
        reseed: false,
    },
    Function {
        name: "ingest-events",
        kind: Kind::Sqs,
        events: &["ingest-events-sqs"],
        store: true,
        reseed: false,
    },
    Function {
        name: "deliver-notifications",
        kind: Kind::Sqs,
        events: &["deliver-notifications-sqs"],
        store: true,
        reseed: false,
    },
    Function {
        name: "remind-expiring",
        kind: Kind::Plain,
        events: &["remind-expiring-scheduled"],
        store: true,
        reseed: false,
    },
    Function {
        name: "pre-token-generation",
        kind: Kind::Plain,
        events: &["pre-token-generation-v2"],
        store: false,
        reseed: false,
    },
];

#[derive(Debug, Clone, Serialize)]
pub struct LambdaResult {
    pub function: String,
    pub cold_starts: usize,
    /// exec → first `next`, median over the cold starts.
    pub init_ms_median: f64,
    pub init_ms_min: f64,
    pub init_ms_max: f64,
    /// Median init ÷ the no-op function's median init.
    pub init_ratio: f64,
    /// The first invocation after a cold start (median), µs.
    pub first_invoke_us_median: u64,
    /// Warm invocations: `next` handed out → response received.
    pub invocations: u64,
    pub invoke_p50_us: u64,
    pub invoke_p99_us: u64,
    pub invoke_max_us: u64,
    pub peak_rss_kib: u64,
    /// What the invocations answered (HTTP status, allow/deny, failures).
    pub answers: BTreeMap<String, u64>,
    pub error: Option<String>,
}

struct Environment {
    dynamodb: Option<(Tables, DynamoStore)>,
    sqs_queue_url: Option<String>,
    receiver: Receiver,
    token: String,
    logs: PathBuf,
}

fn event_text(name: &str, env: &Environment) -> Result<String, String> {
    let path = crate::process::repo_root().join(format!("events/{name}.json"));
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text
        .replace("TOKEN_PLACEHOLDER", &env.token)
        .replace("SUBSCRIPTION_ID_PLACEHOLDER", SUBSCRIPTION_ID)
        .replace(
            "http://127.0.0.1:9/hook",
            &env.receiver.uri("/lambda-create"),
        ))
}

/// What Lambda puts in every function's environment (credentials and
/// region from ours, the emulators' defaults otherwise).
fn runtime_env(name: &str, runtime: SocketAddr) -> Vec<(String, String)> {
    let var = |k: &str, default: &str| std::env::var(k).unwrap_or_else(|_| default.to_owned());
    vec![
        // The function template.yaml makes of the one binary (the no-op ignores it).
        ("WEBHOOKS_FUNCTION".into(), name.into()),
        ("AWS_LAMBDA_RUNTIME_API".into(), runtime.to_string()),
        ("AWS_LAMBDA_FUNCTION_NAME".into(), name.into()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE".into(), "128".into()),
        ("AWS_LAMBDA_FUNCTION_VERSION".into(), "$LATEST".into()),
        (
            "AWS_LAMBDA_LOG_GROUP_NAME".into(),
            format!("/aws/lambda/{name}"),
        ),
        ("AWS_LAMBDA_LOG_STREAM_NAME".into(), "bench".into()),
        ("AWS_REGION".into(), var("AWS_REGION", "us-east-1")),
        ("AWS_DEFAULT_REGION".into(), var("AWS_REGION", "us-east-1")),
        ("AWS_ACCESS_KEY_ID".into(), var("AWS_ACCESS_KEY_ID", "test")),
        (
            "AWS_SECRET_ACCESS_KEY".into(),
            var("AWS_SECRET_ACCESS_KEY", "test"),
        ),
        ("TZ".into(), ":UTC".into()),
        ("LANG".into(), "en_US.UTF-8".into()),
        ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
    ]
}

/// A function binary running under a fake Runtime API of its own, for the
/// suites that drive a function as part of a pipeline (`cost`); killed when dropped.
pub struct RunningFunction {
    runtime: RuntimeApi,
    child: Child,
    log: PathBuf,
}

impl RunningFunction {
    /// Starts `bin` as the function `name`, with `vars` beside Lambda's own.
    pub async fn start(
        bin: &Path,
        name: &str,
        vars: Vec<(String, String)>,
        log: &Path,
    ) -> Result<RunningFunction, String> {
        let runtime = RuntimeApi::start().await?;
        let mut env = runtime_env(name, runtime.addr);
        env.extend(vars);
        let mut child = spawn(bin, &env, log)?;
        if let Err(e) = runtime.wait_ready(&mut child).await {
            kill(child);
            return Err(format!("{name}: {e} (log: {})", log.display()));
        }
        Ok(RunningFunction {
            runtime,
            child,
            log: log.to_owned(),
        })
    }

    /// One invocation: the function's answer.
    pub async fn invoke(&self, event: String) -> Result<Value, String> {
        let outcome = self.runtime.invoke(event).await?;
        if !outcome.ok {
            return Err(format!(
                "the function failed: {} (log: {})",
                String::from_utf8_lossy(&outcome.body),
                self.log.display()
            ));
        }
        serde_json::from_slice(&outcome.body).map_err(|e| format!("its answer: {e}"))
    }
}

impl Drop for RunningFunction {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The environment Lambda gives a function, plus the function's own.
fn function_env(f: &Function, runtime: SocketAddr, env: &Environment) -> Vec<(String, String)> {
    let mut vars = runtime_env(f.name, runtime);
    match f.kind {
        Kind::Plain => {}
        Kind::Authorizer => vars.push(("WEBHOOKS_JWT_HS256_SECRET".into(), JWT_SECRET.into())),
        Kind::Http | Kind::Sqs => {
            let (subscriptions, messages) = match &env.dynamodb {
                Some((t, _)) => (t.subscriptions.clone(), t.messages.clone()),
                None => ("webhooks-subscriptions".into(), "webhooks-messages".into()),
            };
            vars.extend([
                ("WEBHOOKS_SUBSCRIPTIONS_TABLE".into(), subscriptions),
                ("WEBHOOKS_MESSAGES_TABLE".into(), messages),
                // The callbacks of the benchmark are on loopback over plain http.
                ("WEBHOOKS_ALLOW_HTTP_CALLBACKS".into(), "true".into()),
                ("WEBHOOKS_ALLOW_PRIVATE_CALLBACKS".into(), "true".into()),
            ]);
            for k in ["AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS"] {
                if let Ok(v) = std::env::var(k) {
                    vars.push((k.into(), v));
                }
            }
            if f.kind == Kind::Sqs {
                vars.push((
                    "WEBHOOKS_DELIVERY_QUEUE_URL".into(),
                    env.sqs_queue_url
                        .clone()
                        .unwrap_or_else(|| "http://127.0.0.1:9/000000000000/bench-delivery".into()),
                ));
            }
        }
    }
    vars
}

fn answer_label(kind: Kind, outcome: &Outcome) -> String {
    if !outcome.ok {
        return "function error".into();
    }
    let v: Value = serde_json::from_slice(&outcome.body).unwrap_or(Value::Null);
    match kind {
        Kind::Http => format!("HTTP {}", v["statusCode"]),
        Kind::Authorizer => v["policyDocument"]["Statement"][0]["Effect"]
            .as_str()
            .unwrap_or("?")
            .to_owned(),
        Kind::Sqs => format!(
            "{} failed record(s)",
            v["batchItemFailures"].as_array().map_or(0, Vec::len)
        ),
        Kind::Plain => "ok".into(),
    }
}

async fn seed(store: &DynamoStore, uri: &str) -> Result<(), String> {
    let now = SystemClock.now_ms();
    store
        .upsert_subscription(Upsert {
            org_id: "org-1".into(),
            uri: uri.into(),
            event_filters: vec![crate::api::inbound_filter("org-1", "dep-1")],
            disabled_filters: vec![],
            expires_at: now + 86_400_000,
            now,
            new_id: SUBSCRIPTION_ID.into(),
            new_secret: SECRET.into(),
            max_per_org: 1000,
            ordered: None,
            rate_limit: None,
            role_arn: None,
            external_id: None,
        })
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

async fn prepare() -> Result<Environment, String> {
    let receiver = Receiver::start().await?;
    let token = mint_hs256(
        JWT_SECRET,
        "org_id",
        "org-1",
        &ALL_SCOPES,
        Duration::from_secs(3600),
    );
    // The functions' own logs, for when one fails: not results, so not in `out`.
    let logs = std::env::temp_dir().join("webhooks-bench-lambda-logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let dynamodb = if std::env::var("AWS_ENDPOINT_URL_DYNAMODB").is_ok() {
        let client = client_from_env().await;
        let run = uuid::Uuid::new_v4().simple().to_string();
        let tables = Tables {
            subscriptions: format!("webhooks-bench-{}-subscriptions", &run[..12]),
            messages: format!("webhooks-bench-{}-messages", &run[..12]),
        };
        create_tables(&client, &tables)
            .await
            .map_err(|e| format!("creating tables on DynamoDB Local: {e}"))?;
        let store = DynamoStore::new(client, tables.clone());
        seed(&store, &receiver.uri("/lambda")).await?;
        store
            .put_message(
                &OrgId::from("org-1"),
                &Message {
                    id: "msg-1".into(),
                    owner: None,
                    time: Some("2023-11-14T22:13:20.000Z".into()),
                    direction: "in".into(),
                    to: vec!["+15550100".into()],
                    from: "+15550199".into(),
                    text: "Hello from the benchmark".into(),
                    media: vec![],
                    attachments: vec![],
                },
                webhook_core::clock::Clock::now_ms(&webhook_core::clock::SystemClock),
            )
            .await
            .map_err(|e| e.to_string())?;
        Some((tables, store))
    } else {
        println!("  AWS_ENDPOINT_URL_DYNAMODB is not set: store-backed functions are measured for init only");
        None
    };
    let sqs_queue_url = crate::bench_queue("webhooks-bench")
        .await?
        .map(|(_, url)| url);
    Ok(Environment {
        dynamodb,
        sqs_queue_url,
        receiver,
        token,
        logs,
    })
}

fn spawn(bin: &Path, vars: &[(String, String)], log: &Path) -> Result<Child, String> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    Command::new(bin)
        .env_clear()
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))
}

fn kill(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// What the cold starts of one function gathered.
struct Acc {
    bin: PathBuf,
    events: Vec<String>,
    log: PathBuf,
    inits: Vec<f64>,
    first_invokes: Vec<f64>,
    invoke: Histogram<u64>,
    answers: BTreeMap<String, u64>,
    peak: u64,
    error: Option<String>,
}

fn accumulator(settings: &Settings, f: &Function, env: &Environment) -> Acc {
    let bin = crate::process::workspace_binary(settings.bin_dir.as_deref(), binary_of(f.name));
    let log = env.logs.join(format!("{}.log", f.name));
    let _ = std::fs::remove_file(&log);
    let events: Result<Vec<String>, String> = f.events.iter().map(|e| event_text(e, env)).collect();
    let error = if !bin.exists() {
        Some(format!(
            "{} is missing: build it with `cargo build --release --workspace --bins`",
            bin.display()
        ))
    } else {
        events.as_ref().err().cloned()
    };
    Acc {
        bin,
        events: events.unwrap_or_default(),
        log,
        inits: Vec::new(),
        first_invokes: Vec::new(),
        invoke: histogram(),
        answers: BTreeMap::new(),
        peak: 0,
        error,
    }
}

/// One cold start: exec → first `next`, then `invocations` invocations
/// (the first one is the cold invocation), peak RSS, kill.
async fn cold_start(
    f: &Function,
    env: &Environment,
    acc: &mut Acc,
    invocations: usize,
) -> Result<(), String> {
    // Every function finds the seeded subscription (delete-subscription removes it).
    if f.store {
        if let Some((_, store)) = &env.dynamodb {
            seed(store, &env.receiver.uri("/lambda")).await?;
        }
    }
    let can_invoke = !f.store || env.dynamodb.is_some();
    let runtime = RuntimeApi::start().await?;
    let vars = function_env(f, runtime.addr, env);
    let exec = Instant::now();
    let mut child = spawn(&acc.bin, &vars, &acc.log)?;
    let ready = match runtime.wait_ready(&mut child).await {
        Ok(at) => at,
        Err(e) => {
            kill(child);
            return Err(format!("{e} (log: {})", acc.log.display()));
        }
    };
    acc.inits
        .push(ready.duration_since(exec).as_secs_f64() * 1000.0);
    if can_invoke {
        for i in 0..invocations {
            if f.reseed && i > 0 {
                if let Some((_, store)) = &env.dynamodb {
                    seed(store, &env.receiver.uri("/lambda")).await?;
                }
            }
            let event = acc.events[i % acc.events.len()].clone();
            let outcome = match runtime.invoke(event).await {
                Ok(o) => o,
                Err(e) => {
                    kill(child);
                    return Err(format!("{e} (log: {})", acc.log.display()));
                }
            };
            let us = micros(outcome.answered.duration_since(outcome.handed_out));
            if i == 0 {
                acc.first_invokes.push(us as f64);
            } else {
                acc.invoke.saturating_record(us);
            }
            *acc.answers
                .entry(answer_label(f.kind, &outcome))
                .or_insert(0) += 1;
        }
    }
    if let Some(mem) = crate::process::memory(child.id()) {
        acc.peak = acc.peak.max(mem.peak_kib);
    }
    kill(child);
    Ok(())
}

fn result(f: &Function, mut acc: Acc) -> LambdaResult {
    let invoke = &acc.invoke;
    let q = |q: f64| {
        if invoke.is_empty() {
            0
        } else {
            invoke.value_at_quantile(q)
        }
    };
    let mut sorted = acc.inits.clone();
    LambdaResult {
        function: f.name.to_owned(),
        cold_starts: acc.inits.len(),
        init_ms_median: median(&mut sorted),
        init_ms_min: sorted.first().copied().unwrap_or(0.0),
        init_ms_max: sorted.last().copied().unwrap_or(0.0),
        init_ratio: 0.0,
        first_invoke_us_median: median(&mut acc.first_invokes) as u64,
        invocations: invoke.len(),
        invoke_p50_us: q(0.5),
        invoke_p99_us: q(0.99),
        invoke_max_us: invoke.max(),
        peak_rss_kib: acc.peak,
        answers: acc.answers.clone(),
        error: acc.error.take(),
    }
}

/// Cold starts go round by round over every function (the no-op among
/// them), so a busy moment of the machine hits them all alike; the first
/// round also runs the warm invocations.
pub async fn run(settings: &Settings) -> Result<Vec<LambdaResult>, String> {
    let env = prepare().await?;
    let mut accs: Vec<Acc> = FUNCTIONS
        .iter()
        .map(|f| accumulator(settings, f, &env))
        .collect();
    let total = (settings.cold_starts * FUNCTIONS.len()) as u64;
    let bar = crate::load::progress("cold starts", total, "");
    for round in 0..settings.cold_starts {
        let mut order: Vec<usize> = (0..FUNCTIONS.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            bar.inc(1);
            let (f, acc) = (&FUNCTIONS[i], &mut accs[i]);
            if acc.error.is_some() {
                continue;
            }
            let invocations = if round == 0 { settings.invocations } else { 1 };
            if let Err(e) = cold_start(f, &env, acc, invocations).await {
                acc.error = Some(e);
            }
        }
    }
    bar.finish_and_clear();
    // Deliveries of the sample notification reach the receiver: not part of any figure.
    env.receiver.take();
    let mut results: Vec<LambdaResult> = FUNCTIONS
        .iter()
        .zip(accs)
        .map(|(f, acc)| result(f, acc))
        .collect();
    let noop = results
        .iter()
        .find(|r| r.function == NOOP && r.error.is_none())
        .map(|r| r.init_ms_median)
        .unwrap_or(0.0);
    for r in &mut results {
        if noop > 0.0 {
            r.init_ratio = r.init_ms_median / noop;
        }
        print_result(r);
    }
    Ok(results)
}

fn print_result(r: &LambdaResult) {
    if let Some(e) = &r.error {
        println!("  {:<26} error: {e}", r.function);
        return;
    }
    let us = fmt_us;
    println!(
        "  {:<26} init {:>6.2} ms (×{:.2} no-op, {} starts)  first invoke {}  warm p50 {} p99 {}  peak RSS {:.1} MiB  {:?}",
        r.function,
        r.init_ms_median,
        r.init_ratio,
        r.cold_starts,
        us(r.first_invoke_us_median),
        us(r.invoke_p50_us),
        us(r.invoke_p99_us),
        r.peak_rss_kib as f64 / 1024.0,
        r.answers
    );
}

// ---------------------------------------------------------------------------
// Results: the init target and the table.

impl LambdaResult {
    fn answers_cell(&self) -> String {
        self.answers
            .iter()
            .map(|(k, v)| format!("{k} ×{v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Every function's init within 1.5× the no-op function's (the worst one shown).
pub fn init_target(results: &[LambdaResult]) -> Target {
    let inits: Vec<&LambdaResult> = results
        .iter()
        .filter(|r| r.function != NOOP && r.error.is_none() && r.cold_starts > 0)
        .collect();
    let no_reference = results
        .iter()
        .all(|r| r.function != NOOP || r.error.is_some());
    let worst = inits
        .iter()
        .max_by(|a, b| a.init_ratio.total_cmp(&b.init_ratio));
    let Some(worst) = worst.filter(|_| !no_reference) else {
        return Target::not_measured("Lambda init vs the no-op function", "≤ 1.5×");
    };
    Target {
        target: "Lambda init vs the no-op function (worst function)".into(),
        goal: "≤ 1.5×".into(),
        measured: format!(
            "×{:.2} ({}: {:.2} ms vs {:.2} ms)",
            worst.init_ratio,
            worst.function,
            worst.init_ms_median,
            worst.init_ms_median / worst.init_ratio.max(1e-9)
        ),
        met: Some(inits.iter().all(|r| r.init_ratio <= 1.5)),
    }
}

/// One row per function (no section when the suite did not run).
pub fn section(
    results: &[LambdaResult],
    cold_starts: usize,
    invocations: usize,
) -> Option<Section> {
    if results.is_empty() {
        return None;
    }
    let columns = [
        left("function"),
        right("init (median)"),
        right("× no-op"),
        right("init min–max"),
        right("first invoke"),
        right("warm p50"),
        right("warm p99"),
        right("peak RSS"),
        left("answers"),
    ];
    let mut table = Table::new(columns);
    for r in results {
        match &r.error {
            Some(e) => table.row_with_blanks(error_cells(r, e)),
            None => table.row(row_cells(r)),
        }
    }
    Some(
        Section::table("Lambda init and invoke", table).with_intro(format!(
            "Native release builds started by a fake Runtime API; init is exec → first \
             `GET /2018-06-01/runtime/invocation/next` (median of {cold_starts} cold starts); warm invocations are \
             `next` handed out → response received over {invocations} invocations of the sample events; peak RSS is VmHWM."
        )),
    )
}

/// A function that failed: its name and the error, the other cells blank.
fn error_cells(r: &LambdaResult, error: &str) -> Vec<Option<String>> {
    let mut cells = vec![
        Some(r.function.clone()),
        Some(format!("error: {}", error.replace('|', "/"))),
    ];
    cells.resize(9, None);
    cells
}

fn row_cells(r: &LambdaResult) -> Vec<String> {
    vec![
        r.function.clone(),
        format!("{:.2} ms", r.init_ms_median),
        format!("{:.2}", r.init_ratio),
        format!("{:.2}–{:.2} ms", r.init_ms_min, r.init_ms_max),
        fmt_us(r.first_invoke_us_median),
        fmt_us(r.invoke_p50_us),
        fmt_us(r.invoke_p99_us),
        mib(r.peak_rss_kib),
        r.answers_cell(),
    ]
}
