//! The web console: a page that is one more client of the public API,
//! served at `/console` (files below `/console/`) without authentication
//! (every API call the page makes carries the API key and token as any
//! client's do). `webhooks-local` serves it before authenticating; on AWS
//! the `console` function does, on routes with no authorizer and no API key.
//!
//! Every answer carries a strict Content-Security-Policy (scripts, styles and
//! connections only from the API's own origin, plus the OAuth provider's for
//! the token calls; no inline script or style; no framing; Trusted Types
//! required, so no string can become markup), `nosniff` and caching headers:
//! the files are revalidated by their ETag (a digest of the embedded text).

pub mod assets;
pub mod config;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{HeaderMap, Method, Response, StatusCode};

use crate::error::{ApiError, ErrorCode};
use crate::http::error_response;
pub use config::ConsoleConfig;

/// The console's path below the stage.
pub const PATH: &str = "/console";

/// One console, built once per process: its configuration document and
/// Content-Security-Policy depend on the deployment.
pub struct Console {
    csp: String,
    config_json: Bytes,
    config_etag: String,
}

impl Console {
    /// The console for `config`: its configuration document, ETag and Content-Security-Policy.
    pub fn new(config: &ConsoleConfig) -> Console {
        let config_json = serde_json::to_vec(config).expect("the config serializes");
        let mut connect = String::from("'self'");
        if let Some(oauth) = &config.oauth {
            connect.push(' ');
            connect.push_str(&oauth.domain);
        }
        Console {
            csp: format!(
                "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                 connect-src {connect}; base-uri 'none'; form-action 'none'; \
                 frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'"
            ),
            config_etag: etag(&config_json),
            config_json: Bytes::from(config_json),
        }
    }

    /// The Content-Security-Policy of every answer.
    pub fn content_security_policy(&self) -> &str {
        &self.csp
    }

    /// Serves `rest`, the path after `/console` (`""` for the page,
    /// `"/app.js"` for a file), to a GET or HEAD.
    pub fn serve(&self, method: &Method, rest: &str, headers: &HeaderMap) -> Response<Bytes> {
        let mut response = self.answer(method, rest, headers);
        self.secure(response.headers_mut());
        response
    }

    fn answer(&self, method: &Method, rest: &str, headers: &HeaderMap) -> Response<Bytes> {
        if method != Method::GET && method != Method::HEAD {
            let e = ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                ErrorCode::MethodNotAllowed,
                format!("{method} is not allowed here; allowed: GET, HEAD"),
            )
            .with_header(header::ALLOW, "GET, HEAD");
            return error_response(&e);
        }
        let (content_type, body, tag) = match rest {
            "" => (
                assets::INDEX.content_type,
                Bytes::from_static(assets::INDEX.body.as_bytes()),
                etag(assets::INDEX.body.as_bytes()),
            ),
            // `/console/` would resolve the page's relative links one level
            // too deep: send the browser to the page itself.
            "/" => {
                return Response::builder()
                    .status(StatusCode::PERMANENT_REDIRECT)
                    .header(header::LOCATION, "../console")
                    .body(Bytes::new())
                    .expect("valid response")
            }
            "/config.json" => (
                "application/json",
                self.config_json.clone(),
                self.config_etag.clone(),
            ),
            _ => match rest.strip_prefix('/').and_then(assets::find) {
                Some(asset) => (
                    asset.content_type,
                    Bytes::from_static(asset.body.as_bytes()),
                    etag(asset.body.as_bytes()),
                ),
                None => return not_found(rest),
            },
        };
        let fresh = headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"));
        let builder = Response::builder()
            .header(header::ETAG, &tag)
            .header(header::CACHE_CONTROL, "no-cache");
        if fresh {
            return builder
                .status(StatusCode::NOT_MODIFIED)
                .body(Bytes::new())
                .expect("valid response");
        }
        let length = body.len();
        builder
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, content_type)
            .header(header::CONTENT_LENGTH, length)
            .body(if method == Method::HEAD {
                Bytes::new()
            } else {
                body
            })
            .expect("valid response")
    }

    fn secure(&self, headers: &mut HeaderMap) {
        let value = HeaderValue::from_str(&self.csp).expect("the policy is a valid header");
        headers.insert(header::CONTENT_SECURITY_POLICY, value);
        for (name, value) in [
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::REFERRER_POLICY, "no-referrer"),
            (
                header::HeaderName::from_static("cross-origin-opener-policy"),
                "same-origin",
            ),
            (
                header::HeaderName::from_static("cross-origin-resource-policy"),
                "same-origin",
            ),
            (
                header::HeaderName::from_static("permissions-policy"),
                "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
            ),
        ] {
            headers.insert(name, HeaderValue::from_static(value));
        }
        if !headers.contains_key(header::CACHE_CONTROL) {
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        }
    }
}

