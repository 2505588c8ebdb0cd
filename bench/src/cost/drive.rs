//! Real operations through `webhooks-local --backend aws`, its DynamoDB and
//! SQS traffic through the recording proxies: creates and API reads; events
//! at fan-out 1 and 10 sent to an events queue and ingested by the real
//! `ingest-events` function (`events.rs`, as deployed), delivered by
//! webhooks-local to a loopback receiver (delivery history on, the default).
//! Each phase is the difference of the proxies' tallies taken before and
//! after it.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::StatusCode;
use serde::Serialize;
use tokio::sync::Semaphore;
use webhook_core::auth::jwt::{mint_hs256, ALL_SCOPES};

use super::events::{EventsPipeline, Wiring};
use super::proxy::{tally_since, Proxy, Service, Tally};
use crate::api::{event_body, inbound_filter, Api};
use crate::process::{self, Listening};
use crate::receiver::Receiver;
use crate::Settings;

const ORG: &str = "bench-cost";

/// What one phase sent through the proxies.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub name: String,
    /// Operations the phase made (creates, reads, events).
    pub operations: u64,
    /// Notifications delivered (event phases), else 0.
    pub notifications: u64,
    /// Event phases: first event sent → last notification received, s (else 0).
    pub seconds: f64,
    pub tally: Tally,
}

struct Proxies {
    dynamodb: Proxy,
    sqs: Proxy,
    /// The events queue's producer and event source mapping.
    events: Proxy,
    /// STS and EventBridge: the AWS destinations' role and bus.
    destination: Proxy,
}

/// Tally keys of the events queue's requests (`sqs-events:SendMessageBatch`).
pub const EVENTS_QUEUE: &str = "sqs-events:";

impl Proxies {
    fn tally(&self) -> Tally {
        let mut all = self.dynamodb.tally();
        all.extend(self.sqs.tally());
        all.extend(self.events.tally().into_iter().map(|(k, c)| {
            let action = k.strip_prefix("sqs:").unwrap_or(&k);
            (format!("{EVENTS_QUEUE}{action}"), c)
        }));
        all.extend(self.destination.tally());
        all
    }

    /// DynamoDB requests so far: unchanged for a while means the service is idle.
    fn dynamodb_requests(&self) -> u64 {
        self.dynamodb.tally().values().map(|c| c.requests).sum()
    }
}

fn random_hex() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn start_service(
    s: &Settings,
    data: &std::path::Path,
    proxies: &Proxies,
    key: &str,
    secret: &str,
    prefix: &str,
) -> Result<Listening, String> {
    let local = process::workspace_binary(s.bin_dir.as_deref(), "webhooks-local");
    let log = std::fs::File::create(data.join("webhooks-local.log")).map_err(|e| e.to_string())?;
    let mut command = Command::new(&local);
    command
        .args(["serve", "--addr", "127.0.0.1:0", "--backend", "aws"])
        .arg("--create-tables")
        .arg("--data-dir")
        .arg(data.join("data"))
        .env("AWS_ENDPOINT_URL_DYNAMODB", proxies.dynamodb.url())
        .env("AWS_ENDPOINT_URL_SQS", proxies.sqs.url())
        .env("AWS_ENDPOINT_URL_STS", proxies.destination.url())
        .env("AWS_ENDPOINT_URL_EVENTBRIDGE", proxies.destination.url())
        .env(
            "WEBHOOKS_SUBSCRIPTIONS_TABLE",
            format!("{prefix}-subscriptions"),
        )
        .env("WEBHOOKS_MESSAGES_TABLE", format!("{prefix}-messages"))
        .env_remove("WEBHOOKS_DELIVERY_QUEUE_URL")
        .env_remove("WEBHOOKS_DELIVERY_DLQ_URL")
        .env("WEBHOOKS_API_KEYS", key)
        .env("WEBHOOKS_JWT_HS256_SECRET", secret)
        .env("RUST_LOG", &s.server_log)
        .stderr(log);
    Listening::spawn(command, "webhooks-local listening on ")
        .map_err(|e| format!("{e} (build it with `cargo build --release -p webhooks-local`)"))
}

