//! The `console` function's sample events (`events/console-*.json`: API
//! Gateway requests on the console's routes, which carry no authorizer
//! context and no API key), fed to the handler its `main.rs` calls.

use testkit::sample_events;

use http::StatusCode;
use lambda_http::{Body, Response};
use webhook_core::console::{Console, ConsoleConfig};
use webhook_core::lambda::console::handle;

fn invoke(console: &Console, name: &str) -> Response<Body> {
    handle(console, sample_events::request(name)).expect("the handler never fails")
}

fn text(response: &Response<Body>) -> &str {
    match response.body() {
        Body::Text(text) => text,
        other => panic!("API Gateway REST needs text bodies, got {other:?}"),
    }
}

fn header<'a>(response: &'a Response<Body>, name: &str) -> &'a str {
    response
        .headers()
        .get(name)
        .unwrap_or_else(|| panic!("no {name}"))
        .to_str()
        .unwrap()
}

#[test]
fn the_page_is_served_without_an_authorizer() {
    let console = Console::new(&ConsoleConfig::default());
    let response = invoke(&console, "console-page");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        header(&response, "content-type"),
        "text/html; charset=utf-8"
    );
    assert!(text(&response).contains("<script type=\"module\" src=\"console/app.js\">"));
    let csp = header(&response, "content-security-policy");
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
    assert_eq!(header(&response, "x-content-type-options"), "nosniff");
}

#[test]
fn the_page_with_a_trailing_slash_redirects_to_the_page() {
    let mut event: serde_json::Value =
        serde_json::from_str(&sample_events::text("console-page")).unwrap();
    event["path"] = "/console/".into();
    event["requestContext"]["path"] = "/prod/console/".into();
    let request = lambda_http::request::from_str(&event.to_string()).unwrap();
    let console = Console::new(&ConsoleConfig::default());
    let response = handle(&console, request).unwrap();
    assert_eq!(response.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(header(&response, "location"), "../console");
}

#[test]
fn a_file_comes_from_the_proxy_path_parameter() {
    let config = ConsoleConfig::from_lookup(|var| match var {
        "WEBHOOKS_CONSOLE_OAUTH_DOMAIN" => {
            Some("https://webhooks-1.auth.us-east-1.amazoncognito.com".into())
        }
        "WEBHOOKS_CONSOLE_OAUTH_CLIENT_ID" => Some("abc123".into()),
        _ => None,
    })
    .unwrap();
    let console = Console::new(&config);
    let response = invoke(&console, "console-asset");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        header(&response, "content-type"),
        "text/javascript; charset=utf-8"
    );
    assert!(text(&response).contains("import"));
    assert!(header(&response, "content-security-policy")
        .contains("connect-src 'self' https://webhooks-1.auth.us-east-1.amazoncognito.com;"));
    assert!(header(&response, "etag").starts_with('"'));
}

#[test]
fn an_unknown_file_is_a_problem_404() {
    let console = Console::new(&ConsoleConfig::default());
    let response = invoke(&console, "console-missing");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        header(&response, "content-type"),
        "application/problem+json"
    );
    let problem: serde_json::Value = serde_json::from_str(text(&response)).unwrap();
    assert_eq!(problem["code"], "ROUTE_NOT_FOUND");
    header(&response, "content-security-policy");
}
