//! What the service tells its operators beyond its logs: Prometheus metrics
//! of `webhooks-local` ([`metrics`]) and CloudWatch Embedded Metric Format
//! lines of the Lambda queue functions ([`emf`]). The pipeline calls one-line hooks in
//! here; every mapping from the pipeline's types to a label lives in this
//! module, so labels come from small fixed sets only (never an
//! organization, a subscription or a URL).

pub mod emf;
pub mod metrics;
pub mod trace;
