//! Public on-demand prices of one region, us-east-1 (US East, N. Virginia),
//! as listed on 2026-11-22. Sources, by name: the Amazon DynamoDB pricing
//! page (on-demand capacity, Standard table class), the Amazon SQS pricing
//! page (standard queues, the tier after the monthly free first million),
//! the AWS Lambda pricing page (Arm price, first tier of duration), and the
//! Amazon API Gateway pricing page (REST APIs, first 333 million a month;
//! HTTP APIs, first 300 million a month).
//! Free tiers are left out: they are a fixed monthly amount, not a cost per
//! notification. Data transfer is excluded.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prices {
    /// DynamoDB on-demand, $ per write request unit (1 KB written; 2 in a transaction).
    pub dynamodb_write_unit: f64,
    /// DynamoDB on-demand, $ per read request unit (4 KB read strongly; 2 in a transaction).
    pub dynamodb_read_unit: f64,
    /// SQS standard queue, $ per request (each 64 KB chunk of a payload is one).
    pub sqs_request: f64,
    /// Lambda, $ per invocation.
    pub lambda_request: f64,
    /// Lambda on Arm (arm64, as template.yaml deploys), $ per GB-second.
    pub lambda_gb_second: f64,
    /// API Gateway REST API, $ per request.
    pub api_request: f64,
    /// API Gateway HTTP API (the `ApiType=http` option), $ per request.
    pub http_api_request: f64,
    /// EventBridge custom events put on a bus, $ per event (each 64 KB chunk is one).
    pub eventbridge_event: f64,
}

/// The date the prices were read.
pub const DATE: &str = "2026-11-22";
pub const REGION: &str = "us-east-1";

pub const US_EAST_1: Prices = Prices {
    dynamodb_write_unit: 0.625 / 1e6,
    dynamodb_read_unit: 0.125 / 1e6,
    sqs_request: 0.40 / 1e6,
    lambda_request: 0.20 / 1e6,
    lambda_gb_second: 0.000_013_333_4,
    api_request: 3.50 / 1e6,
    http_api_request: 1.00 / 1e6,
    eventbridge_event: 1.00 / 1e6,
};

/// Where each price comes from, for the report.
pub fn sources() -> Vec<String> {
    let p = US_EAST_1;
    vec![
        format!(
            "DynamoDB on-demand, Standard table class: ${:.3} per million write request units, ${:.3} per million read request units (Amazon DynamoDB pricing page, on-demand, {REGION}, {DATE})",
            p.dynamodb_write_unit * 1e6,
            p.dynamodb_read_unit * 1e6
        ),
        format!(
            "SQS standard queue: ${:.2} per million requests, a 64 KB chunk of payload = 1 request (Amazon SQS pricing page, {REGION}, {DATE})",
            p.sqs_request * 1e6
        ),
        format!(
            "Lambda on Arm: ${:.2} per million invocations, ${:.10} per GB-s (AWS Lambda pricing page, {REGION}, {DATE})",
            p.lambda_request * 1e6,
            p.lambda_gb_second
        ),
        format!(
            "API Gateway REST API: ${:.2} per million requests, first 333 million a month (Amazon API Gateway pricing page, {REGION}, {DATE})",
            p.api_request * 1e6
        ),
        format!(
            "API Gateway HTTP API: ${:.2} per million requests (of up to 512 KB), first 300 million a month (Amazon API Gateway pricing page, {REGION}, {DATE})",
            p.http_api_request * 1e6
        ),
        format!(
            "EventBridge custom events: ${:.2} per million, a 64 KB chunk = 1 event (Amazon EventBridge pricing page, {REGION}, {DATE}); STS AssumeRole: no charge",
            p.eventbridge_event * 1e6
        ),
    ]
}
