//! Typed configuration, read once at start-up from `WEBHOOKS_*` variables.
//! Every bad value is reported with the name of its variable.

use std::time::Duration;

/// Where the service runs; decides the defaults that differ between a
/// developer's laptop and a deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// `webhooks-local`: callbacks on localhost over plain http are the norm.
    Local,
    /// Deployed Lambdas: https only, public addresses only.
    Lambda,
}

/// How bearer tokens are verified (`WEBHOOKS_JWT_*`).
#[derive(Debug, Clone)]
pub struct JwtConfig {
    /// The HS256 shared secret (`WEBHOOKS_JWT_HS256_SECRET`); none: no HS256 tokens.
    pub hs256_secret: Option<String>,
    /// The identity provider's JWKS for RS256/ES256 tokens (`WEBHOOKS_JWT_JWKS_URL`).
    pub jwks_url: Option<String>,
    /// The `iss` every token must have (`WEBHOOKS_JWT_ISSUER`); none: any.
    pub issuer: Option<String>,
    /// Accepted audiences, comma separated (`WEBHOOKS_JWT_AUDIENCE`); none: any.
    pub audience: Option<String>,
    /// The claim holding the caller's organization id (`WEBHOOKS_JWT_ORG_CLAIM`, default `org_id`).
    pub org_claim: String,
    /// The scope names that grant read and write access.
    pub scopes: ScopeConfig,
}

/// The OAuth scope names that grant access (`WEBHOOKS_READ_SCOPES`,
/// `WEBHOOKS_WRITE_SCOPES`, comma-separated): a token needs any one of the
/// read scopes for GET, any one of the write scopes for POST and DELETE. So
/// an identity provider's own scope names work without new tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeConfig {
    /// Scopes that allow GET (`WEBHOOKS_READ_SCOPES`; any one is enough).
    pub read: Vec<String>,
    /// Scopes that allow POST and DELETE (`WEBHOOKS_WRITE_SCOPES`; any one is enough).
    pub write: Vec<String>,
}

/// The read scope when `WEBHOOKS_READ_SCOPES` is unset.
pub const DEFAULT_READ_SCOPE: &str = "webhooks/read";
/// The write scope when `WEBHOOKS_WRITE_SCOPES` is unset.
pub const DEFAULT_WRITE_SCOPE: &str = "webhooks/write";

impl Default for ScopeConfig {
    fn default() -> Self {
        ScopeConfig {
            read: vec![DEFAULT_READ_SCOPE.to_owned()],
            write: vec![DEFAULT_WRITE_SCOPE.to_owned()],
        }
    }
}

impl ScopeConfig {
    /// Every configured scope, read ones first, each once.
    pub fn all(&self) -> Vec<&str> {
        let mut all: Vec<&str> = Vec::new();
        for scope in self.read.iter().chain(&self.write) {
            if !all.contains(&scope.as_str()) {
                all.push(scope);
            }
        }
        all
    }
}

/// A comma-separated list of OAuth scope names: each one non-empty, without
/// spaces or quotes (RFC 6749's scope-token), at most 20 of them.
fn scope_list(
    var: &'static str,
    value: Option<String>,
    default: &str,
) -> Result<Vec<String>, ConfigError> {
    let Some(value) = value else {
        return Ok(vec![default.to_owned()]);
    };
    let scopes: Vec<String> = value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let valid = |s: &String| {
        s.len() <= 256
            && s.chars()
                .all(|c| c == '!' || ('#'..='[').contains(&c) || (']'..='~').contains(&c))
    };
    if scopes.is_empty() || scopes.len() > 20 || !scopes.iter().all(valid) {
        return Err(ConfigError {
            var,
            message: format!(
                "expected 1 to 20 comma-separated scope names (printable ASCII without spaces, \\ or \"), got '{value}'"
            ),
        });
    }
    Ok(scopes)
}

