//! Outbound calls to client callbacks: the address policy, a resolver that
//! enforces it at connect time, the two calls ([`handshake`] and [`post`]),
//! and the classification of their failures ([`CallFailure`]). Both calls take a
//! [`CallbackTarget`], which only the policy makes: no call can skip it.

pub mod handshake;
pub mod policy;
pub mod post;
pub mod resolver;

use std::error::Error as StdError;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use url::Url;

use crate::failure::CallFailure;

pub use policy::{AddressPolicy, UriProblem};
pub use resolver::{Dns, ResolveError, SystemDns};

/// A callback URL that passed the [`AddressPolicy`] (scheme, user info,
/// literal addresses). Host names are checked again at connect time by the
/// client's resolver, so a name that turns private later is still refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallbackTarget(Url);

impl CallbackTarget {
    /// The checked URL.
    pub fn url(&self) -> &Url {
        &self.0
    }
}

/// One HTTP client for every callback: no proxy, no redirects, every resolved
/// address checked against the policy, and Mozilla's root certificates
/// compiled in (`webpki-roots`: no file reads or certificate parsing, where
/// the system's store cost about 1.7 ms per process). Built on first use (a
/// Lambda function's init builds nothing), or at start by
/// [`CallbackClient::warm_up`] (`webhooks-local`).
#[derive(Clone)]
pub struct CallbackClient {
    http: Arc<OnceLock<reqwest::Client>>,
    dns: Arc<dyn Dns>,
    /// Which callback addresses and schemes are allowed.
    pub policy: Arc<AddressPolicy>,
}

impl CallbackClient {
    /// A client that calls only what `policy` allows, resolving names with `dns`.
    pub fn new(policy: AddressPolicy, dns: Arc<dyn Dns>) -> Self {
        CallbackClient {
            http: Arc::default(),
            dns,
            policy: Arc::new(policy),
        }
    }

    /// Builds the HTTP client now: called at start by `webhooks-local`, so
    /// its first handshake or delivery does not pay for it.
    pub fn warm_up(&self) {
        self.http();
    }

    fn http(&self) -> &reqwest::Client {
        self.http.get_or_init(|| {
            let resolver = resolver::PolicyResolver::new(self.policy.clone(), self.dns.clone());
            reqwest::Client::builder()
                .tls_backend_preconfigured(tls_config())
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .dns_resolver(Arc::new(resolver))
                .connect_timeout(Duration::from_secs(5))
                .pool_idle_timeout(POOL_IDLE)
                .user_agent(concat!("webhooks/", env!("CARGO_PKG_VERSION")))
                .build()
                .expect("callback HTTP client builds")
        })
    }
}

/// How long an idle callback connection is kept for reuse. Under the
/// shortest keep-alive of the servers receivers commonly run (gunicorn's
/// 2 s; Node.js and uvicorn keep 5 s): a connection the receiver is closing
/// at the moment it is reused fails the delivery. Connections in use are
/// not affected; after a burst the idle ones (each with its buffers, and
/// pinning the allocator's pages around them) are closed within two of
/// these (the pool's reaper runs at this interval), so the memory goes back
/// soon after the load
/// (docs/performance-history.md#the-writer-on-a-thread-of-its-own-issue-26).
const POOL_IDLE: Duration = Duration::from_millis(1500);

/// TLS 1.2 and 1.3 on aws-lc-rs (the one crypto provider of the build),
/// trusting Mozilla's roots.
fn tls_config() -> rustls::ClientConfig {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("aws-lc-rs supports the default TLS versions")
    .with_root_certificates(roots)
    .with_no_client_auth()
}

/// The step of a call that `e` says failed.
fn classify(e: &reqwest::Error) -> CallFailure {
    if let Some(r) = find_in_chain::<ResolveError>(e) {
        return match r {
            ResolveError::Dns(_) => CallFailure::DnsFailed,
            ResolveError::Forbidden(_) => CallFailure::AddressForbidden,
        };
    }
    if e.is_timeout() {
        CallFailure::Timeout
    } else if find_in_chain::<rustls::Error>(e).is_some() {
        CallFailure::TlsFailed
    } else {
        CallFailure::ConnectFailed
    }
}

/// Finds an error of type `T` in a source chain, looking inside `io::Error`s
/// too (their `source()` skips the error they wrap).
fn find_in_chain<'a, T: StdError + 'static>(e: &'a (dyn StdError + 'static)) -> Option<&'a T> {
    let mut cur: Option<&'a (dyn StdError + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(t) = err.downcast_ref::<T>() {
            return Some(t);
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if let Some(inner) = io.get_ref() {
                if let Some(t) = find_in_chain::<T>(inner) {
                    return Some(t);
                }
            }
        }
        cur = err.source();
    }
    None
}
