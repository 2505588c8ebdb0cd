//! The AWS adapters (feature `aws`): [`dynamodb`] (the store), [`sqs`] (the
//! delivery queue), [`outbox`] (ingestion's commit across both), and the SDK
//! configuration they are all built from.

pub mod call_log;
pub mod destination;
pub mod dynamodb;
pub mod outbox;
pub mod sqs;
pub mod tls;

pub use tls::Roots;

/// Region, endpoints and credentials from the SDK's standard environment.
/// Lambda hands every function its credentials in the environment; reading
/// them there directly skips the default chain, whose web-identity provider
/// builds an STS client (and loads the system root certificates for it) at
/// init. Without them (a developer's `AWS_PROFILE`), the default chain applies.
///
/// Unbounded by this project's settings: the tests' and tools' provisioning.
/// What serves requests or batches is built with [`sdk_config_with`].
pub async fn sdk_config() -> aws_config::SdkConfig {
    sdk_config_with(
        &crate::call_bounds::AwsCalls::default().batch,
        Roots::System,
    )
    .await
}

/// The same, every call bounded: an attempt timeout, an operation timeout
/// and the standard retry mode (exponential backoff with jitter; throttling,
/// 5xx, timeouts and connection failures are retried, until the operation
/// timeout or `max_attempts`). Built once per client, at start-up.
pub async fn sdk_config_with(
    bounds: &crate::call_bounds::CallBounds,
    roots: Roots,
) -> aws_config::SdkConfig {
    let timeouts = aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(bounds.attempt)
        .operation_attempt_timeout(bounds.attempt)
        .operation_timeout(bounds.operation)
        .build();
    let loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .timeout_config(timeouts)
        .retry_config(
            aws_config::retry::RetryConfig::standard().with_max_attempts(bounds.max_attempts),
        );
    let loader = match call_log::wrap(tls::http_client(roots)) {
        Some(client) => loader.http_client(client),
        None => loader,
    };
    let loader = if std::env::var_os("AWS_ACCESS_KEY_ID").is_some() {
        loader.credentials_provider(
            aws_config::environment::EnvironmentVariableCredentialsProvider::new(),
        )
    } else {
        loader
    };
    loader.load().await
}

/// Whether a failed SDK call is worth retrying later: no answer in time, no
/// connection, a response cut short, throttling, or a 5xx. Everything else
/// (a refused condition, a validation error, a missing table, bad
/// credentials) is the request's or the deployment's fault.
pub(crate) fn is_transient<E>(
    e: &aws_sdk_dynamodb::error::SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>,
) -> bool
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata,
{
    use aws_sdk_dynamodb::error::SdkError;
    match e {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            true
        }
        SdkError::ServiceError(service) => {
            service.raw().status().is_server_error()
                || service.raw().status().as_u16() == 429
                || THROTTLING.contains(&service.err().code().unwrap_or_default())
        }
        _ => false,
    }
}

/// The error codes DynamoDB and SQS throttle with (with a 400).
const THROTTLING: &[&str] = &[
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "TransactionInProgressException",
    "RequestThrottled",
    "AWS.SimpleQueueService.RequestThrottled",
    "KmsThrottled",
];
