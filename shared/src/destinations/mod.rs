//! AWS destinations (docs/decisions/destinations.md): a subscription whose
//! `uri` is the ARN of an SQS queue or an EventBridge bus in the customer's
//! account, reached through a role the customer made for the service. This
//! module holds what is checked without calling AWS (the two ARNs, the
//! organization's external id) and the port the sender implements
//! ([`Destinations`]: `aws/destination.rs`); like a [`CallbackTarget`], a
//! [`Destination`] is only made by [`Destination::parse`], which keeps the
//! service in its own partition and region.
//!
//! [`CallbackTarget`]: crate::callback::CallbackTarget

use std::time::Duration;

use async_trait::async_trait;

use crate::failure::CallFailure;
use crate::ids::OrgId;

/// The kind of an AWS destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DestinationKind {
    /// An SQS queue (FIFO when its name ends `.fifo`).
    Sqs,
    /// An EventBridge event bus.
    EventBridge,
}

impl DestinationKind {
    /// The wire name: `sqs` or `eventbridge`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sqs => "sqs",
            Self::EventBridge => "eventbridge",
        }
    }

    /// The kind of a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "sqs" => Some(Self::Sqs),
            "eventbridge" => Some(Self::EventBridge),
            _ => None,
        }
    }
}

/// A checked destination: its ARN's parts and the role to assume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// SQS queue or EventBridge bus.
    pub kind: DestinationKind,
    /// The destination's ARN, as the subscription's `uri`.
    pub arn: String,
    /// The ARN's partition (`aws`, `aws-cn`, `aws-us-gov`).
    pub partition: String,
    /// The ARN's region.
    pub region: String,
    /// The customer's account id (12 digits).
    pub account: String,
    /// The queue's or bus's name.
    pub name: String,
    /// The role the service assumes, in the same account.
    pub role_arn: String,
}

/// Why a destination is refused before any call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DestinationProblem {
    /// Not a well-formed ARN of its kind (a field error of `field`).
    Invalid {
        /// `destination.arn` or `destination.roleArn`.
        field: &'static str,
        /// Why, for a person.
        message: String,
    },
    /// Well formed, but outside what this deployment may reach.
    Forbidden(String),
}

impl Destination {
    /// Checks `arn` (of `kind`) and `role_arn` against the service's
    /// `partition` and `region`: the service writes only where it runs, and
    /// only through a role of the destination's own account.
    pub fn parse(
        kind: DestinationKind,
        arn: &str,
        role_arn: &str,
        partition: &str,
        region: &str,
    ) -> Result<Self, DestinationProblem> {
        let invalid = |field, message: &str| DestinationProblem::Invalid {
            field,
            message: message.to_owned(),
        };
        let (service, expect) = match kind {
            DestinationKind::Sqs => ("sqs", "arn:<partition>:sqs:<region>:<account>:<queue name>"),
            DestinationKind::EventBridge => (
                "events",
                "arn:<partition>:events:<region>:<account>:event-bus/<bus name>",
            ),
        };
        let bad_arn = || invalid("destination.arn", &format!("must be an ARN {expect}"));
        let parts: Vec<&str> = arn.splitn(6, ':').collect();
        let [scheme, arn_partition, arn_service, arn_region, account, resource] = parts[..] else {
            return Err(bad_arn());
        };
        if scheme != "arn" || arn_service != service || !is_account(account) {
            return Err(bad_arn());
        }
        let name = match kind {
            DestinationKind::Sqs => resource,
            DestinationKind::EventBridge => resource.strip_prefix("event-bus/").unwrap_or(""),
        };
        if !valid_name(kind, name) {
            return Err(bad_arn());
        }
        if arn_partition != partition || arn_region != region {
            return Err(DestinationProblem::Forbidden(format!(
                "this deployment delivers only to destinations in partition {partition}, region {region}"
            )));
        }
        let role: Vec<&str> = role_arn.splitn(6, ':').collect();
        let bad_role = || {
            invalid(
                "destination.roleArn",
                "must be an IAM role's ARN, arn:<partition>:iam::<account>:role/<name>",
            )
        };
        let ["arn", role_partition, "iam", "", role_account, role_resource] = role[..] else {
            return Err(bad_role());
        };
        let role_name = role_resource.strip_prefix("role/").unwrap_or("");
        if !is_account(role_account)
            || role_name.is_empty()
            || role_arn.len() > 2048
            || !role_name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+=,.@_-/".contains(c))
        {
            return Err(bad_role());
        }
        if role_partition != partition || role_account != account {
            return Err(DestinationProblem::Forbidden(
                "the role must be in the destination's account and partition".to_owned(),
            ));
        }
        Ok(Destination {
            kind,
            arn: arn.to_owned(),
            partition: partition.to_owned(),
            region: region.to_owned(),
            account: account.to_owned(),
            name: name.to_owned(),
            role_arn: role_arn.to_owned(),
        })
    }

