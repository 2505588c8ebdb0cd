//! Reads of many items: a whole partition (`Query`, paginated) and a set
//! of keys (`BatchGetItem`, in batches of 100, unprocessed keys asked for
//! again after a backoff). `BatchGetItem` is strongly consistent, `Query`
//! as its caller says.

use aws_sdk_dynamodb::types::KeysAndAttributes;

use super::backoff::Backoff;
use super::codec::s;
use super::{backend, backend_build, DynamoStore, Item};
use crate::store::StoreError;

/// `BatchGetItem` takes at most 100 keys.
const BATCH_GET: usize = 100;

impl DynamoStore {
    pub(super) async fn query_all(
        &self,
        table: &str,
        pk: String,
        sk_prefix: Option<&str>,
        consistent: bool,
    ) -> Result<Vec<Item>, StoreError> {
        let mut request = self
            .client
            .query()
            .table_name(table)
            .consistent_read(consistent)
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

    /// The items of `keys` that exist, in no particular order.
    pub(super) async fn batch_get(
        &self,
        table: &str,
        keys: Vec<Item>,
        what: &str,
    ) -> Result<Vec<Item>, StoreError> {
        let mut found = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(BATCH_GET) {
            let mut keys = chunk.to_vec();
            let mut backoff = Backoff::default();
            while !keys.is_empty() {
                let request = KeysAndAttributes::builder()
                    .set_keys(Some(keys))
                    .consistent_read(true)
                    .build()
                    .map_err(backend_build)?;
                let mut output = self
                    .client
                    .batch_get_item()
                    .request_items(table, request)
                    .send()
                    .await
                    .map_err(backend)?;
                if let Some(items) = output.responses.as_mut().and_then(|r| r.remove(table)) {
                    found.extend(items);
                }
                keys = output
                    .unprocessed_keys()
                    .and_then(|m| m.get(table))
                    .map(|k| k.keys().to_vec())
                    .unwrap_or_default();
                if !keys.is_empty() {
                    backoff.wait(what).await?;
                }
            }
        }
        Ok(found)
    }
}
