//! Random values: subscription signing secrets and handshake tokens.

use base64::Engine;

pub const SECRET_PREFIX: &str = "whsec_";

pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf).expect("the operating system provides randomness");
    buf
}

/// A Standard Webhooks signing secret: `whsec_` + base64 of 24 random bytes.
pub fn new_signing_secret() -> String {
    format!(
        "{SECRET_PREFIX}{}",
        base64::engine::general_purpose::STANDARD.encode(random_bytes::<24>())
    )
}

/// A fresh `validation-token` for a handshake: 256 random bits, hex.
pub fn validation_token() -> String {
    random_bytes::<32>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A new API key for `webhooks-local`'s generated credentials.
pub fn new_api_key() -> String {
    format!(
        "wk_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random_bytes::<24>())
    )
}
