//! Bearer token attacks against the real verifier (`auth::jwt::Verifier`): `alg: none`,
//! algorithm confusion (HS256 signed with the RS256 public key), expired and not-yet-valid
//! tokens, wrong issuer or audience, a missing organization claim, tampering and oversized
//! tokens. RS256/ES256 keys come from a JWKS document served by a real HTTP server on
//! loopback; the keys are the test-only PEM files in `tests/keys/`.
//!
//! Every refusal is paired with a control that differs only in the one property under
//! test and is accepted, so no test passes because the token was broken some other way.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use http::StatusCode;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use webhook_core::auth::jwt::{Verifier, MAX_TOKEN_LEN};
use webhook_core::config::JwtConfig;
use webhook_core::ApiError;

const RSA_PRIVATE: &[u8] = include_bytes!("../keys/rsa_private.der");
const RSA_PUBLIC: &[u8] = include_bytes!("../keys/rsa_public.pem");
const EC_PRIVATE: &[u8] = include_bytes!("../keys/ec_private.der");
const HS_SECRET: &str = "test-hs256-secret-0123456789abcdef";
const RSA_KID: &str = "rsa-1";
const EC_KID: &str = "ec-1";

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn claims(org: &str) -> Value {
    json!({"sub": "user-1", "org_id": org, "scope": "webhooks/read webhooks/write",
           "iat": now(), "exp": now() + 600})
}

fn rsa_key() -> EncodingKey {
    EncodingKey::from_rsa_der(RSA_PRIVATE)
}

fn ec_key() -> EncodingKey {
    EncodingKey::from_ec_der(EC_PRIVATE)
}

fn sign(alg: Algorithm, kid: Option<&str>, claims: &Value, key: &EncodingKey) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

fn rs256(claims: &Value) -> String {
    sign(Algorithm::RS256, Some(RSA_KID), claims, &rsa_key())
}

fn hs256(claims: &Value) -> String {
    sign(
        Algorithm::HS256,
        None,
        claims,
        &EncodingKey::from_secret(HS_SECRET.as_bytes()),
    )
}

fn b64(v: &Value) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
}

