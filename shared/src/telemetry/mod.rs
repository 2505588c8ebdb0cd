//! What the service tells its operators beyond its logs: Prometheus metrics
//! of `webhooks-local` ([`metrics`]) and CloudWatch Embedded Metric Format
//! lines of the Lambda queue functions ([`emf`]), and the trace context of
//! requests, ingestions and delivery attempts ([`trace`]). The pipeline
//! calls one-line hooks in here with labels, each named by the type it
//! labels (`Verdict::label`, `Endpoint::label`, `StoreError::kind`): small
//! fixed sets only, never an organization, a subscription or a URL. This
//! module knows none of the service's types.

pub mod emf;
pub mod metrics;
pub mod trace;
