//! The one fake Lambda Runtime API: a function binary started with
//! `AWS_LAMBDA_RUNTIME_API` pointing at a server of its own, fed one
//! invocation at a time. The benchmark's `lambda` and `cost` suites use it
//! in-process; scripts (deploy-rehearsal.py) through the `lambda-runtime`
//! binary of this crate, over stdin and stdout.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, Notify};

/// How long init and each invocation may take.
const LIMIT: Duration = Duration::from_secs(30);

struct Invocation {
    id: String,
    body: String,
    done: oneshot::Sender<Outcome>,
}

/// One invocation's answer, and when it was handed out and answered.
#[derive(Debug)]
pub struct Outcome {
    pub handed_out: Instant,
    pub answered: Instant,
    /// `response` (true) or `error` (false).
    pub ok: bool,
    pub body: Bytes,
}

#[derive(Default)]
struct ApiState {
    first_next: Mutex<Option<Instant>>,
    init_error: Mutex<Option<String>>,
    changed: Notify,
    queue: tokio::sync::Mutex<Option<mpsc::UnboundedReceiver<Invocation>>>,
    inflight: Mutex<HashMap<String, (Instant, oneshot::Sender<Outcome>)>>,
}

/// The Runtime API of one function process; stops when dropped.
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
            .fallback(serve)
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
        let deadline = Instant::now() + LIMIT;
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
        match tokio::time::timeout(LIMIT, answer).await {
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

async fn serve(State(state): State<Arc<ApiState>>, request: Request) -> Response<Body> {
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
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        let deadline = now_ms + LIMIT.as_millis();
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

/// A function binary running under a Runtime API of its own; killed when dropped.
pub struct RunningFunction {
    runtime: RuntimeApi,
    child: Mutex<Child>,
    log: PathBuf,
    /// exec → first `next`.
    pub init: Duration,
}

impl RunningFunction {
    /// Starts `bin` with exactly `vars` (and `AWS_LAMBDA_RUNTIME_API`), its
    /// output appended to `log`, and waits for its init to end.
    pub async fn start(
        bin: &Path,
        vars: &[(String, String)],
        log: &Path,
    ) -> Result<RunningFunction, String> {
        let runtime = RuntimeApi::start().await?;
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let exec = Instant::now();
        let mut child = Command::new(bin)
            .env_clear()
            .envs(vars.iter().map(|(k, v)| (k, v)))
            .env("AWS_LAMBDA_RUNTIME_API", runtime.addr.to_string())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        match runtime.wait_ready(&mut child).await {
            Ok(ready) => Ok(RunningFunction {
                runtime,
                child: Mutex::new(child),
                log: log.to_owned(),
                init: ready.duration_since(exec),
            }),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("{e} (log: {})", log.display()))
            }
        }
    }

    /// One invocation, as the function answered it.
    pub async fn invoke_outcome(&self, event: String) -> Result<Outcome, String> {
        let answer = tokio::select! {
            answer = self.runtime.invoke(event) => answer,
            status = exited(&self.child) => Err(format!("exited: {status}")),
        };
        answer.map_err(|e| format!("{e} (log: {})", self.log.display()))
    }

    /// One invocation: the function's answer, an error when it failed.
    pub async fn invoke(&self, event: String) -> Result<serde_json::Value, String> {
        let outcome = self.invoke_outcome(event).await?;
        if !outcome.ok {
            return Err(format!(
                "the function failed: {} (log: {})",
                String::from_utf8_lossy(&outcome.body),
                self.log.display()
            ));
        }
        serde_json::from_slice(&outcome.body).map_err(|e| format!("its answer: {e}"))
    }

    /// The process id (for its peak RSS).
    pub fn pid(&self) -> u32 {
        self.child.lock().expect("not poisoned").id()
    }
}

/// Resolves when the child has exited (polled: `std::process::Child`).
async fn exited(child: &Mutex<Child>) -> String {
    loop {
        let status = child.lock().expect("not poisoned").try_wait();
        match status {
            Ok(Some(status)) => return status.to_string(),
            Err(e) => return e.to_string(),
            Ok(None) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

impl Drop for RunningFunction {
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}