    /// The kind of destination a stored `uri` names, if it is an ARN.
    pub fn kind_of(uri: &str) -> Option<DestinationKind> {
        match uri.split(':').nth(2) {
            _ if !uri.starts_with("arn:") => None,
            Some("sqs") => Some(DestinationKind::Sqs),
            Some("events") => Some(DestinationKind::EventBridge),
            _ => None,
        }
    }

    /// An SQS FIFO queue: deduplicated by the notification uuid, in one
    /// message group per subscription.
    pub fn is_fifo(&self) -> bool {
        self.kind == DestinationKind::Sqs && self.name.ends_with(".fifo")
    }
}

fn is_account(s: &str) -> bool {
    s.len() == 12 && s.bytes().all(|b| b.is_ascii_digit())
}

/// SQS: 1 to 80 of `[A-Za-z0-9_-]` (FIFO: then `.fifo`); EventBridge: 1 to
/// 256 of `[A-Za-z0-9._-]`.
fn valid_name(kind: DestinationKind, name: &str) -> bool {
    match kind {
        DestinationKind::Sqs => {
            let base = name.strip_suffix(".fifo").unwrap_or(name);
            (1..=80).contains(&name.len())
                && !base.is_empty()
                && base
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        }
        DestinationKind::EventBridge => {
            (1..=256).contains(&name.len())
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        }
    }
}

impl Destination {
    /// Refuses a destination in the service's own AWS account: a role there
    /// that trusts the account without an external-id condition would let a
    /// tenant make the service write into its own queues or bus.
    pub fn outside(&self, service_account: &str) -> Result<(), DestinationProblem> {
        match self.account == service_account {
            true => Err(DestinationProblem::Forbidden(
                "the destination and its role may not be in the service's own AWS account"
                    .to_owned(),
            )),
            false => Ok(()),
        }
    }
}

/// The organization's external id: `<prefix>-<UUIDv5 of the organization
/// id>`. Derived, so the same on every runtime; unique per organization,
/// and not chosen by the customer. A subscription records the one it was
/// validated with, to tell a changed prefix from a customer's fault.
pub fn external_id(prefix: &str, org: &OrgId) -> String {
    format!("{prefix}-{}", org_uuid(org))
}

/// The organization's UUID (v5), its external id's: every deployment's the same.
pub fn org_uuid(org: &OrgId) -> uuid::Uuid {
    uuid::Uuid::new_v5(&EXTERNAL_ID_NAMESPACE, org.as_str().as_bytes())
}

/// An external id of this deployment (its prefix, so the service's own IAM
/// policy lets it be tried) that no organization has: a random UUID (v4),
/// where organizations have UUIDv5s. A role that can be assumed with it
/// lacks the external-id condition.
pub fn foreign_external_id(prefix: &str) -> String {
    let random = uuid::Builder::from_random_bytes(crate::secret::random_bytes::<16>());
    format!("{prefix}-{}", random.into_uuid())
}

/// The namespace of [`external_id`]'s UUIDs.
const EXTERNAL_ID_NAMESPACE: uuid::Uuid =
    uuid::Uuid::from_u128(0x6d1f_4c7e_9a0b_4e58_b2f1_3c5d_7e9a_0b38);

/// One notification to send, signed as a POST would be.
pub struct DestinationMessage<'a> {
    /// The notification uuid (`webhook-id`).
    pub id: &'a str,
    /// `webhook-timestamp`: epoch seconds.
    pub timestamp: i64,
    /// `webhook-signature`.
    pub signature: String,
    /// The notification as JSON, sent and signed as is.
    pub body: &'a str,
    /// A FIFO queue's message group: the subscription id.
    pub group: &'a str,
    /// The subscription's organization (the role session's name).
    pub org: &'a OrgId,
}

