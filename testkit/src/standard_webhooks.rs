//! Signature checks with the Standard Webhooks reference libraries, code
//! independent of the service's own: always the Rust crate (`standardwebhooks`
//! on crates.io), and, where `WEBHOOKS_STANDARDWEBHOOKS_PYTHON` names an
//! interpreter that has it, the Python library too (`standardwebhooks` on
//! PyPI), which must agree. `./scripts/test.sh` installs the Python library
//! (`scripts/emulators.sh`'s `install_verify_tools`) and sets the variable; a
//! plain `cargo test`, which needs no network, checks with the Rust crate.
//!
//! A `v1a` (ed25519) check, whose `secret` is a `whpk_` public key, is made
//! with `ed25519-dalek` (neither reference library has `v1a`): an ed25519
//! of its own, not the service's aws-lc-rs.

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
    /// A `whsec_` secret (`v1`) or a `whpk_` public key (`v1a`).
    pub secret: &'a str,
    pub signature: Option<&'a str>,
}

/// Runs every check on the notification with the reference libraries: one
/// verdict per check, the same from each library.
pub fn verify(notification: &Received, checks: &[Check<'_>]) -> Vec<bool> {
    let (v1a, v1): (Vec<_>, Vec<_>) = checks
        .iter()
        .enumerate()
        .partition(|(_, c)| c.secret.starts_with(PUBLIC_KEY_PREFIX));
    let mut verdicts = vec![false; checks.len()];
    for (i, check) in &v1a {
        verdicts[*i] = verify_v1a(notification, check);
    }
    for (i, check) in &v1 {
        verdicts[*i] = verify_rust(notification, check);
    }
    if let Some(python) = std::env::var(PYTHON).ok().filter(|p| !p.trim().is_empty()) {
        let ours: Vec<Check<'_>> = v1
            .iter()
            .map(|(_, c)| Check {
                secret: c.secret,
                signature: c.signature,
            })
            .collect();
        let python = verify_python(&python, notification, &ours);
        let rust: Vec<bool> = v1.iter().map(|(i, _)| verdicts[*i]).collect();
        assert_eq!(
            rust, python,
            "the Rust and Python Standard Webhooks libraries disagree"
        );
    }
    verdicts
}

/// The prefix of a `v1a` public key.
pub const PUBLIC_KEY_PREFIX: &str = "whpk_";

/// How far a `webhook-timestamp` may be from now, in seconds (the
/// reference libraries' tolerance).
const TOLERANCE_SECONDS: i64 = 300;

/// One `v1a` check with `ed25519-dalek`: a recent timestamp, and one of
/// the header's `v1a,` signatures verifying over `id.timestamp.body`.
fn verify_v1a(notification: &Received, check: &Check<'_>) -> bool {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    use ed25519_dalek::{Signature, VerifyingKey};

    let raw = STANDARD
        .decode(&check.secret[PUBLIC_KEY_PREFIX.len()..])
        .expect("a whpk_ key is base64");
    let key = VerifyingKey::from_bytes(&raw.try_into().expect("a whpk_ key is 32 bytes"))
        .expect("a whpk_ key is a curve point");
    let timestamp = notification.header("webhook-timestamp");
    let Ok(seconds) = timestamp.parse::<i64>() else {
        return false;
    };
    if (seconds - chrono::Utc::now().timestamp()).abs() > TOLERANCE_SECONDS {
        return false;
    }
    let mut message = format!("{}.{timestamp}.", notification.header("webhook-id")).into_bytes();
    message.extend_from_slice(&notification.body);
    let header = check
        .signature
        .unwrap_or_else(|| notification.header("webhook-signature"));
    header
        .split(' ')
        .filter_map(|s| s.strip_prefix("v1a,"))
        .filter_map(|b64| STANDARD.decode(b64).ok())
        .filter_map(|bytes| Signature::from_slice(&bytes).ok())
        .any(|signature| key.verify_strict(&message, &signature).is_ok())
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
