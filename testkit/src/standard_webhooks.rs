//! Signature checks with the Standard Webhooks *Python* library
//! (`standardwebhooks` on PyPI), code independent of the service's own and
//! of the Rust crate: `scripts/emulators.sh`'s `install_verify_tools`
//! installs it into the tools venv and exports its interpreter as
//! `WEBHOOKS_STANDARDWEBHOOKS_PYTHON`. A test that needs it and does not find
//! it fails with instructions; it never passes vacuously.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::Received;

pub const PYTHON: &str = "WEBHOOKS_STANDARDWEBHOOKS_PYTHON";

/// Reads the checks from stdin and prints one true/false per check: does
/// `Webhook(secret).verify(body, headers)` accept the notification, with
/// the check's `signature` as the `webhook-signature` header if it has one.
const SCRIPT: &str = r#"
import json, sys
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
request = json.load(sys.stdin)
results = []
for check in request["checks"]:
    headers = dict(request["headers"])
    if check.get("signature") is not None:
        headers["webhook-signature"] = check["signature"]
    try:
        Webhook(check["secret"]).verify(request["body"], headers)
        results.append(True)
    except WebhookVerificationError:
        results.append(False)
print(json.dumps(results))
"#;

/// One verification to run: a secret, and optionally a replacement
/// `webhook-signature` header (to check one signature of several alone).
pub struct Check<'a> {
    pub secret: &'a str,
    pub signature: Option<&'a str>,
}

/// Runs every check on the notification with the Python library.
pub fn verify(notification: &Received, checks: &[Check<'_>]) -> Vec<bool> {
    let python = match std::env::var(PYTHON) {
        Ok(p) if !p.trim().is_empty() => p,
        _ => panic!(
            "{PYTHON} is not set: this test checks signatures with the Standard Webhooks \
             Python library. Run it through ./scripts/test.sh, or in a shell: \
             `source scripts/emulators.sh && install_verify_tools`, then cargo test."
        ),
    };
    let headers: serde_json::Map<String, Value> =
        ["webhook-id", "webhook-timestamp", "webhook-signature"]
            .iter()
            .map(|name| (name.to_string(), Value::from(notification.header(name))))
            .collect();
    let request = json!({
        "body": String::from_utf8(notification.body.clone()).expect("a UTF-8 body"),
        "headers": headers,
        "checks": checks
            .iter()
            .map(|c| json!({"secret": c.secret, "signature": c.signature}))
            .collect::<Vec<_>>(),
    });
    let mut child = Command::new(&python)
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{PYTHON}={python}: cannot run it: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "the Standard Webhooks Python check failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("a JSON list of booleans")
}
