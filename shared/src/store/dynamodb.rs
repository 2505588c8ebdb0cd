//! DynamoDB store adapter (feature `aws`): the same [`Store`] port as SQLite,
//! passing the same conformance suite, on two tables whose key schema is a
//! string partition key `pk` and a string sort key `sk` (`template.yaml`).
//!
//! # Subscriptions table
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | subscription | `ORG#<org>` | `SUB#<id>` | the subscription, `version` |
//! | uniqueness guard | `ORG#<org>` | `URI#<sha256(uri), hex>` | `subscriptionId`, `uri` |
//! | subscription counter | `ORG#<org>` | `COUNT` | `n` |
//! | filter index entry | `FILTER#<canonical filter>` | `SUB#<id>` | a copy of the subscription, `ttl` |
//!
//! - **Create** is one `TransactWriteItems`: put the guard if absent, add 1
//!   to the counter if below the cap, put the subscription and one index
//!   entry per filter. Concurrent creates of one (org, uri) race on the
//!   guard: one wins, the others are cancelled and retry as updates.
//! - **Update** and **delete** read the subscription (strongly consistent),
//!   then write it, its guard, counter and index entries in one transaction
//!   conditioned on its `version` (optimistic concurrency): an index entry can
//!   never outlive or disagree with its subscription. Cancelled transactions
//!   (conflicts, lost races) are retried with jittered backoff.
//! - **Fan-out** ([`Store::subscriptions_for_filter`]) is one `Query` on
//!   `pk = FILTER#<filter>`: the entries carry everything delivery needs
//!   (org, id, uri, status, expiry, secret), so no further reads.
//! - **List** is one `Query` on `pk = ORG#<org>`, `begins_with(sk, "SUB#")`,
//!   bounded by the per-organization cap.
//! - Reads that decide what to write, and reads right after a write by
//!   another process (lists, lookups, fan-out), are strongly consistent.
//!   Nothing scans.
//! - **TTL**: index entries carry `ttl` = the subscription's expiry (epoch
//!   seconds), so DynamoDB removes entries of expired subscriptions from the
//!   fan-out partitions; posting the uri again writes them anew. Subscription
//!   items, guards and counters carry no `ttl`: an expired subscription stays
//!   listed (as `EXPIRED`) and counted until deleted, as in SQLite.
//!
//! # Messages table
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | message | `ORG#<org>` | `MSG#<id>` | the [`Message`]'s fields |
//!
//! Messages carry no `ttl` (kept like in SQLite); the table has TTL enabled
//! on `ttl` so a retention can be added without a migration.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::client::Waiters;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::create_table::CreateTableError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, Delete, KeySchemaElement, KeyType, Put,
    ReturnValuesOnConditionCheckFailure, ScalarAttributeType, TimeToLiveSpecification,
    TimeToLiveStatus, TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;

use super::{DeliveryRecord, DisabledEntry, Store, StoreError, StoredSubscription, Upsert};
use crate::config::{Config, ConfigError};
use crate::model::{Message, SubscriptionStatus};

pub const DEFAULT_SUBSCRIPTIONS_TABLE: &str = "webhooks-subscriptions";
pub const DEFAULT_MESSAGES_TABLE: &str = "webhooks-messages";

/// DynamoDB's limit on a sort key, in bytes.
const MAX_SORT_KEY: usize = 1024;
/// Attempts of one write before contention is reported as a failure.
const MAX_ATTEMPTS: u32 = 16;

type Item = HashMap<String, AttributeValue>;

/// The table names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tables {
    pub subscriptions: String,
    pub messages: String,
}

impl Tables {
    /// Both names from configuration; deployed functions must be told.
    pub fn required(config: &Config) -> Result<Tables, ConfigError> {
        let need = |value: &Option<String>, var: &'static str| {
            value.clone().ok_or(ConfigError {
                var,
                message: "is required (the DynamoDB table name)".into(),
            })
        };
        Ok(Tables {
            subscriptions: need(&config.subscriptions_table, "WEBHOOKS_SUBSCRIPTIONS_TABLE")?,
            messages: need(&config.messages_table, "WEBHOOKS_MESSAGES_TABLE")?,
        })
    }

    /// Names from configuration, else `webhooks-subscriptions` and `webhooks-messages`.
    pub fn or_defaults(config: &Config) -> Tables {
        Tables {
            subscriptions: config
                .subscriptions_table
                .clone()
                .unwrap_or_else(|| DEFAULT_SUBSCRIPTIONS_TABLE.into()),
            messages: config
                .messages_table
                .clone()
                .unwrap_or_else(|| DEFAULT_MESSAGES_TABLE.into()),
        }
    }
}

