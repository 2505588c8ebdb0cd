//! The JSON of a page of subscriptions (`GET /webhooksubscription/all`) and
//! of one (`GET /webhooksubscription/{id}`), written straight into the
//! answer: the same bytes as `serde_json`'s serialization of
//! [`Page<Subscription>`] and [`Subscription`] (property tests hold them
//! together), at a fraction of the cost. serde_json escapes every key and
//! value in several calls each, about 500 strings a page and a fifth of its
//! instructions (docs/performance-history.md, "The rules once, and the list
//! page's JSON (issue 26)"); here the keys are constants
//! written with their punctuation, and a value goes through serde_json's
//! escaping only when it holds a character JSON escapes.

use crate::model::{
    DisabledFilter, LastFailure, Page, SortOrder, Subscription, SubscriptionHealth,
};

/// The page as JSON.
pub fn page(page: &Page<Subscription>) -> Vec<u8> {
    // About 450 bytes a subscription.
    let mut out = Writer(Vec::with_capacity(512 + page.content.len() * 512));
    out.raw(b"{\"totalElements\":");
    out.int(page.total_elements);
    out.raw(b",\"totalPages\":");
    out.int(page.total_pages);
    out.raw(b",\"pageable\":{\"unpaged\":");
    out.bool(page.pageable.unpaged);
    out.raw(b",\"paged\":");
    out.bool(page.pageable.paged);
    out.raw(b",\"pageSize\":");
    out.int(page.pageable.page_size);
    out.raw(b",\"pageNumber\":");
    out.int(page.pageable.page_number);
    out.raw(b",\"offset\":");
    out.int(page.pageable.offset);
    out.raw(b",\"sort\":");
    out.list(&page.pageable.sort, Writer::sort_order);
    out.raw(b"},\"first\":");
    out.bool(page.first);
    out.raw(b",\"last\":");
    out.bool(page.last);
    out.raw(b",\"size\":");
    out.int(page.size);
    out.raw(b",\"content\":");
    out.list(&page.content, Writer::subscription);
    out.raw(b",\"number\":");
    out.int(page.number);
    out.raw(b",\"sort\":");
    out.list(&page.sort, Writer::sort_order);
    out.raw(b",\"numberOfElements\":");
    out.int(page.number_of_elements);
    out.raw(b",\"empty\":");
    out.bool(page.empty);
    out.raw(b"}");
    out.0
}

/// One subscription as JSON.
pub fn subscription(subscription: &Subscription) -> Vec<u8> {
    let mut out = Writer(Vec::with_capacity(512));
    out.subscription(subscription);
    out.0
}

struct Writer(Vec<u8>);

impl Writer {
    fn raw(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    fn int(&mut self, value: impl itoa::Integer) {
        self.raw(itoa::Buffer::new().format(value).as_bytes());
    }

    fn bool(&mut self, value: bool) {
        self.raw(if value { b"true" } else { b"false" });
    }

    /// A JSON string: as it is when nothing in it needs escaping (ids,
    /// dates, most URIs and filters), else escaped by serde_json.
    fn str(&mut self, value: &str) {
        if value.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
            serde_json::to_writer(&mut self.0, value).expect("a string serializes into a Vec");
        } else {
            self.0.reserve(value.len() + 2);
            self.raw(b"\"");
            self.raw(value.as_bytes());
            self.raw(b"\"");
        }
    }

    fn list<T>(&mut self, items: &[T], mut item: impl FnMut(&mut Self, &T)) {
        self.raw(b"[");
        for (i, x) in items.iter().enumerate() {
            if i > 0 {
                self.raw(b",");
            }
            item(self, x);
        }
        self.raw(b"]");
    }

    fn sort_order(&mut self, o: &SortOrder) {
        self.raw(b"{\"direction\":");
        self.str(&o.direction);
        self.raw(b",\"nullHandling\":");
        self.str(&o.null_handling);
        self.raw(b",\"ascending\":");
        self.bool(o.ascending);
        self.raw(b",\"property\":");
        self.str(&o.property);
        self.raw(b",\"ignoreCase\":");
        self.bool(o.ignore_case);
        self.raw(b"}");
    }

