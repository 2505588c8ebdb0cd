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
mod tests;
