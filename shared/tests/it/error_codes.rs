//! Every `code` the API can answer is documented in openapi.yaml: a new
//! `ErrorCode` fails here until the document names it.

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

#[test]
fn every_error_code_is_documented_in_openapi() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi.yaml");
    let document = std::fs::read_to_string(path).expect("openapi.yaml beside the workspace");
    let missing: Vec<&str> = ErrorCode::ALL
        .iter()
        .map(|c| c.as_str())
        .filter(|c| !occurs(&document, c))
        .collect();
    assert!(missing.is_empty(), "codes not in openapi.yaml: {missing:?}");
}

#[test]
fn the_search_is_for_whole_words() {
    assert!(occurs("code: TIMEOUT.", "TIMEOUT"));
    assert!(!occurs("STORE_TIMEOUT TIMEOUTS", "TIMEOUT"));
    assert!(ErrorCode::ALL.len() > 20, "the list is complete");
}
