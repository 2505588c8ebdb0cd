//! Subscriptions and messages to and from DynamoDB items.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::keys::{expiry_key, filter_pk, key, org_pk, sub_sk};
use super::Item;
use crate::custom_headers::CustomHeaders;
use crate::health::Health;
use crate::ids::{OrgId, SubscriptionId};
use crate::model::SubscriptionStatus;
use crate::payload_filter::PayloadFilter;
use crate::retry_schedule::RetrySchedule;
use crate::store::{DisabledEntry, PreviousSecret, StoreError, StoredSubscription};

pub(super) fn subscription_attributes(sub: &StoredSubscription) -> Item {
    let mut item = Item::new();
    item.insert("orgId".into(), s(sub.org_id.to_string()));
    item.insert("id".into(), s(sub.id.to_string()));
    item.insert("uri".into(), s(sub.uri.clone()));
    item.insert("eventFilters".into(), list(&sub.event_filters));
    item.insert(
        "disabledFilters".into(),
        AttributeValue::L(
            sub.disabled_filters
                .iter()
                .map(|d| {
                    AttributeValue::M(HashMap::from([
                        ("filter".to_owned(), s(d.filter.clone())),
                        ("reason".to_owned(), s(d.reason.clone())),
                        ("message".to_owned(), s(d.message.clone())),
                    ]))
                })
                .collect(),
        ),
    );
    item.insert("expiresAt".into(), n(sub.expires_at));
    item.insert("status".into(), s(sub.status.as_str().into()));
    item.insert("createdAt".into(), n(sub.created_at));
    item.insert("updatedAt".into(), n(sub.updated_at));
    item.insert("secret".into(), s(sub.secret.clone()));
    item.insert(
        "previousSecrets".into(),
        previous_secrets(&sub.previous_secrets),
    );
    if let Some(at) = sub.failing_since {
        item.insert("failingSince".into(), n(at));
    }
    if sub.ordered {
        item.insert("ordered".into(), AttributeValue::Bool(true));
    }
    if let Some(limit) = sub.rate_limit {
        item.insert(RATE_LIMIT.into(), n(i64::from(limit)));
    }
    if let Some(role) = &sub.role_arn {
        item.insert(ROLE_ARN.into(), s(role.clone()));
    }
    if let Some(id) = &sub.external_id {
        item.insert(EXTERNAL_ID.into(), s(id.clone()));
    }
    // On the index copies too: fan-out evaluates it with what it reads.
    if let Some(filter) = &sub.payload_filter {
        item.insert(PAYLOAD_FILTER.into(), s(filter.json().to_owned()));
    }
    if let Some(schedule) = &sub.retry_schedule {
        item.insert(RETRY_SCHEDULE.into(), s(schedule.stored()));
    }
    item
}

/// The subscription's own retry schedule, as `WEBHOOKS_RETRY_SCHEDULE`
/// writes one (`5s,2m,1h`), when it has one.
pub(super) const RETRY_SCHEDULE: &str = "retrySchedule";
/// The subscription's custom headers, a JSON object, when it has some.
pub(super) const CUSTOM_HEADERS: &str = "customHeaders";

/// The subscription's payload filter, its compact JSON, when it has one.
pub(super) const PAYLOAD_FILTER: &str = "payloadFilter";

/// The external id an AWS destination subscription was validated with.
pub(super) const EXTERNAL_ID: &str = "externalId";

/// The role of an AWS destination subscription (docs/decisions/destinations.md).
pub(super) const ROLE_ARN: &str = "roleArn";

/// The subscription's rate limit (notifications per second), when it has one.
pub(super) const RATE_LIMIT: &str = "rateLimit";

/// Replaced secrets still in their grace period: a list of `{secret, expiresAt}`.
pub(super) fn previous_secrets(previous: &[PreviousSecret]) -> AttributeValue {
    AttributeValue::L(
        previous
            .iter()
            .map(|p| {
                AttributeValue::M(HashMap::from([
                    ("secret".to_owned(), s(p.secret.clone())),
                    ("expiresAt".to_owned(), n(p.expires_at)),
                ]))
            })
            .collect(),
    )
}

