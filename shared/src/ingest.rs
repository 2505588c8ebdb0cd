//! Event ingestion: validate the envelope
//! (docs/decisions/event-ingestion.md), store the message,
//! fan out through the filter index, and enqueue one notification per
//! matching subscription, all through the [`Outbox`] port.

use serde::Deserialize;

use http::StatusCode;

use crate::app::App;
use crate::auth::Caller;
use crate::error::{ApiError, ErrorCode, FieldError};
use crate::filter::{self, Direction, EventFilter, Topic};
use crate::model::Message;
use crate::notification::{ContactInfo, MessageInfo, Notification};
use crate::queue::Outbox;

mod batch;
pub(crate) mod jobs;
pub use batch::{fan_out, ingest_all, FannedOut};

const MAX_TEXT_ID: usize = 256;
const MAX_RECIPIENTS: usize = 100;

/// The event envelope producers send (one per SQS message, or `POST /prod/events`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct EventEnvelope {
    /// `eventId`: deduplicates the event (a repeated id is ignored); generated when absent.
    #[serde(rename = "eventId")]
    pub event_id: Option<String>,
    /// `type`: `message.inbound`, `message.outbound`, `contact.created`, `contact.updated` or `contact.deleted`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// `organizationId`: the organization the event belongs to.
    #[serde(rename = "organizationId")]
    pub organization_id: Option<String>,
    /// `departmentId`: the department within it.
    #[serde(rename = "departmentId")]
    pub department_id: Option<String>,
    /// `occurredAt`: when it happened (epoch ms); absent: when it is ingested.
    #[serde(
        rename = "occurredAt",
        default,
        deserialize_with = "crate::model::epoch_millis"
    )]
    pub occurred_at: Option<i64>,
    /// `message`: the message of a message event (required there).
    pub message: Option<MessageInput>,
    /// `carrierMessageId`: the carrier's id of the message, passed on in `messageInfo`.
    #[serde(rename = "carrierMessageId")]
    pub carrier_message_id: Option<String>,
    /// `status`: the message's status (e.g. `RECEIVED`), passed on in `messageInfo`.
    pub status: Option<String>,
    /// `contact`: the contact of a contact event (required there).
    pub contact: Option<ContactRef>,
}

/// A message as producers send it; absent (or `null`) lists and texts default to empty.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct MessageInput {
    /// `id`: the message's id (required), by which `getmessagebyid` finds it.
    pub id: Option<String>,
    /// `owner`: the message's owner, stored as sent.
    #[serde(default)]
    pub owner: Option<String>,
    /// ISO 8601 (RFC 3339: date, time and offset) when present.
    #[serde(default)]
    pub time: Option<String>,
    /// `in` or `out`, agreeing with the event's type; derived from it when absent.
    pub direction: Option<String>,
    /// `to`: the recipients' numbers (at most 100).
    #[serde(default, deserialize_with = "null_as_default")]
    pub to: Vec<String>,
    /// `from`: the sender's number.
    #[serde(default, deserialize_with = "null_as_default")]
    pub from: String,
    /// `text`: the message's text.
    #[serde(default, deserialize_with = "null_as_default")]
    pub text: String,
    /// `media`: media references.
    #[serde(default, deserialize_with = "null_as_default")]
    pub media: Vec<String>,
    /// `attachments`: attachment references.
    #[serde(default, deserialize_with = "null_as_default")]
    pub attachments: Vec<String>,
}

/// `null` is the same as absent: the type's default (empty).
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Whether `time` is an ISO 8601 date and time with its offset (RFC 3339,
/// e.g. `2024-03-10T18:07:52.534Z` or `2024-03-10T20:07:52+02:00`).
fn is_iso_8601(time: &str) -> bool {
    chrono::DateTime::parse_from_rfc3339(time).is_ok()
}

/// The `contact` of a contact event.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ContactRef {
    /// `id`: the contact's id (required), sent as `contactInfo.contactId`.
    pub id: Option<String>,
}

