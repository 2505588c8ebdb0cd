//! Property tests for every parser of outside input, beside the ones in the modules
//! themselves (`filter`, `ingest`, `page`): the event envelope with structured near-valid
//! input, page/size/sort, the JWT header and claims handling, `Retry-After`, epoch
//! milliseconds, routing, and payload filters. The `fuzz/` crate runs the same properties under
//! libFuzzer.

use std::time::{Duration, SystemTime};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use http::{Method, StatusCode};
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use webhook_core::api::subscriptions::SORTABLE;
use webhook_core::auth::jwt::{mint_hs256, Verifier, ALL_SCOPES, MAX_TOKEN_LEN};
use webhook_core::config::JwtConfig;
use webhook_core::delivery::decide::{parse_retry_after, MAX_RETRY_AFTER};
use webhook_core::filter::{self, EventFilter};
use webhook_core::ingest::EventEnvelope;
use webhook_core::model::SubscriptionRequest;
use webhook_core::page::{PageRequest, MAX_SIZE};
use webhook_core::routes::Route;

// ---------------------------------------------------------------------------------------
// Event envelope

const KINDS: &[&str] = &[
    "message.inbound",
    "message.outbound",
    "contact.created",
    "contact.updated",
    "contact.deleted",
];

/// Strings that are sometimes valid ids and sometimes nearly so.
fn id_like() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z0-9_-]{1,64}",
        "[A-Za-z0-9_-]{65,70}",
        ".{0,8}",
        Just(String::new()),
        Just("a/b".to_owned()),
        Just("org\n".to_owned()),
    ]
}

