//! webhook-core's tests that need no emulator (CONTRIBUTING.md, "Tests"), in one binary (one
//! link of the crate and its dependencies instead of one per file). `lambda_handlers` runs on
//! SQLite, and on DynamoDB Local with `WEBHOOKS_TEST_BACKEND=aws`. The tests that need
//! DynamoDB Local or moto whatever the setting are the `aws` binary beside it.

// Helpers shared with the `aws` binary live in `tests/support/`.
#[macro_use]
#[path = "../support/conformance/mod.rs"]
mod conformance;
#[cfg(feature = "aws")]
#[path = "../support/dynamodb_local/mod.rs"]
mod dynamodb_local;
#[cfg(feature = "aws")]
#[path = "../support/lambda.rs"]
mod lambda_support;
#[macro_use]
#[path = "../support/queue_conformance/mod.rs"]
mod queue_conformance;
#[path = "../support/sample_events/mod.rs"]
mod sample_events;
#[path = "../support/security/mod.rs"]
mod security;

mod architecture;
mod delivery_clock;
mod error_codes;
#[cfg(feature = "aws")]
mod lambda_console;
#[cfg(feature = "aws")]
mod lambda_function;
#[cfg(feature = "aws")]
mod lambda_handlers;
#[cfg(feature = "aws")]
mod lambda_pre_token;
mod parser_properties;
mod queue_sqlite;
mod security_ssrf;
mod security_tokens;
mod store_sqlite;
