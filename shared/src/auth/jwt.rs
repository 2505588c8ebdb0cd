//! Bearer token (JWT) verification and minting.
//!
//! HS256 with a shared secret, or RS256/ES256 with keys from a JWKS document
//! fetched once and cached (refetched, rate limited, when a token names an
//! unknown `kid`). `alg: none` cannot be expressed, and the key type is
//! chosen from configuration, never from the token, so an HS256 token
//! signed with a public RSA key is refused (algorithm confusion).
//!
//! A verified token is remembered until its `exp` (`cache.rs`), so a client
//! that sends the same token on every request pays the checks once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde_json::{Map, Value};
use tokio::sync::RwLock;

use super::cache::{self, TokenCache};
use super::{Caller, ScopeConfig, SCOPE_READ, SCOPE_WRITE};
use crate::config::{JwtConfig, JWKS_REFRESH_MIN_INTERVAL};
use crate::error::{ApiError, ErrorCode};
use http::StatusCode;

/// Tokens longer than this are refused before any parsing.
pub const MAX_TOKEN_LEN: usize = 8 * 1024;

/// Verifies bearer tokens (HS256, or keys from the JWKS) into [`Caller`]s, remembering those that pass.
pub struct Verifier {
    hs256: Option<DecodingKey>,
    jwks: Option<JwksCache>,
    issuer: Option<String>,
    /// Accepted audiences (`WEBHOOKS_JWT_AUDIENCE`, comma-separated; e.g.
    /// the public app client and the machine client); empty: not checked.
    audiences: Vec<String>,
    org_claim: String,
    scopes: ScopeConfig,
    verified: TokenCache,
}

type KeysById = HashMap<String, (Algorithm, DecodingKey)>;

struct JwksCache {
    url: String,
    /// Built on the first fetch: a Lambda authorizer's init builds no TLS client.
    http: std::sync::OnceLock<reqwest::Client>,
    /// The keys, and when they were last fetched.
    keys: RwLock<(KeysById, Option<Instant>)>,
    min_refresh: Duration,
    /// Fetches of the key set so far: a verified token is remembered only
    /// while the key set it was verified with is the current one.
    generation: AtomicU64,
}

impl Verifier {
    /// The verifier `config` describes (`WEBHOOKS_JWT_*`); the JWKS is fetched on first use.
    pub fn new(config: &JwtConfig) -> Self {
        Verifier {
            hs256: config
                .hs256_secret
                .as_ref()
                .map(|s| DecodingKey::from_secret(s.as_bytes())),
            jwks: config.jwks_url.as_ref().map(|url| JwksCache {
                url: url.clone(),
                http: std::sync::OnceLock::new(),
                keys: RwLock::new((HashMap::new(), None)),
                min_refresh: JWKS_REFRESH_MIN_INTERVAL,
                generation: AtomicU64::new(0),
            }),
            issuer: config.issuer.clone(),
            audiences: config
                .audience
                .iter()
                .flat_map(|a| a.split(','))
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect(),
            org_claim: config.org_claim.clone(),
            scopes: config.scopes.clone(),
            verified: TokenCache::default(),
        }
    }

    /// The scope names that grant access here (`WEBHOOKS_*_SCOPES`).
    pub fn scopes(&self) -> &ScopeConfig {
        &self.scopes
    }

    /// How often an unknown `kid` may refetch the JWKS (key rotation
    /// support that a stream of forged `kid`s cannot turn into a flood).
    pub fn with_jwks_min_refresh(mut self, interval: Duration) -> Self {
        if let Some(jwks) = &mut self.jwks {
            jwks.min_refresh = interval;
        }
        self
    }

    /// Some way of verifying tokens is configured (an HS256 secret or a JWKS URL).
    pub fn is_configured(&self) -> bool {
        self.hs256.is_some() || self.jwks.is_some()
    }