/// What an event is about, from its `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// `message.inbound` or `message.outbound`.
    Message(Direction),
    /// `contact.*`, with the action sent in `contactInfo.action`: `CREATED`, `UPDATED` or `DELETED`.
    Contact(&'static str),
}

impl EventKind {
    /// Every `type` an event may have (each one [`EventKind::parse`] knows).
    pub const TYPES: [&'static str; 5] = [
        "message.inbound",
        "message.outbound",
        "contact.created",
        "contact.updated",
        "contact.deleted",
    ];

    /// The kind of a `type`; `None` for an unknown one.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "message.inbound" => EventKind::Message(Direction::Inbound),
            "message.outbound" => EventKind::Message(Direction::Outbound),
            "contact.created" => EventKind::Contact("CREATED"),
            "contact.updated" => EventKind::Contact("UPDATED"),
            "contact.deleted" => EventKind::Contact("DELETED"),
            _ => return None,
        })
    }
}

/// A validated event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The event's id, as sent or generated: deduplicates it.
    pub id: String,
    /// What it is about.
    pub kind: EventKind,
    /// Its organization.
    pub organization_id: String,
    /// Its department.
    pub department_id: String,
    /// When it happened (epoch ms).
    pub occurred_at: i64,
    /// The message of a message event, stored for `getmessagebyid`.
    pub message: Option<Message>,
    /// The carrier's message id (empty when none was sent).
    pub carrier_message_id: String,
    /// The message's status (empty when none was sent).
    pub status: String,
    /// The contact's id, for a contact event.
    pub contact_id: Option<String>,
    /// When the event was first accepted, if it carries that time (on the
    /// events queue: the message's `SentTimestamp`): its notifications are
    /// created at that time and their ids carry it
    /// ([`crate::notification::notification_id_at`]).
    pub accepted_at: Option<i64>,
    /// SQS handed the event over before (`ApproximateReceiveCount` above 1):
    /// its first try may have run on a version that recorded events.
    pub redelivered: bool,
}

impl Event {
    /// The filter this event notifies.
    pub fn filter(&self) -> EventFilter {
        let topic = match self.kind {
            EventKind::Message(d) => Topic::Message(d),
            EventKind::Contact(_) => Topic::Contact,
        };
        EventFilter::new(&self.organization_id, &self.department_id, topic)
    }
}

fn short_id(errors: &mut Vec<FieldError>, field: &str, value: Option<String>) -> String {
    match value {
        Some(v)
            if !v.is_empty()
                && v.chars().count() <= MAX_TEXT_ID
                && !v.chars().any(char::is_control) =>
        {
            v
        }
        Some(_) => {
            errors.push(FieldError::new(
                field,
                format!("must be 1 to {MAX_TEXT_ID} characters, without control characters"),
            ));
            String::new()
        }
        None => {
            errors.push(FieldError::new(field, "is required"));
            String::new()
        }
    }
}

