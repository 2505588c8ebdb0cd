//! Fault injection against the real emulators (issue 14): `webhooks-local
//! --backend aws` under a burst of events and API calls while DynamoDB Local
//! is frozen (SIGSTOP, as a stalled network looks), then while moto is
//! frozen, then while moto is killed and restarted with its queues recreated.
//!
//! Checked: every answer within 5 s, a `503` with `Retry-After` (never a
//! hang, never a 500) while a dependency is down; afterwards every accepted
//! event's notification arrives at a real receiver. Duplicates are counted
//! and printed with the other figures (their first run:
//! docs/performance-history.md#faults-of-dynamodb-and-sqs-issue-14).
//!
//! Run by `./scripts/test.sh --full` as a stage of its own (it freezes the
//! shared DynamoDB Local): needs `WEBHOOKS_TEST_BACKEND=aws`,
//! `AWS_ENDPOINT_URL_DYNAMODB`, `DYNAMODB_LOCAL_PID` and `WEBHOOKS_MOTO_SERVER`
//! (the command that starts the project's moto server, `scripts/emulators.sh`'s
//! `moto_command`: the test runs a moto of its own, which it kills).

use crate::common;

use std::collections::{HashMap, HashSet};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use reqwest::Method;
use serde_json::{json, Value};

/// How long each dependency is down: longer than every timeout of the API
/// (3 s per operation) and than a delivery's first retries (1 s, 1 s, 2 s,
/// 2 s); 20 s when the figures of docs/performance-history.md were taken,
/// 10 s since, to keep CI's three outages from costing a minute.
const OUTAGE: Duration = Duration::from_secs(10);
/// The acceptance's bound on any answer.
const BOUND: Duration = Duration::from_secs(5);

fn required(var: &str) -> String {
    std::env::var(var)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| {
            panic!(
                "{var} is not set: the fault suite needs the emulators; run it through \
             ./scripts/test.sh (stage \"fault injection\")"
            )
        })
}

fn signal(pid: &str, sig: &str) {
    let ok = Command::new("kill").args([sig, pid]).status().unwrap();
    assert!(ok.success(), "kill {sig} {pid} failed");
}

/// DynamoDB Local stopped until dropped (also on a failed assertion).
struct Frozen(String);

impl Frozen {
    fn new(pid: &str) -> Frozen {
        signal(pid, "-STOP");
        Frozen(pid.to_owned())
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        signal(&self.0, "-CONT");
    }
}

/// A moto server of this test's own, on a fixed port across restarts.
struct Moto {
    bin: String,
    port: u16,
    child: Option<Child>,
}