fn parse_previous_secrets(item: &Item) -> Result<Vec<PreviousSecret>, StoreError> {
    match item.get("previousSecrets") {
        // Items written before rotation existed have none.
        None => Ok(Vec::new()),
        Some(AttributeValue::L(entries)) => entries
            .iter()
            .map(|entry| match entry {
                AttributeValue::M(m) => Ok(PreviousSecret {
                    secret: text(m, "secret")?,
                    expires_at: number(m, "expiresAt")?,
                }),
                _ => Err(corrupt("previousSecrets")),
            })
            .collect(),
        Some(_) => Err(corrupt("previousSecrets")),
    }
}

pub(super) fn subscription_item(sub: &StoredSubscription, version: u64) -> Item {
    let mut item = subscription_attributes(sub);
    item.extend(key(org_pk(&sub.org_id), sub_sk(&sub.id)));
    item.insert("version".into(), n(version as i64));
    // The breaker lives on the subscription item only: deliveries read it,
    // the fan-out's index copies need not.
    item.insert(HEALTH_REV.into(), n(sub.health.rev as i64));
    if !sub.health.is_clear() || sub.health.paused_until.is_some() {
        item.insert(HEALTH.into(), s(health_json(&sub.health)));
    }
    // Deliveries read them; fan-out's index copies need not (up to 4 KB
    // each would cost every fan-out's read).
    if let Some(headers) = &sub.custom_headers {
        item.insert(CUSTOM_HEADERS.into(), s(headers.json()));
    }
    item
}

/// The breaker's state, as JSON ([`Health`]), and its revision.
pub(super) const HEALTH: &str = "health";
pub(super) const HEALTH_REV: &str = "healthRev";

pub(super) fn health_json(health: &Health) -> String {
    serde_json::to_string(health).expect("health serialises")
}

fn parse_health(item: &Item) -> Result<Health, StoreError> {
    let stored = match item.get(HEALTH) {
        None => Health::default(),
        Some(AttributeValue::S(json)) => serde_json::from_str(json).map_err(|_| corrupt(HEALTH))?,
        Some(_) => return Err(corrupt(HEALTH)),
    };
    let rev = match item.contains_key(HEALTH_REV) {
        true => number(item, HEALTH_REV)? as u64,
        false => 0,
    };
    Ok(Health { rev, ..stored })
}

pub(super) fn index_item(sub: &StoredSubscription, filter: &str) -> Item {
    let mut item = subscription_attributes(sub);
    item.extend(key(filter_pk(filter), sub_sk(&sub.id)));
    item.insert("ttl".into(), n(sub.expires_at.div_euclid(1000) + 1));
    item
}

/// The subscription's expiry entry: enough to read it and to tell a
/// stale entry; kept a day past the expiry (DynamoDB's TTL is lazy).
pub(super) fn expiry_item(sub: &StoredSubscription) -> Item {
    let mut item = expiry_key(sub.expires_at, &sub.org_id, &sub.id);
    item.insert("orgId".into(), s(sub.org_id.to_string()));
    item.insert("id".into(), s(sub.id.to_string()));
    item.insert("expiresAt".into(), n(sub.expires_at));
    item.insert("ttl".into(), n(sub.expires_at.div_euclid(1000) + 86_400));
    item
}

/// What an expiry entry names: (org, id, expiry).
pub(super) fn parse_expiry_entry(item: &Item) -> Result<(OrgId, SubscriptionId, i64), StoreError> {
    let entry = || {
        Ok((
            text(item, "orgId")?.into(),
            text(item, "id")?.into(),
            number(item, "expiresAt")?,
        ))
    };
    keyed(item, entry())
}

pub(super) fn parse_subscription(item: &Item) -> Result<StoredSubscription, StoreError> {
    keyed(item, subscription_of(item))
}

