//! A subscription's own headers (`customHeaders`), sent on every POST to
//! its callback and on its handshake (docs/api.md, "Custom headers";
//! docs/decisions/custom-headers.md).
//!
//! A bounded set ([`MAX_HEADERS`], [`MAX_NAME_BYTES`], [`MAX_VALUE_BYTES`],
//! [`MAX_TOTAL_BYTES`]) of HTTP field names and printable-ASCII values. A
//! name that would change what the delivery means or how it travels is
//! refused ([`reserved`]). Every value is a secret: never logged (`Debug`
//! shows the names only), returned by the API only [`mask`]ed.

use std::fmt;

use serde_json::{Map, Value};

use crate::error::FieldError;

/// At most this many headers.
pub const MAX_HEADERS: usize = 10;
/// A header's name is 1 to this many bytes.
pub const MAX_NAME_BYTES: usize = 64;
/// A header's value is 1 to this many bytes.
pub const MAX_VALUE_BYTES: usize = 1024;
/// The names and values together are at most this many bytes.
pub const MAX_TOTAL_BYTES: usize = 4096;

/// The field's name in requests, responses and errors.
pub const FIELD: &str = "customHeaders";

/// A value this long or longer is shown with its last 4 characters.
const SHOWN_TAIL_FROM: usize = 16;

/// A subscription's headers, sorted by their lower-cased names (which are
/// distinct); each name as the client spelled it.
#[derive(Clone, PartialEq, Eq)]
pub struct CustomHeaders(Vec<(String, String)>);

/// Names only: the values are secrets.
impl fmt::Debug for CustomHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(n, _)| n))
            .finish()
    }
}

impl CustomHeaders {
    /// Checks a request's `customHeaders` object: every problem is a field
    /// error naming `customHeaders` (or `customHeaders.<name>`). `{}` is no
    /// headers (`None`).
    pub fn parse(value: &Value) -> Result<Option<Self>, Vec<FieldError>> {
        let Value::Object(members) = value else {
            return Err(vec![FieldError::new(
                FIELD,
                "must be an object of header names to string values, or null",
            )]);
        };
        let mut errors = Vec::new();
        if members.len() > MAX_HEADERS {
            errors.push(FieldError::new(
                FIELD,
                format!("at most {MAX_HEADERS} headers ({} given)", members.len()),
            ));
        }
        let mut headers = Vec::with_capacity(members.len());
        let mut total = 0;
        for (name, value) in members {
            let field = format!("{FIELD}.{name}");
            total += name.len();
            if let Err(m) = check_name(name) {
                errors.push(FieldError::new(field.clone(), m));
            }
            match value {
                Value::String(v) => {
                    total += v.len();
                    match check_value(v) {
                        Ok(()) => headers.push((name.clone(), v.clone())),
                        Err(m) => errors.push(FieldError::new(field, m)),
                    }
                }
                _ => errors.push(FieldError::new(field, "must be a string")),
            }
        }
        if total > MAX_TOTAL_BYTES {
            errors.push(FieldError::new(
                FIELD,
                format!(
                    "names and values are at most {MAX_TOTAL_BYTES} bytes together ({total} given)"
                ),
            ));
        }
        headers.sort_by_key(|(n, _)| n.to_ascii_lowercase());
        for pair in headers.windows(2) {
            if pair[0].0.eq_ignore_ascii_case(&pair[1].0) {
                errors.push(FieldError::new(
                    format!("{FIELD}.{}", pair[1].0),
                    format!(
                        "the same header as {} (names are case-insensitive)",
                        pair[0].0
                    ),
                ));
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok((!headers.is_empty()).then_some(CustomHeaders(headers)))
    }

    /// The stored form: a JSON object, names sorted.
    pub fn json(&self) -> String {
        let map: Map<String, Value> = self
            .0
            .iter()
            .map(|(n, v)| (n.clone(), Value::String(v.clone())))
            .collect();
        Value::Object(map).to_string()
    }

    /// Reads the stored form back, checking it as a request's.
    pub fn from_stored(json: &str) -> Result<Self, String> {
        let value: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
        match CustomHeaders::parse(&value) {
            Ok(Some(headers)) => Ok(headers),
            Ok(None) => Err("an empty set of headers".to_owned()),
            Err(errors) => Err(errors
                .into_iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect::<Vec<_>>()
                .join("; ")),
        }
    }

    /// What the API shows: each name, its value [`mask`]ed.
    pub fn masked(&self) -> Value {
        Value::Object(
            self.0
                .iter()
                .map(|(n, v)| (n.clone(), Value::String(mask(v))))
                .collect(),
        )
    }

    /// The names and values, to send.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }
}

/// A value as the API shows it: `…` and, when it is at least 16
/// characters, its last 4 (enough to tell which token is in place, too
/// little to use it). `…` is not printable ASCII, so a masked value sent
/// back is refused, never stored.
pub fn mask(value: &str) -> String {
    let tail = match value.len() >= SHOWN_TAIL_FROM {
        true => &value[value.len() - 4..],
        false => "",
    };
    format!("…{tail}")
}

/// Whether a header name is the service's to set: the Standard Webhooks
/// headers (`webhook-*`), the trace context, the handshake's token, what
/// frames the body (`content-*`, `host`, `expect`), hop-by-hop headers
/// (RFC 9110 section 7.6.1, `proxy-*`), and `user-agent`, which names the
/// sender.
pub fn reserved(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "host",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "expect",
        "traceparent",
        "tracestate",
        "validation-token",
        "user-agent",
    ];
    const PREFIXES: &[&str] = &["webhook-", "content-", "proxy-"];
    let name = name.to_ascii_lowercase();
    NAMES.contains(&name.as_str()) || PREFIXES.iter().any(|p| name.starts_with(p))
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "a header name is 1 to {MAX_NAME_BYTES} bytes ({} given)",
            name.len()
        ));
    }
    // RFC 9110's token.
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if !name.bytes().all(tchar) {
        return Err("a header name is letters, digits and !#$%&'*+-.^_`|~ only".to_owned());
    }
    if reserved(name) {
        return Err(format!(
            "{name} is the service's to set (docs/api.md, \"Custom headers\")"
        ));
    }
    Ok(())
}

