//! Every body a test receives, checked against the event catalogue
//! (`catalogue/schemas/`, docs/api.md "Event catalogue"): its kind read from
//! the body, then its kind's JSON Schema, by an implementation of JSON
//! Schema the service itself does not use. The [`Receiver`](crate::Receiver)
//! checks each notification it records and fails the test that reads them
//! on a mismatch, so the catalogue cannot drift from what the code sends.

use std::collections::HashMap;
use std::sync::LazyLock;

use jsonschema::Validator;
use serde_json::Value;

static VALIDATORS: LazyLock<HashMap<&'static str, Validator>> = LazyLock::new(|| {
    webhooks_catalogue::ALL
        .iter()
        .map(|t| {
            let validator = jsonschema::draft202012::new(&t.schema_json())
                .unwrap_or_else(|e| panic!("the schema of {} is not valid: {e}", t.kind));
            (t.kind, validator)
        })
        .collect()
});

/// Why `body` is not a notification of the catalogue: it is not JSON, its
/// kind is not in the catalogue, or it does not validate against its kind's
/// schema (every error, with its place). `Ok` with the kind otherwise.
pub fn check(body: &[u8]) -> Result<String, String> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| format!("the body is not JSON ({e}): {}", shown(body)))?;
    check_value(&value)
}

/// [`check`] of a body already parsed.
pub fn check_value(value: &Value) -> Result<String, String> {
    let kind = webhooks_catalogue::kind_of(value)
        .ok_or_else(|| format!("the body is of no kind of the catalogue: {value}"))?;
    let validator = VALIDATORS
        .get(kind.as_str())
        .ok_or_else(|| format!("the catalogue has no kind {kind:?}: {value}"))?;
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at '{}'", e, e.instance_path()))
        .collect();
    if errors.is_empty() {
        Ok(kind)
    } else {
        Err(format!(
            "a {kind} notification does not match its schema: {}; body: {value}",
            errors.join("; ")
        ))
    }
}

fn shown(body: &[u8]) -> String {
    String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind's example validates against its own schema, is of its
    /// kind, and its schema says what the API lists (title, description).
    #[test]
    fn every_example_validates_as_its_kind() {
        assert!(webhooks_catalogue::ALL.len() >= 11);
        for t in webhooks_catalogue::ALL {
            let schema = t.schema_json();
            assert_eq!(schema["title"], t.kind);
            assert_eq!(
                schema["$schema"],
                "https://json-schema.org/draft/2020-12/schema"
            );
            assert!(schema["description"].as_str().is_some_and(|d| d.len() > 20));
            let examples = schema["examples"].as_array().expect("examples");
            assert_eq!(examples.len(), 1, "{}", t.kind);
            assert_eq!(check_value(&examples[0]), Ok(t.kind.to_owned()));
        }
    }

    /// The check can fail: a field missing, one of the wrong type, one too
    /// many, or a body of another kind's shape each refused.
    #[test]
    fn a_body_off_its_schema_is_refused() {
        let example = |kind: &str| {
            webhooks_catalogue::find(kind).unwrap().schema_json()["examples"][0].clone()
        };
        let mut missing = example("message.inbound");
        missing["messageInfo"]
            .as_object_mut()
            .unwrap()
            .remove("messageId");
        let mut wrong_type = example("contact.deleted");
        wrong_type["timestamp"] = "yesterday".into();
        let mut extra = example("subscription.expiring");
        extra["subscriptionInfo"]["notificationId"] = example("message.inbound")["uuid"].clone();
        let mut other_direction = example("message.outbound");
        other_direction["event"] = "/orgId/o/department/d/message?direction=sideways".into();
        for (body, says) in [
            (missing, "messageId"),
            (wrong_type, "yesterday"),
            (extra, "notificationId"),
            (other_direction, "sideways"),
        ] {
            let e = check_value(&body).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
        assert!(check(b"not json").unwrap_err().contains("not JSON"));
        assert!(check(br#"{"hello": 1}"#).unwrap_err().contains("no kind"));
    }
}
