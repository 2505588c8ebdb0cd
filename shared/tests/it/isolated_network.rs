//! Helpers of the security suites: an `App` on a real SQLite file with a test resolver,
//! a raw-TCP callback peer that counts every connection it accepts and can misbehave on
//! purpose (redirect, never answer, trickle, stream a huge body), and a network namespace
//! runner so SSRF tests can put "private" and "public" addresses on a loopback interface
//! that exists only for them.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use webhook_core::callback::Dns;
use webhook_core::sqlite::SqliteDb;
use webhook_core::{App, Config, Profile};

/// A resolver whose answers the test decides. Each host has a list of answers: lookup `n`
/// gets answer `n` (the last one repeats), so a test can change the answer between calls.
#[derive(Default)]
pub struct FakeDns {
    answers: Mutex<HashMap<String, Vec<Vec<IpAddr>>>>,
    lookups: Mutex<HashMap<String, usize>>,
}

impl FakeDns {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// `host` resolves to `ips` from now on.
    pub fn set(&self, host: &str, ips: &[IpAddr]) {
        self.answers
            .lock()
            .unwrap()
            .insert(host.to_owned(), vec![ips.to_vec()]);
        self.lookups.lock().unwrap().remove(host);
    }

    /// `host` resolves to `answers[n]` on its `n`-th lookup (the last one repeats).
    pub fn sequence(&self, host: &str, answers: &[&[IpAddr]]) {
        self.answers.lock().unwrap().insert(
            host.to_owned(),
            answers.iter().map(|a| a.to_vec()).collect(),
        );
        self.lookups.lock().unwrap().remove(host);
    }

    pub fn lookups(&self, host: &str) -> usize {
        self.lookups.lock().unwrap().get(host).copied().unwrap_or(0)
    }
}

#[async_trait]
impl Dns for FakeDns {
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        let n = {
            let mut lookups = self.lookups.lock().unwrap();
            let n = lookups.entry(host.to_owned()).or_default();
            *n += 1;
            *n - 1
        };
        let answers = self.answers.lock().unwrap();
        match answers.get(host) {
            Some(list) => Ok(list[n.min(list.len() - 1)].clone()),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{host}: no such test host"),
            )),
        }
    }
}

/// Configuration as deployed (Lambda profile: private callbacks refused) except that plain
/// http is allowed (test peers speak http) and timeouts are short.
pub fn config(allow_private: bool, extra: &[(&str, &str)]) -> Config {
    let mut vars: HashMap<String, String> = HashMap::from([
        ("WEBHOOKS_ALLOW_HTTP_CALLBACKS".into(), "true".into()),
        (
            "WEBHOOKS_ALLOW_PRIVATE_CALLBACKS".into(),
            allow_private.to_string(),
        ),
        ("WEBHOOKS_HANDSHAKE_TIMEOUT_MS".into(), "3000".into()),
        ("WEBHOOKS_DELIVERY_TIMEOUT_MS".into(), "3000".into()),
        ("WEBHOOKS_RETRY_SCHEDULE".into(), "1s,1s,1s".into()),
    ]);
    for (k, v) in extra {
        vars.insert((*k).into(), (*v).into());
    }
    Config::from_lookup(Profile::Lambda, |k| vars.get(k).cloned()).unwrap()
}

/// The real app on a real SQLite file, with `dns` as its resolver.
pub struct TestApp {
    pub app: App,
    pub store: Arc<SqliteDb>,
    _dir: tempfile::TempDir,
}

impl TestApp {
    pub fn new(config: Config, dns: Arc<FakeDns>) -> TestApp {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteDb::open(&dir.path().join("webhooks.db")).unwrap());
        TestApp {
            app: App::with_dns(config, store.clone(), dns),
            store,
            _dir: dir,
        }
    }

    /// Another app (another policy, resolver) over the same store, as another process
    /// (or Lambda function) of the same deployment would be.
    pub fn sibling(&self, config: Config, dns: Arc<FakeDns>) -> App {
        App::with_dns(config, self.store.clone(), dns)
    }
}

/// How a [`Peer`] answers.
#[derive(Clone, Debug)]
pub enum Behaviour {
    /// A well-behaved callback: echoes `validation-token`, answers 200 to POSTs.
    Echo,
    /// Answers every request with this status and `Location`.
    Redirect(u16, String),
    /// Accepts the connection, reads the request, never answers.
    Silent,
    /// Sends a status line, then one header byte every 50 ms, forever.
    Trickle,
    /// Echoes the handshake; answers POSTs 200 with a body of this many bytes, streamed.
    HugeBody(u64),
}

