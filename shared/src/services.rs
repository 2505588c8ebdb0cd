//! The one place where adapters are built: every runtime (`webhooks-local`,
//! each Lambda function, the benchmarks) gets its store, outbox and delivery
//! queue from here, from the typed configuration, and names an adapter's
//! own type (a table's store for a one-off command, the SQLite threads'
//! hook) only through here.

use std::sync::Arc;

use crate::app::App;
use crate::clock::Clock;
use crate::config::{Config, ConfigError};
use crate::queue::{DeliveryQueue, Outbox, QueueError};
#[cfg(feature = "sqlite")]
use crate::sqlite::SqliteDb;
use crate::store::StoreError;

/// Why a backend could not be opened (fatal at start-up), its cause kept.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The SQLite file's folder cannot be created.
    #[error("{}: {source}", path.display())]
    DataDir {
        /// The folder that could not be created.
        path: std::path::PathBuf,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
    /// A configuration value the backend needs is missing or wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store could not be opened (the SQLite file, its migration).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The queue failed at start (the leases of a killed predecessor not released).
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// The DynamoDB tables are missing or cannot be reached.
    #[error("DynamoDB tables {subscriptions} and {messages}: {source}{hint}")]
    Tables {
        /// The subscriptions table's name.
        subscriptions: String,
        /// The messages table's name.
        messages: String,
        /// How to create them, when they were only checked; else empty.
        hint: &'static str,
        /// Why they could not be checked or created.
        #[source]
        source: StoreError,
    },
}

/// Runs `hook` on each SQLite connection thread before it sleeps (the
/// runtime gives its allocator's memory back there).
#[cfg(feature = "sqlite")]
pub use crate::sqlite::before_sleep;

/// Where the data lives.
pub enum Backend {
    /// One SQLite file holds store, outbox and queue.
    #[cfg(feature = "sqlite")]
    Sqlite(std::path::PathBuf),
    /// DynamoDB tables and SQS queues.
    #[cfg(feature = "aws")]
    Aws(aws::AwsBackend),
}

/// The ports of one backend: the [`App`] (with the store) the handlers work
/// with, the outbox ingestion commits to, and the queue delivery reads.
pub struct Services {
    /// What the handlers work with: configuration, store, history, clock.
    pub app: Arc<App>,
    /// Where ingestion commits an event's message and notifications.
    pub outbox: Arc<dyn Outbox>,
    /// Where the delivery workers lease jobs.
    pub queue: Arc<dyn DeliveryQueue>,
    /// Where a second worker loop leases the jobs of ordered subscriptions,
    /// when they have a queue of their own (SQS FIFO); None where `queue`
    /// leases them too (SQLite).
    pub ordered_queue: Option<Arc<dyn DeliveryQueue>>,
}

impl Services {
    /// Opens the backend. The SQLite file is created and migrated if needed,
    /// and jobs a killed predecessor had leased are made due at once: the
    /// caller is the one process serving that file.
    pub async fn open(
        config: Config,
        backend: Backend,
        clock: Arc<dyn Clock>,
    ) -> Result<Services, OpenError> {
        match backend {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(path) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|source| OpenError::DataDir {
                        path: dir.to_owned(),
                        source,
                    })?;
                }
                let db = Arc::new(SqliteDb::open(&path)?.with_clock(clock.clone()));
                #[cfg(feature = "aws")]
                let destinations = aws::local_destinations(&config).await;
                let released = db.release_leases().await?;
                if released > 0 {
                    tracing::info!(released, "resuming deliveries left in flight");
                }
                #[allow(unused_mut)]
                let mut app = App::new(config, db.clone())
                    .with_clock(clock)
                    .with_ordered_delivery();
                #[cfg(feature = "aws")]
                {
                    app.destinations = destinations;
                }
                Ok(Services {
                    app: Arc::new(app),
                    outbox: db.clone(),
                    queue: db,
                    ordered_queue: None,
                })
            }
            #[cfg(feature = "aws")]
            Backend::Aws(aws) => {
                // One process serves the API and delivers: the API's bounds.
                let sdk =
                    crate::aws::sdk_config_with(&config.aws_calls.api, crate::aws::Roots::System)
                        .await;
                let store = aws::open_store(&aws, &sdk, &config).await?;
                let queue = aws::open_queue(&aws, &sdk)
                    .await?
                    .with_parking(store.clone());
                let mut app = App::new(config, store.clone()).with_clock(clock);
                app.ordered_delivery = queue.keeps_order();
                app.destinations = aws::destinations(&sdk);
                let ordered_queue = queue
                    .ordered_poller()
                    .map(|q| Arc::new(q) as Arc<dyn DeliveryQueue>);
                Ok(Services {
                    outbox: Arc::new(crate::aws::outbox::AwsOutbox::new(
                        store,
                        queue.clone(),
                        app.clock.clone(),
                    )),
                    app: Arc::new(app),
                    queue: Arc::new(queue),
                    ordered_queue,
                })
            }
        }
    }
}

