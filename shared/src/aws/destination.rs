//! The [`Destinations`] port on AWS: assume the customer's role, then send
//! into their SQS queue or onto their EventBridge bus
//! (docs/decisions/destinations.md). The STS client is built on first use;
//! the assumed credentials, with the SQS and EventBridge clients built on
//! them, are kept per (role, external id) until [`REFRESH_BEFORE`] their
//! expiry. A refusal is not kept: a role the customer fixes works at the
//! next attempt.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use aws_sdk_sqs::types::MessageAttributeValue;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;

use crate::destinations::{
    org_uuid, partition_of, Destination, DestinationKind, DestinationMessage, Destinations,
    Refusal, Sent, ServiceFault,
};
use crate::failure::CallFailure;
use crate::filter::{EventFilter, Topic};
use crate::ids::OrgId;

/// Assumed credentials are renewed this long before they expire.
pub const REFRESH_BEFORE: Duration = Duration::from_secs(5 * 60);

/// How long an assumed session lasts (STS's default and the role's minimum maximum).
const SESSION: Duration = Duration::from_secs(3600);

/// The `Source` of every EventBridge event the service puts.
pub const EVENT_SOURCE: &str = "webhooks";

/// The `detail-type` of the validation event.
pub const VALIDATION_DETAIL_TYPE: &str = "Webhooks Destination Validation";

/// The clients of one assumed role.
#[derive(Clone)]
struct Session {
    renew_at: SystemTime,
    sqs: aws_sdk_sqs::Client,
    events: aws_sdk_eventbridge::Client,
}

/// Sends to customers' SQS queues and EventBridge buses through their roles.
pub struct AwsDestinations {
    sdk: aws_config::SdkConfig,
    partition: &'static str,
    region: String,
    sts: OnceLock<aws_sdk_sts::Client>,
    account: tokio::sync::OnceCell<String>,
    sessions: Mutex<HashMap<(String, String), Session>>,
}

impl AwsDestinations {
    /// The sender on `sdk` (its region, endpoints, credentials and bounds);
    /// None without a region, where no destination could be checked.
    pub fn new(sdk: &aws_config::SdkConfig) -> Option<Self> {
        let region = sdk.region()?.as_ref().to_owned();
        Some(AwsDestinations {
            sdk: sdk.clone(),
            partition: partition_of(&region),
            region,
            sts: OnceLock::new(),
            account: tokio::sync::OnceCell::new(),
            sessions: Mutex::default(),
        })
    }

    fn sts(&self) -> &aws_sdk_sts::Client {
        self.sts.get_or_init(|| aws_sdk_sts::Client::new(&self.sdk))
    }

    /// `AssumeRole` of `role` with `external_id`, its session named for the
    /// organization (the customer's CloudTrail shows who acted).
    async fn assume(
        &self,
        role: &str,
        external_id: &str,
        org: &OrgId,
    ) -> Result<aws_sdk_sts::operation::assume_role::AssumeRoleOutput, Refusal> {
        self.sts()
            .assume_role()
            .role_arn(role)
            .role_session_name(session_name(org))
            .external_id(external_id)
            .duration_seconds(SESSION.as_secs() as i32)
            .send()
            .await
            .map_err(|e| assume_failure(&e))
    }

    /// The clients of `role` assumed with `external_id`: kept ones, or new
    /// ones after an `AssumeRole`.
    async fn session(
        &self,
        role: &str,
        external_id: &str,
        org: &OrgId,
    ) -> Result<Session, Refusal> {
        let key = (role.to_owned(), external_id.to_owned());
        if let Some(s) = self.sessions.lock().expect("sessions").get(&key) {
            if s.renew_at > SystemTime::now() {
                return Ok(s.clone());
            }
        }
        let out = self.assume(role, external_id, org).await?;
        let creds = out
            .credentials()
            .ok_or(Refusal::Step(CallFailure::DestinationError))?;
        let expires = SystemTime::try_from(*creds.expiration())
            .unwrap_or_else(|_| SystemTime::now() + SESSION);
        let provider = aws_sdk_sqs::config::Credentials::new(
            creds.access_key_id(),
            creds.secret_access_key(),
            Some(creds.session_token().to_owned()),
            Some(expires),
            "webhooks-destination",
        );
        let session = Session {
            renew_at: expires
                .checked_sub(REFRESH_BEFORE)
                .unwrap_or_else(SystemTime::now),
            sqs: aws_sdk_sqs::Client::from_conf(
                aws_sdk_sqs::config::Builder::from(&self.sdk)
                    .credentials_provider(provider.clone())
                    .build(),
            ),
            events: aws_sdk_eventbridge::Client::from_conf(
                aws_sdk_eventbridge::config::Builder::from(&self.sdk)
                    .credentials_provider(provider)
                    .build(),
            ),
        };
        let mut sessions = self.sessions.lock().expect("sessions");
        // Sessions past their renewal go with the next one made: the map
        // holds the roles delivered to lately, not every role ever seen.
        let now = SystemTime::now();
        sessions.retain(|_, s| s.renew_at > now);
        sessions.insert(key, session.clone());
        Ok(session)
    }