/// What a send found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// Accepted: the destination's id of the message or event.
    Accepted(String),
    /// Not accepted: the step that failed.
    Failed(CallFailure),
    /// Not attempted as the customer's: the service's own fault.
    ServiceFault(ServiceFault),
}

/// A fault of the service itself, its credentials or its configuration,
/// never the customer's: an outage of the service, retried and told to its
/// operators, not a reason to disable a subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceFault {
    /// AWS refused the service's own credentials when it called STS (expired,
    /// invalid, a signature off by a clock skew): AWS's error code.
    Credentials(String),
    /// The subscription was validated with another external id than the one
    /// the service's prefix gives now: the prefix changed.
    ExternalIdChanged,
    /// The service's own AWS account could not be learned (why).
    AccountUnknown(String),
}

impl ServiceFault {
    /// The `kind` label of its count.
    pub fn kind(&self) -> &'static str {
        match self {
            ServiceFault::Credentials(_) => "credentials",
            ServiceFault::ExternalIdChanged => "external_id_changed",
            ServiceFault::AccountUnknown(_) => "account_unknown",
        }
    }
}

impl std::fmt::Display for ServiceFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServiceFault::Credentials(code) => {
                write!(f, "AWS refused the service's own credentials ({code})")
            }
            ServiceFault::ExternalIdChanged => f.write_str(
                "the subscription was validated with another external id than the service's \
                 prefix gives now (WEBHOOKS_DESTINATION_EXTERNAL_ID_PREFIX changed)",
            ),
            ServiceFault::AccountUnknown(why) => {
                write!(f, "the service's own AWS account is unknown: {why}")
            }
        }
    }
}

/// Why a destination's validation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A step failed: the customer's configuration, or AWS (by the step).
    Step(CallFailure),
    /// The role can also be assumed with an external id that is not the
    /// organization's: its trust policy lacks the external-id condition.
    TrustsAnyExternalId,
    /// The service's own fault.
    Service(ServiceFault),
}

impl From<CallFailure> for Refusal {
    fn from(step: CallFailure) -> Self {
        Refusal::Step(step)
    }
}

/// Sends to AWS destinations (the adapter: `aws/destination.rs`).
#[async_trait]
pub trait Destinations: Send + Sync {
    /// The partition and region destinations must be in: the service's.
    fn partition_and_region(&self) -> (&str, &str);

    /// The AWS account of the credentials the service calls with, learned
    /// once (`sts:GetCallerIdentity`) where the deployment does not say.
    async fn caller_account(&self) -> Result<String, ServiceFault>;

    /// Assumes the destination's role with `external_id`, checks that it
    /// cannot be assumed with `foreign`, another external id of this
    /// deployment, and sends the validation message carrying `token`.
    async fn validate(
        &self,
        destination: &Destination,
        external_id: &str,
        foreign: &str,
        token: &str,
        org: &OrgId,
        timeout: Duration,
    ) -> Result<(), Refusal>;

    /// Sends one notification.
    async fn send(
        &self,
        destination: &Destination,
        external_id: &str,
        message: DestinationMessage<'_>,
        timeout: Duration,
    ) -> Sent;
}

/// The `type` of the validation message sent into a destination before a
/// subscription naming it is stored (its kind in the event catalogue).
pub const VALIDATION_TYPE: &str = "webhooks.destination.validation";

