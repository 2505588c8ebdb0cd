//! SSRF: a client chooses the address the service calls, so it must never make the service
//! call anything but public addresses (docs/decisions/callback-address-policy.md). For the handshake
//! (`subscriptions::create_subscription`) and for deliveries (`delivery::deliver`), with the
//! real policy, resolver, HTTP client and SQLite store:
//!
//! - every forbidden range as a literal, in every spelling (decimal, hex, octal, short IPv4,
//!   IPv4-mapped / NAT64 / 6to4 IPv6, `0.0.0.0`, `[::]`);
//! - hostnames that resolve to them (through a test resolver);
//! - a DNS answer that changes between the check and the connection (rebinding);
//! - a public callback that redirects to a forbidden one.
//!
//! Each is refused with `ADDRESS_FORBIDDEN` (the redirect: with the 3xx as a failure) and
//! **no connection is made**: the forbidden addresses are real, listening, well-behaved
//! callbacks ("tripwires") that would pass the handshake, so a missing protection shows up
//! as a success and a counted connection, not as a connect error.
//!
//! To listen on private and public addresses without any packet leaving the machine, the
//! tests run in a network namespace of their own whose only interface is a loopback holding
//! those addresses: the wrapper test `ssrf_suite_in_an_isolated_network` re-runs this binary's
//! `isolated::` tests there (they are `#[ignore]`d on the host and refuse to run outside).

use crate::isolated_network;

use isolated_network::run_isolated;

/// A public (not forbidden) address, local to the namespace.
const PUBLIC_V4: &str = "11.22.33.44";
const PUBLIC_V6: &str = "2a0a:1::1";

/// Forbidden addresses put on the namespace's loopback so a tripwire can catch them.
const FORBIDDEN_ON_LO: &[&str] = &[
    "10.0.0.1",
    "172.16.0.1",
    "172.31.255.254",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "100.127.255.254",
    "198.18.0.1",
    "192.0.0.1",
    "192.0.2.1",
    "198.51.100.1",
    "203.0.113.1",
    "192.88.99.1",
    "240.0.0.1",
    "fc00::1",
    "fd00::1",
    "fec0::1",
    "2001:db8::1",
    "100::1",
    "2001::1",
    "64:ff9b:1::1",
    "64:ff9b::a00:1",
    "2002:a00:1::1",
    "3fff::1",
];

#[test]
fn ssrf_suite_in_an_isolated_network() {
    if isolated_network::in_isolated_network() {
        return; // this is the inner run: the isolated:: tests do the work
    }
    let mut addresses = vec![PUBLIC_V4, PUBLIC_V6];
    addresses.extend_from_slice(FORBIDDEN_ON_LO);
    run_isolated("security_ssrf::isolated::", &addresses);
}

mod isolated {
    use std::net::{IpAddr, SocketAddr};
    use std::time::Duration;

    use http::StatusCode;
    use webhook_core::api::subscriptions;
    use webhook_core::auth::jwt::ALL_SCOPES;
    use webhook_core::delivery::{self, Verdict};
    use webhook_core::ids::OrgId;
    use webhook_core::model::SubscriptionRequest;
    use webhook_core::page::{PageRequest, MAX_SIZE};
    use webhook_core::queue::{DeliveryJob, DeliveryQueue, Lease};
    use webhook_core::store::{Store, Upsert};
    use webhook_core::{ApiError, App, Caller};

    use super::*;
    use crate::isolated_network::{config, require_isolated, Behaviour, FakeDns, Peer, TestApp};

    const ORG: &str = "org-1";
    const FILTER: &str = "/orgId/org-1/department/dep-1/message?direction=inbound";

