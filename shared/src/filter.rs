//! The event filter grammar of the interface:
//!
//! ```text
//! /orgId/<org>/department/<dep>/message?direction=inbound
//! /orgId/<org>/department/<dep>/message?direction=outbound
//! /orgId/<org>/department/<dep>/contact
//! /orgId/<org>/subscription?type=failing,recovered,disabled,exhausted,expiring
//! ```
//!
//! The last is the operational filter (an addition to the interface): news
//! about the organization's own subscriptions ([`crate::notice`]); its
//! `?type=` is optional (all kinds when absent). Ids match `[A-Za-z0-9_-]{1,64}`. Parsing is lenient only where meaning
//! cannot change (surrounding whitespace, keyword case, a trailing slash);
//! [`EventFilter`]'s `Display` gives the canonical string that is stored,
//! indexed and sent back in notifications.

use std::fmt;
use std::str::FromStr;

/// Organization and department ids in a filter are at most this long.
pub const MAX_ID_LEN: usize = 64;

/// A message filter's `direction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// `inbound`: messages received (`message.inbound` events).
    Inbound,
    /// `outbound`: messages sent (`message.outbound` events).
    Outbound,
}

impl Direction {
    /// The name in a filter: `inbound` or `outbound`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Inbound => "inbound",
            Direction::Outbound => "outbound",
        }
    }
}

/// What a filter selects within its organization (and department).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Topic {
    /// `.../message?direction=...`: messages of that direction.
    Message(Direction),
    /// `.../contact`: contact events (created, updated, deleted).
    Contact,
    /// Operational notifications about the organization's subscriptions, of these kinds.
    Subscription(NoticeKinds),
}

/// A parsed event filter; `Display` gives its canonical form.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventFilter {
    /// The `<org>` of `/orgId/<org>/...`.
    pub organization_id: String,
    /// Empty for [`Topic::Subscription`], which is organization-wide.
    pub department_id: String,
    /// What it selects.
    pub topic: Topic,
}

/// Why a filter does not parse, for a person; sent back as a field error of `eventFilters`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FilterError(String);

impl FilterError {
    fn new(msg: impl Into<String>) -> Self {
        FilterError(msg.into())
    }
}

const SHAPES: &str = "expected /orgId/<organizationId>/department/<departmentId>/message?direction=inbound|outbound, /orgId/<organizationId>/department/<departmentId>/contact or /orgId/<organizationId>/subscription[?type=failing,recovered,disabled,exhausted,expiring]";

/// The key a filter is indexed under for fan-out: the filter itself, but
/// an operational filter without its `?type=` (the kinds are checked on the
/// subscriptions found, so one lookup serves every combination).
pub fn index_key(canonical: &str) -> &str {
    canonical
        .split_once("?type=")
        .map_or(canonical, |(path, _)| path)
}

impl EventFilter {
    /// The filter of `topic` in `org` and `department` (empty for a subscription topic).
    pub fn new(org: &str, department: &str, topic: Topic) -> Self {
        EventFilter {
            organization_id: org.to_owned(),
            department_id: department.to_owned(),
            topic,
        }
    }

    /// The operational filter of `org` for `kinds`.
    pub fn operational(org: &str, kinds: NoticeKinds) -> Self {
        EventFilter {
            organization_id: org.to_owned(),
            department_id: String::new(),
            topic: Topic::Subscription(kinds),
        }
    }

    /// Whether this filter asks for the operational notification `kind`.
    pub fn wants_notice(&self, kind: NoticeKind) -> bool {
        matches!(self.topic, Topic::Subscription(kinds) if kinds.contains(kind))
    }

