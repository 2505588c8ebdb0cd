//! Standard Webhooks signatures, one per key in `webhook-signature`:
//!
//! - `v1,<base64 HMAC-SHA256 over "<webhook-id>.<webhook-timestamp>.<body>">`,
//!   keyed with the base64-decoded part of a `whsec_` secret;
//! - `v1a,<base64 ed25519 signature over the same bytes>`, with a `whsk_`
//!   private key (base64 of its 32-byte seed and 32-byte public key); the
//!   receiver verifies with the `whpk_` public key (base64 of its 32 bytes).
//!
//! A subscription's scheme is the kind of its current key: nothing else is
//! stored (docs/decisions/ed25519-signatures.md).

use aws_lc_rs::hmac;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair, UnparsedPublicKey, ED25519};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use crate::secret::{random_bytes, SECRET_PREFIX};

/// The prefix of a `v1a` (ed25519) private key; base64 follows it.
pub const PRIVATE_KEY_PREFIX: &str = "whsk_";
/// The prefix of a `v1a` (ed25519) public key; base64 follows it.
pub const PUBLIC_KEY_PREFIX: &str = "whpk_";

/// How a subscription's notifications are signed (`signatureScheme`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureScheme {
    /// `v1`: HMAC-SHA256 with a shared `whsec_` secret (the default).
    V1,
    /// `v1a`: ed25519; the service alone holds the private key.
    V1a,
}

impl SignatureScheme {
    /// Its name in the API and in `webhook-signature`.
    pub fn as_str(self) -> &'static str {
        match self {
            SignatureScheme::V1 => "v1",
            SignatureScheme::V1a => "v1a",
        }
    }

    /// The scheme named `name` (`v1` or `v1a`).
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "v1" => Some(SignatureScheme::V1),
            "v1a" => Some(SignatureScheme::V1a),
            _ => None,
        }
    }

    /// The scheme of a stored key: `v1a` for a `whsk_` key, else `v1`.
    pub fn of_key(key: &str) -> Self {
        if key.starts_with(PRIVATE_KEY_PREFIX) {
            SignatureScheme::V1a
        } else {
            SignatureScheme::V1
        }
    }

    /// A new key of this scheme, from the operating system's random source.
    pub fn new_key(self) -> String {
        match self {
            SignatureScheme::V1 => crate::secret::new_signing_secret(),
            SignatureScheme::V1a => new_private_key(),
        }
    }
}

/// A `whsk_` private key: a random 32-byte seed and its public key.
fn new_private_key() -> String {
    let seed = random_bytes::<32>();
    let pair = Ed25519KeyPair::from_seed_unchecked(&seed).expect("any 32 bytes are a seed");
    let mut raw = seed.to_vec();
    raw.extend_from_slice(pair.public_key().as_ref());
    format!("{PRIVATE_KEY_PREFIX}{}", STANDARD.encode(raw))
}

/// The `whpk_` public key of a stored `whsk_` private key; `None` for any
/// other key (a `whsec_` secret has none) or one that does not decode.
pub fn public_key(key: &str) -> Option<String> {
    let pair = ed25519_pair(key.strip_prefix(PRIVATE_KEY_PREFIX)?).ok()?;
    Some(format!(
        "{PUBLIC_KEY_PREFIX}{}",
        STANDARD.encode(pair.public_key().as_ref())
    ))
}

/// The key pair of a `whsk_` key's base64: seed then public key, which
/// must agree.
fn ed25519_pair(encoded: &str) -> Result<Ed25519KeyPair, BadSecret> {
    let raw = STANDARD.decode(encoded).map_err(|_| BadSecret)?;
    if raw.len() != 64 {
        return Err(BadSecret);
    }
    Ed25519KeyPair::from_seed_and_public_key(&raw[..32], &raw[32..]).map_err(|_| BadSecret)
}

/// A signing key that is neither a `whsec_` secret nor a `whsk_` key.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("the signing key is not a whsec_ secret or a whsk_ ed25519 key")]
pub struct BadSecret;

/// A subscription's signing key, decoded once.
// At most 11 keys, held for one delivery: the HMAC variant's size costs
// nothing, where a box would add an allocation to every `v1` delivery.
#[allow(clippy::large_enum_variant)]
pub enum SigningKey {
    /// `v1`: HMAC-SHA256.
    Hmac(hmac::Key),
    /// `v1a`: ed25519.
    Ed25519(Ed25519KeyPair),
}

impl SigningKey {
    /// Decodes a `whsk_` key, or a `whsec_...` secret (whose prefix may be
    /// left out).
    pub fn from_secret(secret: &str) -> Result<Self, BadSecret> {
        if let Some(encoded) = secret.strip_prefix(PRIVATE_KEY_PREFIX) {
            return ed25519_pair(encoded).map(SigningKey::Ed25519);
        }
        let encoded = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
        let raw = STANDARD.decode(encoded).map_err(|_| BadSecret)?;
        if raw.is_empty() {
            return Err(BadSecret);
        }
        Ok(SigningKey::Hmac(hmac::Key::new(hmac::HMAC_SHA256, &raw)))
    }

