//! Every `code` the API can answer is documented in openapi.yaml and
//! docs/api.md: a new `ErrorCode`, or a new code of an API Gateway response
//! in template.yaml, fails here until both documents name it.

use webhook_core::error::ErrorCode;

/// Whether `code` occurs in `text` as a whole word (`TIMEOUT` is not found
/// in `STORE_TIMEOUT` or `TIMEOUTS`).
fn occurs(text: &str, code: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(code).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + code.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// The codes API Gateway itself answers with (template.yaml's
/// GatewayResponses: `"code":"..."` in their templates).
fn gateway_codes() -> Vec<String> {
    let template = read("template.yaml");
    let mut codes: Vec<String> = template
        .split("\"code\":\"")
        .skip(1)
        .filter_map(|rest| rest.split_once('"').map(|(code, _)| code.to_owned()))
        // A code, not a template variable (`$context.error.responseType`).
        .filter(|code| {
            code.starts_with(|c: char| c.is_ascii_uppercase())
                && code
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
        .collect();
    codes.sort();
    codes.dedup();
    codes
}

#[test]
fn every_error_code_is_documented_in_openapi_and_the_api_guide() {
    let openapi = read("openapi.yaml");
    let api = read("docs/api.md");
    let gateway = gateway_codes();
    // The search finds API Gateway's own codes (it cannot pass on an empty list).
    assert!(
        gateway.iter().any(|c| c == "ROUTE_NOT_FOUND"),
        "{gateway:?}"
    );
    let codes = ErrorCode::ALL
        .iter()
        .map(|c| c.as_str())
        .chain(gateway.iter().map(String::as_str));
    let mut missing = Vec::new();
    for code in codes {
        if !occurs(&openapi, code) {
            missing.push(format!("{code} in openapi.yaml"));
        }
        if !api.contains(&format!("`{code}`")) {
            missing.push(format!("{code} in docs/api.md"));
        }
    }
    assert!(missing.is_empty(), "codes not documented: {missing:#?}");
}

#[test]
fn the_search_is_for_whole_words() {
    assert!(occurs("code: TIMEOUT.", "TIMEOUT"));
    assert!(!occurs("STORE_TIMEOUT TIMEOUTS", "TIMEOUT"));
    assert!(ErrorCode::ALL.len() > 20, "the list is complete");
}

/// The text of `document` from the line `start` up to the next line that
/// starts with `end_prefix` (or the end).
fn section<'a>(document: &'a str, start: &str, end_prefix: &str) -> &'a str {
    let from = document
        .find(start)
        .unwrap_or_else(|| panic!("no {start:?} in the document"));
    let rest = &document[from + start.len()..];
    let to = rest.find(&format!("\n{end_prefix}")).unwrap_or(rest.len());
    &rest[..to]
}

fn read(relative: &str) -> String {
    let path = format!("{}/../{relative}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every code a create can answer is listed where a client looks for it:
/// the create operation of openapi.yaml, docs/api.md's "What a create can
/// answer", and, for a destination's, docs/destinations.md.
#[test]
fn every_code_a_create_can_answer_is_in_each_document() {
    use webhook_core::api::subscriptions::CREATE_CODES;
    use webhook_core::failure::CallFailure;
    // A handshake or validation answers its failing step's code.
    for step in CallFailure::ALL {
        assert!(CREATE_CODES.contains(&step.code()), "{}", step.code());
    }
    let openapi = read("openapi.yaml");
    let operation = section(&openapi, "\n  /webhooksubscription:\n", "  /");
    let api = read("docs/api.md");
    let answers = section(&api, "\n### What a create can answer\n", "#");
    let destinations = read("docs/destinations.md");
    let mut missing = Vec::new();
    for code in CREATE_CODES.iter().map(|c| c.as_str()) {
        if !occurs(operation, code) {
            missing.push(format!(
                "{code} in openapi.yaml's POST /webhooksubscription"
            ));
        }
        if !occurs(answers, code) {
            missing.push(format!(
                "{code} in docs/api.md, \"What a create can answer\""
            ));
        }
    }
    let destination_codes = CallFailure::ALL
        .iter()
        .filter(|s| {
            !matches!(
                s,
                CallFailure::DnsFailed | CallFailure::AddressForbidden | CallFailure::TlsFailed
            )
        })
        .map(|s| s.code().as_str())
        .chain([
            "DESTINATION_FORBIDDEN",
            "ROLE_TRUSTS_ANY_EXTERNAL_ID",
            "DESTINATIONS_UNAVAILABLE",
        ]);
    for code in destination_codes {
        if !occurs(&destinations, code) {
            missing.push(format!("{code} in docs/destinations.md"));
        }
    }
    assert!(missing.is_empty(), "not documented: {missing:#?}");
}
