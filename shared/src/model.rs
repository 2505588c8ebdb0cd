//! Wire types of the public interface. Field names follow `spec/interface.md` exactly.

use serde::{Deserialize, Serialize};

/// Body of `POST /webhooksubscription`. Fields are optional here so that
/// validation can report every missing field at once.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SubscriptionRequest {
    pub uri: Option<String>,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SubscriptionStatus {
    Active,
    Blacklisted,
    Expired,
}

impl SubscriptionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "ACTIVE",
            Self::Blacklisted => "BLACKLISTED",
            Self::Expired => "EXPIRED",
        }
    }

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
    pub filter: String,
    pub reason: String,
    pub message: String,
    #[serde(rename = "orgId")]
    pub org_id: String,
    pub id: String,
}

/// Response of create/update and element of a page's `content`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subscription {
    pub id: String,
    pub uri: String,
    #[serde(rename = "eventFilters")]
    pub event_filters: Vec<String>,
    #[serde(rename = "disabledFilters")]
    pub disabled_filters: Vec<DisabledFilter>,
    #[serde(rename = "expirationTime")]
    pub expiration_time: String,
    #[serde(rename = "expiresIn")]
    pub expires_in: i64,
    pub status: SubscriptionStatus,
    #[serde(rename = "createdDateTime")]
    pub created_date_time: String,
    #[serde(rename = "lastUpdateDateTime")]
    pub last_update_date_time: String,
    #[serde(rename = "orgId")]
    pub org_id: String,
    /// Its circuit breaker (an addition to the original interface).
    pub health: SubscriptionHealth,
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
    /// Consecutive failed attempts that looked like an outage.
    #[serde(rename = "consecutiveFailures")]
    pub consecutive_failures: u32,
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
    pub timestamp: String,
    /// The failing step (`TIMEOUT`, `CONNECT_FAILED`, ...) or `BAD_STATUS`.
    pub code: String,
    #[serde(
        rename = "httpStatus",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub http_status: Option<u16>,
}

/// `GET /webhooksubscription/{id}/secret`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SigningSecret {
    pub key: String,
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
}

/// A stored SMS message, as returned by `getmessagebyid`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub id: String,
    pub owner: Option<String>,
    pub time: Option<String>,
    pub direction: String,
    pub to: Vec<String>,
    pub from: String,
    pub text: String,
    pub media: Vec<String>,
    pub attachments: Vec<String>,
}

/// Spring Data `Sort.Order` as the spec serialises it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SortOrder {
    pub direction: String,
    #[serde(rename = "nullHandling")]
    pub null_handling: String,
    pub ascending: bool,
    pub property: String,
    #[serde(rename = "ignoreCase")]
    pub ignore_case: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pageable {
    pub unpaged: bool,
    pub paged: bool,
    #[serde(rename = "pageSize")]
    pub page_size: u64,
    #[serde(rename = "pageNumber")]
    pub page_number: u64,
    pub offset: u64,
    pub sort: Vec<SortOrder>,
}

/// Spring Data `Page<Subscription>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    #[serde(rename = "totalElements")]
    pub total_elements: u64,
    #[serde(rename = "totalPages")]
    pub total_pages: u64,
    pub pageable: Pageable,
    pub first: bool,
    pub last: bool,
    pub size: u64,
    pub content: Vec<T>,
    pub number: u64,
    pub sort: Vec<SortOrder>,
    #[serde(rename = "numberOfElements")]
    pub number_of_elements: u64,
    pub empty: bool,
}

impl<T> Page<T> {
    /// The same page with each element mapped.
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
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