/// Waits until the receiver has `expected` notifications and the service
/// has made no DynamoDB call for a second (the last history updates), and
/// takes them; when the last one arrived.
async fn settle(receiver: &Receiver, expected: u64, proxies: &Proxies) -> Result<Instant, String> {
    let limit = Duration::from_secs(300);
    let deadline = Instant::now() + limit;
    while receiver.count() < expected {
        if Instant::now() > deadline {
            return Err(format!(
                "{} of {expected} notifications received after {} s",
                receiver.count(),
                limit.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let arrived = Instant::now();
    quiet(proxies, deadline).await;
    receiver.take();
    Ok(arrived)
}

/// Until the service has made no DynamoDB call for a second, or `deadline`.
async fn quiet(proxies: &Proxies, deadline: Instant) {
    let mut last = proxies.dynamodb_requests();
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < Duration::from_secs(1) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = proxies.dynamodb_requests();
        if now != last {
            last = now;
            quiet_since = Instant::now();
        }
    }
}

/// Runs every phase of `operations` operations each, then the backlogs.
pub async fn run(s: &Settings) -> Result<(Vec<Phase>, Vec<Backlog>), String> {
    let upstream = |var: &str| {
        std::env::var(var)
            .map_err(|_| format!("{var} is not set: the cost suite needs the emulators"))
    };
    let proxies = Proxies {
        dynamodb: Proxy::start(Service::DynamoDb, &upstream("AWS_ENDPOINT_URL_DYNAMODB")?).await?,
        sqs: Proxy::start(Service::Sqs, &upstream("AWS_ENDPOINT_URL_SQS")?).await?,
        events: Proxy::start(Service::Sqs, &upstream("AWS_ENDPOINT_URL_SQS")?).await?,
        // moto serves STS and EventBridge on SQS's endpoint.
        destination: Proxy::start(Service::Destination, &upstream("AWS_ENDPOINT_URL_SQS")?).await?,
    };
    let data = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (key, secret) = (format!("bench-{}", random_hex()), random_hex());
    let prefix = format!("cost-{}", &random_hex()[..10]);
    let service = start_service(s, data.path(), &proxies, &key, &secret, &prefix)?;
    let pipeline = EventsPipeline::start(
        &s.lambda_binary(crate::lambda::LAMBDA_BINARY),
        &data.path().join("ingest-events.log"),
        &proxies.events,
        Wiring {
            dynamodb: &proxies.dynamodb,
            sqs: &proxies.sqs,
            subscriptions_table: format!("{prefix}-subscriptions"),
            messages_table: format!("{prefix}-messages"),
            delivery_queue_url: delivery_queue_url(&prefix).await?,
        },
        s.cost_events_per_send,
    )
    .await?;
    let receiver = Receiver::start().await?;
    let token = mint_hs256(
        &secret,
        "org_id",
        ORG,
        &ALL_SCOPES,
        Duration::from_secs(86_400),
    );
    let api = Api::new(format!("http://{}/prod", service.addr), &key, &token, 4);
    let n = s.cost_operations.max(1);
    let mut phases = Vec::new();
    let mut record =
        |name: &str, before: &Tally, operations: u64, notifications: u64, seconds: f64| {
            let phase = Phase {
                name: name.to_owned(),
                operations,
                notifications,
                seconds,
                tally: tally_since(&proxies.tally(), before),
            };
            println!(
                "  {name}: {operations} operations, {} DynamoDB/SQS actions",
                phase.tally.len()
            );
            phases.push(phase);
        };

    // The ten subscriptions of the fan-out-10 events, outside any phase.
    let ten = inbound_filter(ORG, "ten");
    for i in 0..10 {
        api.create(&receiver.uri(&format!("/ten/{i}")), &ten)
            .await?;
    }

    let before = proxies.tally();
    let mut ids = Vec::new();
    for i in 0..n {
        let filter = inbound_filter(ORG, &format!("dep-{i}"));
        ids.push(
            api.create(&receiver.uri(&format!("/one/{i}")), &filter)
                .await?,
        );
    }
    record("create subscription", &before, n, 0, 0.0);

    let before = proxies.tally();
    let bodies: Vec<String> = (0..n)
        .map(|i| event_body(ORG, "dep-0", &format!("e1-{i}"), &format!("m-{i}")))
        .collect();
    let started = Instant::now();
    pipeline.ingest(&bodies).await?;
    let arrived = settle(&receiver, n, &proxies).await?;
    record(
        "event, fan-out 1",
        &before,
        n,
        n,
        (arrived - started).as_secs_f64(),
    );

    let before = proxies.tally();
    let bodies: Vec<String> = (0..n)
        .map(|i| event_body(ORG, "ten", &format!("e10-{i}"), &format!("m10-{i}")))
        .collect();
    let started = Instant::now();
    pipeline.ingest(&bodies).await?;
    let arrived = settle(&receiver, n * 10, &proxies).await?;
    record(
        "event, fan-out 10",
        &before,
        n,
        n * 10,
        (arrived - started).as_secs_f64(),
    );

    // Issue 38: the same event at fan-out 1 into an AWS destination of a
    // customer account in moto (docs/destinations.md), each subscription
    // validated outside the phase.
    let customer = testkit::customer::Customer::new();
    let external = webhook_core::destinations::external_id("webhooks", &ORG.into());
    let (queue, bus, copy, role) = (
        format!("{prefix}-orders"),
        format!("{prefix}-bus"),
        format!("{prefix}-copy"),
        format!("{prefix}-role"),
    );
    customer.create_queue(&queue).await;
    customer.bus(&bus, &copy).await;
    customer.role(&role, &external, &[&queue], &[&bus]).await;
    let role_arn = testkit::customer::Customer::role_arn(&role);
    for (kind, label, arn, read) in [
        (
            "sqs",
            "an SQS queue",
            testkit::customer::Customer::queue_arn(&queue),
            &queue,
        ),
        (
            "eventbridge",
            "an EventBridge bus",
            testkit::customer::Customer::bus_arn(&bus),
            &copy,
        ),
    ] {
        let department = format!("dest-{kind}");
        let body = serde_json::json!({
            "destination": {"type": kind, "arn": arn, "roleArn": role_arn},
            "eventFilters": [inbound_filter(ORG, &department)],
            "expiresDateInMillies": 0,
        });
        api.post("/webhooksubscription", body.to_string(), StatusCode::OK)
            .await?;
        customer.wait_for(read, 1).await; // the validation message
        let before = proxies.tally();
        let bodies: Vec<String> = (0..n)
            .map(|i| {
                event_body(
                    ORG,
                    &department,
                    &format!("e-{kind}-{i}"),
                    &format!("m-{kind}-{i}"),
                )
            })
            .collect();
        let started = Instant::now();
        pipeline.ingest(&bodies).await?;
        let mut got = 0;
        let deadline = Instant::now() + Duration::from_secs(300);
        while got < n {
            got += customer.receive(read).await.len() as u64;
            if Instant::now() > deadline {
                return Err(format!("{got} of {n} notifications in {read} after 300 s"));
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        quiet(&proxies, deadline).await;
        record(
            &format!("event to {label}, fan-out 1"),
            &before,
            n,
            n,
            seconds,
        );
    }

    let before = proxies.tally();
    for i in 0..n {
        let id = &ids[i as usize % ids.len()];
        api.get(&format!("/webhooksubscription/{id}"), StatusCode::OK)
            .await?;
    }
    record("get subscription", &before, n, 0, 0.0);

    let before = proxies.tally();
    for i in 0..n {
        api.get(&format!("/message/getmessagebyid/m-{i}"), StatusCode::OK)
            .await?;
    }
    record("get message", &before, n, 0, 0.0);

    let before = proxies.tally();
    for _ in 0..n {
        api.get("/webhooksubscription/all?page=0&size=20", StatusCode::OK)
            .await?;
    }
    record(
        &format!("list subscriptions (page of 20 of {})", n + 10),
        &before,
        n,
        0,
        0.0,
    );
    // Issue 36: a backlog for one slow subscription, its SQS requests per
    // notification (deferrals over the cap are re-sent messages).
    let mut backlogs = Vec::new();
    for (k, &depth) in s.cost_backlog.iter().enumerate() {
        backlogs.push(backlog(s, &api, &receiver, &proxies, k, depth).await?);
    }
    drop(pipeline);
    drop(service);
    Ok((phases, backlogs))
}

/// One backlog of the cost suite's backlog phase (issue 36), printed and in
/// results.json.
#[derive(Debug, Clone, Serialize)]
pub struct Backlog {
    /// Events to post (`--cost-backlog`).
    pub events: u64,
    /// Events per second offered (`--cost-backlog-rate`; 0: as fast as the senders go).
    pub rate: f64,
    /// Events accepted (`202`), after retries.
    pub posted: u64,
    /// Answers other than `202` (and transport errors), each retried after
    /// its `Retry-After`, by status and code.
    pub refused: BTreeMap<String, u64>,
    /// Events given up after [`POST_TRIES`] tries.
    pub failed: u64,
    /// First post sent → last post answered.
    pub posting_s: f64,
    /// Accepted but not yet delivered when the last post was answered: the
    /// deepest the backlog got (posting outpaces the callback's 32/s).
    pub queued_when_posted: u64,
    /// Distinct notifications received (by `webhook-id`).
    pub received: u64,
    /// Deliveries received, redeliveries of the same notification included.
    pub arrivals: u64,
    /// First post sent → last notification received.
    pub received_s: f64,
    /// The delivery queue's SQS requests (ingestion's sends included).
    pub sqs_requests: u64,
    /// `sqs_requests` ÷ `received`.
    pub per_notification: f64,
    /// The delivery queue's requests by action.
    pub by_action: BTreeMap<String, u64>,
}

/// Tries of one backlog event before it is given up.
const POST_TRIES: u32 = 10;
/// Posts in flight at once in the backlog phase.
const BACKLOG_SENDERS: usize = 32;
/// A backlog's notifications are awaited this long at most, and given up on
/// when none has arrived for [`BACKLOG_STALL`].
const BACKLOG_WAIT: Duration = Duration::from_secs(3600);
const BACKLOG_STALL: Duration = Duration::from_secs(180);

#[derive(Default)]
struct Posting {
    posted: AtomicU64,
    failed: AtomicU64,
    refused: Mutex<BTreeMap<String, u64>>,
}

/// Posts one event until it is accepted: a refusal (or a transport error)
/// waits its `Retry-After` (1 s without one, at most 30 s) and tries again,
/// counted; the same `eventId` each time, which the service ingests once.
async fn post_event(api: &Api, body: String, posting: &Posting) {
    let url = format!("{}/events", api.base);
    for _ in 0..POST_TRIES {
        let (why, wait) = match api
            .client
            .post(&url)
            .header(CONTENT_TYPE, "application/json")
            .body(body.clone())
            .send()
            .await
        {
            Ok(r) if r.status() == StatusCode::ACCEPTED => {
                let _ = r.bytes().await;
                posting.posted.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Ok(r) => {
                let status = r.status();
                let wait = r
                    .headers()
                    .get(RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(1)
                    .clamp(1, 30);
                let body = r.bytes().await.unwrap_or_default();
                let code = serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v["code"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                (format!("{} {code}", status.as_u16()), wait)
            }
            Err(e) if e.is_timeout() => ("timeout".to_owned(), 1),
            Err(_) => ("connection".to_owned(), 1),
        };
        *posting
            .refused
            .lock()
            .expect("not poisoned")
            .entry(why.trim().to_owned())
            .or_default() += 1;
        tokio::time::sleep(Duration::from_secs(wait)).await;
    }
    posting.failed.fetch_add(1, Ordering::Relaxed);
}

/// `depth` events posted for one subscription whose callback answers after
/// 1 s (at `--cost-backlog-rate` per second, [`BACKLOG_SENDERS`] in flight
/// at most), delivered to the last: the delivery queue's SQS requests per
/// notification.
async fn backlog(
    s: &Settings,
    api: &Api,
    receiver: &Receiver,
    proxies: &Proxies,
    k: usize,
    depth: u64,
) -> Result<Backlog, String> {
    let dep = format!("backlog-{k}");
    api.create(
        &receiver.uri(&format!("/slow/{k}")),
        &inbound_filter(ORG, &dep),
    )
    .await?;
    receiver.take();
    let before = proxies.tally();
    let started = Instant::now();
    // Posted to webhooks-local, faster than the events pipeline: the backlog
    // must build faster than the callback drains it (32/s).
    let posting = Arc::new(Posting::default());
    let senders = Arc::new(Semaphore::new(BACKLOG_SENDERS));
    let rate = s.cost_backlog_rate.max(0.0);
    let mut posts = tokio::task::JoinSet::new();
    for i in 0..depth {
        if rate > 0.0 {
            tokio::time::sleep_until((started + Duration::from_secs_f64(i as f64 / rate)).into())
                .await;
        }
        let permit = senders
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| e.to_string())?;
        let (api, posting) = (api.clone(), posting.clone());
        let id = format!("b{k}-{i}");
        let body = event_body(ORG, &dep, &id, &id);
        posts.spawn(async move {
            post_event(&api, body, &posting).await;
            drop(permit);
        });
        while posts.try_join_next().is_some() {}
    }
    while posts.join_next().await.is_some() {}
    let posting_s = started.elapsed().as_secs_f64();
    let posted = posting.posted.load(Ordering::Relaxed);
    let failed = posting.failed.load(Ordering::Relaxed);
    let refused = posting.refused.lock().expect("not poisoned").clone();
    let queued = posted.saturating_sub(receiver.distinct());
    println!(
        "  backlog of {depth}: {posted} posted in {posting_s:.0} s ({} refusals retried: {refused:?}; {failed} given up), {queued} not yet delivered then",
        refused.values().sum::<u64>(),
    );
    // Every accepted event's notification, then a second without DynamoDB calls.
    let deadline = started + BACKLOG_WAIT;
    let (mut last_count, mut last_change) = (0, Instant::now());
    loop {
        let count = receiver.distinct();
        if count >= posted {
            break;
        }
        if count != last_count {
            (last_count, last_change) = (count, Instant::now());
        }
        if Instant::now() > deadline || last_change.elapsed() > BACKLOG_STALL {
            println!(
                "  backlog of {depth}: only {count} of {posted} notifications received after {:.0} s",
                started.elapsed().as_secs_f64()
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let received_s = started.elapsed().as_secs_f64();
    quiet(proxies, Instant::now() + Duration::from_secs(30)).await;
    let arrivals = receiver.take();
    let received = arrivals
        .iter()
        .map(|(id, _)| id.as_str())
        .collect::<std::collections::HashSet<_>>()
        .len() as u64;
    let tally = tally_since(&proxies.tally(), &before);
    let by_action: BTreeMap<String, u64> = tally
        .iter()
        .filter_map(|(k, c)| Some((k.strip_prefix("sqs:")?.to_owned(), c.requests)))
        .collect();
    let sqs_requests: u64 = by_action.values().sum();
    let per_notification = sqs_requests as f64 / received.max(1) as f64;
    let action = |a: &str| by_action.get(a).copied().unwrap_or(0);
    println!(
        "  backlog of {depth} for a 1 s callback: {received} of {posted} notifications received ({} deliveries) in {received_s:.0} s; delivery queue: {sqs_requests} SQS requests, {per_notification:.2} per notification (ReceiveMessage {}, SendMessage {}, SendMessageBatch {}, DeleteMessage {}, DeleteMessageBatch {})",
        arrivals.len(),
        action("ReceiveMessage"),
        action("SendMessage"),
        action("SendMessageBatch"),
        action("DeleteMessage"),
        action("DeleteMessageBatch"),
    );
    Ok(Backlog {
        events: depth,
        rate,
        posted,
        refused,
        failed,
        posting_s,
        queued_when_posted: queued,
        received,
        arrivals: arrivals.len() as u64,
        received_s,
        sqs_requests,
        per_notification,
        by_action,
    })
}

/// The delivery queue `webhooks-local --create-tables` made for `prefix`
/// (named after its subscriptions table), asked of moto directly.
async fn delivery_queue_url(prefix: &str) -> Result<String, String> {
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let name = format!("{prefix}-subscriptions-delivery");
    aws_sdk_sqs::Client::new(&sdk)
        .get_queue_url()
        .queue_name(&name)
        .send()
        .await
        .map_err(|e| format!("{name}: {}", aws_sdk_sqs::error::DisplayErrorContext(e)))?
        .queue_url()
        .map(str::to_owned)
        .ok_or_else(|| format!("{name}: no URL"))
}
