//! The event catalogue (docs/api.md, "Event catalogue"): every kind of
//! notification the service sends, one JSON Schema (2020-12) per kind in
//! `schemas/`, each with its description and an example. This crate is
//! their one copy: webhook-core serves them (`GET /event-types`), and the
//! test receiver (`testkit::catalogue`) validates every body it receives
//! against them, so the files cannot drift from the code.

use serde_json::Value;

/// One kind of notification: its name and its schema's text.
#[derive(Debug, Clone, Copy)]
pub struct EventType {
    /// The kind, e.g. `message.inbound`: the schema's `title`.
    pub kind: &'static str,
    /// The JSON Schema document, as in `schemas/<kind>.json`.
    pub schema: &'static str,
}

macro_rules! kind {
    ($kind:literal) => {
        EventType {
            kind: $kind,
            schema: include_str!(concat!("../schemas/", $kind, ".json")),
        }
    };
}

/// The destination validation's kind (also its body's `type`).
pub const DESTINATION_VALIDATION: &str = "webhooks.destination.validation";

/// Every kind, in the order the API lists them.
pub const ALL: &[EventType] = &[
    kind!("message.inbound"),
    kind!("message.outbound"),
    kind!("contact.created"),
    kind!("contact.updated"),
    kind!("contact.deleted"),
    kind!("subscription.failing"),
    kind!("subscription.recovered"),
    kind!("subscription.disabled"),
    kind!("notification.exhausted"),
    kind!("subscription.expiring"),
    kind!("webhooks.destination.validation"),
];

/// The kind named `kind`, if the catalogue has it.
pub fn find(kind: &str) -> Option<&'static EventType> {
    ALL.iter().find(|t| t.kind == kind)
}

impl EventType {
    /// The schema as JSON (the files are checked to parse by the tests).
    pub fn schema_json(&self) -> Value {
        serde_json::from_str(self.schema).expect("the catalogue's schemas are JSON")
    }
}

/// The kind of a body the service sent, read from the body alone (what a
/// receiver does): `subscriptionInfo.type` for an operational notification,
/// `contactInfo.action` for a contact, the filter's direction for a message,
/// `type` for a destination's validation. `None` for none of these.
pub fn kind_of(body: &Value) -> Option<String> {
    if body["type"] == DESTINATION_VALIDATION {
        return Some(DESTINATION_VALIDATION.to_owned());
    }
    if let Some(kind) = body["subscriptionInfo"]["type"].as_str() {
        return Some(kind.to_owned());
    }
    if let Some(action) = body["contactInfo"]["action"].as_str() {
        return Some(format!("contact.{}", action.to_ascii_lowercase()));
    }
    if body["messageInfo"].is_object() {
        let event = body["event"].as_str()?;
        let (_, direction) = event.rsplit_once("?direction=")?;
        return Some(format!("message.{direction}"));
    }
    None
}
