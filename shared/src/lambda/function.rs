//! Which function a process of the one Lambda binary (`webhooks-lambda`)
//! serves: its `WEBHOOKS_FUNCTION` (template.yaml sets it per function), and
//! the start-up of each. One binary is built, linked and zipped once for all
//! of them (docs/decisions/build.md); each function keeps its own role,
//! route and configuration.
//!
//! Init reads and checks the configuration only, so a missing variable
//! stops the function at once, naming it; the SDK and its clients are built
//! on the first invocation, once ([`OnFirstUse`]).

use std::future::Future;

use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;
use tokio::sync::OnceCell;

use super::{authorizer, console, pre_token, queues, schedule, Endpoint, StartError};
use crate::config::{Config, Profile};
use crate::services::aws::{ApiStart, QueueStart};

/// The variable naming the function a process serves.
pub const VAR: &str = "WEBHOOKS_FUNCTION";

/// What is built from a checked configuration `S` on the first invocation,
/// once: a function's init is then as short as a no-op's.
pub struct OnFirstUse<S, T> {
    start: S,
    built: OnceCell<T>,
}

impl<S, T> OnFirstUse<S, T> {
    /// Nothing built yet.
    pub fn new(start: S) -> Self {
        OnFirstUse {
            start,
            built: OnceCell::new(),
        }
    }

    /// What `build` makes of the start, built by the first caller.
    pub async fn get<'a, F, Fut>(&'a self, build: F) -> &'a T
    where
        F: FnOnce(&'a S) -> Fut,
        Fut: Future<Output = T>,
    {
        self.built.get_or_init(|| build(&self.start)).await
    }
}

macro_rules! functions {
    ($($variant:ident = $name:literal,)*) => {
        /// A function of template.yaml, named as its `WEBHOOKS_FUNCTION`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Function {
            $(#[doc = concat!("`", $name, "`")] $variant,)*
        }

        impl Function {
            /// Every function, each once.
            pub const ALL: &'static [Function] = &[$(Function::$variant,)*];

            /// Its name: the value of `WEBHOOKS_FUNCTION`.
            pub fn name(self) -> &'static str {
                match self {
                    $(Function::$variant => $name,)*
                }
            }
        }
    };
}

functions! {
    Authorizer = "authorizer",
    CreateSubscription = "create-subscription",
    ListSubscriptions = "list-subscriptions",
    GetSubscription = "get-subscription",
    DeleteSubscription = "delete-subscription",
    GetSubscriptionSecret = "get-subscription-secret",
    RotateSubscriptionSecret = "rotate-subscription-secret",
    GetMessage = "get-message",
    ListNotifications = "list-notifications",
    GetNotification = "get-notification",
    ResendNotification = "resend-notification",
    RecoverNotifications = "recover-notifications",
    GetDeliveryStats = "get-delivery-stats",
    GetDestinationIdentity = "get-destination-identity",
    IngestEvents = "ingest-events",
    DeliverNotifications = "deliver-notifications",
    RemindExpiring = "remind-expiring",
    PreTokenGeneration = "pre-token-generation",
    Console = "console",
}

impl Function {
    /// The function named `name`.
    pub fn parse(name: &str) -> Result<Function, StartError> {
        Function::ALL
            .iter()
            .copied()
            .find(|f| f.name() == name)
            .ok_or_else(|| format!("{VAR}={name:?} is no function; {}", Self::expected()).into())
    }

    /// The function `WEBHOOKS_FUNCTION` names; an error naming the variable
    /// and the functions when it is unset or names none.
    pub fn from_env() -> Result<Function, StartError> {
        match std::env::var(VAR) {
            Ok(name) => Function::parse(&name),
            Err(_) => Err(format!("{VAR} is not set; {}", Self::expected()).into()),
        }
    }

    fn expected() -> String {
        let names: Vec<_> = Function::ALL.iter().map(|f| f.name()).collect();
        format!(
            "it names the function this process serves: one of {}",
            names.join(", ")
        )
    }