/// A callback peer on raw TCP. Counts every accepted connection (so a test can prove no
/// connection was made) and every byte of response body it managed to write.
pub struct Peer {
    pub addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    body_written: Arc<AtomicU64>,
    finished: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Peer {
    pub async fn start(bind: SocketAddr, behaviour: Behaviour) -> Peer {
        let listener = TcpListener::bind(bind)
            .await
            .unwrap_or_else(|e| panic!("bind {bind}: {e}"));
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let body_written = Arc::new(AtomicU64::new(0));
        let finished = Arc::new(AtomicUsize::new(0));
        let (a, w, f) = (accepted.clone(), body_written.clone(), finished.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                a.fetch_add(1, Ordering::SeqCst);
                let (behaviour, w, f) = (behaviour.clone(), w.clone(), f.clone());
                tokio::spawn(async move {
                    serve_one(stream, behaviour, w).await;
                    f.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        Peer {
            addr,
            accepted,
            body_written,
            finished,
            task,
        }
    }

    pub fn uri(&self, path: &str) -> String {
        match self.addr {
            SocketAddr::V4(a) => format!("http://{a}{path}"),
            SocketAddr::V6(a) => format!("http://[{}]:{}{path}", a.ip(), a.port()),
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Response body bytes the kernel accepted from this peer so far.
    pub fn body_bytes_written(&self) -> u64 {
        self.body_written.load(Ordering::SeqCst)
    }

    /// Waits until `n` connections have been fully handled (written out or dropped).
    pub async fn wait_finished(&self, n: usize) {
        while self.finished.load(Ordering::SeqCst) < n {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Head {
    method: String,
    token: Option<String>,
    content_length: usize,
}

async fn read_head(stream: &mut TcpStream) -> Option<Head> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if buf.len() > 64 * 1024 || stream.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        buf.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&buf);
    let mut lines = text.split("\r\n");
    let method = lines.next()?.split(' ').next()?.to_owned();
    let mut head = Head {
        method,
        token: None,
        content_length: 0,
    };
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "validation-token" => head.token = Some(value.trim().to_owned()),
                "content-length" => head.content_length = value.trim().parse().unwrap_or(0),
                _ => {}
            }
        }
    }
    Some(head)
}

async fn serve_one(mut stream: TcpStream, behaviour: Behaviour, written: Arc<AtomicU64>) {
    let Some(head) = read_head(&mut stream).await else {
        return;
    };
    let mut body = vec![0u8; head.content_length.min(1 << 20)];
    if stream.read_exact(&mut body).await.is_err() {
        return;
    }
    let handshake_echo = |token: &Option<String>| {
        match token {
        Some(t) => format!(
            "HTTP/1.1 200 OK\r\nvalidation-token: {t}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        ),
        None => "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned(),
    }
    };
    match behaviour {
        Behaviour::Echo => {
            let _ = stream
                .write_all(handshake_echo(&head.token).as_bytes())
                .await;
        }
        Behaviour::Redirect(status, location) => {
            let _ = stream
                .write_all(
                    format!(
                        "HTTP/1.1 {status} Redirect\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    )
                    .as_bytes(),
                )
                .await;
        }
        Behaviour::Silent => {
            // Hold the connection open, say nothing, until the client gives up.
            let mut sink = [0u8; 1024];
            while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
        }
        Behaviour::Trickle => {
            if stream.write_all(b"HTTP/1.1 200 OK\r\n").await.is_err() {
                return;
            }
            loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                if stream.write_all(b"x").await.is_err() {
                    return;
                }
            }
        }
        Behaviour::HugeBody(size) => {
            if head.method == "GET" {
                let _ = stream
                    .write_all(handshake_echo(&head.token).as_bytes())
                    .await;
                return;
            }
            let headers = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: {size}\r\n\r\n"
            );
            if stream.write_all(headers.as_bytes()).await.is_err() {
                return;
            }
            let chunk = vec![b'0'; 64 * 1024];
            let mut left = size;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                match stream.write(&chunk[..n]).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        written.fetch_add(n as u64, Ordering::SeqCst);
                        left -= n as u64;
                    }
                }
            }
        }
    }
}

/// Whether this process is in a network namespace of its own with only a loopback
/// interface (as made by [`run_isolated`]).
pub fn in_isolated_network() -> bool {
    let Ok(dev) = std::fs::read_to_string("/proc/self/net/dev") else {
        return false;
    };
    let names: Vec<&str> = dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    names == ["lo"]
}

/// Runs this test binary's ignored tests whose names start with `prefix` in a fresh network
/// namespace that has only a loopback interface, holding `addresses` as well, so tests
/// can listen on "private" and "public" addresses without any packet leaving the machine.
/// Fails the calling test if any of them fails, or if no namespace can be made.
pub fn run_isolated(prefix: &str, addresses: &[&str]) {
    let exe = std::env::current_exe().unwrap();
    let mut setup = String::from("set -e; ip link set lo up; ");
    for a in addresses {
        let family = if a.contains(':') { "-6" } else { "-4" };
        let len = if a.contains(':') { 128 } else { 32 };
        setup.push_str(&format!("ip {family} addr add {a}/{len} dev lo; "));
    }
    setup.push_str("exec \"$0\" \"$@\"");
    let mut attempts = vec![vec!["--net"], vec!["--user", "--map-root-user", "--net"]];
    // Root can make a namespace directly; others need a user namespace first.
    if !is_root() {
        attempts.reverse();
    }
    let mut last_error = String::new();
    for flags in attempts {
        let out = std::process::Command::new("unshare")
            .args(&flags)
            .args(["sh", "-c", &setup])
            .arg(&exe)
            .args([prefix, "--ignored", "--test-threads=4", "--nocapture"])
            .env("WEBHOOKS_TEST_ISOLATED", "1")
            .output();
        let out = match out {
            Ok(out) => out,
            Err(e) => {
                last_error = format!("unshare: {e}");
                continue;
            }
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() && !stdout.contains("running ") {
            // The namespace could not be made; try the next way.
            last_error = format!("unshare {flags:?}: {stderr}");
            continue;
        }
        print!("{stdout}");
        eprint!("{stderr}");
        assert!(
            out.status.success(),
            "tests in the isolated network namespace failed (see above)"
        );
        assert!(
            !stdout.contains("running 0 tests"),
            "no test matched {prefix}"
        );
        return;
    }
    panic!(
        "cannot create a network namespace for the SSRF suite (needs unshare from util-linux \
         and root or unprivileged user namespaces): {last_error}"
    );
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Guard at the top of every test meant for the namespace: never runs on the host network.
pub fn require_isolated() {
    assert!(
        in_isolated_network(),
        "this test makes connections to private addresses and runs only inside the \
         network namespace its wrapper test creates; run the wrapper instead"
    );
}
