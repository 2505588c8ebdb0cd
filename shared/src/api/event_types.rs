//! The event catalogue (`webhooks_catalogue`; docs/api.md, "Event
//! catalogue"): every kind of notification the service sends, with its JSON
//! Schema and an example. The same for every organization and read from
//! nothing but the binary, so each answer is serialized once per process.

use std::sync::LazyLock;

use serde_json::{json, Value};

use crate::error::{ApiError, ErrorCode};

/// One kind as the API shows it: `{kind, description, schema, example}`.
fn entry(t: &webhooks_catalogue::EventType) -> Value {
    let schema = t.schema_json();
    json!({
        "kind": t.kind,
        "description": schema["description"],
        "example": schema["examples"][0],
        "schema": schema,
    })
}

static ENTRIES: LazyLock<Vec<(&'static str, Vec<u8>)>> = LazyLock::new(|| {
    webhooks_catalogue::ALL
        .iter()
        .map(|t| (t.kind, entry(t).to_string().into_bytes()))
        .collect()
});

static LIST: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let all: Vec<Value> = webhooks_catalogue::ALL.iter().map(entry).collect();
    json!({ "eventTypes": all }).to_string().into_bytes()
});

/// `GET /event-types`: `{"eventTypes": [...]}`, every kind in the catalogue's order.
pub fn list_event_types() -> Vec<u8> {
    LIST.clone()
}

/// `GET /event-types/{kind}`: one kind, or `404 EVENT_TYPE_NOT_FOUND`.
pub fn get_event_type(kind: &str) -> Result<Vec<u8>, ApiError> {
    ENTRIES
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, body)| body.clone())
        .ok_or_else(|| {
            ApiError::not_found(
                ErrorCode::EventTypeNotFound,
                "no such kind in the event catalogue (GET /event-types lists them)",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::NoticeKind;
    use crate::ingest::EventKind;

    /// Every kind the code can produce has its entry: each event `type`
    /// ingestion accepts, each operational notice, the destination's
    /// validation; and the catalogue has no kind the code cannot produce.
    #[test]
    fn every_kind_the_code_produces_is_catalogued() {
        let mut produced: Vec<&str> = EventKind::TYPES.to_vec();
        produced.extend(NoticeKind::ALL.map(NoticeKind::event_type));
        produced.push(crate::destinations::VALIDATION_TYPE);
        for kind in &produced {
            assert!(
                webhooks_catalogue::find(kind).is_some(),
                "{kind} is not in the catalogue"
            );
        }
        let catalogued: Vec<&str> = webhooks_catalogue::ALL.iter().map(|t| t.kind).collect();
        produced.sort_unstable();
        let mut sorted = catalogued.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted, produced,
            "the catalogue lists what the code produces"
        );
    }

    #[test]
    fn one_kind_or_a_stable_404() {
        let body: Value =
            serde_json::from_slice(&get_event_type("contact.updated").unwrap()).unwrap();
        assert_eq!(body["kind"], "contact.updated");
        assert_eq!(body["example"]["contactInfo"]["action"], "UPDATED");
        assert_eq!(body["schema"]["title"], "contact.updated");
        let e = get_event_type("contact.merged").unwrap_err();
        assert_eq!(
            (e.status.as_u16(), e.code.as_str()),
            (404, "EVENT_TYPE_NOT_FOUND")
        );
        let list: Value = serde_json::from_slice(&list_event_types()).unwrap();
        assert_eq!(
            list["eventTypes"].as_array().unwrap().len(),
            webhooks_catalogue::ALL.len()
        );
    }
}
