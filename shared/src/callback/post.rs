//! POSTing one signed notification to a callback: what came back (status and
//! `Retry-After`), or why nothing did. Deciding what that means is
//! `delivery::decide`'s job, not this one's.

use std::time::{Duration, Instant};

use http::header::{CONTENT_TYPE, RETRY_AFTER};

use super::{classify, CallbackClient, CallbackTarget};
use crate::custom_headers::CustomHeaders;
use crate::failure::{CallFailure, Failure};
use crate::history::MAX_KEPT_RESPONSE;

/// At most this much of a callback's response body is read.
pub const MAX_RESPONSE_BODY: usize = 16 * 1024;

/// A notification ready to send: its body and the Standard Webhooks headers.
pub struct SignedNotification<'a> {
    /// `webhook-id`: the notification uuid.
    pub id: &'a str,
    /// `webhook-timestamp`: epoch seconds.
    pub timestamp: i64,
    /// `webhook-signature`.
    pub signature: String,
    /// The notification as JSON, sent as is and signed as is.
    pub body: &'a str,
    /// `traceparent`: the delivery attempt's W3C trace context.
    pub traceparent: Option<String>,
    /// The subscription's own headers (`customHeaders`), none of them one
    /// of the above.
    pub headers: Option<&'a CustomHeaders>,
}

/// What one POST produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Posted {
    /// The callback answered.
    Answered {
        /// The HTTP status of the answer.
        status: u16,
        /// The raw `Retry-After` header, if any.
        retry_after: Option<String>,
        /// The start of the answer's body (at most [`MAX_KEPT_RESPONSE`] bytes), as text.
        body: String,
        /// From sending the request to the end of the body read.
        elapsed: Duration,
    },
    /// An AWS destination accepted it (docs/decisions/destinations.md).
    Accepted {
        /// The destination's id of the message or event.
        id: String,
        /// From sending to the answer.
        elapsed: Duration,
    },
    /// No answer: the step that failed.
    Failed {
        /// The step that failed.
        failure: CallFailure,
        /// From sending the request to the failure.
        elapsed: Duration,
    },
}

impl Posted {
    /// Why it failed: the status of an answer other than a 2xx, or the
    /// step that failed; `None` for a 2xx.
    pub fn failure(&self) -> Option<Failure> {
        match self {
            Posted::Answered { status, .. } if (200..300).contains(status) => None,
            Posted::Accepted { .. } => None,
            Posted::Answered { status, .. } => Some(Failure::Status(*status)),
            Posted::Failed { failure, .. } => Some(Failure::Call(*failure)),
        }
    }
}

impl CallbackClient {
    /// POSTs `notification` to `target` within `timeout`, following no
    /// redirect, and reads a bounded amount of the answer.
    pub async fn post(
        &self,
        target: &CallbackTarget,
        notification: SignedNotification<'_>,
        timeout: Duration,
    ) -> Posted {
        let started = Instant::now();
        let mut request = self.http().post(target.url().clone());
        for (name, value) in notification.headers.iter().flat_map(|h| h.iter()) {
            request = request.header(name, value);
        }
        if let Some(traceparent) = notification.traceparent {
            request = request.header("traceparent", traceparent);
        }
        let sent = request
            .header(CONTENT_TYPE, "application/json")
            .header("webhook-id", notification.id)
            .header("webhook-timestamp", notification.timestamp.to_string())
            .header("webhook-signature", notification.signature)
            .body(notification.body.to_owned())
            .timeout(timeout)
            .send()
            .await;
        let mut response = match sent {
            Ok(r) => r,
            Err(e) => {
                return Posted::Failed {
                    failure: classify(&e),
                    elapsed: started.elapsed(),
                }
            }
        };
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // Read a bounded amount so the connection can be reused; never more.
        let mut read = 0;
        let mut kept = Vec::new();
        while read <= MAX_RESPONSE_BODY {
            match tokio::time::timeout(Duration::from_secs(1), response.chunk()).await {
                Ok(Ok(Some(chunk))) => {
                    read += chunk.len();
                    let room = MAX_KEPT_RESPONSE.saturating_sub(kept.len());
                    kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
                }
                _ => break,
            }
        }
        Posted::Answered {
            status,
            retry_after,
            body: text_of(&kept),
            elapsed: started.elapsed(),
        }
    }
}

/// Bytes as text: invalid UTF-8 (or a character cut at the limit) becomes U+FFFD.
fn text_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
