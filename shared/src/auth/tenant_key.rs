//! The API keys of the HTTP API option (`ApiType=http`), which has no usage
//! plans: the `authorizer` checks `x-api-key` itself against keys stored in
//! DynamoDB (`aws::dynamodb::api_keys`), each bound to one organization.
//!
//! A key is `wk_<id>.<secret>`: the id (12 random bytes, base64url) names the
//! stored item, the secret (32 random bytes) is never stored. Only the key's
//! SHA-256 is kept: the secret has 256 random bits, so no salt or slow hash
//! is needed to make a stolen table useless. Digests are compared in
//! constant time.

use base64::Engine;
use subtle::ConstantTimeEq;

use crate::secret::random_bytes;

const PREFIX: &str = "wk_";
const ID_BYTES: usize = 12;
const SECRET_BYTES: usize = 32;

/// A freshly generated key: `key` is shown once, only `id` and `digest` are stored.
#[derive(Debug)]
pub struct NewTenantKey {
    /// The key's public id (`KEY_ID` of `api-keys revoke`): its item's key.
    pub id: String,
    /// The whole key, `wk_<id>.<secret>`: printed once, never stored.
    pub key: String,
    /// SHA-256 of `key`: what is stored and compared.
    pub digest: [u8; 32],
}

/// A new random key.
pub fn generate() -> NewTenantKey {
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let id = b64(&random_bytes::<ID_BYTES>());
    let key = format!("{PREFIX}{id}.{}", b64(&random_bytes::<SECRET_BYTES>()));
    let digest = digest(&key);
    NewTenantKey { id, key, digest }
}

/// The id part of a presented key, if it has the key's shape.
pub fn key_id(presented: &str) -> Option<&str> {
    let (id, secret) = presented.strip_prefix(PREFIX)?.split_once('.')?;
    let base64url = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    let valid = id.len() == base64_len(ID_BYTES)
        && secret.len() == base64_len(SECRET_BYTES)
        && base64url(id)
        && base64url(secret);
    valid.then_some(id)
}

/// Whether a key id has the shape [`generate`] gives (what `revoke` accepts).
pub fn is_key_id(id: &str) -> bool {
    id.len() == base64_len(ID_BYTES)
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// SHA-256 of the whole key.
pub fn digest(key: &str) -> [u8; 32] {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, key.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// Whether `presented` is the key whose digest is `stored`, compared in
/// constant time.
pub fn matches(stored: &[u8], presented: &str) -> bool {
    bool::from(stored.ct_eq(&digest(presented)))
}

const fn base64_len(bytes: usize) -> usize {
    (bytes * 4).div_ceil(3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_parses_to_its_id_and_matches_its_digest() {
        let new = generate();
        assert_eq!(key_id(&new.key), Some(new.id.as_str()));
        assert!(is_key_id(&new.id));
        assert!(matches(&new.digest, &new.key));
        assert!(!matches(&new.digest, &generate().key));
        assert_ne!(generate().id, new.id);
    }

    #[test]
    fn other_shapes_have_no_id() {
        let new = generate();
        let secret = new.key.split_once('.').unwrap().1;
        for bad in [
            "",
            "wk_",
            "test-api-key",
            &new.key[3..],
            &format!("wk_{}", new.id),
            &format!("wk_{}.{}x", new.id, secret),
            &format!("wk_{}#.{}", &new.id[1..], secret),
            &format!("wk_{}{}", new.id, secret),
        ] {
            assert_eq!(key_id(bad), None, "{bad}");
        }
    }
}
