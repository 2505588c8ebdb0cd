//! `POST /webhooksubscription/{id}/secret/rotate`: a new signing secret, the
//! current one kept valid for a grace period, so receivers can switch keys
//! without missing a notification (Standard Webhooks multi-signature: every
//! notification is signed with the new secret and each unexpired old one).

use super::problem::store_problem;
use super::subscriptions::not_found;
use crate::app::App;
use crate::auth::Caller;
use crate::error::{ApiError, FieldError};
use crate::ids::SubscriptionId;
use crate::model::{RotateSecretRequest, SigningSecret};
use crate::secret;
use crate::store::SecretRotation;

/// The default grace period of the replaced secret: a day.
pub const DEFAULT_GRACE_SECONDS: i64 = 86_400;
/// The longest grace period: a week.
pub const MAX_GRACE_SECONDS: i64 = 604_800;

/// Rotates the subscription's signing secret; the answer holds the new one.
pub async fn rotate_subscription_secret(
    app: &App,
    caller: &Caller,
    id: &SubscriptionId,
    request: RotateSecretRequest,
) -> Result<SigningSecret, ApiError> {
    let (new_secret, grace_seconds) = validate(request)?;
    let rotation = SecretRotation {
        new_secret,
        grace_ms: grace_seconds * 1000,
        now: app.now_ms(),
    };
    let rotated = app
        .store
        .rotate_secret(&caller.org_id, id, rotation)
        .await
        .map_err(store_problem)?
        .ok_or_else(|| not_found(id.as_str()))?;
    // Never the secret itself: ids and counts only.
    tracing::info!(
        org_id = %caller.org_id,
        subscription_id = %rotated.id,
        grace_seconds,
        valid_previous = rotated.previous_secrets.len(),
        "signing secret rotated"
    );
    Ok(SigningSecret {
        key: rotated.secret,
    })
}

/// The new secret (given or generated) and the grace period in seconds.
fn validate(request: RotateSecretRequest) -> Result<(String, i64), ApiError> {
    let mut errors = Vec::new();
    let grace = match request.grace_period_seconds {
        None => DEFAULT_GRACE_SECONDS,
        Some(g) if (0..=MAX_GRACE_SECONDS).contains(&g) => g,
        Some(_) => {
            errors.push(FieldError::new(
                "gracePeriodSeconds",
                format!("must be from 0 to {MAX_GRACE_SECONDS} (a week)"),
            ));
            0
        }
    };
    let key = match request.key {
        None => secret::new_signing_secret(),
        Some(key) => match secret::check_signing_secret(&key) {
            Ok(canonical) => canonical,
            Err(message) => {
                errors.push(FieldError::new("key", message));
                String::new()
            }
        },
    };
    if errors.is_empty() {
        Ok((key, grace))
    } else {
        Err(ApiError::validation(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(grace: Option<i64>, key: Option<&str>) -> RotateSecretRequest {
        RotateSecretRequest {
            grace_period_seconds: grace,
            key: key.map(str::to_owned),
        }
    }

    #[test]
    fn defaults_and_bounds() {
        let (key, grace) = validate(request(None, None)).unwrap();
        assert_eq!(secret::check_signing_secret(&key), Ok(key.clone()));
        assert_eq!(grace, 86_400);
        assert_eq!(validate(request(Some(0), None)).unwrap().1, 0);
        assert_eq!(validate(request(Some(604_800), None)).unwrap().1, 604_800);
        for bad in [-1, 604_801, i64::MAX, i64::MIN] {
            let e = validate(request(Some(bad), None)).unwrap_err();
            assert_eq!(e.errors[0].field, "gracePeriodSeconds");
        }
        let e = validate(request(Some(-5), Some("whsec_short"))).unwrap_err();
        let fields: Vec<&str> = e.errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["gracePeriodSeconds", "key"]);
        assert!(!e.detail.contains("whsec_short"), "the key is not echoed");
    }
}