    fn subscription(&mut self, s: &Subscription) {
        self.raw(b"{\"id\":");
        self.str(&s.id);
        self.raw(b",\"uri\":");
        self.str(&s.uri);
        self.raw(b",\"eventFilters\":");
        self.list(&s.event_filters, |w, f| w.str(f));
        self.raw(b",\"disabledFilters\":");
        self.list(&s.disabled_filters, Writer::disabled_filter);
        self.raw(b",\"expirationTime\":");
        self.str(&s.expiration_time);
        self.raw(b",\"expiresIn\":");
        self.int(s.expires_in);
        self.raw(b",\"status\":");
        self.str(s.status.as_str());
        self.raw(b",\"createdDateTime\":");
        self.str(&s.created_date_time);
        self.raw(b",\"lastUpdateDateTime\":");
        self.str(&s.last_update_date_time);
        self.raw(b",\"orgId\":");
        self.str(&s.org_id);
        self.raw(b",\"health\":");
        self.health(&s.health);
        self.raw(b",\"ordered\":");
        self.bool(s.ordered);
        if let Some(limit) = s.rate_limit {
            self.raw(b",\"rateLimit\":");
            self.int(limit);
        }
        if let Some(d) = &s.destination {
            self.raw(b",\"destination\":{\"type\":");
            self.str(&d.kind);
            self.raw(b",\"arn\":");
            self.str(&d.arn);
            self.raw(b",\"roleArn\":");
            self.str(&d.role_arn);
            self.raw(b",\"externalId\":");
            self.str(&d.external_id);
            self.raw(b"}");
        }
        if let Some(filter) = &s.payload_filter {
            self.raw(b",\"payloadFilter\":");
            let json = serde_json::to_vec(filter).expect("a JSON value serialises");
            self.raw(&json);
        }
        if let Some(schedule) = &s.retry_schedule {
            self.raw(b",\"retrySchedule\":");
            self.list(schedule, |w, wait| w.str(wait));
        }
        if let Some(scheme) = &s.signature_scheme {
            self.raw(b",\"signatureScheme\":");
            self.str(scheme);
        }
        if let Some(headers) = &s.custom_headers {
            self.raw(b",\"customHeaders\":");
            let json = serde_json::to_vec(headers).expect("a JSON value serialises");
            self.raw(&json);
        }
        self.raw(b"}");
    }

    fn disabled_filter(&mut self, d: &DisabledFilter) {
        self.raw(b"{\"filter\":");
        self.str(&d.filter);
        self.raw(b",\"reason\":");
        self.str(&d.reason);
        self.raw(b",\"message\":");
        self.str(&d.message);
        self.raw(b",\"orgId\":");
        self.str(&d.org_id);
        self.raw(b",\"id\":");
        self.str(&d.id);
        self.raw(b"}");
    }

    fn health(&mut self, h: &SubscriptionHealth) {
        self.raw(b"{\"state\":");
        self.str(&h.state);
        if let Some(at) = &h.open_since {
            self.raw(b",\"openSince\":");
            self.str(at);
        }
        if let Some(at) = &h.open_until {
            self.raw(b",\"openUntil\":");
            self.str(at);
        }
        if let Some(at) = &h.paused_until {
            self.raw(b",\"pausedUntil\":");
            self.str(at);
        }
        self.raw(b",\"consecutiveFailures\":");
        self.int(h.consecutive_failures);
        if let Some(last) = &h.last_failure {
            self.raw(b",\"lastFailure\":");
            self.last_failure(last);
        }
        self.raw(b"}");
    }

