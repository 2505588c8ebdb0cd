//! Signature checks with the Standard Webhooks reference libraries, code
//! independent of the service's own: always the Rust crate (`standardwebhooks`
//! on crates.io), and, where `WEBHOOKS_STANDARDWEBHOOKS_PYTHON` names an
//! interpreter that has it, the Python library too (`standardwebhooks` on
//! PyPI), which must agree. `./scripts/test.sh` installs the Python library
//! (`scripts/emulators.sh`'s `install_verify_tools`) and sets the variable; a
//! plain `cargo test`, which needs no network, checks with the Rust crate.

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

/// Runs every check on the notification with the reference libraries: one
/// verdict per check, the same from each library.
pub fn verify(notification: &Received, checks: &[Check<'_>]) -> Vec<bool> {
    let rust: Vec<bool> = checks
        .iter()
        .map(|c| verify_rust(notification, c))
        .collect();
    if let Some(python) = std::env::var(PYTHON).ok().filter(|p| !p.trim().is_empty()) {
        let python = verify_python(&python, notification, checks);
        assert_eq!(
            rust, python,
            "the Rust and Python Standard Webhooks libraries disagree"
        );
    }
    rust
}

/// One check with the Rust crate.
fn verify_rust(notification: &Received, check: &Check<'_>) -> bool {
    let mut headers = notification.headers.clone();
    if let Some(signature) = check.signature {
        headers.insert("webhook-signature", signature.parse().unwrap());
    }
    standardwebhooks::Webhook::new(check.secret)
        .expect("a whsec_ secret")
        .verify(&notification.body, &headers)
        .is_ok()
}

/// Every check with the Python library, in one interpreter run.
fn verify_python(python: &str, notification: &Received, checks: &[Check<'_>]) -> Vec<bool> {
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
    let mut child = Command::new(python)
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
