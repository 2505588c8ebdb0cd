//! The real `webhooks-local` binary on a free port with its own data dir, on SQLite or on
//! DynamoDB Local and moto: started, restarted, crashed, terminated, its clock moved, its
//! delivery queue watched until idle, and requests made as an organization.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::StatusCode;
use serde_json::{json, Value};
use webhook_core::auth::jwt::{mint_hs256, ALL_SCOPES};
use webhook_core::aws::dynamodb::{DynamoStore, Tables};
use webhook_core::sqlite::SqliteDb;
use webhook_core::store::Store;

use super::send;

pub const BIN: &str = env!("CARGO_BIN_EXE_webhooks-local");

/// `WEBHOOKS_TEST_BACKEND=aws`: servers run with `--backend aws` on tables of
/// their own in DynamoDB Local (`AWS_ENDPOINT_URL_DYNAMODB`). Unset or
/// `sqlite`: on their data dir's SQLite file.
pub use testkit::emulators::aws_backend;

/// Table names no other server of any test run uses.
fn unique_tables() -> [(String, String); 2] {
    let run = testkit::emulators::unique_name("webhooks-e2e");
    [
        (
            "WEBHOOKS_SUBSCRIPTIONS_TABLE".into(),
            format!("{run}-subscriptions"),
        ),
        ("WEBHOOKS_MESSAGES_TABLE".into(), format!("{run}-messages")),
    ]
}

/// An SQS queue's messages visible, in flight and delayed (exact on moto).
pub async fn sqs_depth(sqs: &aws_sdk_sqs::Client, url: &str) -> u64 {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(A::All)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap_or_default();
    [
        A::ApproximateNumberOfMessages,
        A::ApproximateNumberOfMessagesNotVisible,
        A::ApproximateNumberOfMessagesDelayed,
    ]
    .iter()
    .map(|name| attributes.get(name).map_or(0, |n| n.parse().unwrap()))
    .sum()
}

/// A server's delivery queue, read from outside to tell when it is empty.
enum DeliveryQueueProbe {
    Sqlite(rusqlite::Connection),
    Sqs(aws_sdk_sqs::Client, String),
}

impl DeliveryQueueProbe {
    /// Jobs on the queue: the SQLite notifications still due, or the SQS
    /// queue's messages visible, in flight and delayed (exact on moto).
    async fn jobs_left(&self) -> u64 {
        match self {
            DeliveryQueueProbe::Sqlite(db) => db
                .query_row(
                    // The queue is the notifications with a due time.
                    "SELECT count(*) FROM notifications WHERE due_at IS NOT NULL",
                    [],
                    |r| r.get::<_, u64>(0),
                )
                .unwrap(),
            DeliveryQueueProbe::Sqs(sqs, url) => sqs_depth(sqs, url).await,
        }
    }
}

/// The file in the data dir that moves the server's clock (`advance_clock`).
const TEST_CLOCK: &str = "test-clock-ms";

pub struct Server {
    pub base: String,
    pub key: String,
    jwt_secret: String,
    child: Child,
    pub dir: tempfile::TempDir,
    pub http: reqwest::Client,
    env: Vec<(String, String)>,
    /// Serving from DynamoDB Local and moto, not the SQLite file.
    aws: bool,
}

impl Server {
    pub fn start() -> Server {
        Self::start_with(&[])
    }

    /// Starts the binary with extra environment variables.
    pub fn start_with(env: &[(&str, &str)]) -> Server {
        let mut env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let aws = aws_backend();
        if aws {
            env.extend(unique_tables());
        }
        Self::start_in(tempfile::tempdir().unwrap(), env, aws)
    }

    /// Starts the binary on SQLite, or on DynamoDB Local and moto (`aws`),
    /// whatever `WEBHOOKS_TEST_BACKEND` says: for tests that compare them.
    pub fn start_on(aws: bool, env: &[(&str, &str)]) -> Server {
        let mut env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if aws {
            testkit::emulators::require(testkit::emulators::DYNAMODB);
            testkit::emulators::require(testkit::emulators::SQS);
            env.extend(unique_tables());
        }
        Self::start_in(tempfile::tempdir().unwrap(), env, aws)
    }

    /// Starts the binary on its SQLite file whatever `WEBHOOKS_TEST_BACKEND`
    /// says: for tests of the embedded backend itself.
    pub fn start_on_sqlite(env: &[(&str, &str)]) -> Server {
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Self::start_in(tempfile::tempdir().unwrap(), env, false)
    }

    /// The SQLite file the server serves from (when it does).
    pub fn sqlite_file(&self) -> std::path::PathBuf {
        assert!(!self.aws, "this server runs on DynamoDB Local");
        self.dir.path().join("webhooks.db")
    }