    fn last_failure(&mut self, f: &LastFailure) {
        self.raw(b"{\"timestamp\":");
        self.str(&f.timestamp);
        self.raw(b",\"code\":");
        self.str(&f.code);
        if let Some(status) = f.http_status {
            self.raw(b",\"httpStatus\":");
            self.int(status);
        }
        self.raw(b"}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DestinationView, Pageable, SubscriptionStatus};
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        // Plain text, and every kind of character JSON escapes or not.
        prop_oneof![
            "[a-z0-9:/._?=-]{0,40}",
            any::<String>(),
            "[\u{0}-\u{7f}\"\\\\\u{7f}\u{80}-\u{10ffff}]{0,12}",
        ]
    }

    fn sort_order() -> impl Strategy<Value = SortOrder> {
        (text(), text(), any::<bool>(), text(), any::<bool>()).prop_map(
            |(direction, null_handling, ascending, property, ignore_case)| SortOrder {
                direction,
                null_handling,
                ascending,
                property,
                ignore_case,
            },
        )
    }

    fn health() -> impl Strategy<Value = SubscriptionHealth> {
        (
            text(),
            proptest::option::of(text()),
            proptest::option::of(text()),
            proptest::option::of(text()),
            any::<u32>(),
            proptest::option::of((text(), text(), proptest::option::of(any::<u16>()))),
        )
            .prop_map(
                |(state, open_since, open_until, paused_until, failures, last)| {
                    SubscriptionHealth {
                        state,
                        open_since,
                        open_until,
                        paused_until,
                        consecutive_failures: failures,
                        last_failure: last.map(|(timestamp, code, http_status)| LastFailure {
                            timestamp,
                            code,
                            http_status,
                        }),
                    }
                },
            )
    }

    fn subscription() -> impl Strategy<Value = Subscription> {
        let status = prop_oneof![
            Just(SubscriptionStatus::Active),
            Just(SubscriptionStatus::Blacklisted),
            Just(SubscriptionStatus::Expired),
        ];
        let disabled = (text(), text(), text(), text(), text()).prop_map(
            |(filter, reason, message, org_id, id)| DisabledFilter {
                filter,
                reason,
                message,
                org_id,
                id,
            },
        );
        (
            (text(), text(), proptest::collection::vec(text(), 0..3)),
            proptest::collection::vec(disabled, 0..3),
            (text(), any::<i64>(), status, text(), text(), text()),
            (health(), proptest::option::of(1u32..=1000)),
            any::<bool>(),
            (
                proptest::option::of((text(), text(), text(), text())),
                proptest::option::of((text(), text(), any::<i64>())),
                proptest::option::of(proptest::collection::vec(text(), 1..3)),
                proptest::option::of((text(), text())),
            ),
        )
            .prop_map(
                |(
                    (id, uri, event_filters),
                    disabled_filters,
                    rest,
                    (health, rate_limit),
                    ordered,
                    (destination, payload_filter, retry_schedule, custom_headers),
                )| {
                    let (expiration_time, expires_in, status, created, updated, org_id) = rest;
                    Subscription {
                        id,
                        uri,
                        event_filters,
                        disabled_filters,
                        expiration_time,
                        expires_in,
                        status,
                        created_date_time: created,
                        last_update_date_time: updated,
                        org_id,
                        health,
                        ordered,
                        rate_limit,
                        destination: destination.map(|(kind, arn, role_arn, external_id)| {
                            DestinationView {
                                kind,
                                arn,
                                role_arn,
                                external_id,
                            }
                        }),
                        payload_filter: payload_filter.map(|(path, value, bound)| {
                            serde_json::json!({ "$or": [{ path: value }, { "n": { "$gte": bound } }] })
                        }),
                        retry_schedule,
                        signature_scheme: ordered.then(|| "v1a".to_owned()),
                        custom_headers: custom_headers
                            .map(|(name, masked)| serde_json::json!({ name: masked })),
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn one_subscription_is_the_same_bytes_as_serde_json(one in subscription()) {
            let ours = super::subscription(&one);
            prop_assert_eq!(
                String::from_utf8(ours).unwrap(),
                serde_json::to_string(&one).unwrap()
            );
        }

        #[test]
        fn the_same_bytes_as_serde_json(
            content in proptest::collection::vec(subscription(), 0..4),
            sort in proptest::collection::vec(sort_order(), 0..3),
            numbers in any::<[u64; 6]>(),
            flags in any::<[bool; 5]>(),
        ) {
            let page = Page {
                total_elements: numbers[0],
                total_pages: numbers[1],
                pageable: Pageable {
                    unpaged: flags[0],
                    paged: flags[1],
                    page_size: numbers[2],
                    page_number: numbers[3],
                    offset: numbers[4],
                    sort: sort.clone(),
                },
                first: flags[2],
                last: flags[3],
                size: numbers[5],
                number_of_elements: content.len() as u64,
                content,
                number: numbers[3],
                sort,
                empty: flags[4],
            };
            let ours = super::page(&page);
            let theirs = serde_json::to_vec(&page).unwrap();
            prop_assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&theirs));
        }
    }
}
