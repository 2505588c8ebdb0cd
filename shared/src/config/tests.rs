use super::*;

#[test]
fn durations() {
    assert_eq!(parse_duration("200ms"), Ok(Duration::from_millis(200)));
    assert_eq!(parse_duration(" 5s"), Ok(Duration::from_secs(5)));
    assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
    assert_eq!(parse_duration("90d"), Ok(Duration::from_secs(90 * DAY)));
    for bad in ["", "5", "s", "5 s", "-1s", "1w", "99999999999999999999y"] {
        assert!(parse_duration(bad).is_err(), "{bad}");
    }
}

#[test]
fn bad_values_name_their_variable() {
    let err = Config::from_lookup(Profile::Local, |k| {
        (k == "WEBHOOKS_RETRY_SCHEDULE").then(|| "5s,often".to_owned())
    })
    .unwrap_err();
    assert_eq!(err.var, "WEBHOOKS_RETRY_SCHEDULE");
    let err = Config::from_lookup(Profile::Local, |k| {
        (k == "WEBHOOKS_ALLOW_PRIVATE_CALLBACKS").then(|| "maybe".to_owned())
    })
    .unwrap_err();
    assert_eq!(err.var, "WEBHOOKS_ALLOW_PRIVATE_CALLBACKS");
}

#[test]
fn message_retention_has_the_duration_syntax_and_is_never_zero() {
    let default = Config::from_lookup(Profile::Lambda, |_| None).unwrap();
    assert_eq!(default.message_retention, Duration::from_secs(30 * DAY));
    let set = |v: &str| {
        let v = v.to_owned();
        Config::from_lookup(Profile::Local, move |k| {
            (k == "WEBHOOKS_MESSAGE_RETENTION").then(|| v.clone())
        })
    };
    assert_eq!(
        set("7d").unwrap().message_retention,
        Duration::from_secs(7 * DAY)
    );
    for bad in ["0d", "0ms", "soon", "30"] {
        assert_eq!(
            set(bad).unwrap_err().var,
            "WEBHOOKS_MESSAGE_RETENTION",
            "{bad}"
        );
    }
}

#[test]
fn scope_names_are_configurable() {
    let default = Config::from_lookup(Profile::Lambda, |_| None).unwrap();
    assert_eq!(default.jwt.scopes, ScopeConfig::default());
    assert_eq!(
        default.jwt.scopes.all(),
        ["webhooks/read", "webhooks/write"]
    );
    let custom = Config::from_lookup(Profile::Lambda, |k| match k {
        "WEBHOOKS_READ_SCOPES" => {
            Some(" https://com.beetexting.scopes/ReadContact , webhooks/read,".to_owned())
        }
        "WEBHOOKS_WRITE_SCOPES" => Some("https://com.beetexting.scopes/WriteContact".to_owned()),
        _ => None,
    })
    .unwrap();
    assert_eq!(
        custom.jwt.scopes.read,
        ["https://com.beetexting.scopes/ReadContact", "webhooks/read"]
    );
    assert_eq!(
        custom.jwt.scopes.write,
        ["https://com.beetexting.scopes/WriteContact"]
    );
    for bad in [",", "a b", "say\"hi\"", "back\\slash", "é"] {
        let err = Config::from_lookup(Profile::Local, |k| {
            (k == "WEBHOOKS_WRITE_SCOPES").then(|| bad.to_owned())
        })
        .unwrap_err();
        assert_eq!(err.var, "WEBHOOKS_WRITE_SCOPES", "{bad}");
    }
}

#[test]
fn profiles_differ_only_in_callback_policy() {
    let local = Config::from_lookup(Profile::Local, |_| None).unwrap();
    let lambda = Config::from_lookup(Profile::Lambda, |_| None).unwrap();
    assert!(local.allow_private_callbacks && local.allow_http_callbacks);
    assert!(!lambda.allow_private_callbacks && !lambda.allow_http_callbacks);
    assert_eq!(local.retry_schedule.len(), 10);
    assert_eq!(local.jwt.org_claim, "org_id");
}

#[test]
fn the_shutdown_grace_has_the_duration_syntax() {
    let default = Config::from_lookup(Profile::Local, |_| None).unwrap();
    assert_eq!(default.shutdown_grace, Duration::from_secs(20));
    let set = |v: &'static str| {
        Config::from_lookup(Profile::Local, move |k| {
            (k == "WEBHOOKS_SHUTDOWN_GRACE").then(|| v.to_owned())
        })
    };
    assert_eq!(
        set("500ms").unwrap().shutdown_grace,
        Duration::from_millis(500)
    );
    assert_eq!(set("soon").unwrap_err().var, "WEBHOOKS_SHUTDOWN_GRACE");
}