    /// Verifies a token and turns its claims into a [`Caller`]; a token
    /// verified before is answered from the cache until its `exp`.
    pub async fn verify(&self, token: &str) -> Result<Caller, ApiError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(ApiError::invalid_token("the token is too long"));
        }
        let key = cache::hash(token);
        let now = jsonwebtoken::get_current_timestamp();
        // Read before the key is looked up: a rotation meanwhile makes the
        // entry stale at once.
        let generation = self
            .jwks
            .as_ref()
            .map_or(0, |j| j.generation.load(Ordering::Acquire));
        if let Some(caller) = self.verified.get(&key, now, generation) {
            return Ok(caller);
        }
        let (caller, exp) = self.verify_uncached(token).await?;
        if let Some(exp) = exp {
            self.verified
                .insert(key, caller.clone(), exp, now, generation);
        }
        Ok(caller)
    }

    /// Every check, and the token's `exp` (seconds).
    async fn verify_uncached(&self, token: &str) -> Result<(Caller, Option<u64>), ApiError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| ApiError::invalid_token("the token is not a well-formed JWT"))?;
        let (alg, key) = match header.alg {
            Algorithm::HS256 => match &self.hs256 {
                Some(key) => (Algorithm::HS256, key.clone()),
                None => return Err(ApiError::invalid_token("HS256 tokens are not accepted")),
            },
            Algorithm::RS256 | Algorithm::ES256 => match &self.jwks {
                Some(jwks) => jwks.key(header.kid.as_deref(), header.alg).await?,
                None => {
                    return Err(ApiError::invalid_token(
                        "RS256/ES256 tokens are not accepted",
                    ))
                }
            },
            other => {
                return Err(ApiError::invalid_token(format!(
                    "the token algorithm {other:?} is not accepted"
                )))
            }
        };
        let mut validation = Validation::new(alg);
        validation.validate_nbf = true;
        validation.leeway = 30;
        // A configured issuer must be present, not only right when present.
        let mut required = vec!["exp"];
        required.extend(self.issuer.as_ref().map(|_| "iss"));
        validation.set_required_spec_claims(&required);
        match &self.issuer {
            Some(iss) => validation.set_issuer(&[iss]),
            None => validation.iss = None,
        }
        // The audience is checked below: Cognito access tokens carry it as
        // `client_id`, not `aud`.
        validation.validate_aud = false;
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
            .map_err(|e| ApiError::invalid_token(describe(&e)))?;
        let claims = &data.claims;
        if claims.get("token_use").and_then(Value::as_str) == Some("id") {
            return Err(ApiError::invalid_token(
                "an ID token is not a bearer token: send the access token",
            ));
        }
        if !self.audiences.is_empty() && !self.audiences.iter().any(|a| has_audience(claims, a)) {
            return Err(ApiError::invalid_token(
                "the token audience is not accepted",
            ));
        }
        let exp = claims
            .get("exp")
            .and_then(|v| v.as_u64().or_else(|| v.as_f64().map(|f| f as u64)));
        Ok((self.caller_from_claims(claims)?, exp))
    }

    fn caller_from_claims(&self, claims: &Map<String, Value>) -> Result<Caller, ApiError> {
        let org_id = claims
            .get(&self.org_claim)
            .and_then(Value::as_str)
            .filter(|org| crate::filter::id("org", org).is_ok())
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::FORBIDDEN,
                    ErrorCode::OrgClaimMissing,
                    format!(
                        "the token has no valid organization id in claim '{}'",
                        self.org_claim
                    ),
                )
            })?;
        Ok(Caller {
            org_id: org_id.into(),
            subject: claims.get("sub").and_then(Value::as_str).map(str::to_owned),
            scopes: scopes(claims),
        })
    }
}

/// `aud` (a string or an array) names the audience, or, for an OAuth
/// access token without `aud` (Cognito's), `client_id` does.
fn has_audience(claims: &Map<String, Value>, audience: &str) -> bool {
    match claims.get("aud") {
        Some(Value::String(aud)) => aud == audience,
        Some(Value::Array(auds)) => auds.iter().any(|a| a.as_str() == Some(audience)),
        Some(_) => false,
        None => {
            claims.get("token_use").and_then(Value::as_str) == Some("access")
                && claims.get("client_id").and_then(Value::as_str) == Some(audience)
        }
    }
}

/// OAuth `scope` (space separated) or `scp` (array or string).
fn scopes(claims: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    for name in ["scope", "scp"] {
        match claims.get(name) {
            Some(Value::String(s)) => out.extend(s.split_whitespace().map(str::to_owned)),
            Some(Value::Array(items)) => {
                out.extend(items.iter().filter_map(Value::as_str).map(str::to_owned))
            }
            _ => {}
        }
    }
    out
}

fn describe(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind::*;
    match e.kind() {
        ExpiredSignature => "the token has expired".into(),
        ImmatureSignature => "the token is not valid yet".into(),
        InvalidSignature => "the token signature is invalid".into(),
        InvalidIssuer => "the token issuer is not accepted".into(),
        InvalidAudience => "the token audience is not accepted".into(),
        MissingRequiredClaim(c) => format!("the token has no '{c}' claim"),
        InvalidAlgorithm => "the token algorithm is not accepted".into(),
        _ => "the token is invalid".into(),
    }
}

