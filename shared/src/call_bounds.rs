//! Bounds on every DynamoDB and SQS call (`WEBHOOKS_AWS_*`): how long one
//! attempt may take, how long the whole operation with its retries may take,
//! and how many attempts the SDK's standard retry (exponential backoff with
//! jitter, for throttling, 5xx, timeouts and connection failures) makes.
//!
//! Two sets, by caller: [`AwsCalls::api`] for the API (a request must answer
//! well inside API Gateway's 29 s, and the first call that hits a stalled
//! dependency ends the request with a `503`), and [`AwsCalls::batch`] for the
//! queue functions (a batch must end inside its function timeout, 15 s for
//! `ingest-events`, 30 s for `deliver-notifications`, each shorter than its
//! queue's visibility timeout). The SDK clients are built with them once, at
//! start-up (`crate::aws::sdk_config_with`).

use std::time::Duration;

/// A setting at fault: its variable and what is wrong (`config::ConfigError`).
pub type Invalid = (&'static str, String);

/// The bounds of one SDK client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallBounds {
    /// One HTTP attempt (connect, send, answer).
    pub attempt: Duration,
    /// The operation: every attempt and the backoff between them.
    pub operation: Duration,
    /// Attempts in all, the first included (1 disables retries).
    pub max_attempts: u32,
}

/// The bounds by caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AwsCalls {
    /// API requests (the API functions, `webhooks-local`).
    pub api: CallBounds,
    /// `ingest-events` and `deliver-notifications`.
    pub batch: CallBounds,
}

impl Default for AwsCalls {
    fn default() -> Self {
        AwsCalls {
            // Two attempts fit (a stalled first one, a quick retry); SQS's
            // one-second long poll (`webhooks-local`'s worker) fits one.
            api: CallBounds {
                attempt: Duration::from_millis(2_000),
                operation: Duration::from_millis(3_000),
                max_attempts: 3,
            },
            // A batch stops at its first unavailable answer (`lambda::queues`),
            // so one operation bounds it: well inside 15 s.
            batch: CallBounds {
                attempt: Duration::from_millis(3_000),
                operation: Duration::from_millis(8_000),
                max_attempts: 3,
            },
        }
    }
}

/// API Gateway's integration timeout: no API call may take that long.
pub const API_GATEWAY_LIMIT: Duration = Duration::from_secs(29);