    /// Parses a filter, leniently only where meaning cannot change.
    pub fn parse(input: &str) -> Result<Self, FilterError> {
        let s = input.trim();
        if s.len() > 512 {
            return Err(FilterError::new("filter is longer than 512 characters"));
        }
        let (path, query) = match s.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (s, None),
        };
        let path = path.strip_suffix('/').unwrap_or(path);
        let Some(rest) = path.strip_prefix('/') else {
            return Err(FilterError::new(format!(
                "filter must start with '/': {SHAPES}"
            )));
        };
        let segments: Vec<&str> = rest.split('/').collect();
        if segments.len() == 3 && segments[2].eq_ignore_ascii_case("subscription") {
            keyword(segments[0], "orgId")?;
            let org = id("organizationId", segments[1])?;
            return Ok(EventFilter::operational(org, notice_kinds(query)?));
        }
        if segments.len() != 5 {
            return Err(FilterError::new(format!(
                "filter has {} path segments, 5 expected: {SHAPES}",
                segments.len()
            )));
        }
        keyword(segments[0], "orgId")?;
        let org = id("organizationId", segments[1])?;
        keyword(segments[2], "department")?;
        let department = id("departmentId", segments[3])?;
        let topic = if segments[4].eq_ignore_ascii_case("message") {
            let Some(query) = query else {
                return Err(FilterError::new(
                    "message filter needs ?direction=inbound or ?direction=outbound",
                ));
            };
            let Some((key, value)) = query.split_once('=') else {
                return Err(FilterError::new(format!(
                    "malformed query '{query}': expected direction=inbound|outbound"
                )));
            };
            keyword(key, "direction")?;
            if value.eq_ignore_ascii_case("inbound") {
                Topic::Message(Direction::Inbound)
            } else if value.eq_ignore_ascii_case("outbound") {
                Topic::Message(Direction::Outbound)
            } else {
                return Err(FilterError::new(format!(
                    "unknown direction '{value}': expected inbound or outbound"
                )));
            }
        } else if segments[4].eq_ignore_ascii_case("contact") {
            if let Some(query) = query {
                return Err(FilterError::new(format!(
                    "contact filter takes no query, found '?{query}'"
                )));
            }
            Topic::Contact
        } else {
            return Err(FilterError::new(format!(
                "unknown event kind '{}': expected message or contact",
                segments[4]
            )));
        };
        Ok(EventFilter {
            organization_id: org.to_owned(),
            department_id: department.to_owned(),
            topic,
        })
    }
}

/// `type=failing,recovered,...` (any order, case-insensitive); absent means every kind.
fn notice_kinds(query: Option<&str>) -> Result<NoticeKinds, FilterError> {
    let Some(query) = query else {
        return Ok(NoticeKinds::ALL);
    };
    let Some((key, values)) = query.split_once('=') else {
        return Err(FilterError::new(format!(
            "malformed query '{query}': expected type=failing,recovered,disabled,exhausted,expiring"
        )));
    };
    keyword(key, "type")?;
    let mut kinds = NoticeKinds::NONE;
    for value in values.split(',') {
        let Some(kind) = NoticeKind::parse(value.trim()) else {
            return Err(FilterError::new(format!(
                "unknown type '{value}': expected failing, recovered, disabled, exhausted or expiring"
            )));
        };
        kinds = kinds.with(kind);
    }
    Ok(kinds)
}

fn keyword(found: &str, expected: &str) -> Result<(), FilterError> {
    if found.eq_ignore_ascii_case(expected) {
        Ok(())
    } else {
        Err(FilterError::new(format!(
            "expected '{expected}', found '{found}'"
        )))
    }
}

/// Checks an identifier against `[A-Za-z0-9_-]{1,64}`.
pub fn id<'a>(what: &str, value: &'a str) -> Result<&'a str, FilterError> {
    if value.is_empty() {
        return Err(FilterError::new(format!("{what} is empty")));
    }
    if value.len() > MAX_ID_LEN {
        return Err(FilterError::new(format!(
            "{what} is longer than {MAX_ID_LEN} characters"
        )));
    }
    if let Some(c) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(FilterError::new(format!(
            "{what} '{value}' contains '{c}': only letters, digits, '_' and '-' are allowed"
        )));
    }
    Ok(value)
}

impl FromStr for EventFilter {
    type Err = FilterError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EventFilter::parse(s)
    }
}

impl fmt::Display for EventFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Topic::Subscription(kinds) = self.topic {
            write!(f, "/orgId/{}/subscription", self.organization_id)?;
            if kinds != NoticeKinds::ALL {
                write!(f, "?type={kinds}")?;
            }
            return Ok(());
        }
        write!(
            f,
            "/orgId/{}/department/{}/",
            self.organization_id, self.department_id
        )?;
        match self.topic {
            Topic::Message(d) => write!(f, "message?direction={}", d.as_str()),
            Topic::Contact => f.write_str("contact"),
            Topic::Subscription(_) => unreachable!("written above"),
        }
    }
}

/// The kinds of operational notification, as the filter's `?type=` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NoticeKind {
    /// Its consecutive failed attempts reached `WEBHOOKS_FAILING_AFTER`, or its breaker opened.
    Failing,
    /// The first success after a `failing`.
    Recovered,
    /// Blacklisted (a `410 Gone`, or failing for `WEBHOOKS_BLACKLIST_AFTER`).
    Disabled,
    /// A notification ran out of retries.
    Exhausted,
    /// It expires within `WEBHOOKS_EXPIRY_NOTICE`.
    Expiring,
}