#[derive(Clone)]
pub struct DynamoStore {
    client: Client,
    tables: Tables,
}

impl DynamoStore {
    pub fn new(client: Client, tables: Tables) -> Self {
        DynamoStore { client, tables }
    }

    /// A client from the SDK's standard environment: region, credentials,
    /// and endpoint (`AWS_ENDPOINT_URL_DYNAMODB` / `AWS_ENDPOINT_URL`).
    pub async fn from_env(tables: Tables) -> Self {
        Self::from_sdk(&crate::aws::sdk_config().await, tables)
    }

    pub fn from_sdk(sdk: &aws_config::SdkConfig, tables: Tables) -> Self {
        Self::new(Client::new(sdk), tables)
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// The subscription and its version, read strongly consistently.
    async fn versioned(
        &self,
        org_id: &str,
        id: &str,
    ) -> Result<Option<(StoredSubscription, u64)>, StoreError> {
        let sk = sub_sk(id);
        if sk.len() > MAX_SORT_KEY {
            return Ok(None); // no id we make is that long
        }
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.subscriptions)
            .key("pk", s(org_pk(org_id)))
            .key("sk", s(sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?;
        output
            .item()
            .map(|item| Ok((parse_subscription(item)?, number(item, "version")? as u64)))
            .transpose()
    }

    async fn guard(&self, org_id: &str, uri: &str) -> Result<Option<String>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.subscriptions)
            .key("pk", s(org_pk(org_id)))
            .key("sk", s(uri_sk(uri)))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?;
        output
            .item()
            .map(|item| text(item, "subscriptionId"))
            .transpose()
    }

    /// Creates the subscription; `dangling` is the id a guard names whose
    /// subscription is gone, which the new guard may then replace.
    async fn try_create(
        &self,
        u: &Upsert,
        dangling: Option<&str>,
    ) -> Result<Attempt<(StoredSubscription, bool)>, StoreError> {
        let sub = StoredSubscription {
            id: u.new_id.clone(),
            org_id: u.org_id.clone(),
            uri: u.uri.clone(),
            event_filters: u.event_filters.clone(),
            disabled_filters: u.disabled_filters.clone(),
            expires_at: u.expires_at,
            status: SubscriptionStatus::Active,
            created_at: u.now,
            updated_at: u.now,
            secret: u.new_secret.clone(),
            failing_since: None,
        };
        let table = &self.tables.subscriptions;
        let mut guard = key(org_pk(&u.org_id), uri_sk(&u.uri));
        guard.insert("subscriptionId".into(), s(sub.id.clone()));
        guard.insert("uri".into(), s(sub.uri.clone()));
        let mut writes = vec![
            put(table, guard, Some(guard_condition(dangling)))?,
            TransactWriteItem::builder()
                .update(
                    Update::builder()
                        .table_name(table)
                        .set_key(Some(key(org_pk(&u.org_id), COUNTER_SK.into())))
                        .update_expression("SET #n = if_not_exists(#n, :zero) + :one")
                        .condition_expression("attribute_not_exists(#n) OR #n < :max")
                        .expression_attribute_names("#n", "n")
                        .expression_attribute_values(":zero", n(0))
                        .expression_attribute_values(":one", n(1))
                        .expression_attribute_values(":max", n(u.max_per_org as i64))
                        .return_values_on_condition_check_failure(
                            ReturnValuesOnConditionCheckFailure::AllOld,
                        )
                        .build()
                        .map_err(backend_build)?,
                )
                .build(),
            put(
                table,
                subscription_item(&sub, 1),
                Some(Condition::new("attribute_not_exists(pk)")),
            )?,
        ];
        for filter in distinct(&sub.event_filters) {
            writes.push(put(table, index_item(&sub, filter), None)?);
        }
        match self.transact(writes).await? {
            Transaction::Written => Ok(Attempt::Done((sub, true))),
            Transaction::Cancelled(reasons) => {
                if reasons.first().is_some_and(Reason::condition_failed) {
                    return Ok(Attempt::Retry); // created meanwhile: update it
                }
                match reasons.get(1) {
                    Some(counter) if counter.condition_failed() => {
                        let count = counter
                            .item
                            .as_ref()
                            .and_then(|item| number(item, "n").ok())
                            .map_or(u.max_per_org, |n| n.max(0) as usize);
                        Err(StoreError::LimitReached(count))
                    }
                    _ => Ok(Attempt::Retry),
                }
            }
        }
    }