/// Any JSON value, small.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Envelopes built field by field: each field valid, wrong-typed, or absent.
fn envelope() -> impl Strategy<Value = Value> {
    let field = |valid: BoxedStrategy<Value>| {
        prop_oneof![
            3 => valid.prop_map(Some),
            1 => any_json().prop_map(Some),
            1 => Just(None),
        ]
    };
    let message = (id_like(), prop::collection::vec(".{0,6}", 0..3), ".{0,10}")
        .prop_map(|(id, to, text)| json!({"id": id, "to": to, "text": text}));
    (
        field(prop::sample::select(KINDS).prop_map(Value::from).boxed()),
        field(id_like().prop_map(Value::from).boxed()),
        field(id_like().prop_map(Value::from).boxed()),
        field(id_like().prop_map(Value::from).boxed()),
        field(any::<i64>().prop_map(Value::from).boxed()),
        field(message.boxed()),
        field(id_like().prop_map(|id| json!({"id": id})).boxed()),
    )
        .prop_map(|(kind, org, dep, event_id, at, message, contact)| {
            let mut m = Map::new();
            for (k, v) in [
                ("type", kind),
                ("organizationId", org),
                ("departmentId", dep),
                ("eventId", event_id),
                ("occurredAt", at),
                ("message", message),
                ("contact", contact),
            ] {
                if let Some(v) = v {
                    m.insert(k.into(), v);
                }
            }
            Value::Object(m)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn envelopes_validate_to_well_formed_events_or_field_errors(env in envelope()) {
        let Ok(parsed) = serde_json::from_value::<EventEnvelope>(env.clone()) else {
            return Ok(()); // a type error: the HTTP adapter answers 400 for it
        };
        match parsed.validate(1_700_000_000_000) {
            Ok(event) => {
                prop_assert!(filter::id("org", &event.organization_id).is_ok());
                prop_assert!(filter::id("dep", &event.department_id).is_ok());
                prop_assert_eq!(Some(event.organization_id.as_str()), env["organizationId"].as_str());
                prop_assert!(!event.id.is_empty() && event.id.chars().count() <= 256);
                prop_assert!(!event.id.chars().any(char::is_control));
                let f = event.filter().to_string();
                prop_assert_eq!(EventFilter::parse(&f).unwrap().to_string(), f);
                let is_message = env["type"].as_str().unwrap().starts_with("message.");
                prop_assert_eq!(event.message.is_some(), is_message);
                prop_assert_eq!(event.contact_id.is_some(), !is_message);
            }
            Err(e) => {
                prop_assert_eq!(e.code, "VALIDATION_FAILED");
                prop_assert!(!e.errors.is_empty() && e.errors.len() <= 6);
                let known = ["type", "organizationId", "departmentId", "eventId", "message",
                             "message.id", "message.to", "contact.id"];
                for fe in &e.errors {
                    prop_assert!(known.contains(&fe.field.as_str()), "{}", fe.field);
                }
            }
        }
    }

    #[test]
    fn epoch_milliseconds_accept_exactly_the_integral_numbers(v in prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        (-1e15f64..1e15).prop_map(|f| Value::from(f.trunc())),
        any_json(),
    ]) {
        let body = json!({"expiresDateInMillies": v});
        let parsed = serde_json::from_value::<SubscriptionRequest>(body);
        let expected: Option<Option<i64>> = match &v {
            Value::Null => Some(None),
            Value::Number(n) => n.as_i64().map(Some).or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.223_372_036_854_776e18)
                    .map(|f| Some(f as i64))
            }),
            _ => None,
        };
        match (parsed, expected) {
            (Ok(r), Some(want)) => prop_assert_eq!(r.expires_date_in_millies, want),
            (Err(_), None) => {}
            (got, want) => prop_assert!(false, "{v}: got {got:?}, expected {want:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// page / size / sort

fn query_part() -> impl Strategy<Value = String> {
    let sort_token = prop_oneof![
        prop::sample::select(SORTABLE).prop_map(str::to_owned),
        prop::sample::select(&["asc", "DESC", "ignoreCase", "", " ", "nope"][..])
            .prop_map(str::to_owned),
    ];
    prop_oneof![
        any::<i64>().prop_map(|n| format!("page={n}")),
        any::<u64>().prop_map(|n| format!("size={n}")),
        (0u64..3000).prop_map(|n| format!("size={n}")),
        prop::collection::vec(sort_token, 0..5).prop_map(|t| format!("sort={}", t.join(","))),
        "[a-z=&%,]{0,12}",
        Just("sort".to_owned()),
        Just("page=".to_owned()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn page_requests_are_within_bounds(parts in prop::collection::vec(query_part(), 0..8)) {
        let query = parts.join("&");
        match PageRequest::from_query(Some(&query), SORTABLE) {
            Ok(page) => {
                prop_assert!((1..=MAX_SIZE).contains(&page.size));
                prop_assert!(page.sort.len() <= SORTABLE.len());
                for (i, o) in page.sort.iter().enumerate() {
                    prop_assert!(SORTABLE.contains(&o.property));
                    prop_assert!(page.sort[..i].iter().all(|p| p.property != o.property),
                        "{} twice in {query}", o.property);
                }
                // The arithmetic never overflows, whatever the page number.
                let items: Vec<u32> = (0..30).collect();
                let out = page.apply(items, &[], |a, b, _, _| a.cmp(b));
                prop_assert!(out.content.len() as u64 <= page.size);
                prop_assert_eq!(out.pageable.offset, page.page.saturating_mul(page.size));
                prop_assert_eq!(out.total_pages, 30u64.div_ceil(page.size));
                prop_assert_eq!(out.empty, out.content.is_empty());
            }
            Err(e) => {
                prop_assert_eq!(e.code, "VALIDATION_FAILED");
                let fields: Vec<&str> = e.errors.iter().map(|f| f.field.as_str()).collect();
                let mut unique = fields.clone();
                unique.dedup();
                prop_assert_eq!(fields.len(), unique.len(), "one error per parameter");
                prop_assert!(fields.iter().all(|f| ["page", "size", "sort"].contains(f)));
            }
        }
    }

    #[test]
    fn a_repeated_sort_property_keeps_its_first_direction(
        first in prop::sample::select(SORTABLE),
        n in 1usize..40,
    ) {
        let mut q = format!("sort={first},desc");
        for _ in 0..n {
            q.push_str(&format!("&sort={first},asc"));
        }
        let page = PageRequest::from_query(Some(&q), SORTABLE).unwrap();
        prop_assert_eq!(page.sort.len(), 1);
        prop_assert!(!page.sort[0].ascending);
    }
}

// ---------------------------------------------------------------------------------------
// JWT header and claims handling

const SECRET: &str = "property-secret";

fn verifier(issuer: Option<&str>, audience: Option<&str>) -> Verifier {
    Verifier::new(&JwtConfig {
        hs256_secret: Some(SECRET.into()),
        jwks_url: None,
        issuer: issuer.map(str::to_owned),
        audience: audience.map(str::to_owned),
        org_claim: "org_id".into(),
        scopes: Default::default(),
    })
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

fn b64(v: &Value) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
}

fn sign_hs256(header: &Value, claims: &Value, secret: &str) -> String {
    use aws_lc_rs::hmac;
    let input = format!("{}.{}", b64(header), b64(claims));
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    let sig = hmac::sign(&key, input.as_bytes());
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn claim_value() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        2 => Just(None),
        1 => any_json().prop_map(Some),
        1 => "[a-z0-9-]{1,10}".prop_map(|s| Some(Value::from(s))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Fuzzer-chosen headers and claims, correctly signed with the secret: the verifier
    /// accepts exactly the tokens that are HS256, unexpired, already valid, from the right
    /// issuer, with a valid organization id, and then reports that organization.
    #[test]
    fn claims_decide_acceptance_exactly(
        alg in prop::sample::select(&["HS256", "HS384", "RS256", "none", "hs256"][..]),
        typ in claim_value(),
        kid in claim_value(),
        exp_offset in prop_oneof![Just(None), (-100_000i64..100_000).prop_map(Some)],
        nbf_offset in prop_oneof![Just(None), (-100_000i64..100_000).prop_map(Some)],
        iss in prop_oneof![Just(None), Just(Some("https://idp.example.com/")), Just(Some("https://evil.example.com/"))],
        org in claim_value(),
        extra in any_json(),
    ) {
        let mut header = json!({"alg": alg});
        if let Some(t) = typ { header["typ"] = t; }
        if let Some(k) = kid { header["kid"] = k; }
        let mut claims = json!({"sub": "s", "scope": "webhooks/read", "extra": extra});
        if let Some(e) = exp_offset { claims["exp"] = json!(now() + e); }
        if let Some(n) = nbf_offset { claims["nbf"] = json!(now() + n); }
        if let Some(i) = iss { claims["iss"] = json!(i); }
        if let Some(o) = &org { claims["org_id"] = o.clone(); }
        let token = sign_hs256(&header, &claims, SECRET);
        let result = block_on(verifier(Some("https://idp.example.com/"), None).verify(&token));

        // Away from the 30 s leeway's edges, so the clock cannot flip the answer.
        prop_assume!(exp_offset.is_none_or(|e| (e + 30).abs() > 5));
        prop_assume!(nbf_offset.is_none_or(|n| (n - 30).abs() > 5));
        let kid_ok = header.get("kid").is_none_or(|k| k.is_string() || k.is_null());
        let typ_ok = header.get("typ").is_none_or(|t| t.is_string() || t.is_null());
        let signature_ok = alg == "HS256" && kid_ok && typ_ok && token.len() <= MAX_TOKEN_LEN;
        let time_ok = exp_offset.is_some_and(|e| e > -30) && nbf_offset.is_none_or(|n| n < 30);
        let iss_ok = iss == Some("https://idp.example.com/");
        let org_id = org.as_ref().and_then(Value::as_str).filter(|o| filter::id("org", o).is_ok());
        match result {
            Ok(caller) => {
                prop_assert!(signature_ok && time_ok && iss_ok, "accepted {header} {claims}");
                prop_assert_eq!(Some(caller.org_id.as_str()), org_id);
            }
            Err(e) if e.status == StatusCode::FORBIDDEN => {
                prop_assert_eq!(e.code, "ORG_CLAIM_MISSING");
                prop_assert!(signature_ok && time_ok && iss_ok && org_id.is_none());
            }
            Err(e) => {
                prop_assert_eq!((e.status, e.code.as_str()), (StatusCode::UNAUTHORIZED, "INVALID_TOKEN"));
                prop_assert!(!(signature_ok && time_ok && iss_ok), "refused {header} {claims}: {e}");
            }
        }
    }

    /// Without the secret nothing is accepted: arbitrary text, and valid tokens with one
    /// character changed anywhere.
    #[test]
    fn nothing_unsigned_or_altered_is_accepted(
        junk in ".{0,300}",
        org in "[a-z]{1,8}",
        pos in any::<prop::sample::Index>(),
        replacement in "[A-Za-z0-9_.=-]",
    ) {
        let v = verifier(None, None);
        prop_assert!(block_on(v.verify(&junk)).is_err());
        let good = mint_hs256(SECRET, "org_id", &org, &ALL_SCOPES, Duration::from_secs(600));
        prop_assert_eq!(block_on(v.verify(&good)).unwrap().org_id, org.clone());
        let i = pos.index(good.len());
        let mut altered = good.clone();
        altered.replace_range(i..i + 1, &replacement);
        prop_assume!(altered != good);
        if let Ok(caller) = block_on(v.verify(&altered)) {
            // Only a change that decodes to the same bytes (the last base64 character's
            // unused bits) may pass, and then it is the same token.
            prop_assert_eq!(&caller.org_id, &org);
            prop_assert!(i > good.rfind('.').unwrap());
        }
        let other = mint_hs256("another-secret", "org_id", &org, &ALL_SCOPES, Duration::from_secs(600));
        prop_assert!(block_on(v.verify(&other)).is_err());
    }
}

// ---------------------------------------------------------------------------------------
// Retry-After

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn retry_after_is_bounded_for_any_value(value in prop_oneof![
        ".{0,40}",
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        (0u64..253_402_300_800).prop_map(|secs| httpdate::fmt_http_date(
            SystemTime::UNIX_EPOCH + Duration::from_secs(secs))),
    ]) {
        if let Some(d) = parse_retry_after(&value, now_ms()) {
            prop_assert!(d <= MAX_RETRY_AFTER, "{value:?} -> {d:?}");
        }
    }

    #[test]
    fn retry_after_seconds_are_exact_up_to_the_bound(secs in 0u64..2_000_000, pad in " {0,3}") {
        let d = parse_retry_after(&format!("{pad}{secs}{pad}"), now_ms()).unwrap();
        prop_assert_eq!(d, Duration::from_secs(secs).min(MAX_RETRY_AFTER));
    }

    #[test]
    fn retry_after_dates_count_from_now(ahead in 10u64..1_000_000) {
        let at = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(ahead));
        let d = parse_retry_after(&at, now_ms()).unwrap();
        prop_assert!(d <= Duration::from_secs(ahead).min(MAX_RETRY_AFTER));
        prop_assert!(d + Duration::from_secs(5) >= Duration::from_secs(ahead).min(MAX_RETRY_AFTER));
    }
}

// ---------------------------------------------------------------------------------------
// Routing

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn routes_bound_ids_and_never_panic(
        prefix in prop::sample::select(&["", "/prod", "/production", "/prod/"][..]),
        path in prop_oneof![
            "(/[a-z%0-9.]{0,12}){0,5}/?",
            ".{0,60}",
            "[%0-9A-F]{0,800}".prop_map(|s| format!("/webhooksubscription/{s}")),
            "[a-z]{0,300}".prop_map(|s| format!("/message/getmessagebyid/{s}")),
        ],
        method in prop::sample::select(&[Method::GET, Method::POST, Method::DELETE, Method::PUT, Method::HEAD][..]),
    ) {
        let full = format!("{prefix}{path}");
        match Route::resolve(&method, &full) {
            Ok(Route::GetSubscription(id)) | Ok(Route::DeleteSubscription(id))
            | Ok(Route::GetSubscriptionSecret(id)) => {
                prop_assert!(!id.as_str().is_empty() && id.as_str().chars().count() <= 256);
            }
            Ok(Route::GetMessage(id)) => {
                prop_assert!(!id.as_str().is_empty() && id.as_str().chars().count() <= 256);
            }
            Ok(route) => prop_assert_eq!(route.method(), method),
            Err(e) => {
                prop_assert!(e.status == StatusCode::NOT_FOUND || e.status == StatusCode::METHOD_NOT_ALLOWED);
                prop_assert!(e.detail.len() < 1024, "the path is echoed unbounded");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Payload filters (`payloadFilter`)

/// Paths into [`filter_document`]'s shape, and some that miss.
fn filter_path() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_owned()),
        Just("b.c".to_owned()),
        Just("list".to_owned()),
        Just("missing.x".to_owned()),
        "[a-c]{1,2}(\\.[a-c]{1,2}){0,2}",
    ]
}

fn filter_scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0i64..4).prop_map(Value::from),
        "[xy]{0,2}".prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
    ]
}

