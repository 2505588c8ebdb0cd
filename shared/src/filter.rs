//! The event filter grammar of the interface:
//!
//! ```text
//! /orgId/<org>/department/<dep>/message?direction=inbound
//! /orgId/<org>/department/<dep>/message?direction=outbound
//! /orgId/<org>/department/<dep>/contact
//! ```
//!
//! Ids match `[A-Za-z0-9_-]{1,64}`. Parsing is lenient only where meaning
//! cannot change (surrounding whitespace, keyword case, a trailing slash);
//! [`EventFilter`]'s `Display` gives the canonical string that is stored,
//! indexed and sent back in notifications.

use std::fmt;
use std::str::FromStr;

pub const MAX_ID_LEN: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Inbound,
    Outbound,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Inbound => "inbound",
            Direction::Outbound => "outbound",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Topic {
    Message(Direction),
    Contact,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventFilter {
    pub organization_id: String,
    pub department_id: String,
    pub topic: Topic,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FilterError(String);

impl FilterError {
    fn new(msg: impl Into<String>) -> Self {
        FilterError(msg.into())
    }
}

const SHAPES: &str = "expected /orgId/<organizationId>/department/<departmentId>/message?direction=inbound|outbound or /orgId/<organizationId>/department/<departmentId>/contact";

impl EventFilter {
    pub fn new(org: &str, department: &str, topic: Topic) -> Self {
        EventFilter {
            organization_id: org.to_owned(),
            department_id: department.to_owned(),
            topic,
        }
    }

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
        write!(
            f,
            "/orgId/{}/department/{}/",
            self.organization_id, self.department_id
        )?;
        match self.topic {
            Topic::Message(d) => write!(f, "message?direction={}", d.as_str()),
            Topic::Contact => f.write_str("contact"),
        }
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
