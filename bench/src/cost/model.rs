//! The arithmetic from what one operation uses to dollars: pure functions,
//! unit-tested below.

use serde::Serialize;

use super::prices::Prices;

/// What AWS bills for one operation (one notification delivered, one API
/// read, one create), averaged over the operations measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Usage {
    pub read_units: f64,
    pub write_units: f64,
    pub sqs_requests: f64,
    pub lambda_invocations: f64,
    pub lambda_gb_seconds: f64,
    pub api_requests: f64,
    /// Requests to the HTTP API option instead of the REST API.
    pub http_api_requests: f64,
}

/// One line of the arithmetic: quantity per operation × unit price.
#[derive(Debug, Clone, Serialize)]
pub struct Part {
    pub name: &'static str,
    pub quantity: f64,
    pub unit_price: f64,
    /// Dollars per 1,000,000 operations.
    pub per_million: f64,
}

/// The lines of `usage` priced at `prices` (all of them, zeros included).
pub fn parts(usage: &Usage, prices: &Prices) -> Vec<Part> {
    let line = |name, quantity: f64, unit_price: f64| Part {
        name,
        quantity,
        unit_price,
        per_million: quantity * unit_price * 1e6,
    };
    vec![
        line(
            "DynamoDB write units",
            usage.write_units,
            prices.dynamodb_write_unit,
        ),
        line(
            "DynamoDB read units",
            usage.read_units,
            prices.dynamodb_read_unit,
        ),
        line("SQS requests", usage.sqs_requests, prices.sqs_request),
        line(
            "Lambda invocations",
            usage.lambda_invocations,
            prices.lambda_request,
        ),
        line(
            "Lambda GB-s",
            usage.lambda_gb_seconds,
            prices.lambda_gb_second,
        ),
        line(
            "API Gateway requests",
            usage.api_requests,
            prices.api_request,
        ),
        line(
            "API Gateway HTTP API requests",
            usage.http_api_requests,
            prices.http_api_request,
        ),
    ]
}

/// Dollars per 1,000,000 operations.
pub fn per_million(parts: &[Part]) -> f64 {
    parts.iter().map(|p| p.per_million).sum()
}

/// The part that costs most, and its share of the total.
pub fn dominant(parts: &[Part]) -> Option<(&Part, f64)> {
    let total = per_million(parts);
    parts
        .iter()
        .max_by(|a, b| a.per_million.total_cmp(&b.per_million))
        .map(|p| {
            (
                p,
                if total > 0.0 {
                    p.per_million / total
                } else {
                    0.0
                },
            )
        })
}

/// GB-seconds billed for invocations of `billed_ms` each (Lambda rounds
/// each invocation up to the next millisecond) at `memory_mb`.
pub fn gb_seconds(invocations: f64, ms: f64, memory_mb: u32) -> f64 {
    invocations * ms.ceil().max(1.0) / 1000.0 * f64::from(memory_mb) / 1024.0
}

/// How the deployed stack handles one event of fan-out `k`, beside the
/// DynamoDB units and ingestion's SQS requests measured through the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Pipeline {
    /// Records per event-source batch (template.yaml: `BatchSize: 10`, both queues).
    pub batch: f64,
    /// Billed milliseconds of ingest-events per event, and of deliver-notifications per notification.
    pub ingest_ms_per_event: f64,
    pub deliver_ms_per_notification: f64,
    /// The functions' memory (template.yaml `MemorySize`).
    pub memory_mb: u32,
}

/// SQS requests per notification on the delivery queue's side: its event
/// source mapping's receive and `DeleteMessageBatch` (full batches, as under load).
pub fn delivery_sqs(p: &Pipeline) -> f64 {
    2.0 / p.batch
}

/// Lambda invocations and GB-s per notification: one ingest-events
/// invocation per batch of events, one deliver-notifications per batch of notifications.
pub fn pipeline_lambda(p: &Pipeline, fan_out: f64) -> (f64, f64) {
    let ingest = 1.0 / (p.batch * fan_out);
    let deliver = 1.0 / p.batch;
    let gbs = gb_seconds(ingest, p.ingest_ms_per_event * p.batch, p.memory_mb)
        + gb_seconds(
            deliver,
            p.deliver_ms_per_notification * p.batch,
            p.memory_mb,
        );
    (ingest + deliver, gbs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::prices::US_EAST_1;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn a_write_unit_per_operation_costs_the_price_of_a_million() {
        let usage = Usage {
            write_units: 1.0,
            ..Usage::default()
        };
        let parts = parts(&usage, &US_EAST_1);
        assert!(close(per_million(&parts), 0.625));
        let (part, share) = dominant(&parts).expect("parts");
        assert_eq!(part.name, "DynamoDB write units");
        assert!(close(share, 1.0));
    }

    #[test]
    fn every_part_adds_up() {
        let usage = Usage {
            read_units: 3.0,
            write_units: 5.0,
            sqs_requests: 1.5,
            lambda_invocations: 0.2,
            lambda_gb_seconds: 0.001,
            api_requests: 0.0,
            http_api_requests: 1.0,
        };
        let total = per_million(&parts(&usage, &US_EAST_1));
        let expected = 3.0 * 0.125 + 5.0 * 0.625 + 1.5 * 0.40 + 0.2 * 0.20 + 0.001 * 13.3334 + 1.0;
        assert!(close(total, expected), "{total} vs {expected}");
    }

    #[test]
    fn lambda_rounds_each_invocation_up_to_a_millisecond() {
        // 0.4 ms bills 1 ms; 256 MB is a quarter GB.
        assert!(close(gb_seconds(1.0, 0.4, 256), 0.001 * 0.25));
        assert!(close(gb_seconds(10.0, 2.1, 1024), 10.0 * 0.003));
    }

    #[test]
    fn the_pipeline_spreads_batches_over_the_fan_out() {
        let p = Pipeline {
            batch: 10.0,
            ingest_ms_per_event: 1.0,
            deliver_ms_per_notification: 0.5,
            memory_mb: 256,
        };
        // Receive 0.1 + delete 0.1 per notification on the delivery queue.
        assert!(close(delivery_sqs(&p), 0.2));
        let (invocations, gbs) = pipeline_lambda(&p, 1.0);
        assert!(close(invocations, 0.2));
        // 0.1 × 10 ms + 0.1 × 5 ms at 0.25 GB.
        assert!(close(gbs, (0.1 * 0.010 + 0.1 * 0.005) * 0.25));
        // Fan-out 10: one ingest invocation per 100 notifications.
        assert!(close(pipeline_lambda(&p, 10.0).0, 0.11));
    }
}
