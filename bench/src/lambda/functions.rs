//! The functions the suite starts, the events each is fed and the
//! environment Lambda would give it; what counts as each answer.

use serde_json::Value;
use webhooks_bench::runtime_api::Outcome;

use super::environment::{Environment, JWT_SECRET, SUBSCRIPTION_ID};

/// The reference: a `lambda_runtime` function that does nothing.
pub const NOOP: &str = "noop-lambda";
/// The one binary of every function (`functions/`), told which by `WEBHOOKS_FUNCTION`.
pub const LAMBDA_BINARY: &str = "webhooks-lambda";

/// The binary a function's processes run: the deployed one, or the no-op.
pub fn binary_of(function: &str) -> &'static str {
    if function == NOOP {
        NOOP
    } else {
        LAMBDA_BINARY
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `lambda_http`: the answer is an API Gateway proxy response.
    Http,
    /// SQS batch: the answer lists `batchItemFailures`.
    Sqs,
    Authorizer,
    /// Any other answer: counted as `ok`.
    Plain,
}

pub struct Function {
    pub name: &'static str,
    pub kind: Kind,
    pub events: &'static [&'static str],
    /// Needs the DynamoDB tables (and possibly SQS).
    pub store: bool,
    /// Re-create the seeded subscription before each invocation (delete).
    pub reseed: bool,
}

pub const FUNCTIONS: &[Function] = &[
    Function {
        name: NOOP,
        kind: Kind::Plain,
        events: &["get-message-ok"],
        store: false,
        reseed: false,
    },
    Function {
        name: "authorizer",
        kind: Kind::Authorizer,
        events: &["authorizer-request"],
        store: false,
        reseed: false,
    },
    Function {
        name: "create-subscription",
        kind: Kind::Http,
        events: &["create-subscription-ok"],
        store: true,
        reseed: false,
    },
    Function {
        name: "list-subscriptions",
        kind: Kind::Http,
        events: &["list-subscriptions-ok"],
        store: true,
        reseed: false,
    },
    Function {
        name: "get-subscription",
        kind: Kind::Http,
        events: &["get-subscription-ok"],
        store: true,
        reseed: false,
    },
    Function {
        name: "delete-subscription",
        kind: Kind::Http,
        events: &["delete-subscription-ok"],
        store: true,
        reseed: true,
    },
    Function {
        name: "get-subscription-secret",
        kind: Kind::Http,
        events: &["get-subscription-secret-ok"],
        store: true,
        reseed: false,
    },
    Function {
        name: "get-message",
        kind: Kind::Http,
        events: &["get-message-ok"],
        store: true,
        reseed: false,
    },
    Function {
        name: "ingest-events",
        kind: Kind::Sqs,
        events: &["ingest-events-sqs"],
        store: true,
        reseed: false,
    },
    Function {
        name: "deliver-notifications",
        kind: Kind::Sqs,
        events: &["deliver-notifications-sqs"],
        store: true,
        reseed: false,
    },
    Function {
        name: "remind-expiring",
        kind: Kind::Plain,
        events: &["remind-expiring-scheduled"],
        store: true,
        reseed: false,
    },
    Function {
        name: "pre-token-generation",
        kind: Kind::Plain,
        events: &["pre-token-generation-v2"],
        store: false,
        reseed: false,
    },
];

pub fn event_text(name: &str, env: &Environment) -> Result<String, String> {
    let path = crate::process::repo_root().join(format!("events/{name}.json"));
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text
        .replace("TOKEN_PLACEHOLDER", &env.token)
        .replace("SUBSCRIPTION_ID_PLACEHOLDER", SUBSCRIPTION_ID)
        .replace(
            "http://127.0.0.1:9/hook",
            &env.receiver.uri("/lambda-create"),
        ))
}

