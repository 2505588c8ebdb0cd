//! `webhooks-local sample-data`: what the sample events of `events/` name, written to the
//! DynamoDB tables the Lambda functions read, so that `cargo lambda invoke <function>
//! --data-file events/<file>.json` answers as the handler tests expect (docs/operations.md,
//! "Invoking the functions locally"; scripts/lambda-invoke.py runs it).
//!
//! Writes organization `org-1`'s subscription `00000000-0000-4000-8000-000000000001` (the
//! `-ok` events' id, with the signing secret the handler tests seed, filtering
//! `/orgId/org-1/department/dep-1/message?direction=inbound`, calling `--uri`) and its
//! message `msg-1`, through the store's own writes (the same `upsert_subscription` and
//! `put_message` the service uses). With `--create-tables` it first creates the tables and a
//! delivery queue with its dead-letter queue (as `serve --backend aws --create-tables`
//! does). Prints the functions' environment for those tables and queues on stdout, one
//! `NAME=value` a line (`cargo lambda watch --env-file`).

use clap::Args;
use webhook_core::clock::{Clock, SystemClock};
use webhook_core::model::Message;
use webhook_core::services::aws::{provisioned, Prepare};
use webhook_core::store::Upsert;
use webhook_core::{Config, Profile};

/// The organization, subscription and message the sample events name.
pub const ORG: &str = "org-1";
pub const SUBSCRIPTION_ID: &str = "00000000-0000-4000-8000-000000000001";
pub const MESSAGE_ID: &str = "msg-1";
/// The subscription's signing secret (the handler tests seed the same).
pub const SECRET: &str = "whsec_c2VlZGVkLXNlY3JldC1mb3ItdGVzdHM=";
const FILTER: &str = "/orgId/org-1/department/dep-1/message?direction=inbound";

#[derive(Args)]
pub struct SampleDataArgs {
    /// The callback URI of the sample subscription (its handshake is not made here: the
    /// deliveries of `deliver-notifications` go to it).
    #[arg(long)]
    uri: String,
    /// Create the tables, and a delivery queue and its dead-letter queue, first.
    #[arg(long)]
    create_tables: bool,
}

pub fn run(args: SampleDataArgs) -> Result<(), String> {
    let config = Config::from_env(Profile::Local).map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let prepare = match args.create_tables {
            true => Prepare::Create,
            false => Prepare::Check,
        };
        let (store, env) = provisioned(&config, prepare)
            .await
            .map_err(|e| e.to_string())?;
        let now = SystemClock.now_ms();
        store
            .upsert_subscription(Upsert {
                org_id: ORG.into(),
                uri: args.uri.clone(),
                event_filters: vec![FILTER.into()],
                disabled_filters: vec![],
                expires_at: now + 30 * 86_400_000,
                now,
                new_id: SUBSCRIPTION_ID.into(),
                new_secret: SECRET.into(),
                max_per_org: config.max_subscriptions_per_org,
                ordered: None,
                rate_limit: None,
                role_arn: None,
                external_id: None,
                payload_filter: None,
                retry_schedule: None,
                custom_headers: None,
            })
            .await
            .map_err(|e| format!("the subscription: {e}"))?;
        let message = Message {
            id: MESSAGE_ID.into(),
            owner: None,
            time: Some("2024-03-10T18:07:52.534Z".into()),
            direction: "in".into(),
            to: vec!["+15550100".into()],
            from: "".into(),
            text: "hello".into(),
            media: vec![],
            attachments: vec![],
        };
        store
            .put_message(&ORG.into(), &message, now)
            .await
            .map_err(|e| format!("the message: {e}"))?;
        eprintln!(
            "subscription {SUBSCRIPTION_ID} of {ORG} (callback {}) and message {MESSAGE_ID} written",
            args.uri
        );
        for (name, value) in env {
            println!("{name}={value}");
        }
        Ok(())
    })
}
