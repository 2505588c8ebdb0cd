//! Bearer token verification (header and claims handling): any input is refused with 401
//! or 403 and never accepted, as the fuzzer cannot know the HS256 secret. A second input
//! form signs fuzzer-chosen claims with the right secret, to exercise claims handling.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use webhook_core::auth::jwt::Verifier;
use webhook_core::config::JwtConfig;

const SECRET: &str = "fuzz-secret";

fn verifier() -> &'static (Verifier, tokio::runtime::Runtime) {
    static V: OnceLock<(Verifier, tokio::runtime::Runtime)> = OnceLock::new();
    V.get_or_init(|| {
        let v = Verifier::new(&JwtConfig {
            hs256_secret: Some(SECRET.into()),
            jwks_url: None,
            issuer: Some("https://idp.example.com/".into()),
            audience: None,
            org_claim: "org_id".into(),
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        (v, rt)
    })
}

fn b64(data: &[u8]) -> String {
    use std::fmt::Write;
    // base64url without padding, written out to avoid another dependency.
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..=chunk.len() {
            let _ = out.write_char(A[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let (v, rt) = verifier();
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // 1. The raw token.
    if let Ok(caller) = rt.block_on(v.verify(text)) {
        panic!("an unsigned fuzz input was accepted: {caller:?}");
    }
    // 2. "header\npayload": fuzzer-chosen JSON, base64url-encoded, with a garbage
    //    signature: must be refused whatever the header says (alg none, other algs, kid).
    if let Some((header, payload)) = text.split_once('\n') {
        let token = format!(
            "{}.{}.{}",
            b64(header.as_bytes()),
            b64(payload.as_bytes()),
            b64(b"sig")
        );
        if let Ok(caller) = rt.block_on(v.verify(&token)) {
            panic!("a token with a forged signature was accepted: {caller:?}");
        }
    }
});
