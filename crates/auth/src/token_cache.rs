//! [`TokenCache`]: access tokens found valid a moment ago, kept in memory so that a repeated
//! token costs no `SQLite` read.
//!
//! The cache holds what the token's row said (the [`Principal`], with its expiry), keyed by
//! the token's digest, never the token itself. Three rules keep it from accepting a token the
//! database no longer would:
//!
//! - Expiry is not cached away: the caller compares the principal's expiry with its clock on
//!   every use.
//! - Writes of this process: every write that revokes, rotates or deletes tokens runs through
//!   `AuthStore::write_then_forget_tokens`, which calls [`TokenCache::invalidate`] after the
//!   commit, bumping a generation; an entry made
//!   under an older generation is never used. A lookup reads the generation *before* it
//!   reads the database, so an entry made from a read that raced with a write is older than
//!   the write's bump.
//! - Writes of other processes sharing the database (the CLI, a second server): they cannot
//!   bump this process's generation, so every entry lives at most
//!   [`Config::token_cache_ttl`](crate::Config::token_cache_ttl) (1 s by default) after it
//!   was read.
//!
//! The cache is bounded by [`Config::token_cache_entries`](crate::Config::token_cache_entries);
//! moka evicts by recency and frequency (`TinyLFU`), so a flood of distinct tokens does not
//! push out the ones in steady use.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use moka::sync::Cache;

use crate::Principal;

/// The generation an entry was read under; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Generation(u64);

/// Validated tokens by digest; see the module documentation.
pub(crate) struct TokenCache {
    /// `None` when caching is off (no entries or no lifetime).
    entries: Option<Cache<[u8; 32], Entry>>,
    generation: AtomicU64,
}

#[derive(Debug, Clone)]
struct Entry {
    principal: Principal,
    generation: Generation,
}

impl TokenCache {
    /// A cache of at most `capacity` tokens, each kept at most `time_to_live`; zero for
    /// either turns caching off.
    pub(crate) fn new(capacity: u64, time_to_live: Duration) -> Self {
        let entries = (capacity > 0 && !time_to_live.is_zero()).then(|| {
            Cache::builder()
                .max_capacity(capacity)
                .time_to_live(time_to_live)
                .build()
        });
        Self {
            entries,
            generation: AtomicU64::new(0),
        }
    }

    /// The current generation: read it before reading the token from the database, and
    /// store the result under it.
    pub(crate) fn generation(&self) -> Generation {
        Generation(self.generation.load(Ordering::Acquire))
    }

    /// The principal of the token with `digest`, if it was valid when read under the
    /// current generation less than the lifetime ago. The caller still checks its expiry.
    pub(crate) fn get(&self, digest: &[u8; 32]) -> Option<Principal> {
        let entry = self.entries.as_ref()?.get(digest)?;
        (entry.generation == self.generation()).then_some(entry.principal)
    }

    /// Remembers that the token with `digest` stood for `principal` when read under
    /// `generation`.
    pub(crate) fn insert(&self, digest: [u8; 32], principal: Principal, generation: Generation) {
        if let Some(entries) = &self.entries {
            entries.insert(
                digest,
                Entry {
                    principal,
                    generation,
                },
            );
        }
    }

    /// Forgets every entry: call after a write that may end or change a token has committed.
    pub(crate) fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        if let Some(entries) = &self.entries {
            entries.invalidate_all();
        }
    }

    /// How many entries the cache holds once moka's pending evictions have run.
    #[cfg(test)]
    pub(crate) fn len(&self) -> u64 {
        self.entries.as_ref().map_or(0, |entries| {
            entries.run_pending_tasks();
            entries.entry_count()
        })
    }
}

impl std::fmt::Debug for TokenCache {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TokenCache")
            .field("enabled", &self.entries.is_some())
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AuthStore, ClientId, Config, FakeClock, Scopes, SeededRandom, TokenKind};

    fn principal(client_id: u64) -> Principal {
        Principal {
            client_id: ClientId(client_id),
            user: None,
            scopes: Scopes::READ,
            kind: TokenKind::Client,
            expires_at: None,
        }
    }

    fn digest_of(number: u64) -> [u8; 32] {
        let mut digest = [0_u8; 32];
        digest[..8].copy_from_slice(&number.to_le_bytes());
        digest
    }

    #[test]
    fn an_entry_read_before_an_invalidation_is_not_used() {
        let cache = TokenCache::new(10, Duration::from_secs(60));
        let before = cache.generation();
        cache.insert(digest_of(1), principal(1), before);
        assert_eq!(cache.get(&digest_of(1)), Some(principal(1)));
        cache.invalidate();
        assert_eq!(cache.get(&digest_of(1)), None);
        // A read that raced with the write and is stored after it is not used either.
        cache.insert(digest_of(1), principal(1), before);
        assert_eq!(cache.get(&digest_of(1)), None);
        cache.insert(digest_of(1), principal(1), cache.generation());
        assert_eq!(cache.get(&digest_of(1)), Some(principal(1)));
    }

    #[test]
    fn zero_entries_or_zero_lifetime_caches_nothing() {
        for cache in [
            TokenCache::new(0, Duration::from_secs(1)),
            TokenCache::new(10, Duration::ZERO),
        ] {
            cache.insert(digest_of(1), principal(1), cache.generation());
            assert_eq!(cache.get(&digest_of(1)), None);
        }
    }

    #[test]
    fn the_store_caches_at_most_the_configured_number_of_tokens() {
        let config = Config {
            token_cache_entries: 8,
            ..Config::insecure_fast()
        };
        let store =
            AuthStore::open_in_memory(config, FakeClock::default(), SeededRandom::new(1)).unwrap();
        let app = store
            .create_app("Demo", "https://demo.example/callback", Scopes::READ)
            .unwrap();
        for _ in 0..100 {
            let embed = store.create_embed_token(app.client_id).unwrap();
            store.check_token(&embed).unwrap();
            store.check_token(&embed).unwrap();
        }
        let cached = store.token_cache.len();
        assert!((1..=8).contains(&cached), "{cached} tokens cached");
    }
}
