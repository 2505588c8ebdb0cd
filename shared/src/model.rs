//! Wire types of the public interface. Field names follow the original interface exactly
//! (`openapi.yaml` documents them).

use serde::{Deserialize, Serialize};

/// Body of `POST /webhooksubscription`. Fields are optional here so that
/// validation can report every missing field at once.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SubscriptionRequest {
    /// `uri`: the callback URL notifications are POSTed to (absolute `https`, at most 2048 bytes).
    pub uri: Option<String>,
    /// `eventFilters`: 1 to 20 distinct filters saying which events it receives.
    #[serde(rename = "eventFilters")]
    pub event_filters: Option<Vec<String>>,
    /// The spec's spelling, with the correct spelling accepted as an alias.
    #[serde(
        rename = "expiresDateInMillies",
        alias = "expiresDateInMillis",
        default,
        deserialize_with = "epoch_millis"
    )]
    pub expires_date_in_millies: Option<i64>,
    /// `ordered` (an addition to the original interface): deliver in
    /// acceptance order, one at a time. Absent: false on create, unchanged on update.
    #[serde(default)]
    pub ordered: Option<bool>,
    /// `rateLimit` (an addition): notifications per second, an integer from
    /// 1 to 1000; `0` removes the limit; absent (or `null`) keeps what is
    /// stored (none for a new subscription). Kept as sent, validated with the
    /// other fields.
    #[serde(rename = "rateLimit", default)]
    pub rate_limit: Option<serde_json::Value>,
    /// `destination` (an addition): an AWS destination instead of an HTTPS
    /// callback (docs/decisions/destinations.md); its ARN becomes the `uri`.
    #[serde(default)]
    pub destination: Option<DestinationRequest>,
    /// `payloadFilter` (an addition): which events' contents it receives
    /// ([`crate::payload_filter`]). Absent keeps what is stored (none for a
    /// new subscription); `null` removes it; a filter replaces it.
    #[serde(rename = "payloadFilter", default, deserialize_with = "present")]
    pub payload_filter: Option<Option<serde_json::Value>>,
    /// `retrySchedule` (an addition): the waits after its failed attempts
    /// ([`crate::retry_schedule`]), in place of the deployment's. Absent
    /// keeps what is stored (none for a new subscription); `null` removes
    /// it; a list replaces it.
    #[serde(rename = "retrySchedule", default, deserialize_with = "present")]
    pub retry_schedule: Option<Option<serde_json::Value>>,
    /// `signatureScheme` (an addition): `v1` (HMAC, the default) or `v1a`
    /// (ed25519). Absent keeps the current key's; another than the current
    /// one's rotates the key to it (as `POST .../secret/rotate` does).
    #[serde(rename = "signatureScheme", default)]
    pub signature_scheme: Option<String>,
    /// `customHeaders` (an addition): headers sent on every POST to the
    /// callback ([`crate::custom_headers`]). Absent keeps what is stored;
    /// `null` or `{}` removes them; an object replaces them.
    #[serde(rename = "customHeaders", default, deserialize_with = "present")]
    pub custom_headers: Option<Option<serde_json::Value>>,
}

/// A member that may be `null`: `Some(None)` for `null`, `None` (by
/// `default`) when absent.
fn present<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<serde_json::Value>>, D::Error> {
    Ok(Some(Option::deserialize(d)?))
}

/// `destination` of a create: what to deliver into, through which role.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct DestinationRequest {
    /// `type`: `sqs` or `eventbridge`.
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    /// `arn`: the queue's or event bus's ARN.
    #[serde(default)]
    pub arn: Option<String>,
    /// `roleArn`: the role, in the destination's account, the service assumes.
    #[serde(rename = "roleArn", default)]
    pub role_arn: Option<String>,
}

/// `destination` of an answer: where a destination subscription delivers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DestinationView {
    /// `type`: `sqs` or `eventbridge`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `arn`: the queue's or event bus's ARN (also the subscription's `uri`).
    pub arn: String,
    /// `roleArn`: the role the service assumes.
    #[serde(rename = "roleArn")]
    pub role_arn: String,
    /// `externalId`: the organization's external id, which the role's trust
    /// policy must require.
    #[serde(rename = "externalId")]
    pub external_id: String,
}