impl AwsCalls {
    /// From `WEBHOOKS_AWS_{API,BATCH}_{ATTEMPT,OPERATION}_TIMEOUT` (durations
    /// like `2s`, `800ms`, read with `parse`) and `WEBHOOKS_AWS_MAX_ATTEMPTS`.
    pub fn from_lookup(
        get: impl Fn(&str) -> Option<String>,
        parse: impl Fn(&str) -> Result<Duration, String>,
    ) -> Result<Self, Invalid> {
        let defaults = AwsCalls::default();
        let duration = |var: &'static str, default: Duration| match get(var) {
            None => Ok(default),
            Some(v) => parse(&v)
                .and_then(|d| match d.is_zero() {
                    true => Err("must be longer than 0".to_owned()),
                    false => Ok(d),
                })
                .map_err(|message| (var, message)),
        };
        let max_attempts = match get("WEBHOOKS_AWS_MAX_ATTEMPTS") {
            None => defaults.api.max_attempts,
            Some(v) => v
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=10).contains(n))
                .ok_or((
                    "WEBHOOKS_AWS_MAX_ATTEMPTS",
                    format!("expected an integer from 1 to 10, got '{v}'"),
                ))?,
        };
        let bounds = |attempt_var, operation_var, default: CallBounds| {
            let attempt = duration(attempt_var, default.attempt)?;
            let operation = duration(operation_var, default.operation)?;
            if attempt > operation {
                return Err((attempt_var, format!("is longer than {operation_var}")));
            }
            Ok(CallBounds {
                attempt,
                operation,
                max_attempts,
            })
        };
        let calls = AwsCalls {
            api: bounds(
                "WEBHOOKS_AWS_API_ATTEMPT_TIMEOUT",
                "WEBHOOKS_AWS_API_OPERATION_TIMEOUT",
                defaults.api,
            )?,
            batch: bounds(
                "WEBHOOKS_AWS_BATCH_ATTEMPT_TIMEOUT",
                "WEBHOOKS_AWS_BATCH_OPERATION_TIMEOUT",
                defaults.batch,
            )?,
        };
        if calls.api.operation >= API_GATEWAY_LIMIT {
            return Err((
                "WEBHOOKS_AWS_API_OPERATION_TIMEOUT",
                "must be shorter than API Gateway's 29 s".into(),
            ));
        }
        Ok(calls)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(pairs: &[(&str, &str)]) -> Result<AwsCalls, Invalid> {
        let get = |k: &str| {
            pairs
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| (*v).to_owned())
        };
        // Plain seconds or milliseconds, as far as these tests need.
        let parse = |v: &str| match (v.strip_suffix("ms"), v.strip_suffix('s')) {
            (Some(ms), _) => ms
                .parse()
                .map(Duration::from_millis)
                .map_err(|e| e.to_string()),
            (None, Some(s)) => s
                .parse()
                .map(Duration::from_secs)
                .map_err(|e| e.to_string()),
            _ => Err(format!("not a duration: {v}")),
        };
        AwsCalls::from_lookup(get, parse)
    }

    #[test]
    fn defaults_answer_inside_the_api_and_function_limits() {
        let calls = lookup(&[]).unwrap();
        assert_eq!(calls, AwsCalls::default());
        assert!(calls.api.operation < Duration::from_secs(5));
        assert!(calls.api.attempt <= calls.api.operation);
        assert!(calls.batch.operation < Duration::from_secs(15));
        assert_eq!(calls.api.max_attempts, 3);
    }

    #[test]
    fn settings_are_read_and_checked() {
        let calls = lookup(&[
            ("WEBHOOKS_AWS_API_ATTEMPT_TIMEOUT", "500ms"),
            ("WEBHOOKS_AWS_API_OPERATION_TIMEOUT", "2s"),
            ("WEBHOOKS_AWS_BATCH_OPERATION_TIMEOUT", "20s"),
            ("WEBHOOKS_AWS_MAX_ATTEMPTS", "5"),
        ])
        .unwrap();
        assert_eq!(calls.api.attempt, Duration::from_millis(500));
        assert_eq!(calls.api.operation, Duration::from_secs(2));
        assert_eq!(calls.batch.operation, Duration::from_secs(20));
        assert_eq!(calls.batch.max_attempts, 5);
        for (var, value, at_fault) in [
            (
                "WEBHOOKS_AWS_API_OPERATION_TIMEOUT",
                "30s",
                "WEBHOOKS_AWS_API_OPERATION_TIMEOUT",
            ),
            (
                "WEBHOOKS_AWS_API_ATTEMPT_TIMEOUT",
                "0s",
                "WEBHOOKS_AWS_API_ATTEMPT_TIMEOUT",
            ),
            (
                "WEBHOOKS_AWS_API_ATTEMPT_TIMEOUT",
                "4s",
                "WEBHOOKS_AWS_API_ATTEMPT_TIMEOUT",
            ),
            (
                "WEBHOOKS_AWS_BATCH_ATTEMPT_TIMEOUT",
                "soon",
                "WEBHOOKS_AWS_BATCH_ATTEMPT_TIMEOUT",
            ),
            (
                "WEBHOOKS_AWS_MAX_ATTEMPTS",
                "0",
                "WEBHOOKS_AWS_MAX_ATTEMPTS",
            ),
        ] {
            assert_eq!(
                lookup(&[(var, value)]).unwrap_err().0,
                at_fault,
                "{var}={value}"
            );
        }
    }
}
