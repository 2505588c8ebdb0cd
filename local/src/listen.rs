//! `webhooks-local listen`: a callback receiver for development. Answers the
//! validation handshake by echoing `validation-token` and prints every
//! notification it receives, one JSON line each, on stdout. With `--secret`
//! it verifies each notification's Standard Webhooks signature and timestamp
//! (a `whsec_` secret with the `standardwebhooks` crate, independent of the
//! sender's code; a `v1a` subscription's `whpk_` public key with ed25519,
//! `signatures.rs`), says so on stderr, and answers 401 to a bad one. `--secret` may be given
//! more than once (during a rotation: the old and the new secret); a
//! notification is accepted when it verifies with any of them, and the line
//! says which (`key 1`, `key 2`, ... in the order given, never the secret). With `--fail-first N`
//! it answers the first N notifications `500` (to see failed deliveries in
//! the history, and resend them); with `--fail-all`, every one until it gets
//! `SIGUSR1`, which switches failing off (and on again, the next time).
//! `--fail-body` is the body of those answers, as `text/html`; `--fail-status`
//! their status (`500` by default: `429` or `503` to see a pause), and
//! `--retry-after` a `Retry-After` (seconds) they carry; `--fail-path` fails
//! only the notifications to a path that starts with it. With `--record FILE`
//! it appends every notification to FILE as one JSON line (`path`, `headers`
//! with lower-case names, `body` as sent), for a script to read what arrived
//! (and `webhooks-local verify` to check its signature).

use std::fs::File;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use clap::Args;

use crate::signatures::Verifier;
use webhooks_receiver::{Answer, Arrival, Callback};

#[derive(Args)]
pub struct ListenArgs {
    /// Port to listen on.
    #[arg(long, default_value_t = 4000)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// The subscription's signing secret (`whsec_...`) or, for a `v1a`
    /// subscription, its public key (`whpk_...`): verify every notification.
    /// Repeat it to accept any of several (the old and the new one while a
    /// rotation's grace period runs); the environment variable takes a
    /// comma-separated list.
    #[arg(long, env = "WEBHOOKS_LISTEN_SECRET", value_delimiter = ',')]
    secret: Vec<String>,
    /// Answer the first N notifications `500 Internal Server Error`.
    #[arg(long, default_value_t = 0)]
    fail_first: u64,
    /// Answer every notification `500` until SIGUSR1 (each SIGUSR1 switches failing off or on).
    #[arg(long)]
    fail_all: bool,
    /// The body of the `500` answers (sent as text/html; charset=utf-8).
    #[arg(long, default_value = "")]
    fail_body: String,
    /// The status of the failing answers (400 to 599): e.g. 429 or 503 with
    /// `--retry-after`, to see the subscription paused.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u16).range(400..=599))]
    fail_status: u16,
    /// `Retry-After` (seconds) on the failing answers.
    #[arg(long)]
    retry_after: Option<u32>,
    /// Fail (`--fail-status`) every notification to a path starting with this
    /// (repeatable), besides `--fail-first` and `--fail-all`.
    #[arg(long)]
    fail_path: Vec<String>,
    /// Append every notification to this file, one JSON line each: `path`,
    /// `headers` (lower-case names), `body` (as sent; `webhooks-local verify` checks it).
    #[arg(long)]
    record: Option<PathBuf>,
}

struct Listener {
    /// One verifier per `--secret`, in the order given.
    verifiers: Vec<Verifier>,
    /// Notifications still to answer 500 (`u64::MAX` with `--fail-all`).
    failures_left: AtomicU64,
    fail_body: String,
    fail_status: u16,
    retry_after: Option<u32>,
    fail_paths: Vec<String>,
    record: Option<Mutex<File>>,
}

pub fn run(args: ListenArgs) -> Result<(), String> {
    let verifiers = args
        .secret
        .iter()
        .enumerate()
        .map(|(i, secret)| {
            Verifier::new(secret).map_err(|e| format!("--secret (key {}): {e}", i + 1))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let record = match &args.record {
        Some(path) => Some(Mutex::new(
            File::options()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("--record {}: {e}", path.display()))?,
        )),
        None => None,
    };
    let listener_state = Arc::new(Listener {
        verifiers,
        failures_left: AtomicU64::new(if args.fail_all {
            FAIL_ALL
        } else {
            args.fail_first
        }),
        fail_body: args.fail_body,
        fail_status: args.fail_status,
        retry_after: args.retry_after,
        fail_paths: args.fail_path,
        record,
    });
    let toggled = listener_state.clone();
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let addr = SocketAddr::new(args.host, args.port);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        eprintln!("webhooks-local listen: receiving callbacks on http://{addr}/");
        #[cfg(unix)]
        tokio::spawn(toggle_on_sigusr1(toggled));
        webhooks_receiver::serve(listener, listener_state)
            .await
            .map_err(|e| e.to_string())
    })
}

