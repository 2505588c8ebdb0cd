//! Jittered exponential backoff between attempts of a cancelled write.

use std::time::Duration;

use super::MAX_ATTEMPTS;
use crate::store::StoreError;

/// Jittered exponential backoff between attempts of one write.
#[derive(Default)]
pub(super) struct Backoff {
    attempts: u32,
}

impl Backoff {
    pub(super) async fn wait(&mut self, what: &str) -> Result<(), StoreError> {
        self.attempts += 1;
        if self.attempts >= MAX_ATTEMPTS {
            return Err(StoreError::Conflict(format!(
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
