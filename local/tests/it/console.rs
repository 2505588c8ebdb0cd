//! The web console through the `webhooks-local` binary: the page and its
//! files need no API key or token, every answer carries the strict
//! Content-Security-Policy and `nosniff`, files have their media types and
//! revalidate by ETag, unknown files are 404, and the banner's console link
//! carries the credentials in its fragment only. (The page itself is tested
//! in Chromium: `local/tests/browser/console.test.mjs`, run by
//! `scripts/console-test.sh`.)

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{Server, BIN};
use http::StatusCode;

fn csp(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("content-security-policy")
        .expect("every console answer has a CSP")
        .to_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn the_console_needs_no_credentials_and_every_answer_is_locked_down() {
    let server = Server::start();
    let http = reqwest::Client::new();
    let page = http.get(server.url("/console")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    let policy = csp(&page);
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self';",
        "frame-ancestors 'none'",
        "form-action 'none'",
        "base-uri 'none'",
        "require-trusted-types-for 'script'",
    ] {
        assert!(policy.contains(directive), "{directive} missing: {policy}");
    }
    assert!(!policy.contains("unsafe-inline") && !policy.contains("unsafe-eval"));
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    assert_eq!(page.headers()["referrer-policy"], "no-referrer");
    let html = page.text().await.unwrap();
    assert!(html.contains("console/app.js") && !html.contains("<script>"));

    for (file, media_type) in [
        ("app.js", "text/javascript; charset=utf-8"),
        ("console.css", "text/css; charset=utf-8"),
        ("icon.svg", "image/svg+xml"),
        ("config.json", "application/json"),
    ] {
        let r = http
            .get(server.url(&format!("/console/{file}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{file}");
        assert_eq!(r.headers()["content-type"], media_type, "{file}");
        assert_eq!(r.headers()["x-content-type-options"], "nosniff");
        assert_eq!(r.headers()["cache-control"], "no-cache");
        let etag = r.headers()["etag"].clone();
        csp(&r);
        let again = http
            .get(server.url(&format!("/console/{file}")))
            .header("if-none-match", etag)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "{file}");
    }
    // Without the stage too, like the API's paths.
    let bare = server.base.strip_suffix("/prod").unwrap();
    let r = http.get(format!("{bare}/console")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    for missing in [
        "/console/nothing.js",
        "/console/..%2fapi-key",
        "/console/app.js/x",
    ] {
        let r = http.get(server.url(missing)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{missing}");
        assert_eq!(r.headers()["content-type"], "application/problem+json");
        csp(&r);
    }
    let r = http.post(server.url("/console")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.headers()["allow"], "GET, HEAD");
    let r = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(server.url("/console/"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(r.headers()["location"], "../console");
    // The API itself still needs both.
    let r = http
        .get(server.url("/webhooksubscription/all"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn the_oauth_provider_comes_from_the_environment_and_may_be_connected_to() {
    let domain = "https://webhooks-test.auth.eu-west-1.amazoncognito.com";
    let server = Server::start_with(&[
        ("WEBHOOKS_CONSOLE_OAUTH_DOMAIN", domain),
        ("WEBHOOKS_CONSOLE_OAUTH_CLIENT_ID", "client123"),
    ]);
    let r = reqwest::get(server.url("/console/config.json"))
        .await
        .unwrap();
    assert!(csp(&r).contains(&format!("connect-src 'self' {domain};")));
    let doc: serde_json::Value = r.json().await.unwrap();
    assert_eq!(doc["oauth"]["clientId"], "client123");
    assert_eq!(
        doc["oauth"]["authorizationUrl"],
        format!("{domain}/oauth2/authorize")
    );
    assert_eq!(doc["oauth"]["tokenUrl"], format!("{domain}/oauth2/token"));
}

#[test]
fn a_bad_oauth_setting_stops_start_up_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env("WEBHOOKS_CONSOLE_OAUTH_DOMAIN", "http://evil.example/path")
        .env("WEBHOOKS_CONSOLE_OAUTH_CLIENT_ID", "client123")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("WEBHOOKS_CONSOLE_OAUTH_DOMAIN"), "{stderr}");
}

#[tokio::test]
async fn the_banner_links_the_console_with_the_credentials_in_the_fragment() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env_remove("WEBHOOKS_API_KEYS")
        .env_remove("WEBHOOKS_JWT_HS256_SECRET")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut banner = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let done = line.starts_with("Console");
        banner.push(line);
        if done {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    let link = banner
        .last()
        .and_then(|l| l.strip_prefix("Console (signed in):"))
        .unwrap_or_else(|| panic!("no console link in {banner:?}"))
        .trim()
        .to_owned();
    let key = std::fs::read_to_string(dir.path().join("api-key")).unwrap();
    let (page, fragment) = link
        .split_once('#')
        .expect("the credentials are in the fragment");
    assert!(
        page.ends_with("/prod/console") && !page.contains('?'),
        "{link}"
    );
    let params: Vec<(String, String)> = url::form_urlencoded::parse(fragment.as_bytes())
        .into_owned()
        .collect();
    assert_eq!(params[0], ("key".into(), key.trim().into()));
    assert_eq!(params[1].0, "token");
    // The token in the link works with the key.
    let base = page.strip_suffix("/console").unwrap();
    let r = reqwest::Client::new()
        .get(format!("{base}/webhooksubscription/all"))
        .header("x-api-key", key.trim())
        .bearer_auth(&params[1].1)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = reqwest::get(page).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    child.kill().unwrap();
    child.wait().unwrap();
}