impl NoticeKind {
    /// In the filter's canonical order.
    pub const ALL: [NoticeKind; 5] = [
        NoticeKind::Failing,
        NoticeKind::Recovered,
        NoticeKind::Disabled,
        NoticeKind::Exhausted,
        NoticeKind::Expiring,
    ];

    /// The name in `?type=`.
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::Failing => "failing",
            NoticeKind::Recovered => "recovered",
            NoticeKind::Disabled => "disabled",
            NoticeKind::Exhausted => "exhausted",
            NoticeKind::Expiring => "expiring",
        }
    }

    /// The payload's `subscriptionInfo.type`.
    pub fn event_type(self) -> &'static str {
        match self {
            NoticeKind::Failing => "subscription.failing",
            NoticeKind::Recovered => "subscription.recovered",
            NoticeKind::Disabled => "subscription.disabled",
            NoticeKind::Exhausted => "notification.exhausted",
            NoticeKind::Expiring => "subscription.expiring",
        }
    }

    /// Case-insensitive.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str().eq_ignore_ascii_case(s))
    }

    fn bit(self) -> u8 {
        1 << Self::ALL.iter().position(|k| *k == self).unwrap_or(0)
    }
}

/// A set of [`NoticeKind`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NoticeKinds(u8);

impl NoticeKinds {
    /// No kind.
    pub const NONE: NoticeKinds = NoticeKinds(0);
    /// Every kind (a `/subscription` filter without `?type=`).
    pub const ALL: NoticeKinds = NoticeKinds(0b1_1111);

    /// The set of the kinds whose bits (in [`NoticeKind::ALL`]'s order) are set.
    pub fn from_bits(bits: u8) -> Self {
        NoticeKinds(bits & Self::ALL.0)
    }

    /// The set with `kind` added.
    pub fn with(self, kind: NoticeKind) -> Self {
        NoticeKinds(self.0 | kind.bit())
    }

    /// Whether `kind` is in the set.
    pub fn contains(self, kind: NoticeKind) -> bool {
        self.0 & kind.bit() != 0
    }
}