    /// The store the server serves from, for seeding data through the port:
    /// its SQLite file, or its DynamoDB tables with `WEBHOOKS_TEST_BACKEND=aws`.
    pub async fn store(&self) -> Arc<dyn Store> {
        let var = |name: &str| {
            self.env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        match (
            var("WEBHOOKS_SUBSCRIPTIONS_TABLE"),
            var("WEBHOOKS_MESSAGES_TABLE"),
        ) {
            (Some(subscriptions), Some(messages)) if self.aws => Arc::new(
                DynamoStore::from_env(Tables {
                    subscriptions,
                    messages,
                })
                .await,
            ),
            _ => Arc::new(SqliteDb::open(&self.dir.path().join("webhooks.db")).unwrap()),
        }
    }

    /// `kill -9`, then a new server on the same data dir and environment.
    pub fn crash_and_restart(mut self) -> Server {
        self.child.kill().unwrap(); // SIGKILL: no shutdown code runs
        self.child.wait().unwrap();
        self.restart()
    }

    /// Sends SIGTERM (what systemd, Kubernetes and `docker stop` send) and
    /// waits, for at most `limit`, for the process to end: how it ended and
    /// how long that took.
    pub async fn terminate(&mut self, limit: Duration) -> (ExitStatus, Duration) {
        let sent = Instant::now();
        let kill = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success(), "kill -TERM failed");
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status, sent.elapsed());
            }
            assert!(
                sent.elapsed() < limit,
                "still running {limit:?} after SIGTERM"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// A new server on the same data dir, its environment changed by
    /// `changes` (each variable set to its value), once this one has ended.
    pub fn restart_with(mut self, changes: &[(&str, &str)]) -> Server {
        for (name, value) in changes {
            self.env.retain(|(k, _)| k != name);
            self.env.push((name.to_string(), value.to_string()));
        }
        self.restart()
    }

    /// A new server on the same data dir and environment, once this one
    /// has ended.
    pub fn restart(mut self) -> Server {
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap());
        let env = std::mem::take(&mut self.env);
        Self::start_in(dir, env, self.aws)
    }

    fn start_in(dir: tempfile::TempDir, env: Vec<(String, String)>, aws: bool) -> Server {
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .env_remove("WEBHOOKS_API_KEYS")
            .env_remove("WEBHOOKS_JWT_HS256_SECRET")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if aws {
            cmd.args(["--backend", "aws", "--create-tables"]);
        }
        cmd.env("WEBHOOKS_TEST_CLOCK_FILE", dir.path().join(TEST_CLOCK));
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("webhooks-local starts");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in stdout.lines() {});
        let base = first
            .trim()
            .strip_prefix("webhooks-local listening on ")
            .unwrap_or_else(|| panic!("unexpected banner: {first:?}"))
            .to_owned();
        assert_eq!(
            dir.path().join("webhooks.db").exists(),
            !aws,
            "the SQLite file exists exactly when serving from it"
        );
        let read = |name: &str| {
            std::fs::read_to_string(dir.path().join(name))
                .unwrap()
                .trim()
                .to_owned()
        };
        Server {
            base,
            key: read("api-key"),
            jwt_secret: read("jwt-secret"),
            child,
            dir,
            http: reqwest::Client::new(),
            env,
            aws,
        }
    }

    /// Waits (at most 60 s) until the server has nothing left to send: no
    /// job queued, leased or waiting for its retry. A test that asserts
    /// "nothing more is sent" asserts after this, not after a sleep.
    pub async fn wait_until_idle(&self) {
        let queue = self.delivery_queue().await;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = queue.jobs_left().await;
            if left == 0 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{left} jobs still on the delivery queue after 60 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The delivery queue this server serves from, opened once per wait.
    async fn delivery_queue(&self) -> DeliveryQueueProbe {
        if !self.aws {
            let db = rusqlite::Connection::open_with_flags(
                self.sqlite_file(),
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .unwrap();
            return DeliveryQueueProbe::Sqlite(db);
        }
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let prefix = self.env_var("WEBHOOKS_SUBSCRIPTIONS_TABLE").unwrap();
        // --create-tables names the queue after the subscriptions table.
        let url = sqs
            .get_queue_url()
            .queue_name(format!("{prefix}-delivery"))
            .send()
            .await
            .unwrap()
            .queue_url
            .unwrap();
        DeliveryQueueProbe::Sqs(sqs, url)
    }

    /// Moves the server's clock forward by `by` (`WEBHOOKS_TEST_CLOCK_FILE`):
    /// how a test lets an expiry or a grace period pass without sleeping.
    pub fn advance_clock(&self, by: Duration) {
        let path = self.dir.path().join(TEST_CLOCK);
        let ahead: i64 = std::fs::read_to_string(&path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        // Written whole, then renamed: the server never reads half a number.
        let next = path.with_extension("next");
        std::fs::write(&next, (ahead + by.as_millis() as i64).to_string()).unwrap();
        std::fs::rename(&next, &path).unwrap();
    }

    pub fn token(&self, org: &str) -> String {
        self.token_with(org, &ALL_SCOPES)
    }

    pub fn token_with(&self, org: &str, scopes: &[&str]) -> String {
        mint_hs256(
            &self.jwt_secret,
            "org_id",
            org,
            scopes,
            Duration::from_secs(600),
        )
    }

    /// An environment variable the server was started with.
    pub fn env_var(&self, name: &str) -> Option<String> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }

    pub fn jwt_secret(&self) -> &str {
        &self.jwt_secret
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// A request with the API key and a token for `org`.
    pub fn req(&self, method: reqwest::Method, path: &str, org: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, self.url(path))
            .header("x-api-key", &self.key)
            .bearer_auth(self.token(org))
    }

    pub async fn create(&self, org: &str, uri: &str, filters: &[&str]) -> (StatusCode, Value) {
        let body = json!({"uri": uri, "eventFilters": filters, "expiresDateInMillies": 0});
        send(
            self.req(reqwest::Method::POST, "/webhooksubscription", org)
                .json(&body),
        )
        .await
    }

    pub async fn get(&self, path: &str, org: &str) -> (StatusCode, Value) {
        send(self.req(reqwest::Method::GET, path, org)).await
    }

    pub async fn delete(&self, path: &str, org: &str) -> (StatusCode, Value) {
        send(self.req(reqwest::Method::DELETE, path, org)).await
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