/// The partition of a region, as AWS names them.
pub fn partition_of(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "aws-cn"
    } else if region.starts_with("us-gov-") {
        "aws-us-gov"
    } else {
        "aws"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROLE: &str = "arn:aws:iam::222222222222:role/webhooks-delivery";

    fn parse(
        kind: DestinationKind,
        arn: &str,
        role: &str,
    ) -> Result<Destination, DestinationProblem> {
        Destination::parse(kind, arn, role, "aws", "us-east-1")
    }

    #[test]
    fn destinations_of_the_service_region_parse() {
        let q = parse(
            DestinationKind::Sqs,
            "arn:aws:sqs:us-east-1:222222222222:orders",
            ROLE,
        )
        .unwrap();
        assert_eq!(
            (q.account.as_str(), q.name.as_str(), q.is_fifo()),
            ("222222222222", "orders", false)
        );
        let f = parse(
            DestinationKind::Sqs,
            "arn:aws:sqs:us-east-1:222222222222:orders.fifo",
            ROLE,
        )
        .unwrap();
        assert!(f.is_fifo());
        let b = parse(
            DestinationKind::EventBridge,
            "arn:aws:events:us-east-1:222222222222:event-bus/orders",
            "arn:aws:iam::222222222222:role/path/webhooks",
        )
        .unwrap();
        assert_eq!(b.name, "orders");
        assert_eq!(
            Destination::kind_of(&b.arn),
            Some(DestinationKind::EventBridge)
        );
        assert_eq!(Destination::kind_of(&q.arn), Some(DestinationKind::Sqs));
        assert_eq!(
            Destination::kind_of("https://example.com/arn:aws:sqs"),
            None
        );
    }

    #[test]
    fn other_regions_accounts_and_shapes_are_refused() {
        use DestinationKind::*;
        let forbidden = [
            (Sqs, "arn:aws:sqs:eu-west-1:222222222222:orders", ROLE),
            (Sqs, "arn:aws-cn:sqs:us-east-1:222222222222:orders", ROLE),
            (
                Sqs,
                "arn:aws:sqs:us-east-1:222222222222:orders",
                "arn:aws:iam::333333333333:role/x",
            ),
        ];
        for (kind, arn, role) in forbidden {
            assert!(
                matches!(
                    parse(kind, arn, role),
                    Err(DestinationProblem::Forbidden(_))
                ),
                "{arn} {role}"
            );
        }
        let invalid = [
            (Sqs, "arn:aws:sqs:us-east-1:22222222222:orders", ROLE),
            (Sqs, "arn:aws:sqs:us-east-1:222222222222:", ROLE),
            (Sqs, "arn:aws:sqs:us-east-1:222222222222:a/b", ROLE),
            (
                Sqs,
                "https://sqs.us-east-1.amazonaws.com/222222222222/orders",
                ROLE,
            ),
            (
                Sqs,
                "arn:aws:events:us-east-1:222222222222:event-bus/b",
                ROLE,
            ),
            (
                EventBridge,
                "arn:aws:events:us-east-1:222222222222:rule/b",
                ROLE,
            ),
            (
                Sqs,
                "arn:aws:sqs:us-east-1:222222222222:orders",
                "arn:aws:iam::222222222222:user/x",
            ),
            (
                Sqs,
                "arn:aws:sqs:us-east-1:222222222222:orders",
                "arn:aws:sts::222222222222:role/x",
            ),
        ];
        for (kind, arn, role) in invalid {
            assert!(
                matches!(
                    parse(kind, arn, role),
                    Err(DestinationProblem::Invalid { .. })
                ),
                "{arn} {role}"
            );
        }
    }

    #[test]
    fn the_external_id_is_the_organizations_own() {
        let a = external_id("webhooks", &"org-a".into());
        assert_eq!(a, external_id("webhooks", &"org-a".into()));
        assert_ne!(a, external_id("webhooks", &"org-b".into()));
        assert!(a.starts_with("webhooks-") && a.len() == "webhooks-".len() + 36);
    }

    #[test]
    fn the_services_own_account_is_refused() {
        let d = parse(
            DestinationKind::Sqs,
            "arn:aws:sqs:us-east-1:222222222222:orders",
            ROLE,
        )
        .unwrap();
        assert_eq!(d.outside("123456789012"), Ok(()));
        assert!(matches!(
            d.outside("222222222222"),
            Err(DestinationProblem::Forbidden(_))
        ));
    }

    #[test]
    fn a_foreign_external_id_is_of_the_deployment_and_no_organizations() {
        let (a, b) = (foreign_external_id("stack"), foreign_external_id("stack"));
        assert_ne!(a, b, "random");
        let uuid: uuid::Uuid = a.strip_prefix("stack-").unwrap().parse().unwrap();
        assert_eq!(uuid.get_version_num(), 4, "organizations' are version 5");
        let org = external_id("stack", &"org-1".into());
        let org_uuid: uuid::Uuid = org.strip_prefix("stack-").unwrap().parse().unwrap();
        assert_eq!(org_uuid.get_version_num(), 5);
    }
}
