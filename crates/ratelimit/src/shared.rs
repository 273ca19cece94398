//! The shared quota backend: every replica charges the same quotas in one Redis server.
//!
//! Each decision is one Lua script run by `EVALSHA` (falling back to `EVAL`'s load once
//! after a Redis restart), so it is atomic in Redis and costs one round trip. The scripts
//! read the time with Redis's own `TIME`: replicas share one clock without needing theirs
//! in sync. Entity and search quotas are the same GCRA as governor's in `memory.rs`
//! (burst = the per-minute quota, refilling continuously); the tile quota is a fixed window
//! counted from the Unix epoch (so a one-day window turns at midnight UTC).
//!
//! When Redis does not answer within the timeout, [`SharedQuotas::check`] returns `None`
//! and the caller decides with this process's quotas: a warning is logged once per outage,
//! every failure counted, and Redis is tried again after `RedisConfig::retry_interval`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::limits::{Class, Usage, percent};
use crate::{Config, RateLimitError, Rejection};

/// Where the shared quotas live and how long to wait for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisConfig {
    /// `redis://[:PASSWORD@]HOST[:PORT][/DB]` (or `redis+unix:///PATH`).
    pub url: String,
    /// The longest wait to connect, and for each answer, before the call is decided by
    /// this process's quotas instead.
    pub timeout: Duration,
    /// After a failure, how long this process decides on its own before trying Redis
    /// again, so an outage does not cost every request a timeout.
    pub retry_interval: Duration,
    /// The prefix of every key the quotas write.
    pub key_prefix: String,
}

impl RedisConfig {
    /// The defaults for `url`: a 200 ms timeout, a retry after 1 s, keys under
    /// `streetlevel:quota:`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            timeout: Duration::from_millis(200),
            retry_interval: Duration::from_secs(1),
            key_prefix: String::from("streetlevel:quota:"),
        }
    }
}

/// GCRA (the same arithmetic as governor's): `KEYS[1]` holds the app's theoretical arrival
/// time in microseconds since the epoch. `ARGV[1]` is the emission interval `t` in µs,
/// `ARGV[2]` the burst. Returns `{1, calls left}` or `{0, µs until the next call is allowed}`.
/// The key expires when the bucket is full again, which is when it would be forgotten anyway.
const GCRA: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local t = tonumber(ARGV[1])
local tau = t * (tonumber(ARGV[2]) - 1)
local tat = tonumber(redis.call('GET', KEYS[1])) or now
local earliest = tat - tau
if now < earliest then
  return {0, earliest - now}
end
local next_tat = math.max(tat, now) + t
redis.call('SET', KEYS[1], string.format('%d', next_tat), 'PX', math.ceil((next_tat - now) / 1000) + 1)
return {1, math.floor(math.min(now + tau + t - next_tat, tau + t) / t)}
";

/// A fixed window from the epoch: `KEYS[1]` is a hash of the window's index `w` and its
/// count `n`. `ARGV[1]` is the window in µs, `ARGV[2]` the limit. Returns `{1, count}` or
/// `{0, µs until the next window}`.
const WINDOW: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local index = math.floor(now / window)
local until_next = window - (now - index * window)
local stored = redis.call('HMGET', KEYS[1], 'w', 'n')
local count = 0
if tonumber(stored[1]) == index then
  count = tonumber(stored[2]) or 0
end
if count >= limit then
  return {0, until_next}
end
count = count + 1
redis.call('HSET', KEYS[1], 'w', string.format('%d', index), 'n', count)
redis.call('PEXPIRE', KEYS[1], math.ceil(until_next / 1000) + 1)
return {1, count}
";

/// Connections kept open for the next checks; more may be open at once under load.
const IDLE_CONNECTIONS: usize = 32;

/// Whether Redis is failing, since when, and when to try it again.
#[derive(Debug, Clone, Copy)]
struct Outage {
    since: Instant,
    retry_at: Instant,
}

/// The quotas in Redis, with a small pool of blocking connections.
pub(crate) struct SharedQuotas {
    client: redis::Client,
    timeout: Duration,
    retry_interval: Duration,
    idle: Mutex<Vec<redis::Connection>>,
    outage: Mutex<Option<Outage>>,
    errors: AtomicU64,
    gcra: redis::Script,
    window: redis::Script,
    key_prefix: String,
    /// Per class: the GCRA's emission interval in µs and its burst.
    entity: (u64, u32),
    search: (u64, u32),
    tiles_window_micros: u64,
    tiles_per_window: u32,
    trace_member: Arc<str>,
}

impl std::fmt::Debug for SharedQuotas {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the URL: it may hold a password.
        formatter
            .debug_struct("SharedQuotas")
            .field("timeout", &self.timeout)
            .field("errors", &self.errors)
            .finish_non_exhaustive()
    }
}

/// The emission interval of a per-minute quota in µs (rounded up, so never more calls than
/// the quota) and its burst.
fn per_minute(quota: std::num::NonZeroU32) -> (u64, u32) {
    let quota = quota.get();
    (60_000_000_u64.div_ceil(u64::from(quota)), quota)
}

