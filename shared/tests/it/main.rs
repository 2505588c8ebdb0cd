//! webhook-core's tests that need no emulator (CONTRIBUTING.md, "Tests"), in one binary (one
//! link of the crate and its dependencies instead of one per file). `lambda_handlers` runs on
//! SQLite, and on DynamoDB Local with `WEBHOOKS_TEST_BACKEND=aws`. The tests that need
//! DynamoDB Local or moto whatever the setting are the `aws` binary beside it.

// Support shared with the `aws` binary and webhooks-local's tests is `testkit`; this binary's
// own is `isolated_network` (the SSRF tests' network namespace, fake DNS and peers).
mod isolated_network;

mod architecture;
mod delivery_clock;
mod error_codes;
mod event_catalogue;
mod file_size;
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