impl EventEnvelope {
    /// Validates the envelope, reporting every problem at once.
    pub fn validate(self, now: i64) -> Result<Event, ApiError> {
        let mut errors = Vec::new();
        let kind = match self.kind.as_deref() {
            None => {
                errors.push(FieldError::new("type", "is required"));
                None
            }
            Some(k) => EventKind::parse(k).or_else(|| {
                errors.push(FieldError::new(
                    "type",
                    format!("'{k}' is not one of message.inbound, message.outbound, contact.created, contact.updated, contact.deleted"),
                ));
                None
            }),
        };
        let mut id_field = |field: &str, value: Option<String>| match value {
            None => {
                errors.push(FieldError::new(field, "is required"));
                String::new()
            }
            Some(v) => match filter::id(field, &v) {
                Ok(_) => v,
                Err(e) => {
                    errors.push(FieldError::new(field, e.to_string()));
                    String::new()
                }
            },
        };
        let organization_id = id_field("organizationId", self.organization_id);
        let department_id = id_field("departmentId", self.department_id);
        let event_id = match self.event_id {
            None => uuid::Uuid::new_v4().to_string(),
            Some(id) => short_id(&mut errors, "eventId", Some(id)),
        };
        let mut message = None;
        let mut contact_id = None;
        match kind {
            Some(EventKind::Message(direction)) => match self.message {
                None => errors.push(FieldError::new("message", "is required for message events")),
                Some(m) => {
                    let id = short_id(&mut errors, "message.id", m.id);
                    if m.to.len() > MAX_RECIPIENTS {
                        errors.push(FieldError::new(
                            "message.to",
                            format!("at most {MAX_RECIPIENTS} recipients"),
                        ));
                    }
                    let (expected, kind) = match direction {
                        Direction::Inbound => ("in", "message.inbound"),
                        Direction::Outbound => ("out", "message.outbound"),
                    };
                    if m.direction.as_deref().is_some_and(|d| d != expected) {
                        errors.push(FieldError::new(
                            "message.direction",
                            format!("must be '{expected}' for a {kind} event (or absent)"),
                        ));
                    }
                    if m.time.as_deref().is_some_and(|t| !is_iso_8601(t)) {
                        errors.push(FieldError::new(
                            "message.time",
                            "must be an ISO 8601 date and time with its offset, like 2024-03-10T18:07:52.534Z",
                        ));
                    }
                    message = Some(Message {
                        id,
                        owner: m.owner,
                        time: m.time,
                        direction: expected.to_owned(),
                        to: m.to,
                        from: m.from,
                        text: m.text,
                        media: m.media,
                        attachments: m.attachments,
                    });
                }
            },
            Some(EventKind::Contact(_)) => {
                contact_id = Some(short_id(
                    &mut errors,
                    "contact.id",
                    self.contact.and_then(|c| c.id),
                ));
            }
            None => {}
        }
        if !errors.is_empty() {
            return Err(ApiError::validation(errors));
        }
        Ok(Event {
            id: event_id,
            kind: kind.expect("validated"),
            organization_id,
            department_id,
            occurred_at: self.occurred_at.unwrap_or(now),
            message,
            carrier_message_id: self.carrier_message_id.unwrap_or_default(),
            status: self.status.unwrap_or_default(),
            contact_id,
            accepted_at: None,
            redelivered: false,
        })
    }
}

/// What ingesting one event did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Ingested {
    /// `eventId`: the event's id, as sent or generated.
    #[serde(rename = "eventId")]
    pub event_id: String,
    /// Notifications enqueued (0 for a duplicate event id).
    pub notifications: usize,
    /// The event id was ingested before: nothing was done (not sent).
    #[serde(skip)]
    pub duplicate: bool,
}

/// `POST /events`: validates the envelope and ingests it for the caller,
/// whose organization it must be (events of other organizations are the
/// platform's to send, on the events queue).
pub async fn accept(
    app: &App,
    outbox: &dyn Outbox,
    caller: &Caller,
    envelope: EventEnvelope,
) -> Result<Ingested, ApiError> {
    let event = envelope.validate(app.now_ms())?;
    if caller.org_id != event.organization_id {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::OrganizationMismatch,
            "events can only be ingested for the caller's own organization",
        ));
    }
    ingest(app, outbox, event).await
}

/// Ingests a validated event: fan-out, then one atomic commit through the outbox.
pub async fn ingest(app: &App, outbox: &dyn Outbox, event: Event) -> Result<Ingested, ApiError> {
    let fanned = fan_out(app, event).await?;
    let mut outcomes = ingest_all(app, outbox, vec![fanned]).await;
    outcomes.pop().expect("one outcome per event")
}

