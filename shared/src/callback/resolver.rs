//! DNS resolution that enforces the address policy: a host is refused if any
//! of its addresses is refused, and the connection goes only to the
//! addresses that were checked, so a DNS answer that changes between check
//! and connect (rebinding) cannot reach a forbidden address.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use async_trait::async_trait;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::AddressPolicy;

/// Why a callback host gave no address to connect to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// The lookup failed or found nothing; the message says why.
    #[error("DNS lookup failed: {0}")]
    Dns(String),
    /// The host resolved to an address the policy refuses.
    #[error("address {0} is not allowed for callbacks")]
    Forbidden(IpAddr),
}

/// Name resolution, injectable so tests can make a host resolve anywhere.
#[async_trait]
pub trait Dns: Send + Sync {
    /// The addresses `host` resolves to.
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>>;
}

/// The operating system's resolver.
pub struct SystemDns;

#[async_trait]
impl Dns for SystemDns {
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        Ok(tokio::net::lookup_host((host, 0))
            .await?
            .map(|a| a.ip())
            .collect())
    }
}

pub(crate) struct PolicyResolver {
    policy: Arc<AddressPolicy>,
    dns: Arc<dyn Dns>,
}

impl PolicyResolver {
    pub(crate) fn new(policy: Arc<AddressPolicy>, dns: Arc<dyn Dns>) -> Self {
        PolicyResolver { policy, dns }
    }
}

impl Resolve for PolicyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let dns = self.dns.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let ips = dns
                .lookup(&host)
                .await
                .map_err(|e| ResolveError::Dns(format!("{host}: {e}")))?;
            if ips.is_empty() {
                return Err(ResolveError::Dns(format!("{host}: no addresses")).into());
            }
            if let Some(bad) = ips.iter().find(|ip| !policy.allows(**ip)) {
                return Err(ResolveError::Forbidden(*bad).into());
            }
            let addrs: Addrs = Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}
