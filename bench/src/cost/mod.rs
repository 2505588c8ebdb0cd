//! The `cost` suite: what AWS bills per operation, in units counted by a
//! recording proxy in front of DynamoDB Local and moto (`proxy.rs`) while
//! real operations run (`drive.rs`): API calls through `webhooks-local
//! --backend aws`, events through an events queue and the `ingest-events`
//! function (`events.rs`), then in dollars at public on-demand prices
//! (`prices.rs`, `model.rs`).
//!
//! DynamoDB units and every SQS request of ingestion are measured: the
//! producer's sends to the events queue, the event source mapping's
//! receives and deletes there (played by the suite, batches of 10), and the
//! outbox's `SendMessageBatch` calls. What the deployed stack adds around the
//! same code is counted from template.yaml: the delivery queue's event
//! source mapping (receives and `DeleteMessageBatch`es of 10; webhooks-local
//! polls it its own way), Lambda invocations (one per batch, one per API
//! call) billed at the `lambda` suite's warm p50 durations at 256 MB, and
//! one API Gateway request per API call (the authorizer's answer cached: no
//! invocation counted). A get is priced a second time on the HTTP API
//! option (`ApiType=http`): the same units, an HTTP API request instead of a
//! REST one (its authorizer's key lookup is cached with its answer, like the
//! token check on REST).

mod drive;
mod events;
pub mod model;
pub mod prices;
pub mod proxy;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde::Serialize;

use self::drive::Phase;
use self::model::{Part, Pipeline, Usage};
use crate::lambda::LambdaResult;
use crate::report::{left, right, Section, Table, Target};
use crate::Settings;

/// template.yaml: `MemorySize: 256`, `BatchSize: 10` on both queues.
const MEMORY_MB: u32 = 256;
const BATCH: f64 = 10.0;

/// Warm p50 (ms) of each function in the lambda-only run of 2026-11-22
/// (`66025a6`, docs/performance-history.md#lambda-init-the-root-stores-out-of-the-cold-start-issue-15);
/// this run's figures replace them when the `lambda` suite ran.
const WARM_P50_MS: [(&str, f64); 6] = [
    ("create-subscription", 3.90),
    ("get-subscription", 0.555),
    ("get-message", 0.465),
    ("list-subscriptions", 0.888),
    ("ingest-events", 1.00),
    ("deliver-notifications", 0.50),
];