    async fn try_update(
        &self,
        u: &Upsert,
        id: &str,
    ) -> Result<Attempt<(StoredSubscription, bool)>, StoreError> {
        let Some((current, version)) = self.versioned(&u.org_id, id).await? else {
            // Deleted since the guard was read (or the guard dangles): create anew.
            return self.try_create(u, Some(id)).await;
        };
        let removed: Vec<&String> = current
            .event_filters
            .iter()
            .filter(|f| !u.event_filters.contains(f))
            .collect();
        let sub = StoredSubscription {
            event_filters: u.event_filters.clone(),
            disabled_filters: u.disabled_filters.clone(),
            expires_at: u.expires_at,
            status: SubscriptionStatus::Active,
            updated_at: u.now,
            failing_since: None,
            ..current.clone()
        };
        let table = &self.tables.subscriptions;
        let mut writes = vec![put(
            table,
            subscription_item(&sub, version + 1),
            Some(Condition::version(version)),
        )?];
        for filter in distinct(&sub.event_filters) {
            writes.push(put(table, index_item(&sub, filter), None)?);
        }
        for filter in removed {
            writes.push(delete(table, key(filter_pk(filter), sub_sk(id)), None)?);
        }
        Ok(match self.transact(writes).await? {
            Transaction::Written => Attempt::Done((sub, false)),
            Transaction::Cancelled(_) => Attempt::Retry,
        })
    }

    async fn transact(&self, writes: Vec<TransactWriteItem>) -> Result<Transaction, StoreError> {
        match self
            .client
            .transact_write_items()
            .set_transact_items(Some(writes))
            .send()
            .await
        {
            Ok(_) => Ok(Transaction::Written),
            Err(e) => match e.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => {
                    Ok(Transaction::Cancelled(
                        cancelled
                            .cancellation_reasons()
                            .iter()
                            .map(|r| Reason {
                                code: r.code().unwrap_or("None").to_owned(),
                                item: r.item().cloned(),
                            })
                            .collect(),
                    ))
                }
                Some(TransactWriteItemsError::TransactionInProgressException(_)) => {
                    Ok(Transaction::Cancelled(Vec::new()))
                }
                _ => Err(backend(e)),
            },
        }
    }

    async fn query_all(
        &self,
        table: &str,
        pk: String,
        sk_prefix: Option<&str>,
    ) -> Result<Vec<Item>, StoreError> {
        let mut request = self
            .client
            .query()
            .table_name(table)
            .consistent_read(true)
            .expression_attribute_names("#pk", "pk")
            .expression_attribute_values(":pk", s(pk));
        request = match sk_prefix {
            Some(prefix) => request
                .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
                .expression_attribute_names("#sk", "sk")
                .expression_attribute_values(":prefix", s(prefix.into())),
            None => request.key_condition_expression("#pk = :pk"),
        };
        request
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(backend)
    }
}

/// An SDK client from the standard environment, built once at start-up.
pub async fn client_from_env() -> Client {
    Client::new(&crate::aws::sdk_config().await)
}

#[async_trait]
impl Store for DynamoStore {
    async fn upsert_subscription(
        &self,
        upsert: Upsert,
    ) -> Result<(StoredSubscription, bool), StoreError> {
        let mut backoff = Backoff::default();
        loop {
            let attempt = match self.guard(&upsert.org_id, &upsert.uri).await? {
                Some(id) => self.try_update(&upsert, &id).await?,
                None => self.try_create(&upsert, None).await?,
            };
            match attempt {
                Attempt::Done(done) => return Ok(done),
                Attempt::Retry => backoff.wait("upsert").await?,
            }
        }
    }

    async fn get_subscription(
        &self,
        org_id: &str,
        id: &str,
    ) -> Result<Option<StoredSubscription>, StoreError> {
        Ok(self.versioned(org_id, id).await?.map(|(sub, _)| sub))
    }

    async fn list_subscriptions(
        &self,
        org_id: &str,
    ) -> Result<Vec<StoredSubscription>, StoreError> {
        self.query_all(&self.tables.subscriptions, org_pk(org_id), Some(SUB))
            .await?
            .iter()
            .map(parse_subscription)
            .collect()
    }

