//! `webhooks-local verify`: checks the Standard Webhooks signature of
//! notifications recorded by `webhooks-local listen --record` (one JSON
//! line each on stdin), with a `whsec_` secret or a `whpk_` public key as
//! `listen --secret` does (`signatures.rs`): for a script that learns the secret after the
//! notification arrived. Fails naming the first line that does not verify.

use std::io::BufRead;

use clap::Args;
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::signatures::Verifier;

#[derive(Args)]
pub struct VerifyArgs {
    /// The subscription's signing secret (`whsec_...`), or its public key
    /// (`whpk_...`) for `v1a`; repeat it to accept any of several.
    #[arg(long, required = true)]
    secret: Vec<String>,
}

pub fn run(args: VerifyArgs) -> Result<(), String> {
    let verifiers = args
        .secret
        .iter()
        .enumerate()
        .map(|(i, secret)| {
            Verifier::new(secret).map_err(|e| format!("--secret (key {}): {e}", i + 1))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut count = 0;
    for (n, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line.map_err(|e| format!("stdin: {e}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let key = verify_line(&verifiers, &line).map_err(|e| format!("line {}: {e}", n + 1))?;
        println!("line {}: verified with key {}", n + 1, key + 1);
        count += 1;
    }
    if count == 0 {
        return Err("no notification on stdin".into());
    }
    Ok(())
}

/// Which verifier (index) accepts a line of `listen --record`.
fn verify_line(verifiers: &[Verifier], line: &str) -> Result<usize, String> {
    let (headers, body) = recorded(line)?;
    verifiers
        .iter()
        .position(|v| v.verify(body.as_bytes(), &headers).is_ok())
        .ok_or_else(|| "the signature does not verify".to_owned())
}

/// The headers and body of a line of `listen --record`.
fn recorded(line: &str) -> Result<(HeaderMap, String), String> {
    let value: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let mut headers = HeaderMap::new();
    for (name, v) in value["headers"].as_object().into_iter().flatten() {
        let name = HeaderName::try_from(name.as_str()).map_err(|e| e.to_string())?;
        let v = HeaderValue::try_from(v.as_str().unwrap_or("")).map_err(|e| e.to_string())?;
        headers.insert(name, v);
    }
    let body = value["body"].as_str().ok_or("no body")?.to_owned();
    Ok((headers, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listen::record_line;
    use webhooks_receiver::Arrival;

    const SECRET: &str = "whsec_c2VlZGVkLXNlY3JldC1mb3ItdGVzdHM=";
    const OTHER: &str = "whsec_b3RoZXItc2VjcmV0LWZvci10ZXN0cw==";

    /// A notification signed with `key` (`whsec_` or `whsk_`), as `listen --record` writes it.
    fn recorded_notification(body: &str, key: &str) -> String {
        let id = "msg_1";
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let signature = webhook_core::signature::SigningKey::from_secret(key)
            .unwrap()
            .sign(id, now, body.as_bytes());
        let mut headers = HeaderMap::new();
        headers.insert("webhook-id", HeaderValue::from_static(id));
        headers.insert("webhook-timestamp", now.to_string().parse().unwrap());
        headers.insert("webhook-signature", signature.parse().unwrap());
        record_line(&Arrival {
            method: http::Method::POST,
            path: "/hook".into(),
            headers,
            body: body.to_owned().into(),
            at: std::time::Instant::now(),
        })
    }

    fn verifiers(keys: &[&str]) -> Vec<Verifier> {
        keys.iter().map(|k| Verifier::new(k).unwrap()).collect()
    }

    #[test]
    fn a_recorded_notification_verifies_with_its_secret_only() {
        let line = recorded_notification(r#"{"id":"n-1","text":"héllo \"quoted\""}"#, SECRET);
        assert_eq!(verify_line(&verifiers(&[OTHER, SECRET]), &line), Ok(1));
        assert!(verify_line(&verifiers(&[OTHER]), &line).is_err());
        let tampered = line.replace("n-1", "n-2");
        assert!(verify_line(&verifiers(&[SECRET]), &tampered).is_err());
    }

    #[test]
    fn a_v1a_notification_verifies_with_its_public_key_only() {
        use webhook_core::signature::{public_key, SignatureScheme};
        let (key, other) = (
            SignatureScheme::V1a.new_key(),
            SignatureScheme::V1a.new_key(),
        );
        let (public, other_public) = (public_key(&key).unwrap(), public_key(&other).unwrap());
        let line = recorded_notification(r#"{"id":"n-1"}"#, &key);
        assert_eq!(
            verify_line(&verifiers(&[SECRET, &other_public, &public]), &line),
            Ok(2)
        );
        assert!(verify_line(&verifiers(&[SECRET, &other_public]), &line).is_err());
        let tampered = line.replace("n-1", "n-2");
        assert!(verify_line(&verifiers(&[&public]), &tampered).is_err());
        assert!(
            Verifier::new(&key).is_err(),
            "a private key is refused, not used"
        );
    }
}