    fn caller() -> Caller {
        Caller::new(ORG, &ALL_SCOPES)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    async fn create(app: &App, uri: &str) -> Result<(), ApiError> {
        let request = SubscriptionRequest {
            uri: Some(uri.to_owned()),
            event_filters: Some(vec![FILTER.to_owned()]),
            expires_date_in_millies: None,
            ordered: None,
            rate_limit: None,
            destination: None,
            payload_filter: None,
            retry_schedule: None,
            signature_scheme: None,
            custom_headers: None,
        };
        subscriptions::create_subscription(app, &caller(), request)
            .await
            .map(|_| ())
    }

    fn assert_forbidden(result: Result<(), ApiError>, what: &str) {
        let e = result.expect_err(&format!("{what}: the handshake was allowed"));
        assert_eq!(
            (e.status, e.code.as_str()),
            (StatusCode::BAD_REQUEST, "ADDRESS_FORBIDDEN"),
            "{what}: {e}"
        );
    }

    /// A tripwire: a correct callback on every address of the namespace, at one port.
    async fn tripwire() -> Peer {
        Peer::start("[::]:0".parse().unwrap(), Behaviour::Echo).await
    }

    /// Every spelling of a forbidden host, as it appears in a URI (with `{port}`).
    fn forbidden_literals() -> Vec<String> {
        let mut hosts: Vec<String> = [
            // loopback, "this network", unspecified
            "127.0.0.1",
            "127.0.0.2",
            "127.1",
            "2130706433",
            "0x7f000001",
            "0x7f.0.0.1",
            "0177.0.0.1",
            "017700000001",
            "0.0.0.0",
            "0",
            "[::]",
            "[::1]",
            "[0:0:0:0:0:0:0:1]",
            "[::ffff:127.0.0.1]",
            "[::ffff:7f00:1]",
            "[::127.0.0.1]",
            // private, link-local (cloud metadata), CGNAT: literal and other spellings
            "10.1",
            "167772161",
            "0xa000001",
            "012.0.0.1",
            "169.254.43518",
            "2852039166",
            "0xa9fea9fe",
            "0251.0376.0251.0376",
            "[::ffff:169.254.169.254]",
            "[::ffff:a00:1]",
            "[64:ff9b::a9fe:a9fe]",
            "[64:ff9b::a00:1]",
            "[2002:a9fe:a9fe::1]",
            "[2002:a00:1::1]",
            "[2002:7f00:1::1]",
            // IPv6 link-local
            "[fe80::1]",
            "[fe80::a9fe:a9fe]",
            // multicast, broadcast
            "224.0.0.1",
            "255.255.255.255",
            "[ff02::1]",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for a in FORBIDDEN_ON_LO {
            hosts.push(if a.contains(':') {
                format!("[{a}]")
            } else {
                a.to_string()
            });
        }
        hosts
    }

    #[tokio::test]
    #[ignore = "runs inside the network namespace made by ssrf_suite_in_an_isolated_network"]
    async fn isolated_control_the_tripwire_catches_every_reachable_address() {
        // With private callbacks allowed, the same URIs reach the tripwire and pass the
        // handshake: a refusal below is the policy's doing, not an unreachable address.
        require_isolated();
        let wire = tripwire().await;
        let app = TestApp::new(config(true, &[]), FakeDns::new());
        let mut reached = 0;
        for host in [
            "127.0.0.1",
            "2130706433",
            "0x7f000001",
            "127.1",
            "[::1]",
            "[::]",
            "0.0.0.0",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain(
            FORBIDDEN_ON_LO
                .iter()
                .filter(|a| **a != "240.0.0.1")
                .map(|a| {
                    if a.contains(':') {
                        format!("[{a}]")
                    } else {
                        a.to_string()
                    }
                }),
        ) {
            let uri = format!("http://{host}:{}/hook", wire.port());
            create(&app.app, &uri)
                .await
                .unwrap_or_else(|e| panic!("control {uri}: {e}"));
            reached += 1;
        }
        assert_eq!(wire.connections(), reached);
        // And a public address passes with private callbacks refused.
        let strict = TestApp::new(config(false, &[]), FakeDns::new());
        for public in [PUBLIC_V4.to_string(), format!("[{PUBLIC_V6}]")] {
            create(
                &strict.app,
                &format!("http://{public}:{}/hook", wire.port()),
            )
            .await
            .unwrap();
        }
        assert_eq!(wire.connections(), reached + 2);
    }

    #[tokio::test]
    #[ignore = "runs inside the network namespace made by ssrf_suite_in_an_isolated_network"]
    async fn isolated_handshake_refuses_forbidden_literals_in_every_spelling() {
        require_isolated();
        let wire = tripwire().await;
        let app = TestApp::new(config(false, &[]), FakeDns::new());
        for host in forbidden_literals() {
            let uri = format!("http://{host}:{}/hook", wire.port());
            assert_forbidden(create(&app.app, &uri).await, &uri);
        }
        assert_eq!(
            wire.connections(),
            0,
            "a forbidden address was connected to"
        );
        assert!(app
            .store
            .list_subscriptions(&OrgId::from(ORG), &PageRequest::first(MAX_SIZE), 0)
            .await
            .unwrap()
            .content
            .is_empty());
    }

    #[tokio::test]
    #[ignore = "runs inside the network namespace made by ssrf_suite_in_an_isolated_network"]
    async fn isolated_handshake_refuses_hostnames_resolving_to_forbidden_addresses() {
        require_isolated();
        let wire = tripwire().await;
        let dns = FakeDns::new();
        let app = TestApp::new(config(false, &[]), dns.clone());
        let uri = format!("http://callback.test:{}/hook", wire.port());
        let mut answers: Vec<Vec<IpAddr>> = ["127.0.0.1", "::1", "0.0.0.0", "::"]
            .iter()
            .chain(FORBIDDEN_ON_LO)
            .map(|a| vec![ip(a)])
            .collect();
        answers.push(vec![ip("::ffff:169.254.169.254")]);
        // One forbidden address among public ones is enough to refuse the host.
        answers.push(vec![ip(PUBLIC_V4), ip("10.0.0.1")]);
        answers.push(vec![ip("169.254.169.254"), ip(PUBLIC_V4)]);
        answers.push(vec![ip(PUBLIC_V6), ip("fd00::1")]);
        for ips in answers {
            dns.set("callback.test", &ips);
            assert_forbidden(create(&app.app, &uri).await, &format!("{ips:?}"));
            assert_eq!(dns.lookups("callback.test"), 1);
        }
        assert_eq!(
            wire.connections(),
            0,
            "a forbidden address was connected to"
        );
        // Control: the same hostname resolving to a public address passes.
        dns.set("callback.test", &[ip(PUBLIC_V4)]);
        create(&app.app, &uri).await.unwrap();
        assert_eq!(wire.connections(), 1);
    }

    /// The answer changes between the check and the connection: the first lookup is public,
    /// every later one private. The handshake resolves once and connects to what it
    /// checked; a later delivery resolves again and is refused before connecting.
    #[tokio::test]
    #[ignore = "runs inside the network namespace made by ssrf_suite_in_an_isolated_network"]
    async fn isolated_dns_rebinding_never_reaches_the_private_address() {
        require_isolated();
        let public = Peer::start(SocketAddr::new(ip(PUBLIC_V4), 0), Behaviour::Echo).await;
        let private = Peer::start(
            SocketAddr::new(ip("127.0.0.1"), public.port()),
            Behaviour::Echo,
        )
        .await;
        let metadata = Peer::start(
            SocketAddr::new(ip("169.254.169.254"), public.port()),
            Behaviour::Echo,
        )
        .await;
        let dns = FakeDns::new();
        dns.sequence(
            "rebind.test",
            &[
                &[ip(PUBLIC_V4)],
                &[ip("127.0.0.1")],
                &[ip("169.254.169.254")],
            ],
        );
        let t = TestApp::new(config(false, &[]), dns.clone());
        let uri = format!("http://rebind.test:{}/hook", public.port());
        create(&t.app, &uri).await.unwrap();
        assert_eq!(
            dns.lookups("rebind.test"),
            1,
            "one lookup per call: no check-then-resolve window"
        );
        assert_eq!(public.connections(), 1);

        let sub = &t
            .store
            .list_subscriptions(&OrgId::from(ORG), &PageRequest::first(MAX_SIZE), 0)
            .await
            .unwrap()
            .content[0];
        for _ in 0..2 {
            let lease = lease_for(&t, sub.id.as_str()).await;
            match delivery::deliver(&t.app, t.store.as_ref(), t.store.as_ref(), &lease)
                .await
                .unwrap()
            {
                Verdict::Retry { reason, .. } => {
                    assert_eq!(reason.to_string(), "ADDRESS_FORBIDDEN")
                }
                other => panic!("delivery after rebinding: {other:?}"),
            }
        }
        assert_eq!(dns.lookups("rebind.test"), 3);
        assert_eq!(
            (private.connections(), metadata.connections()),
            (0, 0),
            "the rebound address was connected to"
        );
        assert_eq!(public.connections(), 1);
    }

    /// A public callback answers with a redirect to a forbidden address; redirects are
    /// never followed (a followed redirect to a literal would not even pass the resolver).
    #[tokio::test]
    #[ignore = "runs inside the network namespace made by ssrf_suite_in_an_isolated_network"]
    async fn isolated_redirects_to_forbidden_addresses_are_not_followed() {
        require_isolated();
        let wire = tripwire().await;
        let targets = [
            format!("http://127.0.0.1:{}/hook", wire.port()),
            format!("http://169.254.169.254:{}/latest/meta-data/", wire.port()),
            format!("http://[::1]:{}/hook", wire.port()),
            format!("http://2130706433:{}/hook", wire.port()),
        ];
        for allow_private in [false, true] {
            let app = TestApp::new(config(allow_private, &[]), FakeDns::new());
            for status in [301u16, 302, 303, 307, 308] {
                for target in &targets {
                    let redirector = Peer::start(
                        SocketAddr::new(ip(PUBLIC_V4), 0),
                        Behaviour::Redirect(status, target.clone()),
                    )
                    .await;
                    let e = create(&app.app, &redirector.uri("/hook"))
                        .await
                        .expect_err("a redirect passed the handshake");
                    assert_eq!(e.code, "BAD_STATUS", "{status} to {target}: {e}");
                    assert!(e.detail.contains(&status.to_string()), "{}", e.detail);
                    assert_eq!(redirector.connections(), 1);
                }
            }
        }
        assert_eq!(wire.connections(), 0, "a redirect was followed");

        // Deliveries: a subscription whose callback later starts redirecting.
        let t = TestApp::new(config(false, &[]), FakeDns::new());
        let redirector = Peer::start(
            SocketAddr::new(ip(PUBLIC_V4), 0),
            Behaviour::Redirect(307, targets[1].clone()),
        )
        .await;
        let id = store_subscription(&t, &redirector.uri("/hook")).await;
        let lease = lease_for(&t, &id).await;
        match delivery::deliver(&t.app, t.store.as_ref(), t.store.as_ref(), &lease)
            .await
            .unwrap()
        {
            Verdict::Retry { reason, .. } => assert_eq!(reason.to_string(), "status 307"),
            other => panic!("{other:?}"),
        }
        assert_eq!(redirector.connections(), 1);
        assert_eq!(wire.connections(), 0, "a delivery followed a redirect");
    }

    /// A subscription stored directly, as one created while the policy allowed it (or
    /// before the operator tightened it): deliveries must re-check at connect time.
    async fn store_subscription(t: &TestApp, uri: &str) -> String {
        let now = chrono::Utc::now().timestamp_millis();
        let (sub, _) = t
            .store
            .upsert_subscription(Upsert {
                org_id: ORG.into(),
                uri: uri.into(),
                event_filters: vec![FILTER.into()],
                disabled_filters: vec![],
                expires_at: now + 3_600_000,
                now,
                new_id: uuid::Uuid::now_v7().to_string().into(),
                new_secret: webhook_core::secret::new_signing_secret(),
                max_per_org: 10_000,
                ordered: None,
                rate_limit: None,
                role_arn: None,
                external_id: None,
                payload_filter: None,
                retry_schedule: None,
                custom_headers: None,
            })
            .await
            .unwrap();
        sub.id.to_string()
    }

    /// Enqueues one notification for the subscription and leases it, as a worker would.
    async fn lease_for(t: &TestApp, subscription_id: &str) -> Lease {
        let job = DeliveryJob {
            id: uuid::Uuid::new_v4().to_string().into(),
            org_id: ORG.into(),
            subscription_id: subscription_id.into(),
            body: r#"{"uuid":"u","timestamp":1,"event":"e","subscriptionId":"s"}"#.into(),
            created_at: 1,
            trigger: Default::default(),
            attempts: 0,
            not_before: None,
            traceparent: None,
            ordered: false,
            history_attempts: 0,
        };
        t.store.enqueue(vec![job.clone()]).await.unwrap();
        let leases = t
            .store
            .receive(100, 100, Duration::from_secs(60))
            .await
            .unwrap();
        leases
            .into_iter()
            .find(|l| l.job.id == job.id)
            .expect("the job is leased")
    }

    #[tokio::test]
    #[ignore = "runs inside the network namespace made by ssrf_suite_in_an_isolated_network"]
    async fn isolated_deliveries_refuse_forbidden_literals_and_hostnames() {
        require_isolated();
        let wire = tripwire().await;
        let dns = FakeDns::new();
        let t = TestApp::new(config(false, &[]), dns.clone());
        let mut uris: Vec<String> = forbidden_literals()
            .iter()
            .map(|h| format!("http://{h}:{}/hook", wire.port()))
            .collect();
        for (i, a) in ["127.0.0.1", "::1", "169.254.169.254", "10.0.0.1", "fd00::1"]
            .iter()
            .enumerate()
        {
            let host = format!("internal-{i}.test");
            dns.set(&host, &[ip(a)]);
            uris.push(format!("http://{host}:{}/hook", wire.port()));
        }
        dns.set("mixed.test", &[ip(PUBLIC_V4), ip("192.168.1.1")]);
        uris.push(format!("http://mixed.test:{}/hook", wire.port()));
        for uri in &uris {
            let id = store_subscription(&t, uri).await;
            let lease = lease_for(&t, &id).await;
            match delivery::deliver(&t.app, t.store.as_ref(), t.store.as_ref(), &lease)
                .await
                .unwrap()
            {
                Verdict::Retry { reason, .. } => {
                    assert_eq!(reason.to_string(), "ADDRESS_FORBIDDEN", "{uri}")
                }
                other => panic!("{uri}: {other:?}"),
            }
        }
        assert_eq!(
            wire.connections(),
            0,
            "a delivery connected to a forbidden address"
        );

        // Control: the same kind of stored subscription at a public address is delivered,
        // and with private callbacks allowed the tripwire is reached.
        dns.set("public.test", &[ip(PUBLIC_V4)]);
        let id = store_subscription(&t, &format!("http://public.test:{}/hook", wire.port())).await;
        let lease = lease_for(&t, &id).await;
        assert_eq!(
            delivery::deliver(&t.app, t.store.as_ref(), t.store.as_ref(), &lease)
                .await
                .unwrap(),
            Verdict::Delivered
        );
        let permissive = t.sibling(config(true, &[]), dns.clone());
        let id = store_subscription(&t, &format!("http://127.0.0.1:{}/hook", wire.port())).await;
        let lease = lease_for(&t, &id).await;
        assert_eq!(
            delivery::deliver(&permissive, t.store.as_ref(), t.store.as_ref(), &lease)
                .await
                .unwrap(),
            Verdict::Delivered
        );
        assert_eq!(wire.connections(), 2);
    }
}
