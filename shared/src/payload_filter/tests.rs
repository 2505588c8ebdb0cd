use serde_json::json;

use super::*;

fn filter(value: Value) -> PayloadFilter {
    PayloadFilter::parse(&value).unwrap_or_else(|e| panic!("{value}: {e}"))
}

fn refused(value: Value) -> FilterError {
    PayloadFilter::parse(&value).expect_err(&value.to_string())
}

fn inbound() -> Value {
    json!({
        "event": "/orgId/o/department/d/message?direction=inbound",
        "messageInfo": {"organizationId": "o", "departmentId": "d", "lastUpdated": 1_700_000_000_000_i64,
                        "messageId": "m1", "carrierMessageId": "c1", "status": "RECEIVED"},
        "message": {"id": "m1", "owner": null, "time": null, "direction": "in",
                    "to": ["+15550001", "+15550002"], "from": "+15559999", "text": "STOP now",
                    "media": [], "attachments": []}
    })
}

#[test]
fn each_operator_matches_and_refuses() {
    let doc = inbound();
    for (f, expected) in [
        (json!({"messageInfo.status": "RECEIVED"}), true),
        (json!({"messageInfo.status": "SENT"}), false),
        (json!({"messageInfo.status": {"$eq": "RECEIVED"}}), true),
        (json!({"message.to": "+15550002"}), true),
        (
            json!({"message.to": {"$in": ["+15550003", "+15550001"]}}),
            true,
        ),
        (json!({"message.to": {"$in": ["+15550003"]}}), false),
        (json!({"message.text": {"$prefix": "STOP"}}), true),
        (json!({"message.text": {"$prefix": "stop"}}), false),
        (json!({"message.owner": {"$exists": false}}), true),
        (json!({"message.owner": null}), true),
        (json!({"message.media": {"$exists": false}}), true),
        (json!({"message.to": {"$exists": true}}), true),
        (json!({"contactInfo": {"$exists": true}}), false),
        (
            json!({"messageInfo.lastUpdated": {"$gte": 1_700_000_000_000_i64, "$lt": 1.8e12}}),
            true,
        ),
        (
            json!({"messageInfo.lastUpdated": {"$gt": 1_700_000_000_000_i64}}),
            false,
        ),
        (json!({"messageInfo.lastUpdated": 1.7e12}), true),
        (json!({"messageInfo.status": {"$lte": 5}}), false),
        (json!({"messageInfo.messageId": 1}), false),
        (
            json!({"$or": [{"message.from": "+1"}, {"message.from": "+15559999"}]}),
            true,
        ),
        (
            json!({"$and": [{"message.from": "+15559999"}, {"message.text": "x"}]}),
            false,
        ),
        (
            json!({"$not": {"message.text": {"$prefix": "STOP"}}}),
            false,
        ),
        (json!({"$not": {"missing.path": "x"}}), true),
        (json!({"message.to.0": "+15550001"}), false),
        (
            json!({"event": {"$prefix": "/orgId/o/"}, "messageInfo.status": "RECEIVED"}),
            true,
        ),
    ] {
        assert_eq!(filter(f.clone()).matches(&doc), expected, "{f}");
    }
}

#[test]
fn refuses_what_is_not_a_filter_naming_where() {
    for (f, at) in [
        (json!([]), ""),
        (json!("x"), ""),
        (json!({}), ""),
        (json!({"$or": []}), "$or"),
        (json!({"$or": {}}), "$or"),
        (json!({"$nor": []}), "$nor"),
        (json!({"a..b": 1}), "a..b"),
        (json!({"": 1}), ""),
        (json!({"a": [1]}), "a"),
        (json!({"a": {}}), "a"),
        (json!({"a": {"$regex": "x"}}), "a.$regex"),
        (json!({"a": {"$in": []}}), "a.$in"),
        (json!({"a": {"$in": [[1]]}}), "a.$in"),
        (json!({"a": {"$prefix": 1}}), "a.$prefix"),
        (json!({"a": {"$gt": "1"}}), "a.$gt"),
        (json!({"a": {"$exists": 1}}), "a.$exists"),
        (
            json!({"$or": [{"a": 1}, {"b": {"$eq": {}}}]}),
            "$or[1].b.$eq",
        ),
    ] {
        assert_eq!(refused(f.clone()).at, at, "{f}");
    }
}

/// Nested `$not`s: `depth` filters in all.
fn nested(depth: usize) -> Value {
    (1..depth).fold(json!({"a": 1}), |inner, _| json!({"$not": inner}))
}

/// `n` operands: one `$in` of `n` values.
fn operands(n: usize) -> Value {
    json!({"a": {"$in": (0..n).collect::<Vec<_>>()}})
}

#[test]
fn each_limit_is_accepted_and_one_past_it_refused() {
    filter(nested(MAX_DEPTH));
    assert!(refused(nested(MAX_DEPTH + 1)).problem.contains("deep"));
    filter(operands(MAX_OPERANDS));
    assert!(refused(operands(MAX_OPERANDS + 1))
        .problem
        .contains("values in all"));
    let branches = |n: usize| json!({"$or": (0..n).map(|i| json!({"a": i})).collect::<Vec<_>>()});
    filter(branches(MAX_BRANCHES));
    assert!(refused(branches(MAX_BRANCHES + 1))
        .problem
        .contains("filters"));
    // `{"a":"xxx…"}` is 8 bytes around the string.
    let sized = |n: usize| json!({"a": "x".repeat(n - 8)});
    assert_eq!(filter(sized(MAX_BYTES)).json().len(), MAX_BYTES);
    assert!(refused(sized(MAX_BYTES + 1)).problem.contains("bytes"));
}

#[test]
fn stored_json_is_compact_and_reads_back_past_the_limits() {
    let f = filter(json!({ "b": 1, "a": {"$in": ["x"]} }));
    assert_eq!(f.json(), r#"{"a":{"$in":["x"]},"b":1}"#);
    assert_eq!(PayloadFilter::from_stored(f.json()).unwrap(), f);
    let deep = serde_json::to_string(&nested(MAX_DEPTH + 3)).unwrap();
    assert!(PayloadFilter::from_stored(&deep).is_ok());
    assert!(PayloadFilter::from_stored("{").is_err());
}