    /// Forgets a session whose credentials AWS no longer takes.
    fn forget(&self, role: &str, external_id: &str) {
        self.sessions
            .lock()
            .expect("sessions")
            .remove(&(role.to_owned(), external_id.to_owned()));
    }

    async fn put(
        &self,
        d: &Destination,
        external_id: &str,
        org: &OrgId,
        payload: Payload<'_>,
    ) -> Result<String, Refusal> {
        let session = self.session(&d.role_arn, external_id, org).await?;
        self.put_with(&session, d, external_id, payload).await
    }

    async fn put_with(
        &self,
        session: &Session,
        d: &Destination,
        external_id: &str,
        payload: Payload<'_>,
    ) -> Result<String, Refusal> {
        let sent = match d.kind {
            DestinationKind::Sqs => send_sqs(&session.sqs, d, payload).await,
            DestinationKind::EventBridge => put_event(&session.events, d, payload).await,
        };
        if let Err(Refused::Credentials(_)) = sent {
            self.forget(&d.role_arn, external_id);
        }
        sent.map_err(Refused::refusal)
    }

    /// Validation's steps: the role assumed with the organization's external
    /// id, not with `foreign`, then the validation message sent.
    async fn validation(
        &self,
        d: &Destination,
        external_id: &str,
        foreign: &str,
        org: &OrgId,
        payload: Payload<'_>,
    ) -> Result<(), Refusal> {
        let session = self.session(&d.role_arn, external_id, org).await?;
        match self.assume(&d.role_arn, foreign, org).await {
            Ok(_) => return Err(Refusal::TrustsAnyExternalId),
            // Refused, as a role with the condition refuses it.
            Err(Refusal::Step(CallFailure::RoleNotAssumable)) => {}
            // Throttled, failed, or the service's own fault: cannot tell.
            Err(other) => return Err(other),
        }
        self.put_with(&session, d, external_id, payload)
            .await
            .map(|_| ())
    }
}

/// What goes into the destination.
struct Payload<'a> {
    /// SQS: the message body; EventBridge: the detail.
    body: String,
    /// The message attributes (SQS), in the detail already for EventBridge.
    attributes: Vec<(&'static str, String)>,
    /// EventBridge's `detail-type`: the event's kind (none for SQS).
    detail_type: String,
    /// FIFO: deduplication id and group.
    dedup: &'a str,
    group: &'a str,
}

/// Why a send failed: a step, or the assumed session's credentials AWS
/// stopped taking (expired, or signed off by a clock skew): the service's
/// fault, forgotten, retried with new ones.
enum Refused {
    Step(CallFailure),
    Credentials(String),
}

impl Refused {
    fn refusal(self) -> Refusal {
        match self {
            Refused::Step(f) => Refusal::Step(f),
            Refused::Credentials(code) => Refusal::Service(ServiceFault::Credentials(code)),
        }
    }
}

/// AWS's answers to credentials that are the service's own: expired,
/// invalid or unknown, or a signature that does not match (a clock skew).
/// Never the customer's role, policy or resource.
const SERVICE_CREDENTIAL_CODES: [&str; 8] = [
    "ExpiredToken",
    "ExpiredTokenException",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "SignatureDoesNotMatch",
    "IncompleteSignature",
    "MissingAuthenticationToken",
    "RequestExpired",
];

/// The queue URL of an SQS ARN: built from its parts, never taken from the
/// customer; the request goes to the SDK's endpoint whatever the URL's host.
fn queue_url(d: &Destination) -> String {
    let domain = match d.partition.as_str() {
        "aws-cn" => "amazonaws.com.cn",
        _ => "amazonaws.com",
    };
    format!("https://sqs.{}.{domain}/{}/{}", d.region, d.account, d.name)
}

