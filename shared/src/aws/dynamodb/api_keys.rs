//! The HTTP API option's API keys in the subscriptions table (`APIKEY#<id>`,
//! see [`keys`](super::keys)): created and revoked by `webhooks-local
//! api-keys`, read by the `authorizer`. Only a key's SHA-256 is stored
//! ([`crate::auth::tenant_key`]).

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;

use super::codec::{keyed, n, number, s, text};
use super::keys::{api_key_pk, key, API_KEY_SK};
use super::{backend, DynamoStore, Item};
use crate::auth::tenant_key::{self, NewTenantKey};
use crate::ids::OrgId;
use crate::store::StoreError;

/// A stored key: what the authorizer needs to decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredApiKey {
    /// The organization the key opens, and only it.
    pub org_id: OrgId,
    /// SHA-256 of the key.
    pub digest: Vec<u8>,
    /// When it was revoked (epoch ms); a revoked key opens nothing.
    pub revoked_at: Option<i64>,
}

/// What [`DynamoStore::revoke_api_key`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revoked {
    /// The key was active and is revoked from now on.
    Now,
    /// The key had been revoked before: nothing changed.
    Already,
    /// No key has this id.
    NoSuchKey,
}

impl DynamoStore {
    /// Stores a new key for `org_id`, created at `now` (epoch ms); the
    /// returned key is the only copy of its secret.
    pub async fn create_api_key(
        &self,
        org_id: &OrgId,
        now: i64,
    ) -> Result<NewTenantKey, StoreError> {
        let new = tenant_key::generate();
        let mut item = key(api_key_pk(&new.id), API_KEY_SK.into());
        item.insert("orgId".into(), s(org_id.to_string()));
        item.insert("digest".into(), AttributeValue::B(Blob::new(new.digest)));
        item.insert("createdAt".into(), n(now));
        // 96 random bits of id: a collision is not expected, but must not
        // replace another organization's key.
        self.client
            .put_item()
            .table_name(&self.tables.subscriptions)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await
            .map_err(backend)?;
        Ok(new)
    }

    /// Marks the key revoked at `now` (epoch ms); the item stays as a record.
    pub async fn revoke_api_key(&self, key_id: &str, now: i64) -> Result<Revoked, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.tables.subscriptions)
            .set_key(Some(key(api_key_pk(key_id), API_KEY_SK.into())))
            .update_expression("SET revokedAt = :now")
            .condition_expression("attribute_exists(pk) AND attribute_not_exists(revokedAt)")
            .expression_attribute_values(":now", n(now))
            .return_values_on_condition_check_failure(
                aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld,
            )
            .send()
            .await;
        match result {
            Ok(_) => Ok(Revoked::Now),
            Err(e) => match e.as_service_error() {
                Some(aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(
                    failed,
                )) => Ok(if failed.item().is_some() {
                    Revoked::Already
                } else {
                    Revoked::NoSuchKey
                }),
                _ => Err(backend(e)),
            },
        }
    }

    /// The key with this id, read strongly consistently (a revocation
    /// applies at once, past API Gateway's authorizer cache).
    pub async fn api_key(&self, key_id: &str) -> Result<Option<StoredApiKey>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.subscriptions)
            .set_key(Some(key(api_key_pk(key_id), API_KEY_SK.into())))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?;
        output
            .item()
            .map(|item| keyed(item, parse(item)))
            .transpose()
    }
}

fn parse(item: &Item) -> Result<StoredApiKey, StoreError> {
    let digest = match item.get("digest") {
        Some(AttributeValue::B(blob)) => blob.as_ref().to_vec(),
        _ => return Err(super::codec::corrupt("digest")),
    };
    Ok(StoredApiKey {
        org_id: text(item, "orgId")?.into(),
        digest,
        revoked_at: item
            .contains_key("revokedAt")
            .then(|| number(item, "revokedAt"))
            .transpose()?,
    })
}