    async fn delete_subscription(&self, org_id: &str, id: &str) -> Result<bool, StoreError> {
        let table = &self.tables.subscriptions;
        let mut backoff = Backoff::default();
        loop {
            let Some((sub, version)) = self.versioned(org_id, id).await? else {
                return Ok(false);
            };
            let mut writes = vec![
                delete(
                    table,
                    key(org_pk(org_id), sub_sk(id)),
                    Some(Condition::version(version)),
                )?,
                delete(table, key(org_pk(org_id), uri_sk(&sub.uri)), None)?,
                TransactWriteItem::builder()
                    .update(
                        Update::builder()
                            .table_name(table)
                            .set_key(Some(key(org_pk(org_id), COUNTER_SK.into())))
                            .update_expression("ADD #n :minus_one")
                            .expression_attribute_names("#n", "n")
                            .expression_attribute_values(":minus_one", n(-1))
                            .build()
                            .map_err(backend_build)?,
                    )
                    .build(),
            ];
            for filter in distinct(&sub.event_filters) {
                writes.push(delete(table, key(filter_pk(filter), sub_sk(id)), None)?);
            }
            match self.transact(writes).await? {
                Transaction::Written => return Ok(true),
                Transaction::Cancelled(_) => backoff.wait("delete").await?,
            }
        }
    }

    async fn subscriptions_for_filter(
        &self,
        filter: &str,
    ) -> Result<Vec<StoredSubscription>, StoreError> {
        self.query_all(&self.tables.subscriptions, filter_pk(filter), None)
            .await?
            .iter()
            .map(parse_subscription)
            .collect()
    }

    async fn record_delivery(
        &self,
        org_id: &str,
        id: &str,
        record: DeliveryRecord,
    ) -> Result<Option<SubscriptionStatus>, StoreError> {
        let table = &self.tables.subscriptions;
        let mut backoff = Backoff::default();
        // Index entries already removed by TTL (expired subscriptions).
        let mut vanished: HashSet<String> = HashSet::new();
        loop {
            let Some((sub, version)) = self.versioned(org_id, id).await? else {
                return Ok(None);
            };
            let (status, failing_since) = next_state(&sub, record);
            if (status, failing_since) == (sub.status, sub.failing_since) {
                return Ok(Some(status));
            }
            let mut writes = vec![state_update(
                table,
                key(org_pk(org_id), sub_sk(id)),
                (status, failing_since),
                Some(version),
            )?];
            let copies: Vec<&String> = distinct(&sub.event_filters)
                .filter(|f| !vanished.contains(*f))
                .collect();
            for filter in &copies {
                writes.push(state_update(
                    table,
                    key(filter_pk(filter), sub_sk(id)),
                    (status, failing_since),
                    None,
                )?);
            }
            match self.transact(writes).await? {
                Transaction::Written => return Ok(Some(status)),
                Transaction::Cancelled(reasons) => {
                    let gone: Vec<&String> = copies
                        .iter()
                        .zip(reasons.iter().skip(1))
                        .filter(|(_, reason)| reason.condition_failed())
                        .map(|(filter, _)| *filter)
                        .collect();
                    let subscription_changed = reasons.first().is_none_or(|r| r.code != "None");
                    if gone.is_empty() || subscription_changed {
                        backoff.wait("record_delivery").await?;
                    }
                    vanished.extend(gone.into_iter().cloned());
                }
            }
        }
    }

