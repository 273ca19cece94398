//! The quotas every request is charged to, and the decision they return. Where the quotas
//! live is a backend's business: in this process (`memory.rs`, the default) or in Redis,
//! shared by every replica (`shared.rs`), with this process's as the fallback.

use std::sync::Arc;

use streetlevel_model::Clock;

use crate::memory::MemoryQuotas;
use crate::shared::{RedisConfig, SharedQuotas};
use crate::{Config, RateLimitError, Rejection};

/// Which quota a call is charged to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// A call to an entity endpoint such as `{base_url}/<image_id>`.
    Entity,
    /// A search call such as `{base_url}/images?bbox=…`.
    Search,
    /// Any request to `{tiles_url}`.
    Tiles,
}

/// An allowed call, with the share of the quota used so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// The quota the call was charged to.
    pub class: Class,
    /// Share of the quota in use after this call, in percent, rounded down (0 to 100).
    pub used_percent: u8,
}

impl Usage {
    /// The `x-app-usage` header value, `{"call_count":N,"total_cputime":0,"total_time":0}`.
    pub fn app_usage_header(&self) -> String {
        app_usage_header(self.used_percent)
    }
}

pub(crate) fn app_usage_header(percent: u8) -> String {
    format!(r#"{{"call_count":{percent},"total_cputime":0,"total_time":0}}"#)
}

/// The quotas of every app, for all three classes.
///
/// Thread-safe: share one instance (in an `Arc`) between all requests.
#[derive(Debug)]
pub struct RateLimits {
    /// This process's quotas: the only ones without Redis, the fallback with it.
    memory: MemoryQuotas,
    /// The quotas every replica shares, when a Redis server is configured.
    shared: Option<SharedQuotas>,
    config: Config,
}

impl RateLimits {
    /// Quotas held in this process, timed by `clock` (a `FakeClock` in tests).
    pub fn new(config: Config, clock: Arc<dyn Clock>) -> Result<Self, RateLimitError> {
        Ok(Self {
            memory: MemoryQuotas::new(&config, clock)?,
            shared: None,
            config,
        })
    }

    /// Quotas held in the Redis server `redis` names, shared by every process configured
    /// with it, and timed by that server's clock (`TIME`), so replicas need not agree on the
    /// time. While Redis cannot be reached, this process's own quotas (timed by `clock`)
    /// decide: see [`RateLimits::backend_errors`].
    ///
    /// Fails only on a URL the client refuses; an unreachable server is not an error here
    /// (it is logged, and the fallback decides until it answers).
    pub fn with_redis(
        config: Config,
        clock: Arc<dyn Clock>,
        redis: RedisConfig,
    ) -> Result<Self, RateLimitError> {
        let shared = SharedQuotas::new(&config, redis)?;
        shared.probe();
        Ok(Self {
            memory: MemoryQuotas::new(&config, clock)?,
            shared: Some(shared),
            config,
        })
    }

    /// Charges one call of `class` to the app with client ID `app_id`.
    ///
    /// `Ok` lets the call through; `Err` refuses it. A refused call costs nothing.
    pub fn check(&self, app_id: u64, class: Class) -> Result<Usage, Rejection> {
        if let Some(shared) = &self.shared
            && let Some(decision) = shared.check(app_id, class)
        {
            return decision;
        }
        self.memory.check(app_id, class)
    }

    /// Whether quotas are held in Redis, so that [`RateLimits::check`] may wait on the
    /// network (at most the configured timeout, then this process's quotas decide). A caller
    /// on an async worker should then run the check on a blocking thread.
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// How many times the shared quota backend (Redis) failed to answer: each failed call
    /// was decided by this process's quotas instead. Always 0 without Redis.
    pub fn backend_errors(&self) -> u64 {
        self.shared.as_ref().map_or(0, SharedQuotas::errors)
    }

    /// Forgets apps that would start from a full quota anyway: entity and search buckets
    /// that have refilled, and tile counters of past windows. Call it periodically (once a
    /// minute is plenty) so memory stays bounded when many apps come and go. (Redis forgets
    /// on its own: every key expires when its quota would be full again.)
    pub fn retain_recent(&self) {
        self.memory.retain_recent();
    }

    /// The configuration the limiters were built with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// How many per-app entries this process's limiters hold (entity, search and tiles
    /// together; entries in Redis are not counted).
    pub fn len(&self) -> usize {
        self.memory.len()
    }

    /// Whether this process's limiters hold no per-app entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

pub(crate) fn percent(used: u32, limit: u32) -> u8 {
    let percent = u64::from(used) * 100 / u64::from(limit.max(1));
    u8::try_from(percent.min(100)).unwrap_or(100)
}