/// The service's settings, one field per `WEBHOOKS_*` variable (docs/configuration.md).
#[derive(Debug, Clone)]
pub struct Config {
    /// Accepted API keys (`WEBHOOKS_API_KEYS`); API Gateway checks them on AWS.
    pub api_keys: Vec<String>,
    /// How bearer tokens are verified.
    pub jwt: JwtConfig,
    /// How often an unknown token `kid` may refetch the JWKS.
    pub jwks_min_refresh: Duration,
    /// Accept `http://` callbacks (`WEBHOOKS_ALLOW_HTTP_CALLBACKS`; local default true).
    pub allow_http_callbacks: bool,
    /// Allow loopback, private and link-local callback addresses (`WEBHOOKS_ALLOW_PRIVATE_CALLBACKS`; local default true).
    pub allow_private_callbacks: bool,
    /// How long the validation handshake may take (`WEBHOOKS_HANDSHAKE_TIMEOUT_MS`, default 5 s).
    pub handshake_timeout: Duration,
    /// How long one delivery attempt may take (`WEBHOOKS_DELIVERY_TIMEOUT_MS`, default 10 s).
    pub delivery_timeout: Duration,
    /// How long an API request's store and queue calls may take in all
    /// (`WEBHOOKS_API_DEADLINE`, default 4 s; the create's handshake is not counted).
    pub api_deadline: Duration,
    /// Deliveries in flight at once per process (local workers).
    pub delivery_concurrency: usize,
    /// Calls in flight at once to one subscription's callback, per process
    /// (`WEBHOOKS_MAX_IN_FLIGHT_PER_SUBSCRIPTION`).
    pub max_in_flight_per_subscription: usize,
    /// The per-subscription circuit breaker (`WEBHOOKS_BREAKER_*`).
    pub breaker: crate::health::BreakerRule,
    /// A subscription's lifetime when it asks for no expiry (`WEBHOOKS_DEFAULT_LIFETIME`, 90 days).
    pub default_lifetime: Duration,
    /// Longer expiries are clamped to this (`WEBHOOKS_MAX_LIFETIME`, 10 years).
    pub max_lifetime: Duration,
    /// Subscriptions per organization (`WEBHOOKS_MAX_SUBSCRIPTIONS_PER_ORG`, 1000).
    pub max_subscriptions_per_org: usize,
    /// Delays between delivery attempts, before jitter (`WEBHOOKS_RETRY_SCHEDULE`); after the last, dead.
    pub retry_schedule: Vec<Duration>,
    /// A subscription failing this long without a success is blacklisted (`WEBHOOKS_BLACKLIST_AFTER`, 24 h).
    pub blacklist_after: Duration,
    /// How long before its expiry a subscription's organization is told
    /// (`subscription.expiring`, `WEBHOOKS_EXPIRY_NOTICE`).
    pub expiry_notice: Duration,
    /// How often `webhooks-local` looks for subscriptions to remind
    /// (`WEBHOOKS_EXPIRY_CHECK_INTERVAL`; on AWS a schedule runs `remind-expiring`).
    pub expiry_check_interval: Duration,
    /// How long notifications and their attempts are kept (`WEBHOOKS_DELIVERY_RETENTION`).
    pub delivery_retention: Duration,
    /// How long a stored message is kept and readable by id, counted from
    /// its last store (`WEBHOOKS_MESSAGE_RETENTION`).
    pub message_retention: Duration,
    /// The DynamoDB subscriptions table (`WEBHOOKS_SUBSCRIPTIONS_TABLE`); none off AWS.
    pub subscriptions_table: Option<String>,
    /// The DynamoDB messages and history table (`WEBHOOKS_MESSAGES_TABLE`); none off AWS.
    pub messages_table: Option<String>,
    /// The SQS delivery queue (`WEBHOOKS_DELIVERY_QUEUE_URL`); none off AWS.
    pub delivery_queue_url: Option<String>,
    /// The delivery queue's dead-letter queue (`WEBHOOKS_DELIVERY_DLQ_URL`); none off AWS.
    pub delivery_dead_letter_url: Option<String>,
    /// The SQS FIFO delivery queue of ordered subscriptions
    /// (`WEBHOOKS_ORDERED_QUEUE_URL`); without it, AWS refuses `ordered`.
    pub ordered_queue_url: Option<String>,
    /// Its FIFO dead-letter queue (`WEBHOOKS_ORDERED_DLQ_URL`).
    pub ordered_dead_letter_url: Option<String>,
    /// Timeouts and retries of every DynamoDB and SQS call (`WEBHOOKS_AWS_*`).
    pub aws_calls: crate::call_bounds::AwsCalls,
    /// How long `webhooks-local` lets the requests and deliveries in flight
    /// finish after SIGTERM or SIGINT (`WEBHOOKS_SHUTDOWN_GRACE`).
    pub shutdown_grace: Duration,
    /// The prefix of every organization's external id for AWS destinations
    /// (`WEBHOOKS_DESTINATION_EXTERNAL_ID_PREFIX`), what the deployment's
    /// IAM policy conditions `sts:AssumeRole` on.
    pub external_id_prefix: String,
    /// The service's AWS account (`WEBHOOKS_AWS_ACCOUNT_ID`), which a
    /// customer's destination role trusts; shown to customers, never used to call.
    pub aws_account_id: Option<String>,
}