/// Epoch milliseconds: a JSON integer, or a number without a fractional part
/// (`1.7e12`, `5.0`), which JSON (and JSON Schema) count as integers too.
/// `null` is the same as absent.
pub fn epoch_millis<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    d.deserialize_any(Whole("an integer number of epoch milliseconds"))
}

/// A whole number of seconds, as [`epoch_millis`] reads milliseconds.
pub fn whole_seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    d.deserialize_any(Whole("an integer number of seconds"))
}

/// An optional JSON integer (or integral number), described as `.0`.
struct Whole(&'static str);

impl serde::de::Visitor<'_> for Whole {
    type Value = Option<i64>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.0)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        i64::try_from(v)
            .map(Some)
            .map_err(|_| E::custom(format!("{v} is out of range")))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        // Every integral f64 strictly inside ±2^63 converts exactly.
        if v.fract() == 0.0 && v.abs() < 9_223_372_036_854_775_808.0 {
            Ok(Some(v as i64))
        } else {
            Err(E::invalid_type(serde::de::Unexpected::Float(v), &self))
        }
    }
}

/// A subscription's status as the API shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SubscriptionStatus {
    /// Notifications are delivered.
    Active,
    /// Disabled after a `410 Gone` or failing for `WEBHOOKS_BLACKLIST_AFTER`; posting its `uri` again reactivates it.
    Blacklisted,
    /// Past its `expirationTime`; posting its `uri` again reactivates it.
    Expired,
}

impl SubscriptionStatus {
    /// The wire name: `ACTIVE`, `BLACKLISTED` or `EXPIRED`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "ACTIVE",
            Self::Blacklisted => "BLACKLISTED",
            Self::Expired => "EXPIRED",
        }
    }

    /// The status of a wire name; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ACTIVE" => Some(Self::Active),
            "BLACKLISTED" => Some(Self::Blacklisted),
            "EXPIRED" => Some(Self::Expired),
            _ => None,
        }
    }
}

/// A filter the caller asked for but may not use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisabledFilter {
    /// `filter`: the filter as asked for.
    pub filter: String,
    /// `reason`: why it is disabled; `PERMISSION_DENIED` (another organization's filter).
    pub reason: String,
    /// `message`: the reason, for a person.
    pub message: String,
    /// `orgId`: the subscription's organization.
    #[serde(rename = "orgId")]
    pub org_id: String,
    /// `id`: the subscription's id.
    pub id: String,
}

/// Response of create/update and element of a page's `content`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subscription {
    /// `id`: the subscription's id, a UUID v7 assigned on create and kept by updates.
    pub id: String,
    /// `uri`: the callback URL; with the organization, what identifies the subscription.
    pub uri: String,
    /// `eventFilters`: the enabled filters, in canonical form.
    #[serde(rename = "eventFilters")]
    pub event_filters: Vec<String>,
    /// `disabledFilters`: the filters asked for that belong to another organization.
    #[serde(rename = "disabledFilters")]
    pub disabled_filters: Vec<DisabledFilter>,
    /// `expirationTime`: when it expires, ISO 8601 UTC with milliseconds.
    #[serde(rename = "expirationTime")]
    pub expiration_time: String,
    /// `expiresIn`: milliseconds left until `expirationTime` when the answer was made (0 once past).
    #[serde(rename = "expiresIn")]
    pub expires_in: i64,
    /// `status`: `ACTIVE`, `BLACKLISTED` or `EXPIRED`.
    pub status: SubscriptionStatus,
    /// `createdDateTime`: when it was first created, ISO 8601 UTC with milliseconds.
    #[serde(rename = "createdDateTime")]
    pub created_date_time: String,
    /// `lastUpdateDateTime`: when it was last updated, ISO 8601 UTC with milliseconds.
    #[serde(rename = "lastUpdateDateTime")]
    pub last_update_date_time: String,
    /// `orgId`: the organization that owns it.
    #[serde(rename = "orgId")]
    pub org_id: String,
    /// Its circuit breaker (an addition to the original interface).
    pub health: SubscriptionHealth,
    /// `ordered` (an addition): notifications are delivered in acceptance
    /// order, each after every earlier one is delivered or has finally failed.
    #[serde(default)]
    pub ordered: bool,
    /// `rateLimit` (an addition): at most this many notifications a second;
    /// absent when unlimited.
    #[serde(rename = "rateLimit", skip_serializing_if = "Option::is_none", default)]
    pub rate_limit: Option<u32>,
    /// `destination` (an addition): the AWS destination; absent for an
    /// HTTPS callback.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub destination: Option<DestinationView>,
    /// `payloadFilter` (an addition): the payload filter, as compact JSON
    /// with its members sorted; absent when it has none.
    #[serde(
        rename = "payloadFilter",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub payload_filter: Option<serde_json::Value>,
    /// `retrySchedule` (an addition): its own waits after a failed attempt,
    /// each in its shortest form (`"90s"`, `"2m"`); absent when it follows
    /// the deployment's schedule.
    #[serde(
        rename = "retrySchedule",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub retry_schedule: Option<Vec<String>>,
    /// `signatureScheme` (an addition): `v1a` when its current key is an
    /// ed25519 key; absent for `v1` (HMAC).
    #[serde(
        rename = "signatureScheme",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub signature_scheme: Option<String>,
    /// `customHeaders` (an addition): each header's name, its value masked
    /// ([`crate::custom_headers::mask`]); absent when it has none.
    #[serde(
        rename = "customHeaders",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub custom_headers: Option<serde_json::Value>,
}

