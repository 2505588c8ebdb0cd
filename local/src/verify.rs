//! `webhooks-local verify`: checks the Standard Webhooks signature of
//! notifications recorded by `webhooks-local listen --record` (one JSON
//! line each on stdin), with the `standardwebhooks` crate as `listen
//! --secret` does: for a script that learns the secret after the
//! notification arrived. Fails naming the first line that does not verify.

use std::io::BufRead;

use clap::Args;
use http::{HeaderMap, HeaderName, HeaderValue};

#[derive(Args)]
pub struct VerifyArgs {
    /// The subscription's signing secret (`whsec_...`); repeat it to accept any of several.
    #[arg(long, required = true)]
    secret: Vec<String>,
}

pub fn run(args: VerifyArgs) -> Result<(), String> {
    let verifiers = args
        .secret
        .iter()
        .enumerate()
        .map(|(i, secret)| {
            standardwebhooks::Webhook::new(secret.trim())
                .map_err(|e| format!("--secret (key {}): {e}", i + 1))
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
fn verify_line(verifiers: &[standardwebhooks::Webhook], line: &str) -> Result<usize, String> {
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

    /// A notification signed with `SECRET`, as `listen --record` writes it.
    fn recorded_notification(body: &str) -> String {
        let id = "msg_1";
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let signature = standardwebhooks::Webhook::new(SECRET)
            .unwrap()
            .sign(id, now, body.as_bytes())
            .unwrap();
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

    #[test]
    fn a_recorded_notification_verifies_with_its_secret_only() {
        let verifiers = |secrets: &[&str]| -> Vec<_> {
            secrets
                .iter()
                .map(|s| standardwebhooks::Webhook::new(s).unwrap())
                .collect()
        };
        let line = recorded_notification(r#"{"id":"n-1","text":"héllo \"quoted\""}"#);
        assert_eq!(verify_line(&verifiers(&[OTHER, SECRET]), &line), Ok(1));
        assert!(verify_line(&verifiers(&[OTHER]), &line).is_err());
        let tampered = line.replace("n-1", "n-2");
        assert!(verify_line(&verifiers(&[SECRET]), &tampered).is_err());
    }
}
