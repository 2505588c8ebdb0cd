//! What the functions find: DynamoDB Local's tables with a seeded
//! subscription and message (when the emulator runs), the SQS queue, a
//! callback receiver and a token.

use std::path::PathBuf;
use std::time::Duration;

use webhook_core::auth::jwt::{mint_hs256, ALL_SCOPES};
use webhook_core::aws::dynamodb::{client_from_env, create_tables, DynamoStore, Tables};
use webhook_core::clock::{Clock, SystemClock};
use webhook_core::ids::OrgId;
use webhook_core::model::Message;
use webhook_core::store::{Store, Upsert};

use crate::receiver::Receiver;

pub const SUBSCRIPTION_ID: &str = "00000000-0000-4000-8000-000000000001";
const SECRET: &str = "whsec_c2VlZGVkLXNlY3JldC1mb3ItdGVzdHM=";
pub const JWT_SECRET: &str = "bench-hs256-secret";

pub struct Environment {
    pub dynamodb: Option<(Tables, DynamoStore)>,
    pub sqs_queue_url: Option<String>,
    pub receiver: Receiver,
    pub token: String,
    pub logs: PathBuf,
}

pub async fn seed(store: &DynamoStore, uri: &str) -> Result<(), String> {
    let now = SystemClock.now_ms();
    store
        .upsert_subscription(Upsert {
            org_id: "org-1".into(),
            uri: uri.into(),
            event_filters: vec![crate::api::inbound_filter("org-1", "dep-1")],
            disabled_filters: vec![],
            expires_at: now + 86_400_000,
            now,
            new_id: SUBSCRIPTION_ID.into(),
            new_secret: SECRET.into(),
            max_per_org: 1000,
            ordered: None,
            rate_limit: None,
            role_arn: None,
            external_id: None,
            payload_filter: None,
            retry_schedule: None,
            custom_headers: None,
        })
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

pub async fn prepare() -> Result<Environment, String> {
    let receiver = Receiver::start().await?;
    let token = mint_hs256(
        JWT_SECRET,
        "org_id",
        "org-1",
        &ALL_SCOPES,
        Duration::from_secs(3600),
    );
    // The functions' own logs, for when one fails: not results, so not in `out`.
    let logs = std::env::temp_dir().join("webhooks-bench-lambda-logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let dynamodb = if std::env::var("AWS_ENDPOINT_URL_DYNAMODB").is_ok() {
        let client = client_from_env().await;
        let run = uuid::Uuid::new_v4().simple().to_string();
        let tables = Tables {
            subscriptions: format!("webhooks-bench-{}-subscriptions", &run[..12]),
            messages: format!("webhooks-bench-{}-messages", &run[..12]),
        };
        create_tables(&client, &tables)
            .await
            .map_err(|e| format!("creating tables on DynamoDB Local: {e}"))?;
        let store = DynamoStore::new(client, tables.clone());
        seed(&store, &receiver.uri("/lambda")).await?;
        store
            .put_message(
                &OrgId::from("org-1"),
                &Message {
                    id: "msg-1".into(),
                    owner: None,
                    time: Some("2023-11-14T22:13:20.000Z".into()),
                    direction: "in".into(),
                    to: vec!["+15550100".into()],
                    from: "+15550199".into(),
                    text: "Hello from the benchmark".into(),
                    media: vec![],
                    attachments: vec![],
                },
                webhook_core::clock::Clock::now_ms(&webhook_core::clock::SystemClock),
            )
            .await
            .map_err(|e| e.to_string())?;
        Some((tables, store))
    } else {
        println!("  AWS_ENDPOINT_URL_DYNAMODB is not set: store-backed functions are measured for init only");
        None
    };
    let sqs_queue_url = crate::bench_queue("webhooks-bench")
        .await?
        .map(|(_, url)| url);
    Ok(Environment {
        dynamodb,
        sqs_queue_url,
        receiver,
        token,
        logs,
    })
}