async fn send_sqs(
    client: &aws_sdk_sqs::Client,
    d: &Destination,
    p: Payload<'_>,
) -> Result<String, Refused> {
    let mut request = client
        .send_message()
        .queue_url(queue_url(d))
        .message_body(p.body);
    for (name, value) in p.attributes {
        let value = MessageAttributeValue::builder()
            .data_type("String")
            .string_value(value)
            .build()
            .map_err(|_| Refused::Step(CallFailure::DestinationError))?;
        request = request.message_attributes(name, value);
    }
    if d.is_fifo() {
        request = request
            .message_deduplication_id(p.dedup)
            .message_group_id(p.group);
    }
    let out = request.send().await.map_err(|e| refused(&e))?;
    Ok(out.message_id().unwrap_or_default().to_owned())
}

async fn put_event(
    client: &aws_sdk_eventbridge::Client,
    d: &Destination,
    p: Payload<'_>,
) -> Result<String, Refused> {
    let entry = aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
        .event_bus_name(&d.arn)
        .source(EVENT_SOURCE)
        .detail_type(p.detail_type)
        .detail(p.body)
        .build();
    let out = client
        .put_events()
        .entries(entry)
        .send()
        .await
        .map_err(|e| refused(&e))?;
    let entry = out.entries().first();
    match entry.and_then(|e| e.error_code()) {
        None => Ok(entry
            .and_then(|e| e.event_id())
            .unwrap_or_default()
            .to_owned()),
        Some(code) => Err(Refused::Step(entry_failure(code))),
    }
}

/// An `AssumeRole` failure, by whose fault it is: the service's own
/// credentials ([`SERVICE_CREDENTIAL_CODES`]) are the service's; throttling
/// and 5xx are STS's; any other refusal (4xx) is the role's.
fn assume_failure<E: aws_sdk_sts::error::ProvideErrorMetadata>(
    e: &SdkError<E, HttpResponse>,
) -> Refusal {
    match e {
        SdkError::ServiceError(s) => {
            let code = s.err().code().unwrap_or_default();
            let status = s.raw().status().as_u16();
            if SERVICE_CREDENTIAL_CODES.contains(&code) {
                Refusal::Service(ServiceFault::Credentials(code.to_owned()))
            } else if is_throttling(code, status) {
                Refusal::Step(CallFailure::DestinationThrottled)
            } else if status >= 500 {
                Refusal::Step(CallFailure::DestinationError)
            } else {
                Refusal::Step(CallFailure::RoleNotAssumable)
            }
        }
        other => Refusal::Step(transport_failure(other)),
    }
}

/// A send's failure, by the error's code and status.
fn refused<E: aws_sdk_sqs::error::ProvideErrorMetadata>(e: &SdkError<E, HttpResponse>) -> Refused {
    let SdkError::ServiceError(s) = e else {
        return Refused::Step(transport_failure(e));
    };
    let code = s.err().code().unwrap_or_default();
    let status = s.raw().status().as_u16();
    if SERVICE_CREDENTIAL_CODES.contains(&code) {
        return Refused::Credentials(code.to_owned());
    }
    Refused::Step(match code {
        "AWS.SimpleQueueService.NonExistentQueue"
        | "QueueDoesNotExist"
        | "ResourceNotFoundException" => CallFailure::DestinationNotFound,
        "AccessDenied"
        | "AccessDeniedException"
        | "KmsAccessDenied"
        | "KmsDisabled"
        | "KmsNotFound"
        | "NotAuthorizedForSourceException" => CallFailure::SendDenied,
        _ if is_throttling(code, status) => CallFailure::DestinationThrottled,
        _ if status == 403 => CallFailure::SendDenied,
        _ => CallFailure::DestinationError,
    })
}

/// A failed PutEvents entry's `ErrorCode`.
fn entry_failure(code: &str) -> CallFailure {
    match code {
        "ResourceNotFoundException" => CallFailure::DestinationNotFound,
        "AccessDeniedException" | "NotAuthorizedForSourceException" => CallFailure::SendDenied,
        "ThrottlingException" => CallFailure::DestinationThrottled,
        _ => CallFailure::DestinationError,
    }
}

fn is_throttling(code: &str, status: u16) -> bool {
    status == 429
        || matches!(
            code,
            "Throttling"
                | "ThrottlingException"
                | "RequestThrottled"
                | "AWS.SimpleQueueService.RequestThrottled"
                | "KmsThrottled"
                | "LimitExceededException"
        )
}