fn render(
    event: &Event,
    filter: &str,
    subscription_id: &str,
    uuid: &str,
    now: i64,
) -> Notification {
    let (message_info, contact_info) = match event.kind {
        EventKind::Message(_) => (
            Some(MessageInfo {
                organization_id: event.organization_id.clone(),
                department_id: event.department_id.clone(),
                last_updated: event.occurred_at,
                message_id: event
                    .message
                    .as_ref()
                    .map(|m| m.id.clone())
                    .unwrap_or_default(),
                carrier_message_id: event.carrier_message_id.clone(),
                status: event.status.clone(),
            }),
            None,
        ),
        EventKind::Contact(action) => (
            None,
            Some(ContactInfo {
                organization_id: event.organization_id.clone(),
                department_id: event.department_id.clone(),
                last_updated: event.occurred_at,
                contact_id: event.contact_id.clone().unwrap_or_default(),
                action: action.to_owned(),
            }),
        ),
    };
    Notification {
        uuid: uuid.to_owned(),
        timestamp: now,
        event: filter.to_owned(),
        subscription_id: subscription_id.to_owned(),
        message_info,
        contact_info,
        subscription_info: None,
    }
}

/// What a payload filter looks at ([`crate::payload_filter`]): the
/// notification's members that say what happened (`event`, `messageInfo`
/// or `contactInfo`) and, for a message event, the `message` as
/// `getmessagebyid` returns it (docs/api.md, "Payload filters").
pub(crate) fn payload_document(event: &Event, filter: &str) -> serde_json::Value {
    let notification = render(event, filter, "", "", 0);
    let serde_json::Value::Object(mut document) =
        serde_json::to_value(notification).expect("a notification serialises")
    else {
        unreachable!("a notification is an object")
    };
    // What differs per subscription or per try is not the event's.
    for own in ["uuid", "timestamp", "subscriptionId"] {
        document.remove(own);
    }
    if let Some(message) = &event.message {
        let message = serde_json::to_value(message).expect("a message serialises");
        document.insert("message".to_owned(), message);
    }
    serde_json::Value::Object(document)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_payload_document_holds_what_the_event_says() {
        let e = parse(
            r#"{"type":"message.inbound","organizationId":"o","departmentId":"d",
            "message":{"id":"m1","to":["+1"],"from":"+2","text":"hi"},"status":"RECEIVED"}"#,
        )
        .unwrap();
        let doc = payload_document(&e, &e.filter().to_string());
        assert_eq!(
            doc["event"],
            "/orgId/o/department/d/message?direction=inbound"
        );
        assert_eq!(doc["messageInfo"]["status"], "RECEIVED");
        assert_eq!(doc["message"]["to"][0], "+1");
        assert!(doc.get("contactInfo").is_none());
        let c = parse(r#"{"type":"contact.updated","organizationId":"o","departmentId":"d","contact":{"id":"c1"}}"#).unwrap();
        let doc = payload_document(&c, &c.filter().to_string());
        assert_eq!(doc["contactInfo"]["action"], "UPDATED");
        assert!(doc.get("message").is_none());
    }

    fn parse(json: &str) -> Result<Event, ApiError> {
        serde_json::from_str::<EventEnvelope>(json)
            .unwrap()
            .validate(42)
    }

    #[test]
    fn message_event() {
        let e = parse(r#"{"eventId":"e1","type":"message.inbound","organizationId":"o","departmentId":"d",
            "message":{"id":"m1","to":["+1"],"from":"+2","text":"hi"},"carrierMessageId":"c","status":"RECEIVED"}"#)
        .unwrap();
        assert_eq!(
            e.filter().to_string(),
            "/orgId/o/department/d/message?direction=inbound"
        );
        assert_eq!(e.occurred_at, 42);
        let m = e.message.unwrap();
        assert_eq!(
            (m.direction.as_str(), m.media.len(), m.owner),
            ("in", 0, None)
        );
    }

    #[test]
    fn contact_event() {
        let e = parse(r#"{"type":"contact.deleted","organizationId":"o","departmentId":"d","contact":{"id":"c1"}}"#).unwrap();
        assert_eq!(e.kind, EventKind::Contact("DELETED"));
        assert_eq!(e.filter().to_string(), "/orgId/o/department/d/contact");
        assert!(!e.id.is_empty(), "an event id is generated");
    }

    #[test]
    fn reports_every_problem() {
        let err = parse(r#"{"type":"message.sideways","organizationId":"o/x"}"#).unwrap_err();
        let fields: Vec<&str> = err.errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["type", "organizationId", "departmentId"]);
        let err = parse(r#"{"type":"message.outbound","organizationId":"o","departmentId":"d"}"#)
            .unwrap_err();
        assert_eq!(err.errors[0].field, "message");
        let err = parse(
            r#"{"type":"contact.created","organizationId":"o","departmentId":"d","contact":{}}"#,
        )
        .unwrap_err();
        assert_eq!(err.errors[0].field, "contact.id");
    }

    #[test]
    fn message_direction_must_agree_with_the_event_type() {
        let event = |kind: &str, direction: &str| {
            format!(
                r#"{{"type":"{kind}","organizationId":"o","departmentId":"d",
                    "message":{{"id":"m","direction":{direction}}}}}"#
            )
        };
        for (kind, direction, stored) in [
            ("message.inbound", r#""in""#, "in"),
            ("message.inbound", "null", "in"),
            ("message.outbound", r#""out""#, "out"),
            ("message.outbound", "null", "out"),
        ] {
            let e = parse(&event(kind, direction)).unwrap();
            assert_eq!(e.message.unwrap().direction, stored, "{kind} {direction}");
        }
        for (kind, direction) in [
            ("message.inbound", r#""out""#),
            ("message.outbound", r#""in""#),
            ("message.inbound", r#""IN""#),
            ("message.outbound", r#""outbound""#),
            ("message.inbound", r#""""#),
        ] {
            let err = parse(&event(kind, direction)).unwrap_err();
            assert_eq!(
                err.errors[0].field, "message.direction",
                "{kind} {direction}"
            );
        }
    }

    #[test]
    fn message_time_is_iso_8601_when_present() {
        let event = |time: &str| {
            format!(
                r#"{{"type":"message.inbound","organizationId":"o","departmentId":"d",
                    "message":{{"id":"m","time":{time}}}}}"#
            )
        };
        for ok in [
            r#""2024-03-10T18:07:52.534Z""#,
            r#""2024-03-10T20:07:52+02:00""#,
            r#""2024-03-10T18:07:52Z""#,
            "null",
        ] {
            parse(&event(ok)).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in [
            r#""yesterday""#,
            r#""2024-13-10T18:07:52Z""#,
            r#""2024-03-10""#,
            r#""1710094072534""#,
            r#""""#,
        ] {
            let err = parse(&event(bad)).unwrap_err();
            assert_eq!(err.errors[0].field, "message.time", "{bad}");
        }
    }

    #[test]
    fn null_lists_and_texts_are_empty() {
        let e = parse(
            r#"{"type":"message.outbound","organizationId":"o","departmentId":"d",
                "message":{"id":"m","media":null,"attachments":null,"to":null,"from":null,"text":null}}"#,
        )
        .unwrap();
        let m = e.message.unwrap();
        assert!(m.media.is_empty() && m.attachments.is_empty() && m.to.is_empty());
        assert_eq!((m.from.as_str(), m.text.as_str()), ("", ""));
        let wrong = serde_json::from_str::<EventEnvelope>(
            r#"{"type":"message.outbound","message":{"id":"m","media":"x"}}"#,
        );
        assert!(wrong.is_err(), "a wrong type is still an error");
    }

    proptest! {
        #[test]
        fn never_panics(json in ".{0,200}") {
            if let Ok(env) = serde_json::from_str::<EventEnvelope>(&json) {
                let _ = env.validate(0);
            }
        }
    }
}