fn check_value(value: &str) -> Result<(), String> {
    if value.is_empty() || value.len() > MAX_VALUE_BYTES {
        return Err(format!(
            "a header value is 1 to {MAX_VALUE_BYTES} bytes ({} given)",
            value.len()
        ));
    }
    if !value.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return Err(
            "a header value is printable ASCII and spaces only (no CR, LF or other control \
             character; a masked value (…) cannot be sent back)"
                .to_owned(),
        );
    }
    if value.starts_with(' ') || value.ends_with(' ') {
        return Err("a header value neither starts nor ends with a space".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(v: Value) -> Vec<String> {
        CustomHeaders::parse(&v)
            .unwrap_err()
            .into_iter()
            .map(|e| e.field)
            .collect()
    }

    #[test]
    fn names_and_values_are_checked() {
        let ok = CustomHeaders::parse(&json!({"X-B": "2", "authorization": "Bearer t"}))
            .unwrap()
            .unwrap();
        assert_eq!(ok.json(), r#"{"X-B":"2","authorization":"Bearer t"}"#);
        assert_eq!(CustomHeaders::from_stored(&ok.json()).unwrap(), ok);
        assert_eq!(CustomHeaders::parse(&json!({})).unwrap(), None);
        for name in [
            "Webhook-Id",
            "traceparent",
            "Content-Type",
            "Proxy-Authorization",
            "TE",
            "a b",
            "",
        ] {
            assert_eq!(
                fields(json!({ name: "v" })),
                [format!("customHeaders.{name}")],
                "{name}"
            );
        }
        for value in [
            json!("a\r\nb"),
            json!(" a"),
            json!(""),
            json!("…abcd"),
            json!(1),
        ] {
            assert_eq!(
                fields(json!({ "X-A": value })),
                ["customHeaders.X-A"],
                "{value}"
            );
        }
        assert_eq!(
            fields(json!({"X-A": "1", "x-a": "2"})),
            ["customHeaders.x-a"]
        );
        assert_eq!(fields(json!(["X-A"])), ["customHeaders"]);
    }

    #[test]
    fn values_are_masked_and_not_debug_printed() {
        let h = CustomHeaders::parse(&json!({"A": "short", "B": "Bearer 0123456789abcdef"}))
            .unwrap()
            .unwrap();
        assert_eq!(h.masked(), json!({"A": "…", "B": "…cdef"}));
        assert_eq!(format!("{h:?}"), r#"["A", "B"]"#);
    }
}