impl JwksCache {
    async fn key(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<(Algorithm, DecodingKey), ApiError> {
        let kid = kid.ok_or_else(|| ApiError::invalid_token("the token has no 'kid'"))?;
        if let Some(found) = self.lookup(kid, alg).await {
            return Ok(found);
        }
        self.refresh().await;
        self.lookup(kid, alg)
            .await
            .ok_or_else(|| ApiError::invalid_token("the token was signed by an unknown key"))
    }

    async fn lookup(&self, kid: &str, alg: Algorithm) -> Option<(Algorithm, DecodingKey)> {
        let keys = self.keys.read().await;
        keys.0.get(kid).filter(|(a, _)| *a == alg).cloned()
    }

    /// Fetches the JWKS, at most once per `min_refresh`.
    async fn refresh(&self) {
        let mut keys = self.keys.write().await;
        if keys.1.is_some_and(|at| at.elapsed() < self.min_refresh) {
            return;
        }
        keys.1 = Some(Instant::now());
        match self.fetch().await {
            Ok(set) => {
                keys.0 = set;
                self.generation.fetch_add(1, Ordering::AcqRel);
            }
            Err(e) => tracing::warn!(url = %self.url, error = %e, "JWKS fetch failed"),
        }
    }

    async fn fetch(&self) -> Result<KeysById, String> {
        let http = self.http.get_or_init(|| {
            reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .no_proxy()
                .build()
                .expect("http client builds")
        });
        let body = http
            .get(&self.url)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(|e| e.to_string())?
            .bytes()
            .await
            .map_err(|e| e.to_string())?;
        let set: JwkSet = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        let mut out = HashMap::new();
        for jwk in &set.keys {
            let (Some(kid), Ok(key)) = (jwk.common.key_id.clone(), DecodingKey::from_jwk(jwk))
            else {
                continue;
            };
            let alg = match &jwk.algorithm {
                jsonwebtoken::jwk::AlgorithmParameters::RSA(_) => Algorithm::RS256,
                jsonwebtoken::jwk::AlgorithmParameters::EllipticCurve(_) => Algorithm::ES256,
                _ => continue,
            };
            out.insert(kid, (alg, key));
        }
        Ok(out)
    }
}

/// Mints an HS256 token for `webhooks-local token` and tests.
pub fn mint_hs256(
    secret: &str,
    org_claim: &str,
    org: &str,
    scopes: &[&str],
    ttl: Duration,
) -> String {
    let now = chrono::Utc::now().timestamp();
    let mut claims = Map::new();
    claims.insert("sub".into(), Value::from(format!("local:{org}")));
    claims.insert(org_claim.into(), Value::from(org));
    claims.insert("scope".into(), Value::from(scopes.join(" ")));
    claims.insert("iat".into(), Value::from(now));
    claims.insert("exp".into(), Value::from(now + ttl.as_secs() as i64));
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .expect("HS256 encoding cannot fail")
}

/// Both default scopes: a token that may read and write.
pub const ALL_SCOPES: [&str; 2] = [SCOPE_READ, SCOPE_WRITE];

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn verifier() -> Verifier {
        Verifier::new(&JwtConfig {
            hs256_secret: Some("s3cret".into()),
            jwks_url: None,
            issuer: None,
            audience: None,
            org_claim: "org_id".into(),
            scopes: Default::default(),
        })
    }

