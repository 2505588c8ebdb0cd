//! What `listen --secret` and `verify --secret` check a notification's
//! signature with: a subscription's `whsec_` secret (`v1`, with the
//! `standardwebhooks` crate) or its `whpk_` public key (`v1a`, ed25519), as
//! `GET /webhooksubscription/{id}/secret` answers them.

use http::HeaderMap;
use webhook_core::signature::{PublicKey, PRIVATE_KEY_PREFIX, PUBLIC_KEY_PREFIX};

/// How far a notification's `webhook-timestamp` may be from now, either way:
/// the `standardwebhooks` crate's tolerance for `v1`, kept for `v1a`.
const TOLERANCE_SECONDS: u64 = 5 * 60;

/// One key given with `--secret`.
pub enum Verifier {
    /// A `whsec_` secret: `v1` signatures.
    Secret(standardwebhooks::Webhook),
    /// A `whpk_` public key: `v1a` signatures.
    PublicKey(PublicKey),
}

impl Verifier {
    /// The verifier of a `whsec_` secret or a `whpk_` public key.
    pub fn new(key: &str) -> Result<Self, String> {
        let key = key.trim();
        if key.starts_with(PRIVATE_KEY_PREFIX) {
            return Err("a whsk_ private key: give the subscription's whpk_ public key".into());
        }
        if key.starts_with(PUBLIC_KEY_PREFIX) {
            return PublicKey::parse(key)
                .map(Verifier::PublicKey)
                .ok_or_else(|| "not a whpk_ public key (base64 of 32 bytes)".to_owned());
        }
        standardwebhooks::Webhook::new(key)
            .map(Verifier::Secret)
            .map_err(|e| e.to_string())
    }

    /// Checks a notification's body and headers; why not, if it fails.
    pub fn verify(&self, body: &[u8], headers: &HeaderMap) -> Result<(), String> {
        let key = match self {
            Verifier::Secret(webhook) => {
                return webhook.verify(body, headers).map_err(|e| e.to_string())
            }
            Verifier::PublicKey(key) => key,
        };
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| format!("no {name} header"))
        };
        let (id, timestamp) = (header("webhook-id")?, header("webhook-timestamp")?);
        let at: u64 = timestamp
            .parse()
            .map_err(|_| "webhook-timestamp is not a number of seconds".to_owned())?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if now.abs_diff(at) > TOLERANCE_SECONDS {
            return Err("webhook-timestamp is more than 5 minutes from now".into());
        }
        if key.verifies(header("webhook-signature")?, id, timestamp, body) {
            Ok(())
        } else {
            Err("no v1a signature of this public key".into())
        }
    }
}
