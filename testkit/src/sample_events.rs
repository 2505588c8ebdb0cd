//! The sample events of `events/`, read as the tests' inputs (the same files
//! `sam local invoke` and `cargo lambda invoke` are given).

/// The text of `events/<name>.json`.
pub fn text(name: &str) -> String {
    let path = format!("{}/../events/{name}.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `events/<name>.json` as JSON.
pub fn json(name: &str) -> serde_json::Value {
    serde_json::from_str(&text(name))
        .unwrap_or_else(|e| panic!("events/{name}.json is not JSON: {e}"))
}

#[cfg(feature = "aws")]
/// `events/<name>.json` as the API Gateway request Lambda hands over.
pub fn request(name: &str) -> lambda_http::Request {
    lambda_http::request::from_str(&text(name))
        .unwrap_or_else(|e| panic!("events/{name}.json is not an API Gateway event: {e}"))
}