/// One priced operation.
#[derive(Debug, Clone, Serialize)]
pub struct Scenario {
    pub name: String,
    /// What one operation is ("notification", "read", "create").
    pub per: &'static str,
    pub usage: Usage,
    pub parts: Vec<Part>,
    pub per_million: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CostResults {
    pub prices: prices::Prices,
    pub prices_date: &'static str,
    pub region: &'static str,
    pub lambda_ms: BTreeMap<String, f64>,
    pub phases: Vec<Phase>,
    pub scenarios: Vec<Scenario>,
    /// The backlog phase (`--cost-backlog`), not priced.
    pub backlogs: Vec<drive::Backlog>,
}

pub async fn run(s: &Settings, lambda: &[LambdaResult]) -> Result<CostResults, String> {
    let mut lambda_ms: BTreeMap<String, f64> = WARM_P50_MS
        .iter()
        .map(|(f, ms)| (f.to_string(), *ms))
        .collect();
    for r in lambda
        .iter()
        .filter(|r| r.error.is_none() && r.invocations > 0)
    {
        if let Some(ms) = lambda_ms.get_mut(&r.function) {
            *ms = r.invoke_p50_us as f64 / 1000.0;
        }
    }
    let (phases, backlogs) = drive::run(s).await?;
    let mut scenarios: Vec<Scenario> = phases.iter().map(|p| scenario(p, &lambda_ms)).collect();
    if let Some(get) = scenarios.iter().find(|s| s.name == GET_SUBSCRIPTION) {
        scenarios.push(on_http_api(get));
    }
    Ok(CostResults {
        prices: prices::US_EAST_1,
        prices_date: prices::DATE,
        region: prices::REGION,
        lambda_ms,
        phases,
        scenarios,
        backlogs,
    })
}

/// The phase a get is priced from, and its row on the HTTP API option.
const GET_SUBSCRIPTION: &str = "get subscription";
const GET_ON_HTTP_API: &str = "get subscription, HTTP API option";

/// `rest` with its API Gateway request on the HTTP API instead.
fn on_http_api(rest: &Scenario) -> Scenario {
    let usage = Usage {
        http_api_requests: rest.usage.api_requests,
        api_requests: 0.0,
        ..rest.usage
    };
    let parts = model::parts(&usage, &prices::US_EAST_1);
    Scenario {
        name: GET_ON_HTTP_API.into(),
        per: rest.per,
        usage,
        per_million: model::per_million(&parts),
        parts,
    }
}

fn sum(phase: &Phase, f: impl Fn(&str, &proxy::Counts) -> f64) -> f64 {
    phase.tally.iter().map(|(k, c)| f(k, c)).sum()
}

/// The usage of one operation of `phase`, measured and counted.
fn scenario(phase: &Phase, lambda_ms: &BTreeMap<String, f64>) -> Scenario {
    let ms = |f: &str| lambda_ms.get(f).copied().unwrap_or(1.0);
    let (per, count) = match phase.notifications {
        0 => (
            if phase.name.starts_with("create") {
                "create"
            } else {
                "read"
            },
            phase.operations,
        ),
        n => ("notification", n),
    };
    let count = count.max(1) as f64;
    let dynamodb = |k: &str| k.starts_with("dynamodb:");
    let mut usage = Usage {
        read_units: sum(phase, |k, c| if dynamodb(k) { c.read_units } else { 0.0 }) / count,
        write_units: sum(phase, |k, c| if dynamodb(k) { c.write_units } else { 0.0 }) / count,
        ..Usage::default()
    };
    if phase.notifications > 0 {
        let fan_out = phase.notifications as f64 / phase.operations.max(1) as f64;
        let pipeline = Pipeline {
            batch: BATCH,
            ingest_ms_per_event: ms("ingest-events"),
            deliver_ms_per_notification: ms("deliver-notifications"),
            memory_mb: MEMORY_MB,
        };
        // The outbox's sends and everything on the events queue.
        let ingestion = sum(phase, |k, c| {
            match k == "sqs:SendMessageBatch" || k.starts_with(drive::EVENTS_QUEUE) {
                true => c.billed_requests as f64,
                false => 0.0,
            }
        });
        usage.sqs_requests = ingestion / count + model::delivery_sqs(&pipeline);
        (usage.lambda_invocations, usage.lambda_gb_seconds) =
            model::pipeline_lambda(&pipeline, fan_out);
    } else {
        let function = match phase.name.as_str() {
            n if n.starts_with("create") => "create-subscription",
            n if n.starts_with("get subscription") => "get-subscription",
            n if n.starts_with("get message") => "get-message",
            _ => "list-subscriptions",
        };
        usage.api_requests = 1.0;
        usage.lambda_invocations = 1.0;
        usage.lambda_gb_seconds = model::gb_seconds(1.0, ms(function), MEMORY_MB);
    }
    let parts = model::parts(&usage, &prices::US_EAST_1);
    Scenario {
        name: phase.name.clone(),
        per,
        usage,
        per_million: model::per_million(&parts),
        parts,
    }
}

fn dollars(v: f64) -> String {
    if v >= 0.1 || v == 0.0 {
        format!("${v:.2}")
    } else {
        format!("${v:.4}")
    }
}

fn units(v: f64) -> String {
    if v > 0.0 && v < 0.01 {
        format!("{v:.2e}")
    } else if v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// Fan-out 1 at ≤ $2 per million notifications delivered.
pub fn target(cost: Option<&CostResults>) -> Target {
    let goal = "≤ $2.00";
    let name = "AWS cost per 1,000,000 notifications, fan-out 1 (ingestion included)";
    let Some(s) = cost.and_then(|c| c.scenarios.iter().find(|s| s.name == "event, fan-out 1"))
    else {
        return Target::not_measured(name, goal);
    };
    Target {
        target: name.into(),
        goal: goal.into(),
        measured: dollars(s.per_million),
        met: Some(s.per_million <= 2.0),
    }
}

/// A get on the HTTP API option at ≤ $1.50 per million.
pub fn http_api_target(cost: Option<&CostResults>) -> Target {
    let goal = "≤ $1.50";
    let name = "AWS cost per 1,000,000 gets on the HTTP API option";
    let Some(s) = cost.and_then(|c| c.scenarios.iter().find(|s| s.name == GET_ON_HTTP_API)) else {
        return Target::not_measured(name, goal);
    };
    Target {
        target: name.into(),
        goal: goal.into(),
        measured: dollars(s.per_million),
        met: Some(s.per_million <= 1.5),
    }
}

pub fn sections(cost: &CostResults) -> Vec<Section> {
    let mut measured = Table::new([
        left("operation"),
        left("call"),
        right("calls per op"),
        right("read units per op"),
        right("write units per op"),
        right("billed SQS requests per op"),
    ]);
    for phase in &cost.phases {
        let per = phase.notifications.max(phase.operations).max(1) as f64;
        for (action, c) in &phase.tally {
            measured.row([
                format!(
                    "{} (per {})",
                    phase.name,
                    if phase.notifications > 0 {
                        "notification"
                    } else {
                        "operation"
                    }
                ),
                action.clone(),
                units(c.requests as f64 / per),
                units(c.read_units / per),
                units(c.write_units / per),
                match action.starts_with("sqs") || action.starts_with(proxy::DESTINATION_SQS) {
                    true => units(c.billed_requests as f64 / per),
                    false => String::new(),
                },
            ]);
        }
    }
    let mut arithmetic = Table::new([
        left("operation"),
        left("part"),
        right("quantity per op"),
        right("unit price"),
        right("$ per 1,000,000"),
    ]);
    let mut totals = Table::new([
        left("operation"),
        right("$ per 1,000,000"),
        left("dominant part"),
    ]);
    for s in &cost.scenarios {
        for p in s.parts.iter().filter(|p| p.quantity > 0.0) {
            arithmetic.row([
                format!("{} (per {})", s.name, s.per),
                p.name.to_owned(),
                units(p.quantity),
                format!("${:.3e}", p.unit_price),
                dollars(p.per_million),
            ]);
        }
        arithmetic.row([
            format!("**{}**", s.name),
            "**total**".into(),
            String::new(),
            String::new(),
            format!("**{}**", dollars(s.per_million)),
        ]);
        let dominant = model::dominant(&s.parts)
            .map(|(p, share)| format!("{} ({:.0} %)", p.name, share * 100.0))
            .unwrap_or_default();
        totals.row([
            format!("{} (per {})", s.name, s.per),
            dollars(s.per_million),
            dominant,
        ]);
    }
    let lambda = cost
        .lambda_ms
        .iter()
        .map(|(f, ms)| format!("{f} {ms:.3} ms"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut destinations = Table::new([
        left("notification to"),
        right("notifications/s"),
        right("× HTTPS callback"),
        right("customer's requests per notification"),
        right("customer's $ per 1,000,000"),
        right("AssumeRole per notification"),
    ]);
    let rate = |p: &drive::Phase| p.notifications as f64 / p.seconds.max(1e-9);
    let http = cost.phases.iter().find(|p| p.name == "event, fan-out 1");
    if let Some(http) = http {
        destinations.row([
            "an HTTPS callback (event, fan-out 1)".to_owned(),
            format!("{:.0}", rate(http)),
            "1.00".to_owned(),
            "—".to_owned(),
            "—".to_owned(),
            "—".to_owned(),
        ]);
    }
    for phase in cost
        .phases
        .iter()
        .filter(|p| p.name.starts_with("event to "))
    {
        let per = phase.notifications.max(1) as f64;
        let count =
            |key: &str, f: fn(&proxy::Counts) -> f64| phase.tally.get(key).map_or(0.0, f) / per;
        let sqs = count(&format!("{}SendMessage", proxy::DESTINATION_SQS), |c| {
            c.billed_requests as f64
        });
        let events = count("destination:PutEvents", |c| c.entries as f64);
        let price = prices::US_EAST_1;
        destinations.row([
            phase
                .name
                .trim_start_matches("event to ")
                .trim_end_matches(", fan-out 1")
                .to_owned(),
            format!("{:.0}", rate(phase)),
            http.map_or(String::new(), |h| format!("{:.2}", rate(phase) / rate(h))),
            units(sqs + events),
            dollars((sqs * price.sqs_request + events * price.eventbridge_event) * 1e6),
            units(count("destination:AssumeRole", |c| c.requests as f64)),
        ]);
    }
    vec![
        Section::table("AWS cost per 1,000,000 operations", totals).with_intro(format!(
            "Prices: on-demand, {}, as listed on {}; data transfer and free tiers excluded. \
             Lambda billed at warm p50 per record ({lambda}), {MEMORY_MB} MB, batches of 10.",
            cost.region, cost.prices_date
        )),
        Section::table("AWS cost: the arithmetic", arithmetic),
        Section::table("AWS cost: units measured through the proxy", measured).with_intro(
            "DynamoDB Local's ConsumedCapacity (ReturnConsumedCapacity added by the proxy) and \
             moto's SQS requests, per operation, as webhooks-local --backend aws and the \
             ingest-events function made them; `sqs-events:` is the events queue (the \
             producer's sends, the event source mapping's receives and deletes). \
             webhooks-local polls the delivery queue itself (ReceiveMessage, DeleteMessage one \
             by one); the priced model counts the event source mapping's batches instead.",
        ),
        Section::table(
            "AWS destinations (issue 38): the customer's side, and throughput",
            destinations,
        )
        .with_intro(
            "The same event at fan-out 1, delivered by webhooks-local --backend aws into a \
             customer account's SQS queue or EventBridge bus in moto (docs/destinations.md) \
             beside an HTTPS callback on loopback; the service's own units and price are the \
             phases' rows above. Notifications/s: first event sent to the events queue → last \
             notification received, moto-bound (not AWS's rates).",
        ),
        Section::list("AWS cost: prices used", prices::sources()),
    ]
}
