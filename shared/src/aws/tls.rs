//! Which roots the AWS SDK's https client trusts.
//!
//! AWS service endpoints present certificates of Amazon Trust Services,
//! which chain to Amazon Root CA 1–4 (cross-signed by Starfield Services Root
//! CA G2). The Lambda functions trust those five alone, compiled in
//! (`amazon-roots.pem`, copied from the Mozilla set): loading the system's
//! ~150 roots took about 1.7 ms of every cold start
//! (docs/performance-history.md#lambda-init-the-root-stores-out-of-the-cold-start-issue-15).
//! `webhooks-local` keeps the system's roots: it may reach AWS
//! through a network whose proxy has a CA of its own.

use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode, TlsContext, TrustStore};
use aws_smithy_http_client::Builder;

const AMAZON_ROOTS: &[u8] = include_bytes!("amazon-roots.pem");

/// The root certificates the SDK's https client trusts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roots {
    /// The five roots AWS endpoints chain to (the Lambda functions).
    Amazon,
    /// The system's root store, as the SDK loads it by default.
    System,
}

/// The https client for `roots`; `None` leaves the SDK's default (the
/// same rustls on aws-lc-rs, with the system's roots).
pub(super) fn http_client(roots: Roots) -> Option<aws_sdk_dynamodb::config::SharedHttpClient> {
    match roots {
        Roots::System => None,
        Roots::Amazon => {
            let trust = TrustStore::empty()
                .with_native_roots(false)
                .with_pem_certificate(AMAZON_ROOTS);
            let context = TlsContext::builder()
                .with_trust_store(trust)
                .build()
                .expect("the compiled-in Amazon roots are valid PEM");
            Some(
                Builder::new()
                    .tls_provider(tls::Provider::Rustls(CryptoMode::AwsLc))
                    .tls_context(context)
                    .build_https(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_amazon_roots_are_five_self_signed_cas() {
        let pem = String::from_utf8(AMAZON_ROOTS.to_vec()).unwrap();
        assert_eq!(pem.matches("-----BEGIN CERTIFICATE-----").count(), 5);
        let mut store = rustls::RootCertStore::empty();
        let ders = rustls::pki_types::pem::PemObject::pem_slice_iter(AMAZON_ROOTS)
            .collect::<Result<Vec<rustls::pki_types::CertificateDer>, _>>()
            .unwrap();
        let (valid, invalid) = store.add_parsable_certificates(ders);
        assert_eq!((valid, invalid), (5, 0));
        assert!(http_client(Roots::Amazon).is_some());
    }
}