/// What Lambda puts in every function's environment (credentials and
/// region from ours, the emulators' defaults otherwise; the Runtime API's
/// address is `runtime_api`'s).
pub fn lambda_env(name: &str) -> Vec<(String, String)> {
    let var = |k: &str, default: &str| std::env::var(k).unwrap_or_else(|_| default.to_owned());
    vec![
        // The function template.yaml makes of the one binary (the no-op ignores it).
        ("WEBHOOKS_FUNCTION".into(), name.into()),
        ("AWS_LAMBDA_FUNCTION_NAME".into(), name.into()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE".into(), "128".into()),
        ("AWS_LAMBDA_FUNCTION_VERSION".into(), "$LATEST".into()),
        (
            "AWS_LAMBDA_LOG_GROUP_NAME".into(),
            format!("/aws/lambda/{name}"),
        ),
        ("AWS_LAMBDA_LOG_STREAM_NAME".into(), "bench".into()),
        ("AWS_REGION".into(), var("AWS_REGION", "us-east-1")),
        ("AWS_DEFAULT_REGION".into(), var("AWS_REGION", "us-east-1")),
        ("AWS_ACCESS_KEY_ID".into(), var("AWS_ACCESS_KEY_ID", "test")),
        (
            "AWS_SECRET_ACCESS_KEY".into(),
            var("AWS_SECRET_ACCESS_KEY", "test"),
        ),
        ("TZ".into(), ":UTC".into()),
        ("LANG".into(), "en_US.UTF-8".into()),
        ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
    ]
}

/// The environment Lambda gives a function, plus the function's own.
/// The environment Lambda gives a function, plus the function's own.
pub fn function_env(f: &Function, env: &Environment) -> Vec<(String, String)> {
    let mut vars = lambda_env(f.name);
    if f.kind == Kind::Authorizer {
        vars.push(("WEBHOOKS_JWT_HS256_SECRET".into(), JWT_SECRET.into()));
    }
    // The authorizer reads the subscriptions table too (the HTTP API option's keys).
    if f.store || f.kind == Kind::Authorizer {
        let (subscriptions, messages) = match &env.dynamodb {
            Some((t, _)) => (t.subscriptions.clone(), t.messages.clone()),
            None => ("webhooks-subscriptions".into(), "webhooks-messages".into()),
        };
        vars.extend([
            ("WEBHOOKS_SUBSCRIPTIONS_TABLE".into(), subscriptions),
            ("WEBHOOKS_MESSAGES_TABLE".into(), messages),
            // The callbacks of the benchmark are on loopback over plain http.
            ("WEBHOOKS_ALLOW_HTTP_CALLBACKS".into(), "true".into()),
            ("WEBHOOKS_ALLOW_PRIVATE_CALLBACKS".into(), "true".into()),
        ]);
        for k in ["AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS"] {
            if let Ok(v) = std::env::var(k) {
                vars.push((k.into(), v));
            }
        }
    }
    // The queue functions, and remind-expiring for its expiry notices.
    if f.kind == Kind::Sqs || f.name == "remind-expiring" {
        vars.push((
            "WEBHOOKS_DELIVERY_QUEUE_URL".into(),
            env.sqs_queue_url
                .clone()
                .unwrap_or_else(|| "http://127.0.0.1:9/000000000000/bench-delivery".into()),
        ));
    }
    vars
}

pub fn answer_label(kind: Kind, outcome: &Outcome) -> String {
    if !outcome.ok {
        return "function error".into();
    }
    let v: Value = serde_json::from_slice(&outcome.body).unwrap_or(Value::Null);
    match kind {
        Kind::Http => format!("HTTP {}", v["statusCode"]),
        Kind::Authorizer => v["policyDocument"]["Statement"][0]["Effect"]
            .as_str()
            .unwrap_or("?")
            .to_owned(),
        Kind::Sqs => format!(
            "{} failed record(s)",
            v["batchItemFailures"].as_array().map_or(0, Vec::len)
        ),
        Kind::Plain => "ok".into(),
    }
}
