//! Notification payloads sent to callbacks, and their ids. Message events
//! use the spec's payload exactly (`messageInfo`); contact events carry
//! `contactInfo`; operational notices `subscriptionInfo`. The jobs that
//! deliver them are made where events and notices are ingested
//! ([`crate::ingest`]).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Namespace of notification ids: `uuid = v5(NAMESPACE, "<eventId>/<subscriptionId>")`,
/// so every retry or duplicate of one notification carries the same `uuid`.
pub const NAMESPACE: Uuid = Uuid::from_u128(0x6f2b_1c0e_5d3a_4e8b_9a41_7c2e_0b9d_4f15);

/// The `uuid` of the notification of event `event_id` to subscription `subscription_id`.
pub fn notification_id(event_id: &str, subscription_id: &str) -> Uuid {
    Uuid::new_v5(
        &NAMESPACE,
        format!("{event_id}/{subscription_id}").as_bytes(),
    )
}

/// The `uuid` of the notification of event `event_id` to subscription
/// `subscription_id` whose event carries the time `at` (epoch ms; on the
/// events queue, when SQS first accepted the message): a UUIDv8 whose first
/// 48 bits are `at`, as in a UUIDv7, and whose other bits are those of
/// [`notification_id`]. The same on every redelivery of the event, and the
/// history finds the notification's summary from the id alone
/// ([`created_at_of`]; docs/decisions/event-ingestion.md).
pub fn notification_id_at(event_id: &str, subscription_id: &str, at: i64) -> Uuid {
    let mut bytes = *notification_id(event_id, subscription_id).as_bytes();
    bytes[..6].copy_from_slice(&at.clamp(0, MAX_MILLIS).to_be_bytes()[2..]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// The largest time a 48-bit field holds (epoch ms, year 10889).
const MAX_MILLIS: i64 = (1 << 48) - 1;

/// The creation time a notification id carries: `Some` for an id of
/// [`notification_id_at`] (UUIDv8), `None` for one of [`notification_id`]
/// (UUIDv5, found through the history's notification item) or not a uuid.
pub fn created_at_of(id: &str) -> Option<i64> {
    let uuid = Uuid::parse_str(id).ok()?;
    if uuid.get_version_num() != 8 {
        return None;
    }
    let mut at = [0u8; 8];
    at[2..].copy_from_slice(&uuid.as_bytes()[..6]);
    Some(i64::from_be_bytes(at))
}

/// `body` named `uuid` and dated `at` instead of its own: what a retried
/// ingestion sends for the notification its first try named and dated (the
/// history keeps those too). `None` for a body that is not a notification.
pub(crate) fn restamped(body: &str, uuid: &str, at: i64) -> Option<String> {
    let mut notification: Notification = serde_json::from_str(body).ok()?;
    notification.uuid = uuid.to_owned();
    notification.timestamp = at;
    serde_json::to_string(&notification).ok()
}

/// The JSON body POSTed to a callback (the `Notification` schema).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notification {
    /// `uuid`: of the event id and the subscription id ([`notification_id`], or
    /// [`notification_id_at`] when the event carries its time), the same on every
    /// retry; also `webhook-id`.
    pub uuid: String,
    /// Epoch milliseconds at which the notification was created.
    pub timestamp: i64,
    /// The filter that matched.
    pub event: String,
    /// `subscriptionId`: the receiving subscription.
    #[serde(rename = "subscriptionId")]
    pub subscription_id: String,
    /// `messageInfo`: what a message event says (message events only).
    #[serde(rename = "messageInfo", skip_serializing_if = "Option::is_none")]
    pub message_info: Option<MessageInfo>,
    /// `contactInfo`: what a contact event says (contact events only).
    #[serde(rename = "contactInfo", skip_serializing_if = "Option::is_none")]
    pub contact_info: Option<ContactInfo>,
    /// Operational notifications ([`crate::notice`]): news about a subscription.
    #[serde(
        rename = "subscriptionInfo",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub subscription_info: Option<SubscriptionInfo>,
}

/// What an operational notification says about a subscription of the organization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionInfo {
    /// `organizationId`: the organization of the subscription it is about.
    pub organization_id: String,
    /// The subscription the news is about.
    pub subscription_id: String,
    /// `uri`: that subscription's callback.
    pub uri: String,
    /// `subscription.failing`, `subscription.recovered`, `subscription.disabled`,
    /// `notification.exhausted` or `subscription.expiring`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its status (`ACTIVE`, `BLACKLISTED`, `EXPIRED`).
    pub status: String,
    /// ISO 8601, as the subscription resource has it.
    pub expiration_time: String,
    /// `consecutiveFailures`: its failed attempts in a row (for `recovered`, the streak that ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive_failures: Option<u32>,
    /// The notification that ran out of retries (`notification.exhausted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notification_id: Option<String>,
    /// `lastAttempt`: the attempt that caused this notification, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempt: Option<LastAttempt>,
}