/// No answer from AWS: in time, or at all.
fn transport_failure<E>(e: &SdkError<E, HttpResponse>) -> CallFailure {
    match e {
        SdkError::TimeoutError(_) => CallFailure::Timeout,
        SdkError::DispatchFailure(d) if d.is_timeout() => CallFailure::Timeout,
        SdkError::DispatchFailure(_) => CallFailure::ConnectFailed,
        _ => CallFailure::DestinationError,
    }
}

#[async_trait]
impl Destinations for AwsDestinations {
    fn partition_and_region(&self) -> (&str, &str) {
        (self.partition, &self.region)
    }

    async fn caller_account(&self) -> Result<String, ServiceFault> {
        let ask = || async {
            let out = self.sts().get_caller_identity().send().await.map_err(|e| {
                let why = match &e {
                    SdkError::ServiceError(s) => {
                        aws_sdk_sts::error::ProvideErrorMetadata::code(s.err())
                            .unwrap_or("an error")
                            .to_owned()
                    }
                    other => transport_failure(other).code().as_str().to_owned(),
                };
                ServiceFault::AccountUnknown(format!("sts:GetCallerIdentity failed: {why}"))
            })?;
            match out.account() {
                Some(a) if !a.is_empty() => Ok(a.to_owned()),
                _ => Err(ServiceFault::AccountUnknown(
                    "sts:GetCallerIdentity named no account".to_owned(),
                )),
            }
        };
        // Learned once; a failure is not kept, the next create asks again.
        self.account.get_or_try_init(ask).await.cloned()
    }

    async fn validate(
        &self,
        d: &Destination,
        external_id: &str,
        foreign: &str,
        token: &str,
        org: &OrgId,
        timeout: Duration,
    ) -> Result<(), Refusal> {
        let detail = serde_json::json!({
            "type": crate::destinations::VALIDATION_TYPE,
            "validationToken": token,
            "organizationId": org.as_str(),
            "destination": d.arn,
        })
        .to_string();
        let payload = Payload {
            body: detail,
            attributes: vec![("webhook-validation-token", token.to_owned())],
            detail_type: VALIDATION_DETAIL_TYPE.to_owned(),
            dedup: token,
            group: "validation",
        };
        let validation = self.validation(d, external_id, foreign, org, payload);
        match tokio::time::timeout(timeout, validation).await {
            Ok(done) => done,
            Err(_) => Err(Refusal::Step(CallFailure::Timeout)),
        }
    }

    async fn send(
        &self,
        d: &Destination,
        external_id: &str,
        m: DestinationMessage<'_>,
        timeout: Duration,
    ) -> Sent {
        let timestamp = m.timestamp.to_string();
        let (body, detail_type) = match d.kind {
            DestinationKind::Sqs => (m.body.to_owned(), String::new()),
            // The exact text signed (`payload`) and the same as JSON for rules.
            DestinationKind::EventBridge => {
                let notification: serde_json::Value =
                    serde_json::from_str(m.body).unwrap_or(serde_json::Value::Null);
                let kind = detail_type(notification["event"].as_str().unwrap_or_default());
                let detail = serde_json::json!({
                    "webhookId": m.id,
                    "webhookTimestamp": timestamp,
                    "webhookSignature": m.signature,
                    "payload": m.body,
                    "notification": notification,
                });
                (detail.to_string(), kind)
            }
        };
        let payload = Payload {
            body,
            attributes: vec![
                ("webhook-id", m.id.to_owned()),
                ("webhook-timestamp", timestamp),
                ("webhook-signature", m.signature.clone()),
            ],
            detail_type,
            dedup: m.id,
            group: m.group,
        };
        let started = Instant::now();
        match tokio::time::timeout(timeout, self.put(d, external_id, m.org, payload)).await {
            Ok(Ok(id)) => Sent::Accepted(id),
            Ok(Err(Refusal::Step(failure))) => {
                tracing::info!(destination = %d.arn, code = failure.code().as_str(),
                    elapsed_ms = started.elapsed().as_millis() as u64, "destination refused a notification");
                Sent::Failed(failure)
            }
            Ok(Err(Refusal::Service(fault))) => Sent::ServiceFault(fault),
            // Only a validation probes the role.
            Ok(Err(Refusal::TrustsAnyExternalId)) => Sent::Failed(CallFailure::RoleNotAssumable),
            Err(_) => Sent::Failed(CallFailure::Timeout),
        }
    }
}

