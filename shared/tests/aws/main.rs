//! webhook-core's tests that need DynamoDB Local and moto's SQS (CONTRIBUTING.md, "Tests"):
//! the DynamoDB and SQS adapters, and the Lambda functions that need them (history, queue
//! functions, API keys). Not run by a plain
//! `cargo test` (`test = false` in Cargo.toml); `./scripts/test.sh` starts the emulators and
//! runs it. Run without them, every test fails naming the command that starts them.

// Support shared with the `it` binary (the conformance suites, DynamoDB Local's tables, the
// Lambda harness, the sample events) is `testkit`.

mod deadline;
mod lambda_custom_headers;
mod lambda_destinations;
mod lambda_history;
mod lambda_http_api;
mod lambda_payload_filter;
mod lambda_queue_events;
mod lambda_retry_schedule;
mod lambda_v1a;
mod list_dynamodb;
mod queue_sqs;
mod store_dynamodb;