    fn b64(v: &Value) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
    }

    fn signed(claims: Value, v_secret: &str) -> String {
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(v_secret.as_bytes()),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn tells_cognito_access_tokens_from_id_tokens() {
        let v = Verifier::new(&JwtConfig {
            hs256_secret: Some("s3cret".into()),
            jwks_url: None,
            issuer: None,
            audience: Some("client-123".into()),
            org_claim: "org_id".into(),
            scopes: Default::default(),
        });
        let exp = chrono::Utc::now().timestamp() + 600;
        let access = serde_json::json!({"token_use": "access", "client_id": "client-123", "scope": "webhooks/read", "org_id": "o", "exp": exp});
        let caller = v.verify(&signed(access, "s3cret")).await.unwrap();
        assert_eq!(caller.scopes, vec![SCOPE_READ]);
        let other_client = serde_json::json!({"token_use": "access", "client_id": "client-9", "org_id": "o", "exp": exp});
        assert_eq!(
            v.verify(&signed(other_client, "s3cret"))
                .await
                .unwrap_err()
                .code,
            "INVALID_TOKEN"
        );
        let id_token =
            serde_json::json!({"token_use": "id", "aud": "client-123", "org_id": "o", "exp": exp});
        let err = v.verify(&signed(id_token, "s3cret")).await.unwrap_err();
        assert!(err.detail.contains("ID token"), "{}", err.detail);
        let aud_list = serde_json::json!({"aud": ["x", "client-123"], "org_id": "o", "exp": exp});
        assert!(v.verify(&signed(aud_list, "s3cret")).await.is_ok());
        let no_aud = serde_json::json!({"org_id": "o", "exp": exp});
        assert_eq!(
            v.verify(&signed(no_aud, "s3cret")).await.unwrap_err().code,
            "INVALID_TOKEN"
        );
    }

    #[tokio::test]
    async fn accepts_each_listed_client_and_no_other() {
        // The public client and the machine (client-credentials) client.
        let v = Verifier::new(&JwtConfig {
            hs256_secret: Some("s3cret".into()),
            jwks_url: None,
            issuer: None,
            audience: Some(" client-123 , machine-456,".into()),
            org_claim: "org_id".into(),
            scopes: Default::default(),
        });
        let exp = chrono::Utc::now().timestamp() + 600;
        let token = |client: &str| {
            signed(
                serde_json::json!({"token_use": "access", "client_id": client,
                    "scope": "webhooks/read webhooks/write", "org_id": "org-m2m", "exp": exp}),
                "s3cret",
            )
        };
        for client in ["client-123", "machine-456"] {
            let caller = v.verify(&token(client)).await.unwrap();
            assert_eq!(caller.org_id, "org-m2m", "{client}");
        }
        for client in ["machine-789", "", "client-123,machine-456"] {
            assert_eq!(
                v.verify(&token(client)).await.unwrap_err().code,
                "INVALID_TOKEN",
                "{client}"
            );
        }
        let aud = serde_json::json!({"aud": "machine-456", "org_id": "o", "exp": exp});
        assert!(v.verify(&signed(aud, "s3cret")).await.is_ok());
    }

    #[tokio::test]
    async fn accepts_a_minted_token() {
        let t = mint_hs256(
            "s3cret",
            "org_id",
            "org-1",
            &ALL_SCOPES,
            Duration::from_secs(60),
        );
        let caller = verifier().verify(&t).await.unwrap();
        assert_eq!(caller.org_id, "org-1");
        assert_eq!(caller.scopes, vec![SCOPE_READ, SCOPE_WRITE]);
    }

    #[tokio::test]
    async fn refuses_alg_none_wrong_key_tampering_and_missing_org() {
        let v = verifier();
        let none = format!(
            "{}.{}.",
            b64(&serde_json::json!({"alg": "none", "typ": "JWT"})),
            b64(&serde_json::json!({"org_id": "org-1", "exp": 9_999_999_999u64}))
        );
        assert_eq!(v.verify(&none).await.unwrap_err().code, "INVALID_TOKEN");
        let other = mint_hs256(
            "other",
            "org_id",
            "org-1",
            &ALL_SCOPES,
            Duration::from_secs(60),
        );
        assert_eq!(v.verify(&other).await.unwrap_err().code, "INVALID_TOKEN");
        let good = mint_hs256(
            "s3cret",
            "org_id",
            "org-1",
            &ALL_SCOPES,
            Duration::from_secs(60),
        );
        let parts: Vec<&str> = good.split('.').collect();
        let forged = format!(
            "{}.{}.{}",
            parts[0],
            b64(&serde_json::json!({"org_id": "org-2", "exp": 9_999_999_999u64})),
            parts[2]
        );
        assert_eq!(v.verify(&forged).await.unwrap_err().code, "INVALID_TOKEN");
        let no_org = mint_hs256(
            "s3cret",
            "tenant",
            "org-1",
            &ALL_SCOPES,
            Duration::from_secs(60),
        );
        assert_eq!(
            v.verify(&no_org).await.unwrap_err().code,
            "ORG_CLAIM_MISSING"
        );
        assert_eq!(
            v.verify(&"a".repeat(MAX_TOKEN_LEN + 1))
                .await
                .unwrap_err()
                .code,
            "INVALID_TOKEN"
        );
    }
}
