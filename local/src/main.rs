//! `webhooks-local`: the whole webhook service as one process.
//!
//! - `serve` (default): the API under `/prod` on the embedded SQLite store
//! - `listen`: a callback receiver that answers the handshake and prints notifications
//! - `token`: mints a bearer token for an organization
//! - `verify`: checks the signatures of notifications `listen --record` wrote
//! - `migrate-messages`: dates the messages of a DynamoDB table that predate
//!   the per-id keys, so their retention applies (once, after upgrading)
//! - `api-keys create|revoke`: the API keys of a deployment with the HTTP API
//!   option, in its DynamoDB table
//! - `sample-data`: what the sample events of `events/` name, in DynamoDB tables, for
//!   `cargo lambda invoke`

/// mimalloc rather than glibc's malloc: a request allocates a few dozen
/// small blocks, and glibc's free lists were an eighth of the server's CPU
/// (docs/performance-history.md#hot-paths-profiled-issue-15). Its v2 without
/// huge pages (the workspace's Cargo.toml): v3 and huge pages kept the memory
/// a load had freed (docs/decisions/webhooks-local-memory.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod api_keys;
mod backend;
mod credentials;
mod listen;
mod memory;
mod runtime;
mod sample_data;
mod serve;
mod shutdown;
mod signatures;
mod test_clock;
mod verify;
mod workers;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use webhook_core::auth::jwt;
use webhook_core::{Config, Profile};

#[derive(Parser)]
#[command(
    name = "webhooks-local",
    version,
    about = "Webhook subscription service on one machine"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API (the default command).
    Serve(ServeArgs),
    /// Run a callback receiver: answers the validation handshake, prints notifications.
    Listen(listen::ListenArgs),
    /// Print a bearer token for an organization.
    Token(TokenArgs),
    /// Check the Standard Webhooks signatures of notifications recorded by
    /// `listen --record` (JSON lines on stdin).
    Verify(verify::VerifyArgs),
    /// After upgrading a DynamoDB deployment to per-id message keys: give every message
    /// still under its old key a receipt time of now and its TTL (WEBHOOKS_MESSAGES_TABLE,
    /// WEBHOOKS_MESSAGE_RETENTION, AWS credentials and region from the SDK's environment).
    MigrateMessages,
    /// With the HTTP API option (ApiType=http): create or revoke API keys in the DynamoDB
    /// subscriptions table (WEBHOOKS_SUBSCRIPTIONS_TABLE, AWS credentials and region from
    /// the SDK's environment).
    ApiKeys(api_keys::ApiKeysArgs),
    /// Write the subscription and message the sample events of events/ name into the DynamoDB
    /// tables (WEBHOOKS_SUBSCRIPTIONS_TABLE, WEBHOOKS_MESSAGES_TABLE, AWS settings from the
    /// SDK's environment), for `cargo lambda invoke`; print the functions' environment.
    SampleData(sample_data::SampleDataArgs),
}

#[derive(Args, Clone)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "WEBHOOKS_ADDR", default_value = "127.0.0.1:3000")]
    addr: SocketAddr,
    /// Where the database and generated credentials live.
    #[arg(long, env = "WEBHOOKS_DATA_DIR", default_value = "webhooks-data")]
    data_dir: PathBuf,
    /// Store: the SQLite file in the data dir, or DynamoDB (endpoint, region and
    /// credentials from the AWS SDK's environment, e.g. AWS_ENDPOINT_URL_DYNAMODB).
    #[arg(long, env = "WEBHOOKS_BACKEND", value_enum, default_value = "sqlite")]
    backend: backend::Backend,
    /// With --backend aws: create the DynamoDB tables if they do not exist.
    #[arg(long)]
    create_tables: bool,
    /// Serve Prometheus metrics at http://ADDR/metrics (off when unset).
    #[arg(long, env = "WEBHOOKS_METRICS_ADDR")]
    metrics_addr: Option<SocketAddr>,
    /// Tests only: the clock runs ahead by the milliseconds written in this file.
    #[arg(long, env = "WEBHOOKS_TEST_CLOCK_FILE", hide = true)]
    test_clock_file: Option<PathBuf>,
}

#[derive(Args)]
struct TokenArgs {
    /// Organization id the token is for.
    #[arg(long)]
    org: String,
    /// Scopes to grant (repeatable); by default every configured read and write scope
    /// (WEBHOOKS_READ_SCOPES, WEBHOOKS_WRITE_SCOPES; webhooks/read and webhooks/write).
    #[arg(long = "scope")]
    scopes: Vec<String>,
    /// Lifetime of the token, e.g. 1h or 30d.
    #[arg(long, default_value = "24h", value_parser = parse_duration)]
    ttl: Duration,
    #[arg(long, env = "WEBHOOKS_DATA_DIR", default_value = "webhooks-data")]
    data_dir: PathBuf,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    webhook_core::config::parse_duration(s)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        None => serve::run(cli.serve),
        Some(Command::Serve(args)) => serve::run(args),
        Some(Command::Listen(args)) => listen::run(args),
        Some(Command::Token(args)) => token(args),
        Some(Command::Verify(args)) => verify::run(args),
        Some(Command::MigrateMessages) => migrate_messages(),
        Some(Command::ApiKeys(args)) => api_keys::run(args),
        Some(Command::SampleData(args)) => sample_data::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("webhooks-local: {message}");
            ExitCode::from(2)
        }
    }
}

fn token(args: TokenArgs) -> Result<(), String> {
    webhook_core::filter::id("--org", &args.org).map_err(|e| e.to_string())?;
    let config = Config::from_env(Profile::Local).map_err(|e| e.to_string())?;
    let secret = match &config.jwt.hs256_secret {
        Some(secret) => secret.clone(),
        None if config.jwt.jwks_url.is_some() => {
            return Err(
                "tokens come from your identity provider when WEBHOOKS_JWT_JWKS_URL is set".into(),
            )
        }
        None => credentials::Credentials::load_or_create(&args.data_dir)?.jwt_secret,
    };
    let scopes: Vec<&str> = if args.scopes.is_empty() {
        config.jwt.scopes.all()
    } else {
        args.scopes.iter().map(String::as_str).collect()
    };
    println!(
        "{}",
        jwt::mint_hs256(&secret, &config.jwt.org_claim, &args.org, &scopes, args.ttl)
    );
    Ok(())
}

fn migrate_messages() -> Result<(), String> {
    use webhook_core::clock::{Clock, SystemClock};
    use webhook_core::services::aws::tables_store;
    let config = Config::from_env(Profile::Local).map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let (dated, table) = runtime.block_on(async {
        let store = tables_store(&config).await;
        let table = store.tables().messages.clone();
        store
            .migrate_legacy_messages(SystemClock.now_ms())
            .await
            .map(|dated| (dated, table.clone()))
            .map_err(|e| format!("{table}: {e}"))
    })?;
    println!(
        "{dated} message(s) under old keys in {table} now expire in {}d",
        config.message_retention.as_secs() / 86_400
    );
    Ok(())
}