/// Comma-separated, in canonical order.
impl fmt::Display for NoticeKinds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = NoticeKind::ALL
            .into_iter()
            .filter(|k| self.contains(*k))
            .map(NoticeKind::as_str)
            .collect();
        f.write_str(&names.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_the_three_shapes() {
        for s in [
            "/orgId/org-1/department/dep_1/message?direction=inbound",
            "/orgId/org-1/department/dep_1/message?direction=outbound",
            "/orgId/org-1/department/dep_1/contact",
        ] {
            assert_eq!(EventFilter::parse(s).unwrap().to_string(), s);
        }
    }

    #[test]
    fn canonicalizes_case_whitespace_and_trailing_slash() {
        let f =
            EventFilter::parse("  /ORGID/Org/Department/D/Message/?Direction=INBOUND ").unwrap();
        assert_eq!(
            f.to_string(),
            "/orgId/Org/department/D/message?direction=inbound"
        );
    }

    #[test]
    fn operational_filters() {
        let all = EventFilter::parse("/orgId/o-1/subscription").unwrap();
        assert_eq!(all.to_string(), "/orgId/o-1/subscription");
        assert!(all.wants_notice(NoticeKind::Expiring));
        let some = EventFilter::parse(" /ORGID/o-1/Subscription/?type=Recovered, failing,failing")
            .unwrap();
        assert_eq!(
            some.to_string(),
            "/orgId/o-1/subscription?type=failing,recovered"
        );
        assert!(some.wants_notice(NoticeKind::Failing));
        assert!(!some.wants_notice(NoticeKind::Disabled));
        let every = "/orgId/o/subscription?type=expiring,exhausted,disabled,recovered,failing";
        assert_eq!(
            EventFilter::parse(every).unwrap().to_string(),
            "/orgId/o/subscription"
        );
        assert_eq!(
            index_key("/orgId/o-1/subscription?type=failing,recovered"),
            "/orgId/o-1/subscription"
        );
        let message = "/orgId/o/department/d/message?direction=inbound";
        assert_eq!(index_key(message), message);
        for (input, expected) in [
            (
                "/orgId/o/subscription?type=failing,late",
                "unknown type 'late'",
            ),
            ("/orgId/o/subscription?type=", "unknown type ''"),
            ("/orgId/o/subscription?kind=failing", "expected 'type'"),
            ("/orgId/o/subscription?type", "malformed query"),
            ("/orgId/o/subscriptions", "3 path segments"),
        ] {
            let err = EventFilter::parse(input).unwrap_err().to_string();
            assert!(err.contains(expected), "{input}: {err}");
        }
    }

    #[test]
    fn explains_what_is_wrong() {
        let cases = [
            ("orgId/a/department/b/contact", "must start with '/'"),
            ("/orgId/a/department/b/contact/x", "6 path segments"),
            ("/org/a/department/b/contact", "expected 'orgId'"),
            ("/orgId/a/dept/b/contact", "expected 'department'"),
            ("/orgId//department/b/contact", "organizationId is empty"),
            ("/orgId/a b/department/b/contact", "contains ' '"),
            ("/orgId/a/department/b/message", "needs ?direction"),
            (
                "/orgId/a/department/b/message?direction=sideways",
                "unknown direction",
            ),
            (
                "/orgId/a/department/b/message?dir=inbound",
                "expected 'direction'",
            ),
            (
                "/orgId/a/department/b/contact?direction=inbound",
                "takes no query",
            ),
            ("/orgId/a/department/b/sms", "unknown event kind 'sms'"),
        ];
        for (input, expected) in cases {
            let err = EventFilter::parse(input).unwrap_err().to_string();
            assert!(err.contains(expected), "{input}: {err}");
        }
        let long = format!("/orgId/{}/department/b/contact", "a".repeat(65));
        assert!(EventFilter::parse(&long)
            .unwrap_err()
            .to_string()
            .contains("longer than 64"));
    }

    fn ident() -> impl Strategy<Value = String> {
        "[A-Za-z0-9_-]{1,64}"
    }

    fn topic() -> impl Strategy<Value = Topic> {
        prop_oneof![
            Just(Topic::Message(Direction::Inbound)),
            Just(Topic::Message(Direction::Outbound)),
            Just(Topic::Contact),
        ]
    }

    proptest! {
        #[test]
        fn operational_canonical_form_round_trips(org in ident(), bits in 1u8..32) {
            let f = EventFilter::operational(&org, NoticeKinds::from_bits(bits));
            let s = f.to_string();
            let parsed = EventFilter::parse(&s).unwrap();
            prop_assert_eq!(&parsed, &f);
            prop_assert_eq!(parsed.to_string(), s);
        }
    }

    proptest! {
        #[test]
        fn canonical_form_round_trips(org in ident(), dep in ident(), topic in topic()) {
            let f = EventFilter::new(&org, &dep, topic);
            let s = f.to_string();
            let parsed = EventFilter::parse(&s).unwrap();
            prop_assert_eq!(&parsed, &f);
            prop_assert_eq!(parsed.to_string(), s);
        }

        #[test]
        fn parse_is_idempotent_on_any_input(s in ".{0,120}") {
            if let Ok(f) = EventFilter::parse(&s) {
                let canon = f.to_string();
                prop_assert_eq!(EventFilter::parse(&canon).unwrap().to_string(), canon);
            }
        }

        #[test]
        fn near_misses_are_rejected(
            org in ident(), dep in ident(), topic in topic(),
            pos in any::<prop::sample::Index>(),
            bad in prop::sample::select(vec!['/', '?', '=', ' ', '#', '%', '.', '&', 'é']),
        ) {
            let canon = EventFilter::new(&org, &dep, topic).to_string();
            // Inserting a character that is not part of any id alphabet, at a
            // position inside an id, must be rejected.
            let prefix = format!("/orgId/{org}");
            let at = 7 + pos.index(org.len());
            let mut mutated = canon.clone();
            mutated.insert(at, bad);
            prop_assume!(at < prefix.len());
            prop_assert!(EventFilter::parse(&mutated).is_err(), "accepted {}", mutated);
        }

        #[test]
        fn dropping_a_segment_is_rejected(org in ident(), dep in ident(), topic in topic(), which in 0usize..5) {
            let canon = EventFilter::new(&org, &dep, topic).to_string();
            let (path, query) = match canon.split_once('?') { Some((p, q)) => (p.to_owned(), Some(q.to_owned())), None => (canon.clone(), None) };
            let mut segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
            segs.remove(which);
            let mut mutated = format!("/{}", segs.join("/"));
            if let Some(q) = query { mutated.push('?'); mutated.push_str(&q); }
            prop_assert!(EventFilter::parse(&mutated).is_err(), "accepted {}", mutated);
        }
    }
}
