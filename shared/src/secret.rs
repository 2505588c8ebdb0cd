//! Random values: subscription signing secrets and handshake tokens.

use base64::Engine;

/// The prefix of a Standard Webhooks signing secret; base64 follows it.
pub const SECRET_PREFIX: &str = "whsec_";

/// `N` bytes from the operating system's random source.
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

/// Bounds of the random part of a signing secret a client supplies, in bytes.
pub const MIN_SECRET_BYTES: usize = 24;
/// The most random bytes a client-supplied signing secret may hold.
pub const MAX_SECRET_BYTES: usize = 64;

/// Checks a signing secret a client supplies: `whsec_` followed by the
/// standard base64 of 24 to 64 bytes. Answers it in canonical form (the
/// unused bits of a padded last character cleared, as every Standard
/// Webhooks library decodes it alike). The message never repeats the value.
pub fn check_signing_secret(secret: &str) -> Result<String, String> {
    use base64::engine::{
        general_purpose, DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig,
    };
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
    );
    let Some(encoded) = secret.strip_prefix(SECRET_PREFIX) else {
        return Err(format!("must start with '{SECRET_PREFIX}'"));
    };
    let raw = LENIENT
        .decode(encoded)
        .map_err(|_| format!("must be '{SECRET_PREFIX}' followed by standard base64"))?;
    if !(MIN_SECRET_BYTES..=MAX_SECRET_BYTES).contains(&raw.len()) {
        return Err(format!(
            "must encode {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} random bytes, not {}",
            raw.len()
        ));
    }
    Ok(format!(
        "{SECRET_PREFIX}{}",
        general_purpose::STANDARD.encode(raw)
    ))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supplied_secrets_are_whsec_base64_of_24_to_64_bytes() {
        let b64 = |n: usize| base64::engine::general_purpose::STANDARD.encode(vec![7u8; n]);
        let fresh = new_signing_secret();
        assert_eq!(check_signing_secret(&fresh), Ok(fresh.clone()));
        for n in [24, 32, 64] {
            let key = format!("whsec_{}", b64(n));
            assert_eq!(check_signing_secret(&key), Ok(key.clone()), "{n}");
        }
        // 25 bytes of 7 end in "Bw==" canonically; "Bx==" is the same byte
        // with an unused bit set.
        let canonical = format!("whsec_{}", b64(25));
        let sloppy = format!("{}x==", canonical.strip_suffix("w==").unwrap());
        assert_eq!(check_signing_secret(&sloppy), Ok(canonical));
        for bad in [
            format!("whsec_{}", b64(23)),
            format!("whsec_{}", b64(65)),
            b64(32),
            format!("WHSEC_{}", b64(32)),
            "whsec_".to_owned(),
            "whsec_not base64!".to_owned(),
            format!(
                "whsec_{}",
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([0xfb; 33])
            ),
        ] {
            let e = check_signing_secret(&bad).unwrap_err();
            assert!(
                bad.len() < 10 || !e.contains(&bad),
                "never echoes the value: {e}"
            );
        }
    }
}