impl Callback for Listener {
    async fn handshake(&self, arrival: Arrival) -> Answer {
        match arrival.token() {
            Some(token) => {
                eprintln!("handshake: answered validation-token on {}", arrival.path);
                Answer::echo(token)
            }
            // Not a handshake: shown like any other request.
            None => self.notification(arrival).await,
        }
    }

    async fn notification(&self, arrival: Arrival) -> Answer {
        let bytes = &arrival.body;
        let id = arrival.id().unwrap_or("-");
        if !self.verifiers.is_empty() {
            let mut verified = Vec::new();
            let mut failure = None;
            for (i, verifier) in self.verifiers.iter().enumerate() {
                match verifier.verify(bytes, &arrival.headers) {
                    Ok(()) => verified.push(format!("key {}", i + 1)),
                    Err(e) => failure = Some(e),
                }
            }
            if verified.is_empty() {
                let e = failure.map(|e| e.to_string()).unwrap_or_default();
                eprintln!("notification {id}: signature INVALID ({e}); answered 401");
                return Answer::status(401);
            }
            let of = self.verifiers.len();
            eprintln!(
                "notification {id}: signature verified with {} (of {of})",
                verified.join(", ")
            );
        }
        let line = match serde_json::from_slice::<serde_json::Value>(bytes) {
            Ok(json) => json.to_string(),
            Err(_) => String::from_utf8_lossy(bytes).into_owned(),
        };
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
        if let Some(file) = &self.record {
            let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
            // One write a line: a reader never sees half of one.
            let _ = file.write_all(format!("{}\n", record_line(&arrival)).as_bytes());
        }
        let fail = self
            .fail_paths
            .iter()
            .any(|p| arrival.path.starts_with(p.as_str()))
            || self
                .failures_left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
                    FAIL_ALL => Some(FAIL_ALL),
                    n => n.checked_sub(1),
                })
                .is_ok();
        if fail {
            let status = self.fail_status;
            eprintln!(
                "notification {id}: answered {status} (--fail-first, --fail-all or --fail-path)"
            );
            let mut failed = Answer::status(status);
            if let Some(seconds) = self.retry_after {
                failed = failed.with_retry_after(&seconds.to_string());
            }
            if self.fail_body.is_empty() {
                return failed;
            }
            return failed.with_body("text/html; charset=utf-8", self.fail_body.clone());
        }
        Answer::ok()
    }
}

/// A notification as `--record` writes it (and `webhooks-local verify` reads it).
pub fn record_line(arrival: &Arrival) -> String {
    let headers: serde_json::Map<String, serde_json::Value> = arrival
        .headers
        .iter()
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (name.as_str().to_owned(), value.into())
        })
        .collect();
    serde_json::json!({
        "path": arrival.path,
        "headers": headers,
        "body": String::from_utf8_lossy(&arrival.body),
    })
    .to_string()
}

/// `failures_left` of `--fail-all`: never counts down.
const FAIL_ALL: u64 = u64::MAX;

/// Each SIGUSR1 switches failing off (when it fails) or on (every
/// notification, as `--fail-all`): a receiver to break and fix by hand.
#[cfg(unix)]
async fn toggle_on_sigusr1(state: Arc<Listener>) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut signals) = signal(SignalKind::user_defined1()) else {
        eprintln!("webhooks-local listen: cannot handle SIGUSR1");
        return;
    };
    while signals.recv().await.is_some() {
        let failing = state.failures_left.load(Ordering::SeqCst) > 0;
        let now = if failing { 0 } else { FAIL_ALL };
        state.failures_left.store(now, Ordering::SeqCst);
        eprintln!(
            "SIGUSR1: {}",
            if failing {
                "answering 200 from now on"
            } else {
                "answering 500 from now on"
            }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;

    fn arrival(path: &str, body: &str) -> Arrival {
        Arrival {
            method: http::Method::POST,
            path: path.into(),
            headers: HeaderMap::from_iter([(
                "webhook-id".parse().unwrap(),
                "n-1".parse().unwrap(),
            )]),
            body: body.to_owned().into(),
            at: std::time::Instant::now(),
        }
    }

    #[tokio::test]
    async fn fail_paths_fail_and_every_notification_is_recorded_as_sent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record.jsonl");
        let listener = Listener {
            verifiers: vec![],
            failures_left: AtomicU64::new(0),
            fail_body: String::new(),
            fail_status: 500,
            retry_after: None,
            fail_paths: vec!["/fail".into()],
            record: Some(Mutex::new(File::create(&path).unwrap())),
        };
        let body = r#"{"text": "a\nb"}"#;
        assert_eq!(
            listener.notification(arrival("/hook", body)).await.code(),
            200
        );
        assert_eq!(
            listener.notification(arrival("/fail/1", body)).await.code(),
            500
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0]["path"], "/hook");
        assert_eq!(lines[1]["path"], "/fail/1");
        assert_eq!(lines[0]["headers"]["webhook-id"], "n-1");
        // The body exactly as sent (its signature covers these bytes).
        assert_eq!(lines[0]["body"], body);
    }
}