    /// The API route it serves through [`super::handle`], if it is one of those.
    pub fn endpoint(self) -> Option<Endpoint> {
        Some(match self {
            Function::CreateSubscription => Endpoint::CreateSubscription,
            Function::ListSubscriptions => Endpoint::ListSubscriptions,
            Function::GetSubscription => Endpoint::GetSubscription,
            Function::DeleteSubscription => Endpoint::DeleteSubscription,
            Function::GetSubscriptionSecret => Endpoint::GetSubscriptionSecret,
            Function::RotateSubscriptionSecret => Endpoint::RotateSubscriptionSecret,
            Function::GetMessage => Endpoint::GetMessage,
            Function::ListNotifications => Endpoint::ListNotifications,
            Function::GetNotification => Endpoint::GetNotification,
            Function::ResendNotification => Endpoint::ResendNotification,
            Function::RecoverNotifications => Endpoint::RecoverNotifications,
            Function::GetDeliveryStats => Endpoint::GetDeliveryStats,
            Function::GetDestinationIdentity => Endpoint::GetDestinationIdentity,
            Function::Authorizer
            | Function::IngestEvents
            | Function::DeliverNotifications
            | Function::RemindExpiring
            | Function::PreTokenGeneration
            | Function::Console => return None,
        })
    }

    /// Checks its configuration and serves its invocations until the
    /// runtime stops; fails at once naming a missing or bad variable.
    pub async fn run(self) -> Result<(), Error> {
        match self {
            Function::Authorizer => {
                let authorizer = authorizer::authorizer_from_env()?;
                lambda_runtime::run(service_fn(|event| authorizer::handle(&authorizer, event)))
                    .await
            }
            Function::CreateSubscription => {
                let start = OnFirstUse::new(ApiStart::check(config()?)?);
                lambda_http::run(service_fn(|request| async {
                    let app = start.get(ApiStart::app_with_destinations).await;
                    super::handle(app, Endpoint::CreateSubscription, request).await
                }))
                .await
            }
            Function::ResendNotification | Function::RecoverNotifications => {
                let endpoint = self.endpoint().expect("an API function");
                let start = OnFirstUse::new(QueueStart::check(config()?)?);
                lambda_http::run(service_fn(|request| async {
                    let (app, queue) = start.get(QueueStart::api_app).await;
                    super::handle_with_queue(app, Some(queue), endpoint, request).await
                }))
                .await
            }
            Function::IngestEvents => {
                let start = OnFirstUse::new(QueueStart::check(config()?)?);
                lambda_runtime::run(service_fn(|event: LambdaEvent<_>| async {
                    let f = start.get(QueueStart::queue_functions).await;
                    Ok::<_, Error>(queues::ingest_events(&f.app, &f.outbox, event.payload).await)
                }))
                .await
            }
            Function::DeliverNotifications => {
                let start = OnFirstUse::new(QueueStart::check(config()?)?);
                lambda_runtime::run(service_fn(|event: LambdaEvent<_>| async {
                    let f = start.get(QueueStart::queue_functions).await;
                    Ok::<_, Error>(
                        queues::deliver_notifications(&f.app, &f.queue, &f.outbox, event.payload)
                            .await,
                    )
                }))
                .await
            }
            Function::RemindExpiring => {
                let start = OnFirstUse::new(QueueStart::check(config()?)?);
                lambda_runtime::run(service_fn(|event: LambdaEvent<Value>| async {
                    let f = start.get(QueueStart::queue_functions).await;
                    schedule::remind_expiring(&f.app, &f.outbox, event.payload)
                        .await
                        .map_err(Error::from)
                }))
                .await
            }
            Function::PreTokenGeneration => {
                let claim = pre_token::org_claim_from_env();
                let machines = pre_token::MachineClients::from_env()?;
                lambda_runtime::run(service_fn(|event: LambdaEvent<_>| async {
                    pre_token::handle(event.payload, &claim, &machines).map_err(Error::from)
                }))
                .await
            }
            Function::Console => {
                let console =
                    crate::console::Console::new(&crate::console::ConsoleConfig::from_env()?);
                lambda_http::run(service_fn(|request| async {
                    console::handle(&console, request)
                }))
                .await
            }
            Function::GetDestinationIdentity => {
                // It also serves the event catalogue: the reads that call nothing.
                let start = OnFirstUse::new(ApiStart::check(config()?)?);
                lambda_http::run(service_fn(|request| async {
                    let app = start.get(ApiStart::app).await;
                    super::handle_one_of(app, &super::READS_WITHOUT_CALLS, request).await
                }))
                .await
            }
            api => {
                let endpoint = api.endpoint().expect("every other function is an API one");
                let start = OnFirstUse::new(ApiStart::check(config()?)?);
                lambda_http::run(service_fn(|request| async {
                    let app = start.get(ApiStart::app).await;
                    super::handle(app, endpoint, request).await
                }))
                .await
            }
        }
    }
}

/// The deployed configuration (`Profile::Lambda`).
fn config() -> Result<Config, StartError> {
    Ok(Config::from_env(Profile::Lambda)?)
}