/// A subscription's delivery health: its circuit breaker and the failures
/// it counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriptionHealth {
    /// `closed` (delivering), `open` (deliveries wait, no calls) or
    /// `half-open` (one probe call decides).
    pub state: String,
    /// When it opened; absent while closed.
    #[serde(rename = "openSince", skip_serializing_if = "Option::is_none", default)]
    pub open_since: Option<String>,
    /// When the next probe may go; absent while closed.
    #[serde(rename = "openUntil", skip_serializing_if = "Option::is_none", default)]
    pub open_until: Option<String>,
    /// `pausedUntil`: while the receiver's pause holds (it answered `429` or
    /// `503` with `Retry-After`), when it ends; nothing of the subscription
    /// is sent before then, whatever `state` says. Absent when not paused.
    #[serde(
        rename = "pausedUntil",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub paused_until: Option<String>,
    /// Consecutive failed attempts that looked like an outage.
    #[serde(rename = "consecutiveFailures")]
    pub consecutive_failures: u32,
    /// `lastFailure`: the last failed attempt the breaker counted; absent before the first.
    #[serde(
        rename = "lastFailure",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub last_failure: Option<LastFailure>,
}

/// The last failed attempt the breaker counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastFailure {
    /// `timestamp`: when the attempt failed, ISO 8601 UTC with milliseconds.
    pub timestamp: String,
    /// The failing step (`TIMEOUT`, `CONNECT_FAILED`, ...) or `BAD_STATUS`.
    pub code: String,
    /// `httpStatus`: the callback's status for `BAD_STATUS`; absent when it did not answer.
    #[serde(
        rename = "httpStatus",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub http_status: Option<u16>,
}

/// `GET /webhooksubscription/destination-identity`: what the role of an AWS
/// destination must trust (docs/destinations.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DestinationIdentity {
    /// `externalId`: the organization's external id (`sts:ExternalId`).
    #[serde(rename = "externalId")]
    pub external_id: String,
    /// `accountId`: the service's AWS account, the role's trusted principal;
    /// absent where the deployment does not say (`WEBHOOKS_AWS_ACCOUNT_ID`).
    #[serde(rename = "accountId", skip_serializing_if = "Option::is_none", default)]
    pub account_id: Option<String>,
}

/// `GET /webhooksubscription/{id}/secret`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SigningSecret {
    /// `key`: the current signing secret, `whsec_` + standard base64; absent
    /// for a `v1a` subscription, whose private key never leaves the service.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub key: Option<String>,
    /// `publicKey` (an addition): a `v1a` subscription's current public key,
    /// `whpk_` + standard base64, what receivers verify with.
    #[serde(rename = "publicKey", skip_serializing_if = "Option::is_none", default)]
    pub public_key: Option<String>,
}

impl SigningSecret {
    /// What the API shows of a stored key: a `whsec_` secret itself, or a
    /// `whsk_` private key's public key.
    pub fn of_key(key: String) -> Self {
        use crate::signature::{public_key, SignatureScheme};
        match SignatureScheme::of_key(&key) {
            // Never the private key, even one that does not decode.
            SignatureScheme::V1a => SigningSecret {
                key: None,
                public_key: public_key(&key),
            },
            SignatureScheme::V1 => SigningSecret {
                key: Some(key),
                public_key: None,
            },
        }
    }
}