impl SharedQuotas {
    pub(crate) fn new(config: &Config, redis: RedisConfig) -> Result<Self, RateLimitError> {
        if config.tiles_window.is_zero() {
            return Err(RateLimitError::ZeroWindow);
        }
        let client = redis::Client::open(redis.url.as_str())
            .map_err(|error| RateLimitError::RedisUrl(error.to_string()))?;
        Ok(Self {
            client,
            timeout: redis.timeout,
            retry_interval: redis.retry_interval,
            idle: Mutex::new(Vec::new()),
            outage: Mutex::new(None),
            errors: AtomicU64::new(0),
            gcra: redis::Script::new(GCRA),
            window: redis::Script::new(WINDOW),
            key_prefix: redis.key_prefix,
            entity: per_minute(config.entity_per_minute),
            search: per_minute(config.search_per_minute),
            tiles_window_micros: u64::try_from(config.tiles_window.as_micros())
                .unwrap_or(u64::MAX)
                .max(1),
            tiles_per_window: config.tiles_per_window.get(),
            trace_member: config.trace_member().into(),
        })
    }

    /// Tries Redis once (at start-up), so an unreachable server is reported before the
    /// first request.
    pub(crate) fn probe(&self) {
        let answered = self
            .with_connection(|connection| redis::cmd("PING").query::<String>(connection))
            .is_ok();
        if answered {
            tracing::info!("rate limits: quotas are shared through Redis");
        }
    }

    /// The failures counted so far.
    pub(crate) fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Charges one call in Redis; `None` when Redis did not answer (or is being left alone
    /// after a failure), so the caller must decide.
    pub(crate) fn check(&self, app_id: u64, class: Class) -> Option<Result<Usage, Rejection>> {
        if !self.worth_trying() {
            return None;
        }
        let key = format!("{}{}:{app_id}", self.key_prefix, class_name(class));
        // The script, its time argument (emission interval or window, µs) and the limit.
        let (script, micros, limit) = match class {
            Class::Entity => (&self.gcra, self.entity.0, self.entity.1),
            Class::Search => (&self.gcra, self.search.0, self.search.1),
            Class::Tiles => (
                &self.window,
                self.tiles_window_micros,
                self.tiles_per_window,
            ),
        };
        let answer = self.with_connection(|connection| {
            script
                .key(&key)
                .arg(micros)
                .arg(limit)
                .invoke::<(i64, i64)>(connection)
        });
        let (allowed, value) = answer.ok()?;
        let value = u64::try_from(value).unwrap_or(0);
        Some(if allowed == 1 {
            let value = u32::try_from(value).unwrap_or(u32::MAX);
            // GCRA answers the calls left, the window the calls made.
            let used = if class == Class::Tiles {
                value
            } else {
                limit.saturating_sub(value)
            };
            Ok(Usage {
                class,
                used_percent: percent(used, limit),
            })
        } else {
            Err(Rejection {
                class,
                retry_after: Duration::from_micros(value),
                trace_member: Arc::clone(&self.trace_member),
            })
        })
    }

    /// Whether to ask Redis now: always while it answers; during an outage once per
    /// retry interval (the caller that gets the turn pushes the next one out, so one probe
    /// at a time).
    fn worth_trying(&self) -> bool {
        let mut outage = self.outage.lock().unwrap_or_else(PoisonError::into_inner);
        match outage.as_mut() {
            None => true,
            Some(outage) => {
                let now = Instant::now();
                if now < outage.retry_at {
                    return false;
                }
                outage.retry_at = now + self.retry_interval;
                true
            }
        }
    }

    /// Runs `command` on a pooled connection, or a new one. A pooled connection that fails
    /// may only have been closed by a Redis restart, so the command is tried once more on a
    /// new connection. Failures are counted, and start or end an outage.
    fn with_connection<T>(
        &self,
        command: impl Fn(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> redis::RedisResult<T> {
        let pooled = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let was_pooled = pooled.is_some();
        let run = |connection: Option<redis::Connection>| {
            let mut connection = match connection {
                Some(connection) => connection,
                None => self.connect()?,
            };
            command(&mut connection).map(|value| (value, connection))
        };
        let mut result = run(pooled);
        if was_pooled
            && result
                .as_ref()
                .is_err_and(|error| error.is_connection_dropped() || error.is_io_error())
        {
            result = run(None);
        }
        match result {
            Ok((value, connection)) => {
                let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
                if idle.len() < IDLE_CONNECTIONS {
                    idle.push(connection);
                }
                drop(idle);
                self.answered();
                Ok(value)
            }
            Err(error) => {
                self.failed(&error);
                Err(error)
            }
        }
    }

    fn connect(&self) -> redis::RedisResult<redis::Connection> {
        let connection = self.client.get_connection_with_timeout(self.timeout)?;
        connection.set_read_timeout(Some(self.timeout))?;
        connection.set_write_timeout(Some(self.timeout))?;
        Ok(connection)
    }

    fn answered(&self) {
        let ended = self
            .outage
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(outage) = ended {
            tracing::warn!(
                after_seconds = outage.since.elapsed().as_secs(),
                "rate limits: Redis answers again; quotas are shared again"
            );
        }
    }

    fn failed(&self, error: &redis::RedisError) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        // The idle connections are most likely as dead as the one that failed.
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        let now = Instant::now();
        let mut outage = self.outage.lock().unwrap_or_else(PoisonError::into_inner);
        if outage.is_none() {
            *outage = Some(Outage {
                since: now,
                retry_at: now + self.retry_interval,
            });
            drop(outage);
            tracing::warn!(
                %error,
                "rate limits: Redis does not answer; each replica enforces the quotas on its \
                 own until it does"
            );
        }
    }
}

fn class_name(class: Class) -> &'static str {
    match class {
        Class::Entity => "entity",
        Class::Search => "search",
        Class::Tiles => "tiles",
    }
}