    async fn put_message(&self, org_id: &str, message: &Message) -> Result<(), StoreError> {
        let sk = msg_sk(&message.id);
        if sk.len() > MAX_SORT_KEY {
            return Err(StoreError::Backend(format!(
                "message id of {} bytes is longer than a DynamoDB sort key allows",
                message.id.len()
            )));
        }
        let mut item = key(org_pk(org_id), sk);
        item.insert("orgId".into(), s(org_id.into()));
        item.insert("id".into(), s(message.id.clone()));
        item.insert("owner".into(), optional(&message.owner));
        item.insert("time".into(), optional(&message.time));
        item.insert("direction".into(), s(message.direction.clone()));
        item.insert("to".into(), list(&message.to));
        item.insert("from".into(), s(message.from.clone()));
        item.insert("text".into(), s(message.text.clone()));
        item.insert("media".into(), list(&message.media));
        item.insert("attachments".into(), list(&message.attachments));
        self.client
            .put_item()
            .table_name(&self.tables.messages)
            .set_item(Some(item))
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn get_message(&self, org_id: &str, id: &str) -> Result<Option<Message>, StoreError> {
        let sk = msg_sk(id);
        if sk.len() > MAX_SORT_KEY {
            return Ok(None);
        }
        // Strongly consistent: a client fetches the message right after the
        // notification that the ingesting process sent.
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.messages)
            .key("pk", s(org_pk(org_id)))
            .key("sk", s(sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?;
        let Some(item) = output.item() else {
            return Ok(None);
        };
        Ok(Some(Message {
            id: text(item, "id")?,
            owner: optional_text(item, "owner")?,
            time: optional_text(item, "time")?,
            direction: text(item, "direction")?,
            to: texts(item, "to")?,
            from: text(item, "from")?,
            text: text(item, "text")?,
            media: texts(item, "media")?,
            attachments: texts(item, "attachments")?,
        }))
    }
}

/// The delivery bookkeeping rules (the same as every adapter's).
fn next_state(
    sub: &StoredSubscription,
    record: DeliveryRecord,
) -> (SubscriptionStatus, Option<i64>) {
    match record {
        DeliveryRecord::Succeeded => (sub.status, None),
        DeliveryRecord::Failed {
            now,
            blacklist_after_ms,
        } => {
            let since = sub.failing_since.unwrap_or(now);
            let blacklist = sub.status == SubscriptionStatus::Active
                && sub.failing_since.is_some()
                && now - since >= blacklist_after_ms;
            let status = if blacklist {
                SubscriptionStatus::Blacklisted
            } else {
                sub.status
            };
            (status, Some(since))
        }
        DeliveryRecord::Gone => (SubscriptionStatus::Blacklisted, sub.failing_since),
    }
}

/// Sets status and failure streak of a subscription item (at `version`,
/// which is bumped) or of an index entry (if it still exists).
fn state_update(
    table: &str,
    key: Item,
    (status, failing_since): (SubscriptionStatus, Option<i64>),
    version: Option<u64>,
) -> Result<TransactWriteItem, StoreError> {
    let mut set = vec!["#status = :status"];
    let mut update = Update::builder()
        .table_name(table)
        .set_key(Some(key))
        .expression_attribute_names("#status", "status")
        .expression_attribute_names("#fs", "failingSince")
        .expression_attribute_values(":status", s(status.as_str().into()));
    if let Some(at) = failing_since {
        set.push("#fs = :fs");
        update = update.expression_attribute_values(":fs", n(at));
    }
    update = match version {
        Some(version) => {
            set.push("#v = :next");
            update
                .condition_expression("#v = :v")
                .expression_attribute_names("#v", "version")
                .expression_attribute_values(":v", n(version as i64))
                .expression_attribute_values(":next", n(version as i64 + 1))
        }
        None => update.condition_expression("attribute_exists(pk)"),
    };
    let remove = if failing_since.is_none() {
        " REMOVE #fs"
    } else {
        ""
    };
    let update = update
        .update_expression(format!("SET {}{remove}", set.join(", ")))
        .build()
        .map_err(backend_build)?;
    Ok(TransactWriteItem::builder().update(update).build())
}

/// Creates both tables (string `pk` + `sk`, on-demand, TTL on `ttl`) unless
/// they exist, and waits until they are active. Idempotent.
pub async fn create_tables(client: &Client, tables: &Tables) -> Result<(), StoreError> {
    for name in [&tables.subscriptions, &tables.messages] {
        create_table(client, name).await?;
    }
    Ok(())
}

/// Fails, naming the table, unless both tables exist (a start-up check for
/// runtimes that do not create them).
pub async fn check_tables(client: &Client, tables: &Tables) -> Result<(), StoreError> {
    if client.config().region().is_none() {
        return Err(StoreError::Backend(
            "no AWS region: set AWS_REGION (or a region in the AWS profile)".into(),
        ));
    }
    for name in [&tables.subscriptions, &tables.messages] {
        client
            .describe_table()
            .table_name(name)
            .send()
            .await
            .map_err(|e| match backend(e) {
                StoreError::Backend(m) => StoreError::Backend(format!("table {name}: {m}")),
                other => other,
            })?;
    }
    Ok(())
}

async fn create_table(client: &Client, name: &str) -> Result<(), StoreError> {
    let attribute = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .map_err(backend_build)
    };
    let key_element = |name: &str, key_type: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(key_type)
            .build()
            .map_err(backend_build)
    };
    let created = client
        .create_table()
        .table_name(name)
        .attribute_definitions(attribute("pk")?)
        .attribute_definitions(attribute("sk")?)
        .key_schema(key_element("pk", KeyType::Hash)?)
        .key_schema(key_element("sk", KeyType::Range)?)
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await;
    match created {
        Ok(_) => {}
        Err(e)
            if matches!(
                e.as_service_error(),
                Some(CreateTableError::ResourceInUseException(_))
            ) => {}
        Err(e) => return Err(backend(e)),
    }
    client
        .wait_until_table_exists()
        .table_name(name)
        .wait(Duration::from_secs(300))
        .await
        .map_err(|e| {
            StoreError::Backend(format!(
                "table {name} did not become active: {}",
                DisplayErrorContext(&e)
            ))
        })?;
    let ttl_enabled = || async {
        let described = client
            .describe_time_to_live()
            .table_name(name)
            .send()
            .await
            .map_err(backend)?;
        let status = described
            .time_to_live_description()
            .and_then(|d| d.time_to_live_status());
        Ok::<_, StoreError>(matches!(
            status,
            Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)
        ))
    };
    if !ttl_enabled().await? {
        let enabled = client
            .update_time_to_live()
            .table_name(name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name("ttl")
                    .enabled(true)
                    .build()
                    .map_err(backend_build)?,
            )
            .send()
            .await;
        // A concurrent create_tables may have enabled it first.
        if let Err(e) = enabled {
            if !ttl_enabled().await? {
                return Err(backend(e));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Keys

const SUB: &str = "SUB#";
const COUNTER_SK: &str = "COUNT";

fn org_pk(org_id: &str) -> String {
    format!("ORG#{org_id}")
}

fn sub_sk(id: &str) -> String {
    format!("{SUB}{id}")
}

/// URIs can be longer than a sort key: the guard is keyed by their hash.
fn uri_sk(uri: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, uri.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("URI#{hex}")
}

fn filter_pk(filter: &str) -> String {
    format!("FILTER#{filter}")
}

fn msg_sk(id: &str) -> String {
    format!("MSG#{id}")
}

fn key(pk: String, sk: String) -> Item {
    HashMap::from([("pk".to_owned(), s(pk)), ("sk".to_owned(), s(sk))])
}

// ---------------------------------------------------------------------------
// Items

fn subscription_attributes(sub: &StoredSubscription) -> Item {
    let mut item = Item::new();
    item.insert("orgId".into(), s(sub.org_id.clone()));
    item.insert("id".into(), s(sub.id.clone()));
    item.insert("uri".into(), s(sub.uri.clone()));
    item.insert("eventFilters".into(), list(&sub.event_filters));
    item.insert(
        "disabledFilters".into(),
        AttributeValue::L(
            sub.disabled_filters
                .iter()
                .map(|d| {
                    AttributeValue::M(HashMap::from([
                        ("filter".to_owned(), s(d.filter.clone())),
                        ("reason".to_owned(), s(d.reason.clone())),
                        ("message".to_owned(), s(d.message.clone())),
                    ]))
                })
                .collect(),
        ),
    );
    item.insert("expiresAt".into(), n(sub.expires_at));
    item.insert("status".into(), s(sub.status.as_str().into()));
    item.insert("createdAt".into(), n(sub.created_at));
    item.insert("updatedAt".into(), n(sub.updated_at));
    item.insert("secret".into(), s(sub.secret.clone()));
    if let Some(at) = sub.failing_since {
        item.insert("failingSince".into(), n(at));
    }
    item
}

fn subscription_item(sub: &StoredSubscription, version: u64) -> Item {
    let mut item = subscription_attributes(sub);
    item.extend(key(org_pk(&sub.org_id), sub_sk(&sub.id)));
    item.insert("version".into(), n(version as i64));
    item
}

fn index_item(sub: &StoredSubscription, filter: &str) -> Item {
    let mut item = subscription_attributes(sub);
    item.extend(key(filter_pk(filter), sub_sk(&sub.id)));
    item.insert("ttl".into(), n(sub.expires_at.div_euclid(1000) + 1));
    item
}

fn parse_subscription(item: &Item) -> Result<StoredSubscription, StoreError> {
    let disabled = match item.get("disabledFilters") {
        Some(AttributeValue::L(entries)) => entries
            .iter()
            .map(|entry| match entry {
                AttributeValue::M(m) => Ok(DisabledEntry {
                    filter: text(m, "filter")?,
                    reason: text(m, "reason")?,
                    message: text(m, "message")?,
                }),
                _ => Err(corrupt("disabledFilters")),
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err(corrupt("disabledFilters")),
    };
    let status = text(item, "status")?;
    Ok(StoredSubscription {
        id: text(item, "id")?,
        org_id: text(item, "orgId")?,
        uri: text(item, "uri")?,
        event_filters: texts(item, "eventFilters")?,
        disabled_filters: disabled,
        expires_at: number(item, "expiresAt")?,
        status: SubscriptionStatus::parse(&status).ok_or_else(|| corrupt("status"))?,
        created_at: number(item, "createdAt")?,
        updated_at: number(item, "updatedAt")?,
        secret: text(item, "secret")?,
        failing_since: item
            .contains_key("failingSince")
            .then(|| number(item, "failingSince"))
            .transpose()?,
    })
}

fn s(value: String) -> AttributeValue {
    AttributeValue::S(value)
}

fn n(value: i64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

fn list(values: &[String]) -> AttributeValue {
    AttributeValue::L(values.iter().cloned().map(AttributeValue::S).collect())
}

fn optional(value: &Option<String>) -> AttributeValue {
    match value {
        Some(v) => s(v.clone()),
        None => AttributeValue::Null(true),
    }
}

fn corrupt(attribute: &str) -> StoreError {
    StoreError::Backend(format!(
        "stored item has a missing or malformed '{attribute}'"
    ))
}

fn text(item: &Item, name: &str) -> Result<String, StoreError> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Ok(v.clone()),
        _ => Err(corrupt(name)),
    }
}

fn optional_text(item: &Item, name: &str) -> Result<Option<String>, StoreError> {
    match item.get(name) {
        None | Some(AttributeValue::Null(_)) => Ok(None),
        Some(AttributeValue::S(v)) => Ok(Some(v.clone())),
        _ => Err(corrupt(name)),
    }
}

fn texts(item: &Item, name: &str) -> Result<Vec<String>, StoreError> {
    match item.get(name) {
        Some(AttributeValue::L(values)) => values
            .iter()
            .map(|v| match v {
                AttributeValue::S(v) => Ok(v.clone()),
                _ => Err(corrupt(name)),
            })
            .collect(),
        _ => Err(corrupt(name)),
    }
}

fn number(item: &Item, name: &str) -> Result<i64, StoreError> {
    match item.get(name) {
        Some(AttributeValue::N(v)) => v.parse().map_err(|_| corrupt(name)),
        _ => Err(corrupt(name)),
    }
}

// ---------------------------------------------------------------------------
// Transactions

enum Attempt<T> {
    Done(T),
    Retry,
}

enum Transaction {
    Written,
    /// One reason per write, in order (empty when DynamoDB gave none).
    Cancelled(Vec<Reason>),
}

struct Reason {
    code: String,
    /// The item as it was, when a condition failed and it was asked for.
    item: Option<Item>,
}

impl Reason {
    fn condition_failed(&self) -> bool {
        self.code == "ConditionalCheckFailed"
    }
}

/// Each filter once: one transaction may not touch an item twice.
fn distinct(filters: &[String]) -> impl Iterator<Item = &String> {
    let mut seen = HashSet::new();
    filters.iter().filter(move |f| seen.insert(f.as_str()))
}

/// The guard may be written if absent, or if it names `dangling`.
fn guard_condition(dangling: Option<&str>) -> Condition {
    match dangling {
        None => Condition::new("attribute_not_exists(pk)"),
        Some(id) => Condition {
            expression: "attribute_not_exists(pk) OR #sid = :dangling".into(),
            names: HashMap::from([("#sid".to_owned(), "subscriptionId".to_owned())]),
            values: HashMap::from([(":dangling".to_owned(), s(id.to_owned()))]),
        },
    }
}

/// A condition expression with its placeholders.
struct Condition {
    expression: String,
    names: HashMap<String, String>,
    values: Item,
}

impl Condition {
    fn new(expression: &str) -> Self {
        Condition {
            expression: expression.into(),
            names: HashMap::new(),
            values: Item::new(),
        }
    }

    /// The item exists at exactly this version.
    fn version(version: u64) -> Self {
        Condition {
            expression: "#v = :v".into(),
            names: HashMap::from([("#v".to_owned(), "version".to_owned())]),
            values: HashMap::from([(":v".to_owned(), n(version as i64))]),
        }
    }
}

fn put(
    table: &str,
    item: Item,
    condition: Option<Condition>,
) -> Result<TransactWriteItem, StoreError> {
    let mut put = Put::builder().table_name(table).set_item(Some(item));
    if let Some(c) = condition {
        put = put
            .condition_expression(c.expression)
            .set_expression_attribute_names((!c.names.is_empty()).then_some(c.names))
            .set_expression_attribute_values((!c.values.is_empty()).then_some(c.values));
    }
    Ok(TransactWriteItem::builder()
        .put(put.build().map_err(backend_build)?)
        .build())
}

fn delete(
    table: &str,
    key: Item,
    condition: Option<Condition>,
) -> Result<TransactWriteItem, StoreError> {
    let mut delete = Delete::builder().table_name(table).set_key(Some(key));
    if let Some(c) = condition {
        delete = delete
            .condition_expression(c.expression)
            .set_expression_attribute_names((!c.names.is_empty()).then_some(c.names))
            .set_expression_attribute_values((!c.values.is_empty()).then_some(c.values));
    }
    Ok(TransactWriteItem::builder()
        .delete(delete.build().map_err(backend_build)?)
        .build())
}

/// Jittered exponential backoff between attempts of one write.
#[derive(Default)]
struct Backoff {
    attempts: u32,
}

impl Backoff {
    async fn wait(&mut self, what: &str) -> Result<(), StoreError> {
        self.attempts += 1;
        if self.attempts >= MAX_ATTEMPTS {
            return Err(StoreError::Backend(format!(
                "{what}: gave up after {} attempts cancelled by concurrent writes",
                self.attempts
            )));
        }
        let cap_ms = (10u64 << self.attempts.min(7)).min(1_000);
        let random = u64::from(u16::from_le_bytes(crate::secret::random_bytes::<2>()));
        tracing::debug!(
            what,
            attempt = self.attempts,
            "transaction cancelled, retrying"
        );
        tokio::time::sleep(Duration::from_millis(random % cap_ms + 1)).await;
        Ok(())
    }
}

/// A failed request: the service's error code and message, or the reason
/// the request did not get an answer (connection, timeout).
fn backend<E, R>(e: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match &e {
        SdkError::ServiceError(service) => StoreError::Backend(format!(
            "DynamoDB {}: {}",
            service.err().code().unwrap_or("error"),
            service.err().message().unwrap_or("(no message)")
        )),
        _ => StoreError::Backend(format!("DynamoDB: {}", DisplayErrorContext(&e))),
    }
}

fn backend_build(e: aws_sdk_dynamodb::error::BuildError) -> StoreError {
    StoreError::Backend(format!("DynamoDB request: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert_eq!(org_pk("org-1"), "ORG#org-1");
        assert_eq!(sub_sk("abc"), "SUB#abc");
        let guard = uri_sk(&format!("https://example.com/{}", "x".repeat(2048)));
        assert_eq!(guard.len(), 4 + 64, "a hash whatever the uri's length");
        assert_ne!(uri_sk("https://a"), uri_sk("https://b"));
    }

    #[test]
    fn items_round_trip() {
        let sub = StoredSubscription {
            id: "id-1".into(),
            org_id: "org-1".into(),
            uri: "https://example.com/hook".into(),
            event_filters: vec!["/orgId/org-1/department/d/contact".into()],
            disabled_filters: vec![DisabledEntry {
                filter: "/orgId/org-2/department/d/contact".into(),
                reason: "PERMISSION_DENIED".into(),
                message: "not yours".into(),
            }],
            expires_at: 1_700_000_000_500,
            status: SubscriptionStatus::Blacklisted,
            created_at: 1,
            updated_at: 2,
            secret: "whsec_x".into(),
            failing_since: Some(3),
        };
        let item = subscription_item(&sub, 7);
        assert_eq!(parse_subscription(&item).unwrap(), sub);
        assert_eq!(number(&item, "version").unwrap(), 7);
        let index = index_item(&sub, &sub.event_filters[0]);
        assert_eq!(parse_subscription(&index).unwrap(), sub);
        assert_eq!(number(&index, "ttl").unwrap(), 1_700_000_001);
        let mut broken = item.clone();
        broken.insert("status".into(), s("MAYBE".into()));
        assert!(parse_subscription(&broken).is_err());
    }
}