/// The part of a request path (with or without the stage) after
/// `/console`, if it is the console's: `""`, `"/"` or `"/<file>"`.
pub fn rest_of_path(path: &str) -> Option<&str> {
    let below_stage = path
        .strip_prefix(crate::routes::STAGE_PREFIX)
        .filter(|p| p.starts_with('/'))
        .unwrap_or(path);
    below_stage
        .strip_prefix(PATH)
        .filter(|rest| rest.is_empty() || rest.starts_with('/'))
}

fn not_found(rest: &str) -> Response<Bytes> {
    let shown: String = rest.chars().take(100).collect();
    error_response(&ApiError::not_found(
        ErrorCode::RouteNotFound,
        format!("the console has no file '{shown}'"),
    ))
}

/// A strong ETag: the first 16 bytes of the SHA-256 of the body, in hex.
fn etag(body: &[u8]) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, body);
    let hex: String = digest.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("\"{hex}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(console: &Console, rest: &str) -> Response<Bytes> {
        console.serve(&Method::GET, rest, &HeaderMap::new())
    }

    #[test]
    fn paths_of_the_console() {
        assert_eq!(rest_of_path("/prod/console"), Some(""));
        assert_eq!(rest_of_path("/console/app.js"), Some("/app.js"));
        assert_eq!(rest_of_path("/prod/console/"), Some("/"));
        assert_eq!(rest_of_path("/prod/consoles"), None);
        assert_eq!(rest_of_path("/prod/webhooksubscription/all"), None);
        assert_eq!(rest_of_path("/production/console"), None);
    }

    #[test]
    fn every_file_has_its_type_and_the_policy() {
        let console = Console::new(&ConsoleConfig::default());
        let page = get(&console, "");
        assert_eq!(page.status(), StatusCode::OK);
        assert_eq!(
            page.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        for asset in assets::FILES {
            let r = get(&console, &format!("/{}", asset.name));
            assert_eq!(r.status(), StatusCode::OK, "{}", asset.name);
            assert_eq!(r.headers()[header::CONTENT_TYPE], asset.content_type);
            assert_eq!(r.headers()[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
            assert!(!r.body().is_empty());
            let csp = r.headers()[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .unwrap();
            assert!(csp.contains("connect-src 'self';"), "{csp}");
            assert!(!csp.contains("unsafe"), "{csp}");
        }
        let missing = get(&console, "/nothing.js");
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
        assert!(missing
            .headers()
            .contains_key(header::CONTENT_SECURITY_POLICY));
        assert_eq!(missing.headers()[header::CACHE_CONTROL], "no-store");
        let post = console.serve(&Method::POST, "", &HeaderMap::new());
        assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(post.headers()[header::ALLOW], "GET, HEAD");
    }

    #[test]
    fn no_file_turns_text_into_markup_or_code() {
        for asset in assets::FILES.iter().chain([&assets::INDEX]) {
            for sink in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
                "new Function",
                "style=",
                "localStorage",
            ] {
                assert!(
                    !asset.body.contains(sink),
                    "{} uses {sink}: values from the API must be text",
                    asset.name
                );
            }
        }
        assert!(!assets::INDEX.body.contains("<script>"), "no inline script");
    }

    #[test]
    fn etags_revalidate() {
        let console = Console::new(&ConsoleConfig::default());
        let first = get(&console, "/app.js");
        let tag = first.headers()[header::ETAG].clone();
        assert_eq!(first.headers()[header::CACHE_CONTROL], "no-cache");
        let mut headers = HeaderMap::new();
        headers.insert(header::IF_NONE_MATCH, tag);
        let again = console.serve(&Method::GET, "/app.js", &headers);
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        assert!(again.body().is_empty());
        let head = console.serve(&Method::HEAD, "/app.js", &HeaderMap::new());
        assert!(head.body().is_empty());
        assert_eq!(
            head.headers()[header::CONTENT_LENGTH],
            first.body().len().to_string()
        );
    }

    #[test]
    fn the_oauth_domain_may_be_connected_to() {
        let config = ConsoleConfig::from_lookup(|k| match k {
            config::OAUTH_DOMAIN_VAR => Some("https://x.auth.us-east-1.amazoncognito.com".into()),
            config::OAUTH_CLIENT_ID_VAR => Some("client1".into()),
            _ => None,
        })
        .unwrap();
        let console = Console::new(&config);
        let r = get(&console, "/config.json");
        assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
        let doc: serde_json::Value = serde_json::from_slice(r.body()).unwrap();
        assert_eq!(doc["oauth"]["clientId"], "client1");
        assert!(console
            .content_security_policy()
            .contains("connect-src 'self' https://x.auth.us-east-1.amazoncognito.com;"));
    }
}