    /// This key's signature in `webhook-signature`: `v1,...` or `v1a,...`.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        match self {
            SigningKey::Hmac(key) => {
                let mut ctx = hmac::Context::with_key(key);
                ctx.update(id.as_bytes());
                ctx.update(b".");
                ctx.update(timestamp.to_string().as_bytes());
                ctx.update(b".");
                ctx.update(body);
                format!("v1,{}", STANDARD.encode(ctx.sign().as_ref()))
            }
            SigningKey::Ed25519(pair) => {
                // ed25519 hashes the message twice: it needs it whole.
                let mut message = Vec::with_capacity(id.len() + body.len() + 22);
                message.extend_from_slice(id.as_bytes());
                message.push(b'.');
                message.extend_from_slice(timestamp.to_string().as_bytes());
                message.push(b'.');
                message.extend_from_slice(body);
                format!("v1a,{}", STANDARD.encode(pair.sign(&message).as_ref()))
            }
        }
    }
}

/// A `whpk_` public key: what a receiver of a `v1a` subscription checks
/// its notifications with (`webhooks-local listen` and `verify` do).
pub struct PublicKey(UnparsedPublicKey<Vec<u8>>);

impl PublicKey {
    /// Decodes a `whpk_` key; `None` for anything else.
    pub fn parse(key: &str) -> Option<Self> {
        let raw = STANDARD.decode(key.strip_prefix(PUBLIC_KEY_PREFIX)?).ok()?;
        (raw.len() == 32).then(|| PublicKey(UnparsedPublicKey::new(&ED25519, raw)))
    }

    /// Whether one of the space-separated signatures of a `webhook-signature`
    /// header is this key's `v1a` signature of `id`, `timestamp` and `body`.
    pub fn verifies(&self, header: &str, id: &str, timestamp: &str, body: &[u8]) -> bool {
        let message = [id.as_bytes(), b".", timestamp.as_bytes(), b".", body].concat();
        header
            .split(' ')
            .filter_map(|s| s.strip_prefix("v1a,"))
            .filter_map(|s| STANDARD.decode(s).ok())
            .any(|signature| self.0.verify(&message, &signature).is_ok())
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
    fn a_v1a_key_signs_what_its_public_key_verifies() {
        use aws_lc_rs::signature::{UnparsedPublicKey, ED25519};
        let key = SignatureScheme::V1a.new_key();
        assert_eq!(SignatureScheme::of_key(&key), SignatureScheme::V1a);
        let public = public_key(&key).unwrap();
        let raw = STANDARD
            .decode(public.strip_prefix("whpk_").unwrap())
            .unwrap();
        assert_eq!(raw.len(), 32);
        let sig = SigningKey::from_secret(&key)
            .unwrap()
            .sign("msg_1", 1614265330, b"{}");
        let sig = STANDARD.decode(sig.strip_prefix("v1a,").unwrap()).unwrap();
        let verifier = UnparsedPublicKey::new(&ED25519, &raw);
        assert!(verifier.verify(b"msg_1.1614265330.{}", &sig).is_ok());
        assert!(verifier.verify(b"msg_1.1614265331.{}", &sig).is_err());
        assert_eq!(public_key(&SignatureScheme::V1.new_key()), None);
    }

    #[test]
    fn a_public_key_verifies_its_v1a_signatures_only() {
        let key = SignatureScheme::V1a.new_key();
        let public = PublicKey::parse(&public_key(&key).unwrap()).unwrap();
        let signed = SigningKey::from_secret(&key)
            .unwrap()
            .sign("msg_1", 1614265330, b"{}");
        let other = SigningKey::from_secret(&SignatureScheme::V1a.new_key())
            .unwrap()
            .sign("msg_1", 1614265330, b"{}");
        let hmac = SigningKey::from_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            .unwrap()
            .sign("msg_1", 1614265330, b"{}");
        assert!(public.verifies(&signed, "msg_1", "1614265330", b"{}"));
        assert!(public.verifies(
            &format!("{hmac} {other} {signed}"),
            "msg_1",
            "1614265330",
            b"{}"
        ));
        assert!(
            !public.verifies(&signed, "msg_1", "1614265331", b"{}"),
            "another timestamp"
        );
        assert!(
            !public.verifies(&signed, "msg_1", "1614265330", b"{ }"),
            "another body"
        );
        assert!(!public.verifies(&format!("{hmac} {other}"), "msg_1", "1614265330", b"{}"));
        assert!(!public.verifies(
            &signed.replacen("v1a,", "v1,", 1),
            "msg_1",
            "1614265330",
            b"{}"
        ));
        assert!(
            PublicKey::parse(&key).is_none(),
            "a private key is no public key"
        );
        assert!(PublicKey::parse("whpk_AAAA").is_none(), "too short");
    }

    #[test]
    fn a_v1a_key_is_its_seed_then_its_public_key() {
        // RFC 8032, 7.1, test 1: the public key of this seed.
        let hex = |s: &str| -> Vec<u8> {
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
                .collect()
        };
        let seed = hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60");
        let public = hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
        let key = format!(
            "whsk_{}",
            STANDARD.encode([seed.clone(), public.clone()].concat())
        );
        assert_eq!(
            public_key(&key),
            Some(format!("whpk_{}", STANDARD.encode(&public)))
        );
        // A public half that is not the seed's is refused.
        let mut wrong = public.clone();
        wrong[0] ^= 1;
        let bad = format!("whsk_{}", STANDARD.encode([seed.clone(), wrong].concat()));
        assert!(SigningKey::from_secret(&bad).is_err());
        assert!(SigningKey::from_secret(&format!("whsk_{}", STANDARD.encode(&seed))).is_err());
        assert!(SigningKey::from_secret("whsk_%%%").is_err());
    }

    #[test]
    fn refuses_bad_secrets() {
        assert!(SigningKey::from_secret("whsec_%%%").is_err());
        assert!(SigningKey::from_secret("whsec_").is_err());
    }
}