#[cfg(feature = "aws")]
pub mod aws {
    //! The AWS backend's parts, and what each Lambda function builds at init.

    use std::sync::Arc;

    use super::OpenError;
    use crate::app::App;
    use crate::aws::dynamodb;
    use crate::aws::outbox::AwsOutbox;
    use crate::aws::sqs::SqsQueue;
    use crate::config::{Config, ConfigError};

    pub use crate::aws::dynamodb::api_keys::Revoked;
    pub use crate::aws::dynamodb::{DynamoStore, Tables};

    /// The queue URL a deployed function needs.
    fn queue_url_required() -> ConfigError {
        ConfigError {
            var: "WEBHOOKS_DELIVERY_QUEUE_URL",
            message: "is required (the stack's DeliveryQueueUrl)".into(),
        }
    }

    /// DynamoDB tables and the SQS delivery queue.
    pub struct AwsBackend {
        /// The DynamoDB subscriptions and messages tables.
        pub tables: Tables,
        /// The delivery queue and its dead-letter queue, when they exist.
        pub queues: Option<(String, Option<String>)>,
        /// The FIFO queue of ordered subscriptions and its dead-letter queue, when they exist.
        pub ordered_queues: Option<(String, Option<String>)>,
        /// Whether the tables (and queues) are checked or created at start.
        pub prepare: Prepare,
    }

    impl AwsBackend {
        /// The tables `config` names (the default names where it names
        /// none) and its delivery queue and dead-letter queue, if set.
        pub fn from_config(config: &Config, prepare: Prepare) -> Self {
            AwsBackend {
                tables: Tables::or_defaults(config),
                queues: config
                    .delivery_queue_url
                    .clone()
                    .map(|url| (url, config.delivery_dead_letter_url.clone())),
                ordered_queues: config
                    .ordered_queue_url
                    .clone()
                    .map(|url| (url, config.ordered_dead_letter_url.clone())),
                prepare,
            }
        }
    }

