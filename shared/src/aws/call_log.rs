//! The AWS calls a process makes, recorded for the least-privilege check
//! (`scripts/deploy-rehearsal.py`, docs/deploy-aws.md): with
//! `WEBHOOKS_RECORD_AWS_CALLS=<file>` set, every DynamoDB and SQS request
//! the SDK sends (each attempt) is appended to the file as one JSON line:
//! the function (`AWS_LAMBDA_FUNCTION_NAME`, else the executable's name),
//! the operation (`X-Amz-Target`, both services speak JSON) and the request's
//! JSON body, from which the check reads the IAM actions and resources.
//!
//! A test setting only: unset (always, in a deployment) the SDK's client is
//! left as it is and nothing is read or written.

use std::io::Write;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::config::http::HttpRequest;
use aws_sdk_dynamodb::config::{HttpClient, RuntimeComponents, SharedHttpClient};
use aws_smithy_runtime_api::client::http::{
    HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};

/// The variable naming the file calls are appended to.
pub const RECORD_VAR: &str = "WEBHOOKS_RECORD_AWS_CALLS";

/// `client` (or the SDK's default https client), recording every call when
/// [`RECORD_VAR`] is set; `client` unchanged otherwise.
pub(super) fn wrap(client: Option<SharedHttpClient>) -> Option<SharedHttpClient> {
    let path = std::env::var_os(RECORD_VAR)?;
    let path = std::path::PathBuf::from(path);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{RECORD_VAR}={}: {e}", path.display()));
    let function = std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default()
    });
    let inner = client.unwrap_or_else(|| {
        aws_smithy_http_client::Builder::new()
            .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
                aws_smithy_http_client::tls::rustls_provider::CryptoMode::AwsLc,
            ))
            .build_https()
    });
    Some(SharedHttpClient::new(Recording {
        inner,
        log: Arc::new(Log {
            function,
            file: Mutex::new(file),
        }),
    }))
}

#[derive(Debug)]
struct Log {
    function: String,
    file: Mutex<std::fs::File>,
}

impl Log {
    fn record(&self, request: &HttpRequest) {
        let target = request
            .headers()
            .get("x-amz-target")
            .unwrap_or_default()
            .to_owned();
        let body = request
            .body()
            .bytes()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
            .unwrap_or(serde_json::Value::Null);
        let mut line = serde_json::json!({
            "function": self.function,
            "target": target,
            "uri": request.uri(),
            "body": body,
        })
        .to_string();
        line.push('\n');
        // One write per line, on a file opened for appending: processes that share
        // the file do not interleave their lines.
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = file.write_all(line.as_bytes()) {
            tracing::error!(error = %e, "{RECORD_VAR}: the call could not be recorded");
        }
    }
}

#[derive(Debug)]
struct Recording {
    inner: SharedHttpClient,
    log: Arc<Log>,
}

impl HttpClient for Recording {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(RecordingConnector {
            inner: self.inner.http_connector(settings, components),
            log: self.log.clone(),
        })
    }
}

#[derive(Debug)]
struct RecordingConnector {
    inner: SharedHttpConnector,
    log: Arc<Log>,
}

impl HttpConnector for RecordingConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        self.log.record(&request);
        self.inner.call(request)
    }
}