/// A bad configuration value, named by its variable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{var}: {message}")]
pub struct ConfigError {
    /// The variable, e.g. `WEBHOOKS_RETRY_SCHEDULE`.
    pub var: &'static str,
    /// What is wrong with its value.
    pub message: String,
}

const DAY: u64 = 86_400;

/// How often, by default, a token with an unknown `kid` may refetch the JWKS.
pub const JWKS_REFRESH_MIN_INTERVAL: Duration = Duration::from_secs(30);

impl Config {
    /// The configuration in the process's environment, with `profile`'s defaults.
    pub fn from_env(profile: Profile) -> Result<Self, ConfigError> {
        Self::from_lookup(profile, |k| std::env::var(k).ok())
    }

    /// The configuration `lookup` gives (a variable's value, or None), with `profile`'s defaults.
    pub fn from_lookup(
        profile: Profile,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let get = |var: &str| lookup(var).filter(|v| !v.trim().is_empty());
        let local = profile == Profile::Local;
        let bool_var = |var: &'static str, default: bool| match get(var) {
            None => Ok(default),
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" => Ok(true),
                "false" | "0" | "no" => Ok(false),
                _ => Err(ConfigError {
                    var,
                    message: format!("expected true or false, got '{v}'"),
                }),
            },
        };
        let duration_var = |var: &'static str, default: Duration| match get(var) {
            None => Ok(default),
            Some(v) => parse_duration(&v).map_err(|message| ConfigError { var, message }),
        };
        let millis_var = |var: &'static str, default: u64| match get(var) {
            None => Ok(Duration::from_millis(default)),
            Some(v) => v
                .trim()
                .parse::<u64>()
                .map(Duration::from_millis)
                .or_else(|_| parse_duration(&v))
                .map_err(|_| ConfigError {
                    var,
                    message: format!("expected milliseconds, got '{v}'"),
                }),
        };
        let retry_schedule: Vec<Duration> = match get("WEBHOOKS_RETRY_SCHEDULE") {
            None => "5s,30s,2m,10m,30m,1h,2h,4h,8h,12h"
                .split(',')
                .map(|d| parse_duration(d).expect("default schedule parses"))
                .collect(),
            Some(v) => v
                .split(',')
                .map(parse_duration)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|message| ConfigError {
                    var: "WEBHOOKS_RETRY_SCHEDULE",
                    message,
                })?,
        };
        let max_subscriptions_per_org = match get("WEBHOOKS_MAX_SUBSCRIPTIONS_PER_ORG") {
            None => 1000,
            Some(v) => v
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or(ConfigError {
                    var: "WEBHOOKS_MAX_SUBSCRIPTIONS_PER_ORG",
                    message: format!("expected a positive integer, got '{v}'"),
                })?,
        };
        // A delivery waits for the POST and a group commit (its outcome)
        // that it shares with ingestion, so throughput is in-flight ÷
        // latency: 64 kept up with ~3,000 notifications/s while events were
        // ingested, 512 with the 5,300–5,800 of the benchmark
        // (docs/performance-history.md#the-delivery-history-issue-11).
        let delivery_concurrency = match get("WEBHOOKS_DELIVERY_CONCURRENCY") {
            None => 512,
            Some(v) => v
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=4096).contains(n))
                .ok_or(ConfigError {
                    var: "WEBHOOKS_DELIVERY_CONCURRENCY",
                    message: format!("expected an integer from 1 to 4096, got '{v}'"),
                })?,
        };
        let count_var = |var: &'static str, default: usize, max: usize| match get(var) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or(ConfigError {
                    var,
                    message: format!("expected an integer from 1 to {max}, got '{v}'"),
                }),
        };
        // A hung callback holds this many slots for the delivery timeout;
        // one healthy subscription delivers at up to cap ÷ callback latency
        // (docs/decisions/tenant-isolation.md).
        let max_in_flight_per_subscription =
            count_var("WEBHOOKS_MAX_IN_FLIGHT_PER_SUBSCRIPTION", 32, 4096)?;
        let breaker_defaults = crate::health::BreakerRule::default();
        let breaker = crate::health::BreakerRule {
            failures: count_var(
                "WEBHOOKS_BREAKER_FAILURES",
                breaker_defaults.failures as usize,
                1000,
            )? as u32,
            window: duration_var("WEBHOOKS_BREAKER_WINDOW", breaker_defaults.window)?,
            cooldown: duration_var("WEBHOOKS_BREAKER_COOLDOWN", breaker_defaults.cooldown)?,
            max_cooldown: duration_var(
                "WEBHOOKS_BREAKER_MAX_COOLDOWN",
                breaker_defaults.max_cooldown,
            )?,
            failing_after: count_var(
                "WEBHOOKS_FAILING_AFTER",
                breaker_defaults.failing_after as usize,
                1000,
            )? as u32,
        };
        if breaker.cooldown.is_zero() || breaker.max_cooldown < breaker.cooldown {
            return Err(ConfigError {
                var: "WEBHOOKS_BREAKER_MAX_COOLDOWN",
                message: "must be at least WEBHOOKS_BREAKER_COOLDOWN, which must be longer than 0"
                    .into(),
            });
        }
        let config = Config {
            delivery_concurrency,
            max_in_flight_per_subscription,
            breaker,
            api_keys: get("WEBHOOKS_API_KEYS")
                .map(|v| {
                    v.split(',')
                        .map(|k| k.trim().to_owned())
                        .filter(|k| !k.is_empty())
                        .collect()
                })
                .unwrap_or_default(),
            jwt: JwtConfig {
                hs256_secret: get("WEBHOOKS_JWT_HS256_SECRET"),
                jwks_url: get("WEBHOOKS_JWT_JWKS_URL"),
                issuer: get("WEBHOOKS_JWT_ISSUER"),
                audience: get("WEBHOOKS_JWT_AUDIENCE"),
                org_claim: get("WEBHOOKS_JWT_ORG_CLAIM").unwrap_or_else(|| "org_id".to_owned()),
                scopes: ScopeConfig {
                    read: scope_list(
                        "WEBHOOKS_READ_SCOPES",
                        get("WEBHOOKS_READ_SCOPES"),
                        DEFAULT_READ_SCOPE,
                    )?,
                    write: scope_list(
                        "WEBHOOKS_WRITE_SCOPES",
                        get("WEBHOOKS_WRITE_SCOPES"),
                        DEFAULT_WRITE_SCOPE,
                    )?,
                },
            },
            jwks_min_refresh: duration_var(
                "WEBHOOKS_JWT_JWKS_MIN_REFRESH",
                JWKS_REFRESH_MIN_INTERVAL,
            )?,
            allow_http_callbacks: bool_var("WEBHOOKS_ALLOW_HTTP_CALLBACKS", local)?,
            allow_private_callbacks: bool_var("WEBHOOKS_ALLOW_PRIVATE_CALLBACKS", local)?,
            handshake_timeout: millis_var("WEBHOOKS_HANDSHAKE_TIMEOUT_MS", 5_000)?,
            delivery_timeout: millis_var("WEBHOOKS_DELIVERY_TIMEOUT_MS", 10_000)?,
            // Under the 5 s a client is promised; two API calls of 2 s each fit.
            api_deadline: duration_var("WEBHOOKS_API_DEADLINE", Duration::from_secs(4))?,
            default_lifetime: duration_var(
                "WEBHOOKS_DEFAULT_LIFETIME",
                Duration::from_secs(90 * DAY),
            )?,
            max_lifetime: duration_var("WEBHOOKS_MAX_LIFETIME", Duration::from_secs(3650 * DAY))?,
            max_subscriptions_per_org,
            retry_schedule,
            blacklist_after: duration_var("WEBHOOKS_BLACKLIST_AFTER", Duration::from_secs(DAY))?,
            expiry_notice: duration_var("WEBHOOKS_EXPIRY_NOTICE", Duration::from_secs(7 * DAY))?,
            expiry_check_interval: duration_var(
                "WEBHOOKS_EXPIRY_CHECK_INTERVAL",
                Duration::from_secs(30),
            )?,
            delivery_retention: duration_var(
                "WEBHOOKS_DELIVERY_RETENTION",
                Duration::from_secs(30 * DAY),
            )?,
            message_retention: duration_var(
                "WEBHOOKS_MESSAGE_RETENTION",
                Duration::from_secs(30 * DAY),
            )?,
            subscriptions_table: get("WEBHOOKS_SUBSCRIPTIONS_TABLE"),
            messages_table: get("WEBHOOKS_MESSAGES_TABLE"),
            delivery_queue_url: get("WEBHOOKS_DELIVERY_QUEUE_URL"),
            delivery_dead_letter_url: get("WEBHOOKS_DELIVERY_DLQ_URL"),
            ordered_queue_url: get("WEBHOOKS_ORDERED_QUEUE_URL"),
            ordered_dead_letter_url: get("WEBHOOKS_ORDERED_DLQ_URL"),
            aws_calls: crate::call_bounds::AwsCalls::from_lookup(get, parse_duration)
                .map_err(|(var, message)| ConfigError { var, message })?,
            // Under the 30 s Kubernetes and `docker stop` wait before SIGKILL.
            shutdown_grace: duration_var("WEBHOOKS_SHUTDOWN_GRACE", Duration::from_secs(20))?,
            aws_account_id: get("WEBHOOKS_AWS_ACCOUNT_ID"),
            external_id_prefix: match get("WEBHOOKS_DESTINATION_EXTERNAL_ID_PREFIX") {
                None => "webhooks".to_owned(),
                // An external id allows `[\w+=,.@:/-]`; the prefix keeps to a
                // stack name's characters so the IAM condition `<prefix>-*` is exact.
                Some(p)
                    if p.len() <= 128
                        && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') =>
                {
                    p
                }
                Some(p) => {
                    return Err(ConfigError {
                        var: "WEBHOOKS_DESTINATION_EXTERNAL_ID_PREFIX",
                        message: format!(
                            "expected letters, digits and '-' (at most 128), got '{p}'"
                        ),
                    })
                }
            },
        };
        if config.message_retention.is_zero() {
            return Err(ConfigError {
                var: "WEBHOOKS_MESSAGE_RETENTION",
                message: "must be longer than 0 (a message would be gone as it is stored)".into(),
            });
        }
        if config.api_deadline.is_zero()
            || config.api_deadline + config.handshake_timeout
                >= crate::call_bounds::API_GATEWAY_LIMIT
        {
            return Err(ConfigError {
                var: "WEBHOOKS_API_DEADLINE",
                message: "must be longer than 0, and with WEBHOOKS_HANDSHAKE_TIMEOUT_MS \
                          shorter than API Gateway's 29 s"
                    .into(),
            });
        }
        if config.default_lifetime > config.max_lifetime {
            return Err(ConfigError {
                var: "WEBHOOKS_DEFAULT_LIFETIME",
                message: "is longer than WEBHOOKS_MAX_LIFETIME".into(),
            });
        }
        Ok(config)
    }
}

/// Parses `200ms`, `5s`, `2m`, `1h`, `90d`, `10y` (a year is 365 days).
pub fn parse_duration(input: &str) -> Result<Duration, String> {
    let s = input.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("'{input}' is not a duration like 200ms, 5s, 2m, 1h or 90d"))?;
    let secs = |mult: u64| n.checked_mul(mult).map(Duration::from_secs);
    let d = match unit {
        "ms" => Some(Duration::from_millis(n)),
        "s" => secs(1),
        "m" => secs(60),
        "h" => secs(3600),
        "d" => secs(DAY),
        "y" => secs(365 * DAY),
        _ => None,
    };
    d.ok_or_else(|| format!("'{input}' is not a duration like 200ms, 5s, 2m, 1h or 90d"))
}

#[cfg(test)]
mod tests;
