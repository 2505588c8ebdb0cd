//! Real operations through `webhooks-local --backend aws`, its DynamoDB and
//! SQS traffic through the recording proxies: creates and API reads; events
//! at fan-out 1 and 10 sent to an events queue and ingested by the real
//! `ingest-events` function (`events.rs`, as deployed), delivered by
//! webhooks-local to a loopback receiver (delivery history on, the default).
//! Each phase is the difference of the proxies' tallies taken before and
//! after it.

use std::process::Command;
use std::time::{Duration, Instant};

use http::StatusCode;
use serde::Serialize;
use webhook_core::auth::jwt::{mint_hs256, ALL_SCOPES};

use super::events::{EventsPipeline, Wiring};
use super::proxy::{tally_since, Proxy, Service, Tally};
use crate::api::{event_body, inbound_filter, Api};
use crate::load::{closed_loop, Limit};
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
    pub tally: Tally,
}

struct Proxies {
    dynamodb: Proxy,
    sqs: Proxy,
    /// The events queue's producer and event source mapping.
    events: Proxy,
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
/// has made no DynamoDB call for a second (the last history updates).
async fn settle(receiver: &Receiver, expected: u64, proxies: &Proxies) -> Result<(), String> {
    settle_within(receiver, expected, proxies, Duration::from_secs(300))
        .await
        .map(drop)
}

async fn settle_within(
    receiver: &Receiver,
    expected: u64,
    proxies: &Proxies,
    limit: Duration,
) -> Result<u64, String> {
    let deadline = Instant::now() + limit;
    while receiver.count() < expected {
        if Instant::now() > deadline {
            return Err(format!(
                "{} of {expected} notifications received after {} s",
                receiver.count(),
                limit.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
    Ok(receiver.take().len() as u64)
}

/// Runs every phase of `operations` operations each.
pub async fn run(s: &Settings) -> Result<Vec<Phase>, String> {
    let upstream = |var: &str| {
        std::env::var(var)
            .map_err(|_| format!("{var} is not set: the cost suite needs the emulators"))
    };
    let proxies = Proxies {
        dynamodb: Proxy::start(Service::DynamoDb, &upstream("AWS_ENDPOINT_URL_DYNAMODB")?).await?,
        sqs: Proxy::start(Service::Sqs, &upstream("AWS_ENDPOINT_URL_SQS")?).await?,
        events: Proxy::start(Service::Sqs, &upstream("AWS_ENDPOINT_URL_SQS")?).await?,
    };
    let data = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (key, secret) = (format!("bench-{}", random_hex()), random_hex());
    let prefix = format!("cost-{}", &random_hex()[..10]);
    let service = start_service(s, data.path(), &proxies, &key, &secret, &prefix)?;
    let pipeline = EventsPipeline::start(
        &process::workspace_binary(s.bin_dir.as_deref(), "ingest-events"),
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
    let mut record = |name: &str, before: &Tally, operations: u64, notifications: u64| {
        let phase = Phase {
            name: name.to_owned(),
            operations,
            notifications,
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
    record("create subscription", &before, n, 0);

    let before = proxies.tally();
    let bodies: Vec<String> = (0..n)
        .map(|i| event_body(ORG, "dep-0", &format!("e1-{i}"), &format!("m-{i}")))
        .collect();
    pipeline.ingest(&bodies).await?;
    settle(&receiver, n, &proxies).await?;
    record("event, fan-out 1", &before, n, n);

    let before = proxies.tally();
    let bodies: Vec<String> = (0..n)
        .map(|i| event_body(ORG, "ten", &format!("e10-{i}"), &format!("m10-{i}")))
        .collect();
    pipeline.ingest(&bodies).await?;
    settle(&receiver, n * 10, &proxies).await?;
    record("event, fan-out 10", &before, n, n * 10);

    let before = proxies.tally();
    for i in 0..n {
        let id = &ids[i as usize % ids.len()];
        api.get(&format!("/webhooksubscription/{id}"), StatusCode::OK)
            .await?;
    }
    record("get subscription", &before, n, 0);

    let before = proxies.tally();
    for i in 0..n {
        api.get(&format!("/message/getmessagebyid/m-{i}"), StatusCode::OK)
            .await?;
    }
    record("get message", &before, n, 0);

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
    );
    // Issue 36: a backlog for one slow subscription, its SQS requests per
    // notification (deferrals over the cap are re-sent messages). Printed.
    for (k, &depth) in s.cost_backlog.iter().enumerate() {
        let dep = format!("backlog-{k}");
        api.create(
            &receiver.uri(&format!("/slow/{k}")),
            &inbound_filter(ORG, &dep),
        )
        .await?;
        let before = proxies.tally();
        let started = Instant::now();
        // Posted to webhooks-local, faster than the events pipeline: the
        // backlog must build faster than the callback drains it (32/s).
        let op = {
            let (api, dep) = (api.clone(), dep.clone());
            move |i: u64| {
                let (api, dep) = (api.clone(), dep.clone());
                async move {
                    let id = format!("b{k}-{i}");
                    api.post(
                        "/events",
                        event_body(ORG, &dep, &id, &id),
                        StatusCode::ACCEPTED,
                    )
                    .await
                    .map(drop)
                }
            }
        };
        let posted = closed_loop("backlog", 32, Duration::ZERO, Limit::Count(depth), op).await;
        let queued = depth.saturating_sub(receiver.count());
        println!(
            "  backlog of {depth}: posted in {:.0} s ({} errors), {queued} not yet delivered then",
            posted.elapsed.as_secs_f64(),
            posted.errors
        );
        let received =
            settle_within(&receiver, posted.ok, &proxies, Duration::from_secs(1800)).await?;
        let tally = tally_since(&proxies.tally(), &before);
        let sqs = |action: &str| {
            tally
                .get(&format!("sqs:{action}"))
                .map_or(0, |c| c.requests)
        };
        let requests: u64 = tally
            .iter()
            .filter(|(k, _)| k.starts_with("sqs:"))
            .map(|(_, c)| c.requests)
            .sum();
        println!(
            "  backlog of {depth} for a 1 s callback: {received} notifications received in {:.0} s; delivery queue: {requests} SQS requests, {:.2} per notification (ReceiveMessage {}, SendMessage {}, SendMessageBatch {}, DeleteMessage {}, DeleteMessageBatch {})",
            started.elapsed().as_secs_f64(),
            requests as f64 / received.max(1) as f64,
            sqs("ReceiveMessage"),
            sqs("SendMessage"),
            sqs("SendMessageBatch"),
            sqs("DeleteMessage"),
            sqs("DeleteMessageBatch"),
        );
    }
    drop(pipeline);
    drop(service);
    Ok(phases)
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