/// Body of `POST /webhooksubscription/{id}/secret/rotate` (optional).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RotateSecretRequest {
    /// How long the replaced secret stays valid, in seconds (default a day).
    #[serde(
        rename = "gracePeriodSeconds",
        default,
        deserialize_with = "whole_seconds"
    )]
    pub grace_period_seconds: Option<i64>,
    /// The new secret (`whsec_...`); generated when absent.
    #[serde(default)]
    pub key: Option<String>,
    /// `signatureScheme` (an addition): the new key's scheme, `v1` or `v1a`;
    /// absent: the current key's (or `key`'s, when given).
    #[serde(rename = "signatureScheme", default)]
    pub signature_scheme: Option<String>,
}

/// A stored SMS message, as returned by `getmessagebyid`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// `id`: the message's id in the messaging platform.
    pub id: String,
    /// `owner`: the message's owner as the producer sent it, or `null`.
    pub owner: Option<String>,
    /// `time`: when it was sent, ISO 8601 as the producer sent it, or `null`.
    pub time: Option<String>,
    /// `direction`: `in` for inbound messages, `out` for outbound ones.
    pub direction: String,
    /// `to`: the recipients' numbers.
    pub to: Vec<String>,
    /// `from`: the sender's number.
    pub from: String,
    /// `text`: the message's text (empty when the producer sent none).
    pub text: String,
    /// `media`: media references (empty when none).
    pub media: Vec<String>,
    /// `attachments`: attachment references (empty when none).
    pub attachments: Vec<String>,
}

/// Spring Data `Sort.Order` as the spec serialises it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SortOrder {
    /// `direction`: `ASC` or `DESC`.
    pub direction: String,
    /// `nullHandling`: always `NATIVE`.
    #[serde(rename = "nullHandling")]
    pub null_handling: String,
    /// `ascending`: `direction` is `ASC`.
    pub ascending: bool,
    /// `property`: the property sorted on, e.g. `createdDateTime`.
    pub property: String,
    /// `ignoreCase`: text compares without case.
    #[serde(rename = "ignoreCase")]
    pub ignore_case: bool,
}

/// Spring Data `Pageable`: the paging the page was asked with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pageable {
    /// `unpaged`: always `false`.
    pub unpaged: bool,
    /// `paged`: always `true`.
    pub paged: bool,
    /// `pageSize`: the `size` asked for.
    #[serde(rename = "pageSize")]
    pub page_size: u64,
    /// `pageNumber`: the `page` asked for, 0-based.
    #[serde(rename = "pageNumber")]
    pub page_number: u64,
    /// `offset`: items before this page (`pageNumber × pageSize`).
    pub offset: u64,
    /// `sort`: the orders asked for.
    pub sort: Vec<SortOrder>,
}

/// Spring Data `Page<Subscription>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    /// `totalElements`: items in every page together.
    #[serde(rename = "totalElements")]
    pub total_elements: u64,
    /// `totalPages`: pages of `size` needed for `totalElements`.
    #[serde(rename = "totalPages")]
    pub total_pages: u64,
    /// `pageable`: the paging asked for.
    pub pageable: Pageable,
    /// `first`: this is page 0.
    pub first: bool,
    /// `last`: no page follows this one.
    pub last: bool,
    /// `size`: the page size asked for (not the items in this page).
    pub size: u64,
    /// `content`: this page's items.
    pub content: Vec<T>,
    /// `number`: this page's number, 0-based.
    pub number: u64,
    /// `sort`: the orders asked for, as in `pageable`.
    pub sort: Vec<SortOrder>,
    /// `numberOfElements`: items in this page.
    #[serde(rename = "numberOfElements")]
    pub number_of_elements: u64,
    /// `empty`: this page has no items.
    pub empty: bool,
}

impl<T> Page<T> {
    /// The same page with each element of its `content` mapped.
    pub fn map_content<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            total_elements: self.total_elements,
            total_pages: self.total_pages,
            pageable: self.pageable,
            first: self.first,
            last: self.last,
            size: self.size,
            content: self.content.into_iter().map(f).collect(),
            number: self.number,
            sort: self.sort,
            number_of_elements: self.number_of_elements,
            empty: self.empty,
        }
    }
}
