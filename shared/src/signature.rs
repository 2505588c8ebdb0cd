//! Standard Webhooks signatures: `webhook-signature: v1,<base64 HMAC-SHA256
//! over "<webhook-id>.<webhook-timestamp>.<body>">`, keyed with the
//! base64-decoded part of the subscription's `whsec_` secret.

use aws_lc_rs::hmac;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use crate::secret::SECRET_PREFIX;

/// A signing secret that is not `whsec_` followed by standard base64.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("the signing secret is not a whsec_ base64 secret")]
pub struct BadSecret;

/// The signing key of a `whsec_...` secret, decoded once.
pub struct SigningKey(hmac::Key);

impl SigningKey {
    /// Decodes a `whsec_...` secret (the prefix may be left out) into its HMAC key.
    pub fn from_secret(secret: &str) -> Result<Self, BadSecret> {
        let encoded = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
        let raw = STANDARD.decode(encoded).map_err(|_| BadSecret)?;
        if raw.is_empty() {
            return Err(BadSecret);
        }
        Ok(SigningKey(hmac::Key::new(hmac::HMAC_SHA256, &raw)))
    }

    /// The `webhook-signature` header value.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut ctx = hmac::Context::with_key(&self.0);
        ctx.update(id.as_bytes());
        ctx.update(b".");
        ctx.update(timestamp.to_string().as_bytes());
        ctx.update(b".");
        ctx.update(body);
        format!("v1,{}", STANDARD.encode(ctx.sign().as_ref()))
    }
}

/// The `webhook-signature` header of a notification signed with every key,
/// space-separated in the order given (Standard Webhooks: a receiver accepts
/// the notification if any one of them verifies with a key it holds).
pub fn signature_header(keys: &[SigningKey], id: &str, timestamp: i64, body: &[u8]) -> String {
    keys.iter()
        .map(|key| key.sign(id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_signs_once_space_separated() {
        let a = SigningKey::from_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let b = SigningKey::from_secret("whsec_c2VsZi10ZXN0LXNlY3JldC0yNC1ieXRlcw==").unwrap();
        let body = br#"{"test": 2432232314}"#;
        let header = signature_header(&[a, b], "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body);
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        assert!(parts[1].starts_with("v1,") && parts[1] != parts[0]);
    }

    #[test]
    fn matches_the_standard_webhooks_reference_vector() {
        // From the Standard Webhooks specification's test vectors.
        let key = SigningKey::from_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let sig = key.sign(
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn refuses_bad_secrets() {
        assert!(SigningKey::from_secret("whsec_%%%").is_err());
        assert!(SigningKey::from_secret("whsec_").is_err());
    }
}