/// A JWKS document with the RSA and EC public keys, served on loopback.
async fn serve_jwks() -> String {
    let mut rsa = Jwk::from_encoding_key(&rsa_key(), Algorithm::RS256).unwrap();
    rsa.common.key_id = Some(RSA_KID.into());
    let mut ec = Jwk::from_encoding_key(&ec_key(), Algorithm::ES256).unwrap();
    ec.common.key_id = Some(EC_KID.into());
    let body = serde_json::to_string(&JwkSet {
        keys: vec![rsa, ec],
    })
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/.well-known/jwks.json",
        axum::routing::get(move || {
            let body = body.clone();
            async move { ([(http::header::CONTENT_TYPE, "application/json")], body) }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}/.well-known/jwks.json")
}

struct Setup {
    hs256: bool,
    jwks: bool,
    issuer: Option<&'static str>,
    audience: Option<&'static str>,
}

const JWKS_ONLY: Setup = Setup {
    hs256: false,
    jwks: true,
    issuer: None,
    audience: None,
};
const BOTH: Setup = Setup {
    hs256: true,
    jwks: true,
    issuer: None,
    audience: None,
};

async fn verifier(setup: Setup) -> Verifier {
    let jwks_url = if setup.jwks {
        Some(serve_jwks().await)
    } else {
        None
    };
    Verifier::new(&JwtConfig {
        hs256_secret: setup.hs256.then(|| HS_SECRET.to_owned()),
        jwks_url,
        issuer: setup.issuer.map(str::to_owned),
        audience: setup.audience.map(str::to_owned),
        org_claim: "org_id".into(),
        scopes: Default::default(),
    })
}

/// Asserts the token is refused as 401 INVALID_TOKEN with the bearer challenge.
async fn assert_invalid(v: &Verifier, token: &str, what: &str) {
    let e: ApiError = v
        .verify(token)
        .await
        .expect_err(&format!("{what}: accepted"));
    assert_eq!(
        (e.status, e.code.as_str()),
        (StatusCode::UNAUTHORIZED, "INVALID_TOKEN"),
        "{what}: {e}"
    );
    assert!(
        e.headers
            .iter()
            .any(|(n, v)| n == http::header::WWW_AUTHENTICATE && v.contains("invalid_token")),
        "{what}: no WWW-Authenticate challenge"
    );
}

async fn assert_accepted(v: &Verifier, token: &str, org: &str, what: &str) {
    let caller = v
        .verify(token)
        .await
        .unwrap_or_else(|e| panic!("{what}: refused: {e}"));
    assert_eq!(caller.org_id, org, "{what}");
}

#[tokio::test]
async fn controls_rs256_es256_and_hs256_tokens_are_accepted() {
    let v = verifier(BOTH).await;
    assert_accepted(&v, &rs256(&claims("org-a")), "org-a", "RS256").await;
    let es = sign(Algorithm::ES256, Some(EC_KID), &claims("org-b"), &ec_key());
    assert_accepted(&v, &es, "org-b", "ES256").await;
    assert_accepted(&v, &hs256(&claims("org-c")), "org-c", "HS256").await;
}

#[tokio::test]
async fn alg_none_is_refused_in_every_spelling() {
    let v = verifier(BOTH).await;
    let payload = b64(&claims("org-a"));
    let valid_signature = rs256(&claims("org-a"))
        .rsplit('.')
        .next()
        .unwrap()
        .to_owned();
    for alg in ["none", "None", "NONE", "nOnE", ""] {
        for header in [
            json!({"alg": alg, "typ": "JWT"}),
            json!({"alg": alg, "typ": "JWT", "kid": RSA_KID}),
        ] {
            let unsigned = format!("{}.{payload}.", b64(&header));
            assert_invalid(&v, &unsigned, &format!("alg {alg:?}, empty signature")).await;
            let with_sig = format!("{}.{payload}.{valid_signature}", b64(&header));
            assert_invalid(&v, &with_sig, &format!("alg {alg:?}, copied signature")).await;
        }
    }
    let no_alg = format!("{}.{payload}.", b64(&json!({"typ": "JWT"})));
    assert_invalid(&v, &no_alg, "no alg at all").await;
}

/// The classic confusion: the attacker knows the RS256 public key (it is public) and signs
/// an HS256 token with it as the HMAC secret, hoping the verifier uses "the key" for
/// whatever algorithm the token names.
#[tokio::test]
async fn hs256_signed_with_the_rs256_public_key_is_refused() {
    let public_pem = EncodingKey::from_secret(RSA_PUBLIC);
    let public_trimmed =
        EncodingKey::from_secret(std::str::from_utf8(RSA_PUBLIC).unwrap().trim().as_bytes());
    let rsa_jwk = Jwk::from_encoding_key(&rsa_key(), Algorithm::RS256).unwrap();
    let jwk_bytes = serde_json::to_vec(&rsa_jwk).unwrap();
    let public_jwk = EncodingKey::from_secret(&jwk_bytes);
    for setup in [JWKS_ONLY, BOTH] {
        let v = verifier(setup).await;
        // Control: the real RS256 token with the same claims is accepted.
        assert_accepted(&v, &rs256(&claims("org-a")), "org-a", "RS256 control").await;
        for (name, key) in [
            ("public key PEM", &public_pem),
            ("trimmed public key PEM", &public_trimmed),
            ("public JWK JSON", &public_jwk),
        ] {
            for kid in [Some(RSA_KID), None] {
                let forged = sign(Algorithm::HS256, kid, &claims("org-a"), key);
                assert_invalid(&v, &forged, &format!("HS256 with the {name}, kid {kid:?}")).await;
            }
        }
    }
}

#[tokio::test]
async fn a_key_is_only_used_for_its_own_algorithm() {
    let v = verifier(JWKS_ONLY).await;
    // RS256 header naming the EC key, and ES256 naming the RSA key.
    let rs_with_ec_kid = sign(Algorithm::RS256, Some(EC_KID), &claims("org-a"), &rsa_key());
    assert_invalid(&v, &rs_with_ec_kid, "RS256 token naming the EC key").await;
    let es_with_rsa_kid = sign(Algorithm::ES256, Some(RSA_KID), &claims("org-a"), &ec_key());
    assert_invalid(&v, &es_with_rsa_kid, "ES256 token naming the RSA key").await;
    // RS384/PS256 use the same RSA key material; they are not configured and are refused.
    for alg in [Algorithm::RS384, Algorithm::RS512, Algorithm::PS256] {
        let t = sign(alg, Some(RSA_KID), &claims("org-a"), &rsa_key());
        assert_invalid(&v, &t, &format!("{alg:?} with the RSA key")).await;
    }
    let unknown_kid = sign(
        Algorithm::RS256,
        Some("rsa-2"),
        &claims("org-a"),
        &rsa_key(),
    );
    assert_invalid(&v, &unknown_kid, "unknown kid").await;
    let no_kid = sign(Algorithm::RS256, None, &claims("org-a"), &rsa_key());
    assert_invalid(&v, &no_kid, "RS256 without kid").await;
    // Without an HS256 secret configured, no HS256 token is accepted at all.
    assert_invalid(&v, &hs256(&claims("org-a")), "HS256 with JWKS only").await;
}

#[tokio::test]
async fn expired_and_not_yet_valid_tokens_are_refused() {
    let v = verifier(BOTH).await;
    let mut c = claims("org-a");
    c["exp"] = json!(now() - 3600);
    assert_invalid(&v, &rs256(&c), "expired an hour ago").await;
    assert_invalid(&v, &hs256(&c), "expired an hour ago (HS256)").await;
    c["exp"] = json!(now() - 120);
    assert_invalid(&v, &rs256(&c), "expired beyond the 30 s leeway").await;

    let mut c = claims("org-a");
    c["nbf"] = json!(now() + 3600);
    assert_invalid(&v, &rs256(&c), "nbf an hour ahead").await;
    assert_invalid(&v, &hs256(&c), "nbf an hour ahead (HS256)").await;
    c["nbf"] = json!(now() - 10);
    assert_accepted(&v, &rs256(&c), "org-a", "nbf in the past (control)").await;

    let mut c = claims("org-a");
    c.as_object_mut().unwrap().remove("exp");
    assert_invalid(&v, &rs256(&c), "no exp").await;
    c["exp"] = json!("tomorrow");
    assert_invalid(&v, &rs256(&c), "exp not a number").await;
}

#[tokio::test]
async fn issuer_and_audience_are_checked_when_configured() {
    let v = verifier(Setup {
        hs256: true,
        jwks: true,
        issuer: Some("https://idp.example.com/"),
        audience: Some("webhooks-api"),
    })
    .await;
    let with = |iss: Option<&str>, aud: Option<Value>| {
        let mut c = claims("org-a");
        if let Some(iss) = iss {
            c["iss"] = json!(iss);
        }
        if let Some(aud) = aud {
            c["aud"] = aud;
        }
        c
    };
    let good = with(
        Some("https://idp.example.com/"),
        Some(json!("webhooks-api")),
    );
    assert_accepted(&v, &rs256(&good), "org-a", "right iss and aud").await;
    let in_list = with(
        Some("https://idp.example.com/"),
        Some(json!(["other", "webhooks-api"])),
    );
    assert_accepted(&v, &rs256(&in_list), "org-a", "aud list holding ours").await;
    for (what, c) in [
        (
            "wrong issuer",
            with(
                Some("https://evil.example.com/"),
                Some(json!("webhooks-api")),
            ),
        ),
        (
            "issuer differing by a slash",
            with(Some("https://idp.example.com"), Some(json!("webhooks-api"))),
        ),
        ("no issuer", with(None, Some(json!("webhooks-api")))),
        (
            "wrong audience",
            with(Some("https://idp.example.com/"), Some(json!("other-api"))),
        ),
        (
            "audience list without ours",
            with(Some("https://idp.example.com/"), Some(json!(["a", "b"]))),
        ),
        ("no audience", with(Some("https://idp.example.com/"), None)),
    ] {
        assert_invalid(&v, &rs256(&c), what).await;
        assert_invalid(&v, &hs256(&c), &format!("{what} (HS256)")).await;
    }
}

#[tokio::test]
async fn a_valid_token_without_an_organization_is_forbidden() {
    let v = verifier(BOTH).await;
    let mut c = claims("org-a");
    c.as_object_mut().unwrap().remove("org_id");
    c["tenant"] = json!("org-a");
    for (what, org) in [
        ("missing", None),
        ("a number", Some(json!(42))),
        ("an array", Some(json!(["org-a"]))),
        ("empty", Some(json!(""))),
        ("not an id", Some(json!("org-a/../org-b"))),
        ("too long", Some(json!("o".repeat(65)))),
    ] {
        if let Some(org) = org {
            c["org_id"] = org;
        }
        for token in [rs256(&c), hs256(&c)] {
            let e = v.verify(&token).await.expect_err(what);
            assert_eq!(
                (e.status, e.code.as_str()),
                (StatusCode::FORBIDDEN, "ORG_CLAIM_MISSING"),
                "{what}"
            );
        }
    }
}

#[tokio::test]
async fn tampered_tokens_are_refused() {
    let v = verifier(BOTH).await;
    for token in [rs256(&claims("org-a")), hs256(&claims("org-a"))] {
        assert_accepted(&v, &token, "org-a", "untouched (control)").await;
        let parts: Vec<&str> = token.split('.').collect();
        let other_org = b64(&claims("org-b"));
        let cases = [
            (
                "payload swapped for another org",
                format!("{}.{other_org}.{}", parts[0], parts[2]),
            ),
            ("signature removed", format!("{}.{}.", parts[0], parts[1])),
            (
                "signature truncated",
                format!(
                    "{}.{}.{}",
                    parts[0],
                    parts[1],
                    &parts[2][..parts[2].len() - 4]
                ),
            ),
            (
                "header swapped (kid)",
                format!(
                    "{}.{}.{}",
                    b64(&json!({"alg": "RS256", "typ": "JWT", "kid": EC_KID})),
                    parts[1],
                    parts[2]
                ),
            ),
            ("two parts", format!("{}.{}", parts[0], parts[1])),
            ("four parts", format!("{token}.{}", parts[2])),
        ];
        for (what, forged) in cases {
            assert_invalid(&v, &forged, what).await;
        }
        // One flipped bit anywhere in the payload.
        let payload = URL_SAFE_NO_PAD.decode(parts[1]).unwrap();
        for i in (0..payload.len()).step_by(7) {
            let mut p = payload.clone();
            p[i] ^= 0x01;
            let forged = format!("{}.{}.{}", parts[0], URL_SAFE_NO_PAD.encode(&p), parts[2]);
            assert_invalid(&v, &forged, &format!("payload byte {i} flipped")).await;
        }
    }
}

#[tokio::test]
async fn oversized_tokens_are_refused_even_when_validly_signed() {
    let v = verifier(BOTH).await;
    let padded = |n: usize| {
        let mut c = claims("org-a");
        c["pad"] = json!("x".repeat(n));
        c
    };
    let small = hs256(&padded(100));
    assert_accepted(&v, &small, "org-a", "padded but small (control)").await;
    let big = hs256(&padded(MAX_TOKEN_LEN));
    assert!(big.len() > MAX_TOKEN_LEN);
    assert_invalid(&v, &big, "validly signed, over the size limit").await;
    assert_invalid(&v, &rs256(&padded(MAX_TOKEN_LEN)), "RS256 over the limit").await;
    assert_invalid(&v, &"e".repeat(1 << 20), "a megabyte of garbage").await;
}

#[tokio::test]
async fn malformed_tokens_are_refused() {
    let v = verifier(BOTH).await;
    for junk in [
        "",
        ".",
        "..",
        "a.b.c",
        "Bearer x",
        "eyJhbGciOiJIUzI1NiJ9",
        "eyJhbGciOiJIUzI1NiJ9..",
        "%%%.%%%.%%%",
        "\u{0}\u{0}.\u{0}.\u{0}",
    ] {
        assert_invalid(&v, junk, &format!("{junk:?}")).await;
    }
    // A JSON header that is not an object, and an unknown algorithm.
    let payload = b64(&claims("org-a"));
    for header in [json!([1, 2]), json!("HS256"), json!({"alg": "HS1024"})] {
        assert_invalid(&v, &format!("{}.{payload}.", b64(&header)), "odd header").await;
    }
}

#[tokio::test]
async fn jwks_is_not_refetched_for_every_unknown_kid() {
    // An attacker minting tokens with random kids must not make the service hammer the
    // identity provider: after one refetch, unknown kids are refused from the cache.
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counter = hits.clone();
    let app = axum::Router::new().route(
        "/jwks",
        axum::routing::get(move || {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { r#"{"keys":[]}"# }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let v = Verifier::new(&JwtConfig {
        hs256_secret: None,
        jwks_url: Some(format!("http://{addr}/jwks")),
        issuer: None,
        audience: None,
        org_claim: "org_id".into(),
        scopes: Default::default(),
    });
    for i in 0..20 {
        let t = sign(
            Algorithm::RS256,
            Some(&format!("kid-{i}")),
            &claims("org-a"),
            &rsa_key(),
        );
        assert_invalid(&v, &t, "unknown kid").await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_remembered_token_does_not_outlive_a_key_rotation() {
    // Verified tokens are cached until their `exp`; a refetched key set that no longer
    // holds the token's key must refuse it, as it would without the cache.
    let jwk = |key: &EncodingKey, alg, kid: &str| {
        let mut jwk = Jwk::from_encoding_key(key, alg).unwrap();
        jwk.common.key_id = Some(kid.into());
        jwk
    };
    let set = |keys| serde_json::to_string(&JwkSet { keys }).unwrap();
    let served = std::sync::Arc::new(std::sync::Mutex::new(set(vec![jwk(
        &rsa_key(),
        Algorithm::RS256,
        RSA_KID,
    )])));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let body = served.clone();
    let app = axum::Router::new().route(
        "/jwks",
        axum::routing::get(move || {
            let body = body.lock().unwrap().clone();
            async move { ([(http::header::CONTENT_TYPE, "application/json")], body) }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let v = Verifier::new(&JwtConfig {
        hs256_secret: None,
        jwks_url: Some(format!("http://{addr}/jwks")),
        issuer: None,
        audience: None,
        org_claim: "org_id".into(),
        scopes: Default::default(),
    })
    .with_jwks_min_refresh(Duration::ZERO);
    let old = rs256(&claims("org-a"));
    for _ in 0..3 {
        assert_accepted(&v, &old, "org-a", "RS256 before the rotation").await;
    }
    // The identity provider rotates: the RSA key is gone, an EC key replaces it.
    *served.lock().unwrap() = set(vec![jwk(&ec_key(), Algorithm::ES256, EC_KID)]);
    let new = sign(Algorithm::ES256, Some(EC_KID), &claims("org-b"), &ec_key());
    assert_accepted(&v, &new, "org-b", "ES256 with the new key").await;
    assert_invalid(&v, &old, "RS256 signed by the retired key").await;
    assert_accepted(&v, &new, "org-b", "ES256, remembered").await;
}