/// The attempt that caused an operational notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastAttempt {
    /// Epoch milliseconds when the POST started.
    pub timestamp: i64,
    /// Absent when nothing answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// The failing step (`TIMEOUT`, `BAD_STATUS`, ...); absent on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// `durationMs`: how long the POST took, ms.
    pub duration_ms: u64,
}

/// The `messageInfo` of a message event's notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageInfo {
    /// `organizationId`: the event's organization.
    #[serde(rename = "organizationId")]
    pub organization_id: String,
    /// `departmentId`: the event's department.
    #[serde(rename = "departmentId")]
    pub department_id: String,
    /// `lastUpdated`: when the event occurred (epoch ms).
    #[serde(rename = "lastUpdated")]
    pub last_updated: i64,
    /// `messageId`: fetch the message with `GET /message/getmessagebyid/{messageId}`.
    #[serde(rename = "messageId")]
    pub message_id: String,
    /// `carrierMessageId`: the carrier's id of the message, as the event sent it.
    #[serde(rename = "carrierMessageId")]
    pub carrier_message_id: String,
    /// `status`: the message's status, as the event sent it.
    pub status: String,
}

/// The `contactInfo` of a contact event's notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContactInfo {
    /// `organizationId`: the event's organization.
    #[serde(rename = "organizationId")]
    pub organization_id: String,
    /// `departmentId`: the event's department.
    #[serde(rename = "departmentId")]
    pub department_id: String,
    /// `lastUpdated`: when the event occurred (epoch ms).
    #[serde(rename = "lastUpdated")]
    pub last_updated: i64,
    /// `contactId`: the contact the event is about.
    #[serde(rename = "contactId")]
    pub contact_id: String,
    /// `CREATED`, `UPDATED` or `DELETED`.
    pub action: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_distinct() {
        assert_eq!(notification_id("e1", "s1"), notification_id("e1", "s1"));
        assert_ne!(notification_id("e1", "s1"), notification_id("e1", "s2"));
        assert_ne!(notification_id("e1", "s1"), notification_id("e2", "s1"));
        assert_eq!(notification_id("e1", "s1").get_version_num(), 5);
    }

    #[test]
    fn timed_ids_carry_their_time_and_are_stable() {
        let at = 1_764_237_600_123;
        let id = notification_id_at("e1", "s1", at);
        assert_eq!(id, notification_id_at("e1", "s1", at));
        assert_ne!(id, notification_id_at("e1", "s2", at));
        assert_ne!(id, notification_id_at("e2", "s1", at));
        assert_ne!(id, notification_id_at("e1", "s1", at + 1));
        assert_eq!(id.get_version_num(), 8);
        assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
        assert_eq!(created_at_of(&id.to_string()), Some(at));
        // Ids of the same time sort by it, like UUIDv7s.
        assert!(notification_id_at("e9", "s9", at - 1).to_string() < id.to_string());
        assert_eq!(
            created_at_of(&notification_id("e1", "s1").to_string()),
            None
        );
        assert_eq!(created_at_of("not-a-uuid"), None);
    }

    #[test]
    fn message_payload_has_exactly_the_spec_fields() {
        let n = Notification {
            uuid: "u".into(),
            timestamp: 1,
            event: "/orgId/o/department/d/message?direction=inbound".into(),
            subscription_id: "s".into(),
            message_info: Some(MessageInfo {
                organization_id: "o".into(),
                department_id: "d".into(),
                last_updated: 2,
                message_id: "m".into(),
                carrier_message_id: "c".into(),
                status: "RECEIVED".into(),
            }),
            contact_info: None,
            subscription_info: None,
        };
        let v = serde_json::to_value(&n).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "event",
                "messageInfo",
                "subscriptionId",
                "timestamp",
                "uuid"
            ]
        );
        let info: Vec<&String> = v["messageInfo"].as_object().unwrap().keys().collect();
        assert_eq!(
            info,
            [
                "carrierMessageId",
                "departmentId",
                "lastUpdated",
                "messageId",
                "organizationId",
                "status"
            ]
        );
    }
}
