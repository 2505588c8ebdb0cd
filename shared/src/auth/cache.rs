//! Verified tokens, remembered until they expire: a client sends the same
//! bearer token on every request, and verifying it (base64, JSON, HMAC or
//! RSA/ECDSA) costs more than serving a read. Only tokens that passed every
//! check are kept, keyed by the SHA-256 of the token (the token itself is
//! neither stored nor logged), each until its `exp` (never later, whatever
//! the verifier's leeway) and only for the JWKS generation it was verified
//! with: a refetched key set (a rotation) makes every entry verified before
//! it a miss. The number of entries is bounded.

use std::collections::HashMap;
use std::sync::Mutex;

use super::Caller;

/// Distinct tokens remembered at once (about 200 bytes each).
pub const MAX_ENTRIES: usize = 4096;

type TokenHash = [u8; 32];

struct Entry {
    caller: Caller,
    /// The token's `exp`, in seconds since the epoch.
    expires_at: u64,
    /// The JWKS generation the token was verified with (0: HS256).
    generation: u64,
}

/// Verified bearer tokens and their callers, keyed by the token's SHA-256, until their `exp`.
#[derive(Default)]
pub struct TokenCache {
    entries: Mutex<HashMap<TokenHash, Entry>>,
}

/// The cache key of `token`.
pub fn hash(token: &str) -> TokenHash {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes());
    let mut key = [0u8; 32];
    key.copy_from_slice(digest.as_ref());
    key
}

impl TokenCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TokenHash, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The caller of a token verified before, if it has not expired at
    /// `now` (seconds) and was verified with the current `generation`.
    pub fn get(&self, key: &TokenHash, now: u64, generation: u64) -> Option<Caller> {
        let mut entries = self.lock();
        let entry = entries.get(key)?;
        if now < entry.expires_at && entry.generation == generation {
            return Some(entry.caller.clone());
        }
        entries.remove(key);
        None
    }

    /// Remembers a verified token until `expires_at` (seconds); a token
    /// already expired at `now` is not kept.
    pub fn insert(
        &self,
        key: TokenHash,
        caller: Caller,
        expires_at: u64,
        now: u64,
        generation: u64,
    ) {
        if expires_at <= now {
            return;
        }
        let mut entries = self.lock();
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(&key) {
            entries.retain(|_, e| now < e.expires_at && e.generation == generation);
            if entries.len() >= MAX_ENTRIES {
                // Still full of live tokens: forget one (any) of them.
                if let Some(victim) = entries.keys().next().copied() {
                    entries.remove(&victim);
                }
            }
        }
        entries.insert(
            key,
            Entry {
                caller,
                expires_at,
                generation,
            },
        );
    }

    /// Tokens remembered now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// No token is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(org: &str) -> Caller {
        Caller::new(org, &["webhooks/read"])
    }

    #[test]
    fn an_entry_lives_until_exp_and_its_generation() {
        let cache = TokenCache::default();
        let key = hash("a.b.c");
        cache.insert(key, caller("o"), 100, 50, 0);
        assert_eq!(cache.get(&key, 99, 0).unwrap().org_id, "o");
        assert!(cache.get(&key, 99, 1).is_none(), "another key set");
        assert!(cache.get(&key, 99, 0).is_none(), "a stale entry is dropped");
        cache.insert(key, caller("o"), 100, 50, 0);
        assert!(cache.get(&key, 100, 0).is_none(), "not at exp");
        cache.insert(key, caller("o"), 100, 100, 0);
        assert!(cache.is_empty(), "an expired token is not kept");
        assert_ne!(hash("a.b.c"), hash("a.b.d"));
    }

    #[test]
    fn the_number_of_entries_is_bounded() {
        let cache = TokenCache::default();
        for i in 0..MAX_ENTRIES + 10 {
            cache.insert(hash(&i.to_string()), caller("o"), 1_000, 0, 0);
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
        // Expired entries go first.
        cache.insert(hash("new"), caller("n"), 5_000, 2_000, 0);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.get(&hash("new"), 2_001, 0).unwrap().org_id, "n");
    }
}