/// Valid filters, up to three deep and eight conditions: two of them, wrapped twice, stay
/// within every limit.
fn payload_filter() -> impl Strategy<Value = Value> {
    let condition = prop_oneof![
        filter_scalar(),
        filter_scalar().prop_map(|v| json!({"$eq": v})),
        prop::collection::vec(filter_scalar(), 1..4).prop_map(|v| json!({"$in": v})),
        "[xy]{0,2}".prop_map(|p| json!({"$prefix": p})),
        any::<bool>().prop_map(|b| json!({"$exists": b})),
        (0i64..4, 0i64..4).prop_map(|(lo, hi)| json!({"$gte": lo, "$lt": hi})),
    ];
    let leaf = (filter_path(), condition).prop_map(|(p, c)| {
        let mut m = Map::new();
        m.insert(p, c);
        Value::Object(m)
    });
    leaf.prop_recursive(2, 8, 2, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"$and": v})),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"$or": v})),
            inner.prop_map(|f| json!({"$not": f})),
        ]
    })
}

/// Documents of the shape the paths look into.
fn filter_document() -> impl Strategy<Value = Value> {
    (
        proptest::option::of(filter_scalar()),
        proptest::option::of(filter_scalar()),
        prop::collection::vec(filter_scalar(), 0..3),
    )
        .prop_map(|(a, c, list)| {
            let mut doc = json!({"b": {}, "list": list});
            if let Some(a) = a {
                doc["a"] = a;
            }
            if let Some(c) = c {
                doc["b"]["c"] = c;
            }
            doc
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any JSON is refused, or is a filter within its size whose stored JSON reads back to
    /// the same filter, deciding every document alike.
    #[test]
    fn any_json_is_a_bounded_filter_that_reads_back_or_refused(value in any_json(), doc in filter_document()) {
        use webhook_core::payload_filter::{PayloadFilter, MAX_BYTES};
        if let Ok(f) = PayloadFilter::parse(&value) {
            prop_assert!(f.json().len() <= MAX_BYTES);
            let again = PayloadFilter::from_stored(f.json()).unwrap();
            prop_assert_eq!(&again, &f);
            prop_assert_eq!(again.matches(&doc), f.matches(&doc));
        }
    }

    /// `$not`, `$and`, `$or` and a filter's several members mean what they say, on any
    /// document.
    #[test]
    fn the_logical_operators_compose(f in payload_filter(), g in payload_filter(), doc in filter_document()) {
        use webhook_core::payload_filter::PayloadFilter;
        let eval = |v: Value| PayloadFilter::parse(&v).unwrap().matches(&doc);
        let (a, b) = (eval(f.clone()), eval(g.clone()));
        prop_assert_eq!(eval(json!({"$not": f.clone()})), !a);
        prop_assert_eq!(eval(json!({"$and": [f.clone(), g.clone()]})), a && b);
        prop_assert_eq!(eval(json!({"$or": [f.clone(), g.clone()]})), a || b);
        prop_assert_eq!(eval(json!({"$not": {"$or": [f, g]}})), !a && !b);
    }
}
