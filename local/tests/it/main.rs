//! webhooks-local end to end, in one binary: each module starts the real `webhooks-local`
//! binary (`common::Server`) and drives it over HTTP with real callback receivers. The
//! backend is SQLite, or DynamoDB Local and moto with `WEBHOOKS_TEST_BACKEND=aws`
//! (`scripts/test.sh` runs the modules where the backend matters both ways; CONTRIBUTING.md,
//! "Tests"). `faults` is `#[ignore]`d: it freezes the shared emulators, so it runs alone, in
//! `./scripts/test.sh --full`.

mod common;

mod console;
mod custom_headers;
mod delivery;
mod destinations;
mod differential;
mod event_catalogue;
mod faults;
mod history;
mod isolation;
mod notices;
mod oauth;
mod openapi_document;
mod ordering;
mod otlp_tracing;
mod payload_filter;
mod rate_limit;
mod retry_schedule;
mod scheduling;
mod secret_rotation;
mod security_limits;
mod security_tenancy;
mod shutdown;
mod signatures_v1a;
mod sqlite_busy;
mod subscriptions_api;