    /// What to do about the tables (and queues) at start.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Prepare {
        /// Check that the tables exist, and fail naming them if not.
        Check,
        /// Create the tables and queues that are missing (`--create-tables`).
        Create,
    }

    /// The store of the tables `config` names (the default names where it
    /// names none), neither checked nor created, with the SDK's standard
    /// environment: what the one-off commands of `webhooks-local`
    /// (`api-keys`, `migrate-messages`) work on.
    pub async fn tables_store(config: &Config) -> DynamoStore {
        let sdk = crate::aws::sdk_config().await;
        DynamoStore::configured(&sdk, Tables::or_defaults(config), config)
    }

    /// For a one-off command that writes sample data (`webhooks-local
    /// sample-data`): the store of the tables `config` names, checked or
    /// created (with a delivery queue and its dead-letter queue) as `prepare`
    /// says, and the functions' environment naming them (`NAME`, value).
    pub async fn provisioned(
        config: &Config,
        prepare: Prepare,
    ) -> Result<(Arc<dyn crate::store::Store>, Vec<(&'static str, String)>), OpenError> {
        let backend = AwsBackend::from_config(config, prepare);
        let sdk = crate::aws::sdk_config().await;
        let store = open_store(&backend, &sdk, config).await?;
        let mut env = vec![
            (
                "WEBHOOKS_SUBSCRIPTIONS_TABLE",
                backend.tables.subscriptions.clone(),
            ),
            ("WEBHOOKS_MESSAGES_TABLE", backend.tables.messages.clone()),
        ];
        if prepare == Prepare::Create {
            let queue = open_queue(&backend, &sdk).await?;
            env.push(("WEBHOOKS_DELIVERY_QUEUE_URL", queue.url().to_owned()));
            if let Some(dlq) = queue.dead_letter_url() {
                env.push(("WEBHOOKS_DELIVERY_DLQ_URL", dlq.to_owned()));
            }
        }
        Ok((store, env))
    }

    /// The store, its tables provisioned or checked as `backend.prepare` says.
    pub(super) async fn open_store(
        backend: &AwsBackend,
        sdk: &aws_config::SdkConfig,
        config: &Config,
    ) -> Result<Arc<DynamoStore>, OpenError> {
        let store = DynamoStore::configured(sdk, backend.tables.clone(), config);
        let tables = &backend.tables;
        let ready = match backend.prepare {
            Prepare::Check => dynamodb::check_tables(store.client(), tables).await,
            Prepare::Create => dynamodb::create_tables(store.client(), tables).await,
        };
        ready.map_err(|source| OpenError::Tables {
            subscriptions: tables.subscriptions.clone(),
            messages: tables.messages.clone(),
            hint: match backend.prepare {
                Prepare::Check => " (create them with --create-tables, or deploy template.yaml)",
                _ => "",
            },
            source,
        })?;
        Ok(Arc::new(store))
    }

    /// The delivery queue: the configured one, or created (`--create-tables`).
    /// Separate from the store so the API functions link no SQS code.
    pub(super) async fn open_queue(
        backend: &AwsBackend,
        sdk: &aws_config::SdkConfig,
    ) -> Result<SqsQueue, OpenError> {
        let client = aws_sdk_sqs::Client::new(sdk);
        match (&backend.queues, backend.prepare) {
            (Some((url, dlq)), _) => Ok(with_ordered(
                SqsQueue::new(client, url, dlq.clone()),
                &backend.ordered_queues,
            )),
            (None, Prepare::Create) => {
                Ok(SqsQueue::create(client, &backend.tables.subscriptions).await?)
            }
            (None, _) => Err(ConfigError {
                var: "WEBHOOKS_DELIVERY_QUEUE_URL",
                message: "is required (the stack's DeliveryQueueUrl output), \
                          or --create-tables to create the queues"
                    .into(),
            }
            .into()),
        }
    }

    /// `queue` with the FIFO queue of ordered subscriptions, when there is one.
    fn with_ordered(queue: SqsQueue, ordered: &Option<(String, Option<String>)>) -> SqsQueue {
        match ordered {
            Some((url, dlq)) => queue.with_ordered(url, dlq.clone()),
            None => queue,
        }
    }

    /// The FIFO queue of `config`, for [`with_ordered`].
    fn ordered_of(config: &Config) -> Option<(String, Option<String>)> {
        config
            .ordered_queue_url
            .clone()
            .map(|url| (url, config.ordered_dead_letter_url.clone()))
    }

    // The Lambda functions below build their clients directly: a deployed
    // stack has its tables and queues, and going through `open_store` /
    // `open_queue` would link table and queue provisioning (and with it the
    // SDK's CreateTable, waiters and CreateQueue code) into every function.
    //
    // Each is in two steps (docs/decisions/build.md): the configuration
    // checked at init, where a missing variable stops the function with its
    // name; the SDK and its clients built on the first invocation, where
    // nothing can fail any more.

    /// An API function's configuration, checked: its tables are named.
    #[derive(Debug, Clone)]
    pub struct ApiStart {
        config: Config,
        tables: Tables,
    }

    impl ApiStart {
        /// Checks what an API function needs of `config`.
        pub fn check(config: Config) -> Result<ApiStart, OpenError> {
            let tables = Tables::required(&config)?;
            Ok(ApiStart { config, tables })
        }

        /// What an API function needs: the app on the DynamoDB store.
        pub async fn app(&self) -> App {
            let sdk = api_sdk(&self.config).await;
            self.app_on(&sdk)
        }

        /// [`ApiStart::app`] with the AWS destinations' sender, for
        /// `create-subscription` (which validates destinations): the other
        /// API functions build no STS or EventBridge client.
        pub async fn app_with_destinations(&self) -> App {
            let sdk = api_sdk(&self.config).await;
            let mut app = self.app_on(&sdk);
            app.destinations = destinations(&sdk);
            app
        }

        fn app_on(&self, sdk: &aws_config::SdkConfig) -> App {
            let store = DynamoStore::configured(sdk, self.tables.clone(), &self.config);
            // `ordered` is accepted where the stack has the FIFO queue (its URL
            // is all the API functions are given of it).
            let ordered = self.config.ordered_queue_url.is_some();
            let mut app = App::new(self.config.clone(), Arc::new(store));
            app.ordered_delivery = ordered;
            app
        }
    }

    /// The configuration of a function that enqueues notifications, checked:
    /// its tables and `WEBHOOKS_DELIVERY_QUEUE_URL` are named.
    #[derive(Debug, Clone)]
    pub struct QueueStart {
        config: Config,
        tables: Tables,
        url: String,
    }

    impl QueueStart {
        /// Checks what a function that enqueues notifications needs of `config`.
        pub fn check(config: Config) -> Result<QueueStart, OpenError> {
            let tables = Tables::required(&config)?;
            let url = config
                .delivery_queue_url
                .clone()
                .ok_or_else(queue_url_required)?;
            Ok(QueueStart {
                config,
                tables,
                url,
            })
        }

        /// What the API functions that send notifications again (resend,
        /// recover) need: the app and the delivery queue they enqueue on.
        pub async fn api_app(&self) -> (App, SqsQueue) {
            let sdk = api_sdk(&self.config).await;
            let queue = SqsQueue::new(aws_sdk_sqs::Client::new(&sdk), self.url.clone(), None);
            let queue = with_ordered(queue, &ordered_of(&self.config));
            let store = DynamoStore::configured(&sdk, self.tables.clone(), &self.config);
            let mut app = App::new(self.config.clone(), Arc::new(store));
            app.ordered_delivery = queue.keeps_order();
            (app, queue)
        }

        /// What the SQS-triggered and scheduled functions need: the app, the
        /// outbox and the delivery queue.
        pub async fn queue_functions(&self) -> QueueFunctions {
            let config = &self.config;
            let sdk =
                crate::aws::sdk_config_with(&config.aws_calls.batch, crate::aws::Roots::Amazon)
                    .await;
            let store = Arc::new(DynamoStore::configured(&sdk, self.tables.clone(), config));
            let queue = SqsQueue::new(
                aws_sdk_sqs::Client::new(&sdk),
                self.url.clone(),
                config.delivery_dead_letter_url.clone(),
            )
            .with_parking(store.clone());
            let queue = with_ordered(queue, &ordered_of(config));
            let mut app = App::new(config.clone(), store.clone());
            app.ordered_delivery = queue.keeps_order();
            app.destinations = destinations(&sdk);
            QueueFunctions {
                outbox: AwsOutbox::new(store, queue.clone(), app.clock.clone()),
                app,
                queue,
            }
        }
    }

    /// The SDK configuration of the API functions: calls bounded for a
    /// waiting client, Amazon's roots only.
    async fn api_sdk(config: &Config) -> aws_config::SdkConfig {
        crate::aws::sdk_config_with(&config.aws_calls.api, crate::aws::Roots::Amazon).await
    }

    /// AWS destinations for `webhooks-local` on SQLite, with the credentials
    /// of its environment, when that environment names a region
    /// (`AWS_REGION`, `AWS_DEFAULT_REGION` or the profile's): otherwise none,
    /// and without asking EC2's instance metadata for one, which on a laptop
    /// only waits and warns (docs/destinations.md).
    pub async fn local_destinations(
        config: &Config,
    ) -> Option<Arc<dyn crate::destinations::Destinations>> {
        use aws_config::meta::region::RegionProviderChain;
        let region = RegionProviderChain::first_try(
            aws_config::environment::EnvironmentVariableRegionProvider::new(),
        )
        .or_else(aws_config::profile::ProfileFileRegionProvider::new())
        .region()
        .await?;
        tracing::debug!(%region, "AWS destinations with the environment's credentials");
        let sdk =
            crate::aws::sdk_config_with(&config.aws_calls.api, crate::aws::Roots::System).await;
        destinations(&sdk)
    }

    /// The AWS destinations' sender on `sdk` (its STS client built on first
    /// use); none without a region.
    pub fn destinations(
        sdk: &aws_config::SdkConfig,
    ) -> Option<Arc<dyn crate::destinations::Destinations>> {
        crate::aws::destination::AwsDestinations::new(sdk)
            .map(|d| Arc::new(d) as Arc<dyn crate::destinations::Destinations>)
    }

    /// [`QueueStart::api_app`], checking `config` first.
    pub async fn api_app_with_queue(config: Config) -> Result<(App, SqsQueue), OpenError> {
        Ok(QueueStart::check(config)?.api_app().await)
    }

    /// What the SQS-triggered functions need: the app, the outbox and the
    /// delivery queue (whose event-source batches they settle).
    pub struct QueueFunctions {
        /// What the handlers work with (DynamoDB store).
        pub app: App,
        /// The outbox ingestion commits to (DynamoDB and SQS).
        pub outbox: AwsOutbox,
        /// The SQS delivery queue, with DynamoDB parking.
        pub queue: SqsQueue,
    }

    /// [`QueueStart::queue_functions`], checking `config` first; the tables
    /// and `WEBHOOKS_DELIVERY_QUEUE_URL` are required.
    pub async fn queue_functions(config: Config) -> Result<QueueFunctions, OpenError> {
        Ok(QueueStart::check(config)?.queue_functions().await)
    }
}
