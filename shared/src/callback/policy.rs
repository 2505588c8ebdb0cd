//! Which callback addresses the service may call (SSRF;
//! docs/decisions/callback-address-policy.md).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use url::{Host, Url};

use super::CallbackTarget;

/// The longest callback `uri` accepted, in bytes.
pub const MAX_URI_LEN: usize = 2048;

/// Ranges no callback may reach unless private callbacks are allowed.
const DENIED: &[&str] = &[
    // IPv4
    "0.0.0.0/8",       // "this network", 0.0.0.0
    "10.0.0.0/8",      // private
    "100.64.0.0/10",   // carrier-grade NAT
    "127.0.0.0/8",     // loopback
    "169.254.0.0/16",  // link-local, cloud metadata
    "172.16.0.0/12",   // private
    "192.0.0.0/24",    // IETF protocol assignments
    "192.0.2.0/24",    // documentation
    "192.88.99.0/24",  // 6to4 relay anycast
    "192.168.0.0/16",  // private
    "198.18.0.0/15",   // benchmarking
    "198.51.100.0/24", // documentation
    "203.0.113.0/24",  // documentation
    "224.0.0.0/4",     // multicast
    "240.0.0.0/4",     // reserved, broadcast
    // IPv6 (mapped, NAT64 and 6to4 forms are unwrapped and checked as IPv4)
    "::/96",          // unspecified, loopback, IPv4-compatible
    "64:ff9b:1::/48", // local-use NAT64
    "100::/64",       // discard
    "2001::/23",      // IETF protocol assignments, Teredo
    "2001:db8::/32",  // documentation
    "3fff::/20",      // documentation
    "fc00::/7",       // unique local
    "fe80::/10",      // link-local
    "fec0::/10",      // site-local (deprecated)
    "ff00::/8",       // multicast
];

/// Why a callback `uri` is refused before any lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UriProblem {
    /// Not a usable callback URL; the message says why.
    Invalid(String),
    /// A literal address in a forbidden range.
    Forbidden(IpAddr),
}

/// Which callbacks may be called: public addresses over HTTPS, unless private or plain HTTP ones are allowed.
#[derive(Debug, Clone)]
pub struct AddressPolicy {
    allow_private: bool,
    allow_http: bool,
    denied: Vec<IpNet>,
}

impl AddressPolicy {
    /// The policy of `WEBHOOKS_ALLOW_PRIVATE_CALLBACKS` and `WEBHOOKS_ALLOW_HTTP_CALLBACKS`.
    pub fn new(allow_private: bool, allow_http: bool) -> Self {
        AddressPolicy {
            allow_private,
            allow_http,
            denied: DENIED
                .iter()
                .map(|n| n.parse().expect("static range"))
                .collect(),
        }
    }

    /// Whether a connection to `ip` is allowed.
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.allow_private || !self.is_forbidden(ip)
    }

    fn is_forbidden(&self, ip: IpAddr) -> bool {
        if let IpAddr::V6(v6) = ip {
            if let Some(v4) = embedded_ipv4(v6) {
                return self.is_forbidden(IpAddr::V4(v4));
            }
        }
        self.denied.iter().any(|net| net.contains(&ip))
    }

    /// Parses and checks a callback URI before any connection is made: the
    /// only way to get a [`CallbackTarget`], which every outbound call takes.
    pub fn check_uri(&self, uri: &str) -> Result<CallbackTarget, UriProblem> {
        let invalid = |m: &str| Err(UriProblem::Invalid(m.to_owned()));
        if uri.len() > MAX_URI_LEN {
            return invalid("must be at most 2048 characters");
        }
        let Ok(url) = Url::parse(uri) else {
            return invalid("must be an absolute https URL");
        };
        match url.scheme() {
            "https" => {}
            "http" if self.allow_http => {}
            "http" => return invalid("must use https"),
            _ => return invalid("must be an absolute https URL"),
        }
        if !url.username().is_empty() || url.password().is_some() {
            return invalid("must not contain user information");
        }
        if url.fragment().is_some() {
            return invalid("must not contain a fragment");
        }
        let ip = match url.host() {
            None => return invalid("must have a host"),
            Some(Host::Ipv4(ip)) => IpAddr::V4(ip),
            Some(Host::Ipv6(ip)) => IpAddr::V6(ip),
            Some(Host::Domain(_)) => return Ok(CallbackTarget(url)),
        };
        if self.allows(ip) {
            Ok(CallbackTarget(url))
        } else {
            Err(UriProblem::Forbidden(ip))
        }
    }
}

/// The IPv4 address inside an IPv4-mapped, NAT64 (64:ff9b::/96) or 6to4
/// (2002::/16) IPv6 address.
fn embedded_ipv4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let o = v6.octets();
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    if v6.segments()[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    if v6.segments()[0] == 0x2002 {
        return Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strict() -> AddressPolicy {
        AddressPolicy::new(false, false)
    }

    #[test]
    fn refuses_every_forbidden_range() {
        let p = strict();
        for ip in [
            "0.0.0.0",
            "10.1.2.3",
            "100.64.0.1",
            "127.0.0.1",
            "169.254.169.254",
            "172.31.255.255",
            "192.0.2.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::1",
            "2001:db8::1",
            "::127.0.0.1",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(!p.allows(ip), "{ip} allowed");
        }
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
            "2002:808:808::1",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(p.allows(ip), "{ip} refused");
        }
    }

    #[test]
    fn checks_literal_hosts_in_every_spelling() {
        let p = strict();
        for uri in [
            "https://127.0.0.1/",
            "https://2130706433/",
            "https://0x7f000001/",
            "https://0177.0.0.1/",
            "https://127.1/",
            "https://0.0.0.0/",
            "https://[::]/",
            "https://[::ffff:169.254.169.254]/",
        ] {
            assert!(
                matches!(p.check_uri(uri), Err(UriProblem::Forbidden(_))),
                "{uri}"
            );
        }
        assert!(p.check_uri("https://example.com/hook").is_ok());
    }

    #[test]
    fn validates_the_shape() {
        let p = strict();
        for uri in [
            "http://example.com/",
            "ftp://example.com/",
            "/relative",
            "https://user:pw@example.com/",
            "https://example.com/#frag",
        ] {
            assert!(
                matches!(p.check_uri(uri), Err(UriProblem::Invalid(_))),
                "{uri}"
            );
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_URI_LEN));
        assert!(matches!(p.check_uri(&long), Err(UriProblem::Invalid(_))));
        assert!(AddressPolicy::new(true, true)
            .check_uri("http://127.0.0.1:9/")
            .is_ok());
    }
}