fn subscription_of(item: &Item) -> Result<StoredSubscription, StoreError> {
    let disabled = match item.get("disabledFilters") {
        Some(AttributeValue::L(entries)) => entries
            .iter()
            .map(|entry| match entry {
                AttributeValue::M(m) => Ok(DisabledEntry {
                    filter: text(m, "filter")?,
                    reason: text(m, "reason")?,
                    message: text(m, "message")?,
                }),
                _ => Err(corrupt("disabledFilters")),
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err(corrupt("disabledFilters")),
    };
    let status = text(item, "status")?;
    Ok(StoredSubscription {
        id: text(item, "id")?.into(),
        org_id: text(item, "orgId")?.into(),
        uri: text(item, "uri")?,
        event_filters: texts(item, "eventFilters")?,
        disabled_filters: disabled,
        expires_at: number(item, "expiresAt")?,
        status: SubscriptionStatus::parse(&status).ok_or_else(|| corrupt("status"))?,
        created_at: number(item, "createdAt")?,
        updated_at: number(item, "updatedAt")?,
        secret: text(item, "secret")?,
        previous_secrets: parse_previous_secrets(item)?,
        failing_since: item
            .contains_key("failingSince")
            .then(|| number(item, "failingSince"))
            .transpose()?,
        health: parse_health(item)?,
        // Absent on items written before ordered delivery existed.
        ordered: matches!(item.get("ordered"), Some(AttributeValue::Bool(true))),
        rate_limit: item
            .contains_key(RATE_LIMIT)
            .then(|| {
                number(item, RATE_LIMIT)
                    .and_then(|v| u32::try_from(v).map_err(|_| corrupt(RATE_LIMIT)))
            })
            .transpose()?,
        role_arn: item
            .contains_key(ROLE_ARN)
            .then(|| text(item, ROLE_ARN))
            .transpose()?,
        external_id: item
            .contains_key(EXTERNAL_ID)
            .then(|| text(item, EXTERNAL_ID))
            .transpose()?,
        payload_filter: item
            .contains_key(PAYLOAD_FILTER)
            .then(|| {
                text(item, PAYLOAD_FILTER).and_then(|json| {
                    PayloadFilter::from_stored(&json).map_err(|_| corrupt(PAYLOAD_FILTER))
                })
            })
            .transpose()?,
        retry_schedule: item
            .contains_key(RETRY_SCHEDULE)
            .then(|| {
                text(item, RETRY_SCHEDULE).and_then(|stored| {
                    RetrySchedule::from_stored(&stored).map_err(|_| corrupt(RETRY_SCHEDULE))
                })
            })
            .transpose()?,
        custom_headers: item
            .contains_key(CUSTOM_HEADERS)
            .then(|| {
                text(item, CUSTOM_HEADERS).and_then(|json| {
                    CustomHeaders::from_stored(&json).map_err(|_| corrupt(CUSTOM_HEADERS))
                })
            })
            .transpose()?,
    })
}

pub(super) fn s(value: String) -> AttributeValue {
    AttributeValue::S(value)
}

pub(super) fn n(value: i64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub(super) fn list(values: &[String]) -> AttributeValue {
    AttributeValue::L(values.iter().cloned().map(AttributeValue::S).collect())
}

pub(super) fn optional(value: &Option<String>) -> AttributeValue {
    match value {
        Some(v) => s(v.clone()),
        None => AttributeValue::Null(true),
    }
}

/// A missing or malformed attribute; [`keyed`] names the item.
pub(super) fn corrupt(attribute: &str) -> StoreError {
    StoreError::corrupt(String::new(), format!("missing or malformed '{attribute}'"))
}

/// `decoded`, with the item's key (`pk/sk`) in a [`StoreError::Corrupt`]
/// that has none yet: a log names the item to look at.
pub(super) fn keyed<T>(item: &Item, decoded: Result<T, StoreError>) -> Result<T, StoreError> {
    decoded.map_err(|e| match e {
        StoreError::Corrupt { key, problem } if key.is_empty() => {
            let part = |name| match item.get(name) {
                Some(AttributeValue::S(v)) => v.as_str(),
                _ => "?",
            };
            StoreError::corrupt(format!("{}/{}", part("pk"), part("sk")), problem)
        }
        e => e,
    })
}

pub(super) fn text(item: &Item, name: &str) -> Result<String, StoreError> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Ok(v.clone()),
        _ => Err(corrupt(name)),
    }
}

pub(super) fn optional_text(item: &Item, name: &str) -> Result<Option<String>, StoreError> {
    match item.get(name) {
        None | Some(AttributeValue::Null(_)) => Ok(None),
        Some(AttributeValue::S(v)) => Ok(Some(v.clone())),
        _ => Err(corrupt(name)),
    }
}

pub(super) fn texts(item: &Item, name: &str) -> Result<Vec<String>, StoreError> {
    match item.get(name) {
        Some(AttributeValue::L(values)) => values
            .iter()
            .map(|v| match v {
                AttributeValue::S(v) => Ok(v.clone()),
                _ => Err(corrupt(name)),
            })
            .collect(),
        _ => Err(corrupt(name)),
    }
}

pub(super) fn number(item: &Item, name: &str) -> Result<i64, StoreError> {
    match item.get(name) {
        Some(AttributeValue::N(v)) => v.parse().map_err(|_| corrupt(name)),
        _ => Err(corrupt(name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SubscriptionStatus;
    use crate::store::DisabledEntry;

    #[test]
    fn items_round_trip() {
        let sub = StoredSubscription {
            id: "id-1".into(),
            org_id: "org-1".into(),
            uri: "https://example.com/hook".into(),
            event_filters: vec!["/orgId/org-1/department/d/contact".into()],
            disabled_filters: vec![DisabledEntry {
                filter: "/orgId/org-2/department/d/contact".into(),
                reason: "PERMISSION_DENIED".into(),
                message: "not yours".into(),
            }],
            expires_at: 1_700_000_000_500,
            status: SubscriptionStatus::Blacklisted,
            created_at: 1,
            updated_at: 2,
            secret: "whsec_x".into(),
            previous_secrets: vec![PreviousSecret {
                secret: "whsec_y".into(),
                expires_at: 9,
            }],
            failing_since: Some(3),
            health: Default::default(),
            ordered: false,
            rate_limit: Some(50),
            role_arn: None,
            external_id: None,
            payload_filter: Some(
                PayloadFilter::parse(&serde_json::json!({"message.to": {"$in": ["+1"]}})).unwrap(),
            ),
            retry_schedule: Some(
                RetrySchedule::parse(&serde_json::json!(["5s", 90, "12h"])).unwrap(),
            ),
            custom_headers: CustomHeaders::parse(&serde_json::json!({"Authorization": "Bearer t"}))
                .unwrap(),
        };
        let item = subscription_item(&sub, 7);
        assert_eq!(parse_subscription(&item).unwrap(), sub);
        assert_eq!(number(&item, "version").unwrap(), 7);
        let index = index_item(&sub, &sub.event_filters[0]);
        let copied = StoredSubscription {
            custom_headers: None,
            ..sub.clone()
        };
        assert_eq!(
            parse_subscription(&index).unwrap(),
            copied,
            "no headers on the copies"
        );
        assert_eq!(number(&index, "ttl").unwrap(), 1_700_000_001);
        let entry = expiry_item(&sub);
        assert_eq!(
            parse_expiry_entry(&entry).unwrap(),
            (sub.org_id.clone(), sub.id.clone(), sub.expires_at)
        );
        assert_eq!(number(&entry, "ttl").unwrap(), 1_700_086_400);
        let mut broken = item.clone();
        broken.insert("status".into(), s("MAYBE".into()));
        assert!(parse_subscription(&broken).is_err());
        let mut old = item.clone();
        old.remove("previousSecrets");
        assert_eq!(parse_subscription(&old).unwrap().previous_secrets, vec![]);
        old.insert("previousSecrets".into(), s("x".into()));
        assert!(parse_subscription(&old).is_err());
    }
}