/// The `RoleSessionName` of the organization's sessions, which the
/// customer's CloudTrail shows: the organization id when it is 2 to 64 of
/// `[A-Za-z0-9_+=,.@-]`; otherwise its first 27 characters with every other
/// character replaced by `_`, a `.`, and the UUID of its external id (64 at
/// most). docs/destinations.md, "Who acted".
pub fn session_name(org: &OrgId) -> String {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_+=,.@-".contains(c);
    let id = org.as_str();
    if (2..=64).contains(&id.len()) && id.chars().all(allowed) {
        return id.to_owned();
    }
    let head: String = id
        .chars()
        .take(27)
        .map(|c| if allowed(c) { c } else { '_' })
        .collect();
    format!("{head}.{}", org_uuid(org))
}

/// EventBridge's `detail-type` of a notification whose `event` is the
/// filter `event`: `message.inbound`, `message.outbound`, `contact`, or
/// `subscription.<kind>` for a notice of one kind.
fn detail_type(event: &str) -> String {
    match EventFilter::parse(event).map(|f| f.topic) {
        Ok(Topic::Message(direction)) => format!("message.{}", direction.as_str()),
        Ok(Topic::Contact) => "contact".to_owned(),
        Ok(Topic::Subscription(_)) => match event.split_once("?type=") {
            Some((_, kind)) if !kind.contains(',') => format!("subscription.{kind}"),
            _ => "subscription".to_owned(),
        },
        Err(_) => "notification".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_urls_are_built_from_the_arn() {
        let d = Destination::parse(
            DestinationKind::Sqs,
            "arn:aws:sqs:us-east-1:222222222222:orders.fifo",
            "arn:aws:iam::222222222222:role/r",
            "aws",
            "us-east-1",
        )
        .unwrap();
        assert_eq!(
            queue_url(&d),
            "https://sqs.us-east-1.amazonaws.com/222222222222/orders.fifo"
        );
    }

    /// An SDK error as the SDK makes it of an answer with `status` and `code`.
    fn answered<E>(
        status: u16,
        code: &str,
        make: fn(aws_sdk_sqs::error::ErrorMetadata) -> E,
    ) -> SdkError<E, HttpResponse> {
        let meta = aws_sdk_sqs::error::ErrorMetadata::builder()
            .code(code)
            .build();
        let raw = HttpResponse::new(
            status.try_into().unwrap(),
            aws_smithy_types::body::SdkBody::empty(),
        );
        SdkError::service_error(make(meta), raw)
    }

    #[test]
    fn send_failures_are_classified_by_code_and_status() {
        use aws_sdk_sqs::operation::send_message::SendMessageError as E;
        let step = |status, code| match refused(&answered(status, code, E::generic)) {
            Refused::Step(f) => Some(f),
            Refused::Credentials(_) => None,
        };
        // Throttling and AWS's own failures retry and count toward the breaker.
        assert_eq!(
            step(400, "AWS.SimpleQueueService.RequestThrottled"),
            Some(CallFailure::DestinationThrottled)
        );
        assert_eq!(
            step(429, "Anything"),
            Some(CallFailure::DestinationThrottled)
        );
        assert_eq!(
            step(500, "InternalError"),
            Some(CallFailure::DestinationError)
        );
        assert_eq!(
            step(503, "ServiceUnavailable"),
            Some(CallFailure::DestinationError)
        );
        // The customer's configuration disables the subscription.
        assert_eq!(
            step(400, "AWS.SimpleQueueService.NonExistentQueue"),
            Some(CallFailure::DestinationNotFound)
        );
        assert_eq!(
            step(400, "QueueDoesNotExist"),
            Some(CallFailure::DestinationNotFound)
        );
        assert_eq!(
            step(400, "ResourceNotFoundException"),
            Some(CallFailure::DestinationNotFound)
        );
        assert_eq!(step(403, "AccessDenied"), Some(CallFailure::SendDenied));
        assert_eq!(step(400, "KmsAccessDenied"), Some(CallFailure::SendDenied));
        assert_eq!(step(403, ""), Some(CallFailure::SendDenied));
        for disables in [
            CallFailure::DestinationNotFound,
            CallFailure::SendDenied,
            CallFailure::RoleNotAssumable,
        ] {
            assert!(disables.disables());
        }
        assert!(
            !CallFailure::DestinationThrottled.disables()
                && !CallFailure::DestinationError.disables()
        );
        // The assumed session's credentials AWS stopped taking (expired, or
        // signed off by the service's clock): forgotten, the service's fault.
        for code in [
            "ExpiredToken",
            "InvalidClientTokenId",
            "SignatureDoesNotMatch",
        ] {
            assert_eq!(step(403, code), None, "{code}");
            assert!(matches!(
                refused(&answered(403, code, E::generic)).refusal(),
                Refusal::Service(ServiceFault::Credentials(c)) if c == code
            ));
        }
        let timeout: SdkError<E, HttpResponse> = SdkError::timeout_error("slow");
        assert!(matches!(
            refused(&timeout),
            Refused::Step(CallFailure::Timeout)
        ));
    }

    #[test]
    fn assume_role_failures_are_told_apart_by_whose_fault_they_are() {
        use aws_sdk_sts::operation::assume_role::AssumeRoleError as E;
        let step = |status, code| assume_failure(&answered(status, code, E::generic));
        // The customer's role: refused, does not exist, another external id.
        assert_eq!(
            step(403, "AccessDenied"),
            Refusal::Step(CallFailure::RoleNotAssumable)
        );
        assert_eq!(
            step(400, "ValidationError"),
            Refusal::Step(CallFailure::RoleNotAssumable)
        );
        // STS's own trouble: retried, counted toward the breaker.
        assert_eq!(
            step(400, "Throttling"),
            Refusal::Step(CallFailure::DestinationThrottled)
        );
        assert_eq!(
            step(500, "InternalFailure"),
            Refusal::Step(CallFailure::DestinationError)
        );
        // The service's own credentials, as STS answers them: never the role's.
        for (status, code) in [
            (400, "ExpiredToken"),
            (403, "InvalidClientTokenId"),
            (400, "UnrecognizedClientException"),
            (403, "SignatureDoesNotMatch"),
            (403, "IncompleteSignature"),
            (403, "MissingAuthenticationToken"),
        ] {
            assert_eq!(
                step(status, code),
                Refusal::Service(ServiceFault::Credentials(code.to_owned())),
                "{code}"
            );
        }
        // No answer from STS at all.
        let timeout: SdkError<E, HttpResponse> = SdkError::timeout_error("slow");
        assert_eq!(
            assume_failure(&timeout),
            Refusal::Step(CallFailure::Timeout)
        );
    }

    #[test]
    fn entry_codes_are_classified() {
        assert_eq!(
            entry_failure("ThrottlingException"),
            CallFailure::DestinationThrottled
        );
        assert_eq!(
            entry_failure("AccessDeniedException"),
            CallFailure::SendDenied
        );
        assert_eq!(
            entry_failure("InternalFailure"),
            CallFailure::DestinationError
        );
        assert!(is_throttling("RequestThrottled", 400));
        assert!(!is_throttling("AccessDenied", 403));
    }

    #[test]
    fn session_names_carry_the_organization_within_sts_rules() {
        let allowed = |name: &str| {
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_+=,.@-".contains(c))
        };
        assert_eq!(session_name(&"org-1".into()), "org-1");
        assert_eq!(session_name(&"a.b@c=d,e+f_g".into()), "a.b@c=d,e+f_g");
        let uuid = org_uuid(&"org 1/ü".into());
        assert_eq!(session_name(&"org 1/ü".into()), format!("org_1__.{uuid}"));
        let long = "x".repeat(65);
        let named = session_name(&long.as_str().into());
        assert_eq!(
            named,
            format!("{}.{}", "x".repeat(27), org_uuid(&long.as_str().into()))
        );
        assert_eq!(
            session_name(&"o".into()),
            format!("o.{}", org_uuid(&"o".into()))
        );
        for org in ["org-1", "org 1/ü", long.as_str(), "o", &"é".repeat(40)] {
            let name = session_name(&org.into());
            assert!(
                (2..=64).contains(&name.len()) && allowed(&name),
                "{org}: {name}"
            );
        }
        assert_ne!(
            session_name(&"a b".into()),
            session_name(&"a/b".into()),
            "two organizations, two names"
        );
    }

    #[test]
    fn detail_types_name_the_event_kind() {
        assert_eq!(
            detail_type("/orgId/o/department/d/message?direction=inbound"),
            "message.inbound"
        );
        assert_eq!(detail_type("/orgId/o/department/d/contact"), "contact");
    }
}