impl Moto {
    async fn start(bin: String) -> Moto {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut moto = Moto {
            bin,
            port,
            child: None,
        };
        moto.run().await;
        moto
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn pid(&self) -> String {
        self.child.as_ref().unwrap().id().to_string()
    }

    async fn run(&mut self) {
        let child = Command::new(&self.bin)
            .args(["-H", "127.0.0.1", "-p", &self.port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", self.bin));
        self.child = Some(child);
        let http = reqwest::Client::new();
        let start = Instant::now();
        while http
            .post(self.url())
            .header("content-type", "application/x-www-form-urlencoded")
            .body("Action=ListQueues&Version=2012-11-05")
            .send()
            .await
            .map(|r| !r.status().is_success())
            .unwrap_or(true)
        {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "moto did not start"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// One SQS call in the JSON protocol the SDK speaks.
    async fn sqs(&self, action: &str, body: Value) -> Value {
        let answer = reqwest::Client::new()
            .post(self.url())
            .header("x-amz-target", format!("AmazonSQS.{action}"))
            .header("content-type", "application/x-amz-json-1.0")
            // moto picks the service from the credential scope.
            .header(
                "authorization",
                "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/sqs/aws4_request, \
                 SignedHeaders=host, Signature=0",
            )
            .body(body.to_string())
            .send()
            .await
            .unwrap_or_else(|e| panic!("moto {action}: {e}"));
        assert!(answer.status().is_success(), "moto {action}: {answer:?}");
        answer.json().await.unwrap()
    }

    async fn create_queue(&self, name: &str) {
        self.sqs("CreateQueue", json!({ "QueueName": name })).await;
    }

    /// Waits until the queue holds no message, visible, in flight or delayed.
    async fn wait_drained(&self, name: &str) {
        let url = self.sqs("GetQueueUrl", json!({ "QueueName": name })).await["QueueUrl"].clone();
        let start = Instant::now();
        loop {
            let got = self
                .sqs(
                    "GetQueueAttributes",
                    json!({ "QueueUrl": url, "AttributeNames": ["All"] }),
                )
                .await;
            let count = |name: &str| {
                got["Attributes"][name]
                    .as_str()
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            let held = count("ApproximateNumberOfMessages")
                + count("ApproximateNumberOfMessagesNotVisible")
                + count("ApproximateNumberOfMessagesDelayed");
            if held == 0 {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{name} still holds {held} messages after 60 s: {got}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
        }
        self.kill();
    }
}

/// One answer of the service during a phase.
#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    code: String,
    retry_after: bool,
    took: Duration,
    /// Sent while the dependency was down.
    during: bool,
}

fn event(id: &str) -> Value {
    json!({
        "eventId": id, "type": "message.inbound", "organizationId": "org-f", "departmentId": "dep-f",
        "occurredAt": 1_700_000_000_000i64,
        "message": {"id": id, "owner": null, "time": "2024-03-10T18:07:52.534Z", "direction": "in",
                    "to": ["+15550100"], "from": "+15550199", "text": "hello", "media": [], "attachments": []},
        "carrierMessageId": "carrier-1", "status": "RECEIVED"
    })
}

async fn call(req: reqwest::RequestBuilder, during: bool) -> Answer {
    let start = Instant::now();
    match req.timeout(Duration::from_secs(15)).send().await {
        Ok(r) => {
            let status = r.status().as_u16();
            let retry_after = r.headers().contains_key("retry-after");
            let body: Value = r.json().await.unwrap_or(Value::Null);
            Answer {
                status,
                code: body["code"].as_str().unwrap_or("").to_owned(),
                retry_after,
                took: start.elapsed(),
                during,
            }
        }
        Err(e) => Answer {
            status: 0,
            code: format!("no answer: {e}"),
            retry_after: false,
            took: start.elapsed(),
            during,
        },
    }
}

/// What a phase's fault tells its burst.
#[derive(Default)]
struct Control {
    /// The dependency is down: answers now are "during the fault".
    down: AtomicBool,
    /// The burst waits (while a queue is drained before moto is killed).
    hold: AtomicBool,
    stop: AtomicBool,
}

/// Events and subscription reads, one after another, until `stop`; every
/// answer recorded with the event id it was for (None for a read).
async fn burst(
    server: Arc<Server>,
    label: &'static str,
    control: Arc<Control>,
) -> Vec<(Option<String>, Answer)> {
    let mut answers = Vec::new();
    let mut n = 0;
    while !control.stop.load(SeqCst) {
        if control.hold.load(SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        n += 1;
        let id = format!("{label}-{n}");
        let during = control.down.load(SeqCst);
        let req = server
            .req(Method::POST, "/events", "org-f")
            .json(&event(&id));
        answers.push((Some(id), call(req, during).await));
        if n % 4 == 0 {
            let during = control.down.load(SeqCst);
            let req = server.req(Method::GET, "/webhooksubscription/all", "org-f");
            answers.push((None, call(req, during).await));
        }
    }
    answers
}

struct Figures {
    label: &'static str,
    answers: Vec<(Option<String>, Answer)>,
    recovery: Duration,
}

/// Runs a burst; `fault` takes the dependency down for OUTAGE and brings it
/// back. Returns the answers and how long after the dependency's return the
/// first event was accepted again.
async fn phase<F, R>(server: &Arc<Server>, label: &'static str, fault: F) -> Figures
where
    F: FnOnce(Arc<Control>) -> R,
    R: std::future::Future<Output = ()>,
{
    let control = Arc::new(Control::default());
    let producer = tokio::spawn(burst(server.clone(), label, control.clone()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    fault(control.clone()).await;
    let back = Instant::now();
    // Probe until an event is accepted again (the probes count as answers).
    let mut recovery = None;
    let mut probes = Vec::new();
    while recovery.is_none() {
        let id = format!("{label}-probe-{}", probes.len());
        let req = server
            .req(Method::POST, "/events", "org-f")
            .json(&event(&id));
        let a = call(req, false).await;
        if a.status == 202 {
            recovery = Some(back.elapsed());
        }
        probes.push((Some(id), a.clone()));
        assert!(
            back.elapsed() < Duration::from_secs(60),
            "{label}: no event accepted within 60 s of the recovery (last answer {a:?})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    control.stop.store(true, SeqCst);
    let mut answers = producer.await.unwrap();
    answers.extend(probes);
    Figures {
        label,
        answers,
        recovery: recovery.unwrap(),
    }
}

/// Checks a phase's answers and prints its figures; returns the ids of the
/// events it accepted and of those to send again (answered 503).
fn check(f: &Figures) -> (Vec<String>, Vec<String>) {
    let mut accepted = Vec::new();
    let mut refused = Vec::new();
    let during: Vec<&Answer> = f
        .answers
        .iter()
        .map(|(_, a)| a)
        .filter(|a| a.during)
        .collect();
    for (id, a) in &f.answers {
        assert!(
            a.took < BOUND,
            "{}: an answer took {:?} (bound {BOUND:?}): {a:?}",
            f.label,
            a.took
        );
        assert!(
            a.status != 0 && a.status != 500,
            "{}: no answer or a bare 500: {a:?}",
            f.label
        );
        if a.status == 503 {
            assert!(
                a.retry_after,
                "{}: a 503 without Retry-After: {a:?}",
                f.label
            );
            assert!(
                [
                    "STORE_UNAVAILABLE",
                    "QUEUE_UNAVAILABLE",
                    "DEADLINE_EXCEEDED"
                ]
                .contains(&a.code.as_str()),
                "{}: {a:?}",
                f.label
            );
        } else {
            assert!(a.status < 300, "{}: unexpected answer {a:?}", f.label);
        }
        match (id, a.status) {
            (Some(id), 202) => accepted.push(id.clone()),
            (Some(id), _) => refused.push(id.clone()),
            _ => {}
        }
    }
    let unavailable = during.iter().filter(|a| a.status == 503).count();
    assert!(
        unavailable > 0,
        "{}: no 503 while the dependency was down ({} answers then)",
        f.label,
        during.len()
    );
    let slowest = during.iter().map(|a| a.took).max().unwrap_or_default();
    let slowest_all = f
        .answers
        .iter()
        .map(|(_, a)| a.took)
        .max()
        .unwrap_or_default();
    let mut codes: HashMap<String, usize> = HashMap::new();
    for a in &during {
        *codes.entry(format!("{} {}", a.status, a.code)).or_default() += 1;
    }
    println!(
        "FAULT {}: {} requests ({} during the fault: {codes:?}), slowest during the fault {:.2} s, \
         slowest overall {:.2} s, first event accepted {:.2} s after recovery",
        f.label,
        f.answers.len(),
        during.len(),
        slowest.as_secs_f64(),
        slowest_all.as_secs_f64(),
        f.recovery.as_secs_f64()
    );
    (accepted, refused)
}

// It freezes the shared emulators, so it runs alone, as the last stage of
// `./scripts/test.sh --full`, never beside other tests.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "freezes the emulators: ./scripts/test.sh --full runs it alone, last"]
async fn dependencies_fail_fast_and_lose_nothing() {
    assert!(
        aws_backend(),
        "the fault suite runs with WEBHOOKS_TEST_BACKEND=aws (./scripts/test.sh)"
    );
    let dynamodb_pid = required("DYNAMODB_LOCAL_PID");
    let mut moto = Moto::start(required("WEBHOOKS_MOTO_SERVER")).await;
    let receiver = Receiver::start(Handshake::Echo).await;
    let server = Arc::new(Server::start_with(&[
        ("AWS_ENDPOINT_URL_SQS", &moto.url()),
        ("WEBHOOKS_RETRY_SCHEDULE", "1s,1s,2s,2s,5s,5s,10s"),
    ]));
    let (status, sub) = server
        .create(
            "org-f",
            &receiver.uri("/hook"),
            &[&inbound("org-f", "dep-f")],
        )
        .await;
    assert_eq!(status.as_u16(), 200, "{sub}");
    let started = Instant::now();

    let dynamodb = phase(&server, "dynamodb-freeze", |control| async move {
        let frozen = Frozen::new(&dynamodb_pid);
        control.down.store(true, SeqCst);
        tokio::time::sleep(OUTAGE).await;
        control.down.store(false, SeqCst);
        drop(frozen);
    })
    .await;
    let moto_pid = moto.pid();
    let sqs = phase(&server, "sqs-freeze", |control| async move {
        let frozen = Frozen::new(&moto_pid);
        control.down.store(true, SeqCst);
        tokio::time::sleep(OUTAGE).await;
        control.down.store(false, SeqCst);
        drop(frozen);
    })
    .await;
    let mut totals = Totals::default();
    let expected = settle(&server, &receiver, &[&dynamodb, &sqs], &mut totals).await;

    // Killed: a moto of the same port comes back empty and the queues are
    // created again (as a redeployed stack would). An in-memory moto loses
    // the messages it held, which SQS never does, so the burst pauses and the
    // delivery queue is drained before the kill; events accepted after it
    // must all arrive.
    let queue = format!(
        "{}-delivery",
        server.env_var("WEBHOOKS_SUBSCRIPTIONS_TABLE").unwrap()
    );
    let moto_ref = &mut moto;
    let restart = phase(&server, "sqs-restart", |control| async move {
        control.hold.store(true, SeqCst);
        moto_ref.wait_drained(&queue).await;
        moto_ref.kill();
        control.down.store(true, SeqCst);
        control.hold.store(false, SeqCst);
        tokio::time::sleep(OUTAGE).await;
        moto_ref.run().await;
        moto_ref.create_queue(&format!("{queue}-dlq")).await;
        moto_ref.create_queue(&queue).await;
        control.down.store(false, SeqCst);
    })
    .await;
    let before = expected.len();
    let expected = settle(&server, &receiver, &[&restart], &mut totals).await;
    println!(
        "FAULT summary: {} events accepted ({} after the restart), 0 lost, \
         {} notifications received, {} duplicates (same webhook-id), {} events sent again \
         after a 503, suite {:.0} s",
        before + expected.len(),
        expected.len(),
        totals.received,
        totals.duplicates,
        totals.resent,
        started.elapsed().as_secs_f64()
    );
}

#[derive(Default)]
struct Totals {
    received: usize,
    duplicates: usize,
    resent: usize,
}

/// Checks the phases' answers, sends the events refused with a 503 again
/// (as a producer honouring Retry-After does: ingestion is idempotent per
/// event id) and waits until every accepted event's notification arrived.
/// Returns the accepted event ids; counts what arrived since the last call.
async fn settle(
    server: &Server,
    receiver: &Receiver,
    phases: &[&Figures],
    totals: &mut Totals,
) -> HashSet<String> {
    let mut accepted = Vec::new();
    let mut resend = Vec::new();
    for f in phases {
        let (a, r) = check(f);
        accepted.extend(a);
        resend.extend(r);
    }
    for id in &resend {
        let a = call(
            server
                .req(Method::POST, "/events", "org-f")
                .json(&event(id)),
            false,
        )
        .await;
        assert_eq!(a.status, 202, "{id} sent again after the recovery: {a:?}");
        accepted.push(id.clone());
    }
    let expected: HashSet<String> = accepted.into_iter().collect();
    let got = wait_delivered(receiver, &expected, "after the recovery").await;
    let uuids: Vec<&str> = got[totals.received..]
        .iter()
        .map(|r| r.header("webhook-id"))
        .collect();
    let unique: HashSet<&str> = uuids.iter().copied().collect();
    totals.received = got.len();
    totals.duplicates += uuids.len() - unique.len();
    totals.resent += resend.len();
    expected
}

/// Waits until a notification of every event in `expected` arrived; fails
/// naming the missing ones.
async fn wait_delivered(
    receiver: &Receiver,
    expected: &HashSet<String>,
    when: &str,
) -> Vec<Received> {
    let start = Instant::now();
    loop {
        let got = receiver.received();
        let seen: HashSet<String> = got
            .iter()
            .filter_map(|r| {
                r.json()["messageInfo"]["messageId"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        let missing: Vec<&String> = expected.difference(&seen).collect();
        if missing.is_empty() {
            return got;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{when}: {} of {} accepted events never arrived, e.g. {:?}",
            missing.len(),
            expected.len(),
            &missing[..missing.len().min(5)]
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
