//! The AWS adapters (feature `aws`): [`dynamodb`] (the store), [`sqs`] (the
//! delivery queue), [`outbox`] (ingestion's commit across both), and the SDK
//! configuration they are all built from.

pub mod dynamodb;
pub mod outbox;
pub mod sqs;

/// Region, endpoints and credentials from the SDK's standard environment.
/// Lambda hands every function its credentials in the environment; reading
/// them there directly skips the default chain, whose web-identity provider
/// builds an STS client (and loads the system root certificates for it) at
/// init. Without them (a developer's `AWS_PROFILE`), the default chain applies.
pub async fn sdk_config() -> aws_config::SdkConfig {
    let loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
    let loader = if std::env::var_os("AWS_ACCESS_KEY_ID").is_some() {
        loader.credentials_provider(
            aws_config::environment::EnvironmentVariableCredentialsProvider::new(),
        )
    } else {
        loader
    };
    loader.load().await
}
