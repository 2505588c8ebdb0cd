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
    let f = EventFilter::parse("  /ORGID/Org/Department/D/Message/?Direction=INBOUND ").unwrap();
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
    let some =
        EventFilter::parse(" /ORGID/o-1/Subscription/?type=Recovered, failing,failing").unwrap();
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
