//! The per-app limiters and the decision they return.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use governor::clock::{Clock as _, Reference};
use governor::middleware::StateInformationMiddleware;
use governor::nanos::Nanos;
use governor::state::keyed::DashMapStateStore;
use governor::{Quota, RateLimiter};

use streetlevel_model::Clock;

use crate::clock::GovernorClock;
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

type KeyedLimiter =
    RateLimiter<u64, DashMapStateStore<u64>, GovernorClock, StateInformationMiddleware>;

/// One tile window of one app: which window, and how many tiles it has fetched in it.
#[derive(Debug, Clone, Copy)]
struct TileWindow {
    index: u64,
    count: u32,
}

/// The limiters of every app, for all three classes.
///
/// Thread-safe: share one instance (in an `Arc`) between all requests.
#[derive(Debug)]
pub struct RateLimits {
    entity: KeyedLimiter,
    search: KeyedLimiter,
    tiles: Mutex<HashMap<u64, TileWindow>>,
    tiles_per_window: NonZeroU32,
    tiles_window: Duration,
    clock: GovernorClock,
    start: Nanos,
    trace_member: Arc<str>,
    config: Config,
}

impl RateLimits {
    /// Limiters that read the time from `clock` (a `FakeClock` in tests).
    pub fn new(config: Config, clock: Arc<dyn Clock>) -> Result<Self, RateLimitError> {
        let clock = GovernorClock(clock);
        if config.tiles_window.is_zero() {
            return Err(RateLimitError::ZeroWindow);
        }
        let trace_member: Arc<str> = config.trace_member().into();
        let entity = RateLimiter::dashmap_with_clock(
            Quota::per_minute(config.entity_per_minute),
            clock.clone(),
        )
        .with_middleware::<StateInformationMiddleware>();
        let search = RateLimiter::dashmap_with_clock(
            Quota::per_minute(config.search_per_minute),
            clock.clone(),
        )
        .with_middleware::<StateInformationMiddleware>();
        let start = clock.now();
        Ok(Self {
            entity,
            search,
            tiles: Mutex::new(HashMap::new()),
            tiles_per_window: config.tiles_per_window,
            tiles_window: config.tiles_window,
            clock,
            start,
            trace_member,
            config,
        })
    }

    /// Charges one call of `class` to the app with client ID `app_id`.
    ///
    /// `Ok` lets the call through; `Err` refuses it. A refused call costs nothing.
    pub fn check(&self, app_id: u64, class: Class) -> Result<Usage, Rejection> {
        match class {
            Class::Entity => self.check_keyed(&self.entity, app_id, class),
            Class::Search => self.check_keyed(&self.search, app_id, class),
            Class::Tiles => self.check_tiles(app_id),
        }
    }

    fn check_keyed(
        &self,
        limiter: &KeyedLimiter,
        app_id: u64,
        class: Class,
    ) -> Result<Usage, Rejection> {
        match limiter.check_key(&app_id) {
            Ok(snapshot) => {
                let burst = snapshot.quota().burst_size().get();
                let used = burst.saturating_sub(snapshot.remaining_burst_capacity());
                Ok(Usage {
                    class,
                    used_percent: percent(used, burst),
                })
            }
            Err(not_until) => Err(Rejection {
                class,
                retry_after: not_until.wait_time_from(self.clock.now()),
                trace_member: Arc::clone(&self.trace_member),
            }),
        }
    }

    fn window_position(&self) -> (u64, Duration) {
        let elapsed = Duration::from(self.clock.now().duration_since(self.start));
        let window_nanos = self.tiles_window.as_nanos().max(1);
        let index = elapsed.as_nanos() / window_nanos;
        let into_window = elapsed.as_nanos() % window_nanos;
        let remaining = window_nanos - into_window;
        (
            u64::try_from(index).unwrap_or(u64::MAX),
            Duration::from_nanos(u64::try_from(remaining).unwrap_or(u64::MAX)),
        )
    }

    fn check_tiles(&self, app_id: u64) -> Result<Usage, Rejection> {
        let (index, until_next_window) = self.window_position();
        let limit = self.tiles_per_window.get();
        let mut windows = self.tiles.lock().unwrap_or_else(PoisonError::into_inner);
        let window = windows
            .entry(app_id)
            .or_insert(TileWindow { index, count: 0 });
        if window.index != index {
            *window = TileWindow { index, count: 0 };
        }
        if window.count >= limit {
            return Err(Rejection {
                class: Class::Tiles,
                retry_after: until_next_window,
                trace_member: Arc::clone(&self.trace_member),
            });
        }
        window.count += 1;
        Ok(Usage {
            class: Class::Tiles,
            used_percent: percent(window.count, limit),
        })
    }

    /// Forgets apps that would start from a full quota anyway: entity and search buckets
    /// that have refilled, and tile counters of past windows. Call it periodically (once a
    /// minute is plenty) so memory stays bounded when many apps come and go.
    pub fn retain_recent(&self) {
        self.entity.retain_recent();
        self.search.retain_recent();
        self.entity.shrink_to_fit();
        self.search.shrink_to_fit();
        let (index, _) = self.window_position();
        let mut windows = self.tiles.lock().unwrap_or_else(PoisonError::into_inner);
        windows.retain(|_, window| window.index == index);
        windows.shrink_to_fit();
    }

    /// The configuration the limiters were built with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// How many per-app entries the limiters hold (entity, search and tiles together).
    pub fn len(&self) -> usize {
        let tiles = self
            .tiles
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        self.entity.len() + self.search.len() + tiles
    }

    /// Whether the limiters hold no per-app entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn percent(used: u32, limit: u32) -> u8 {
    let percent = u64::from(used) * 100 / u64::from(limit.max(1));
    u8::try_from(percent.min(100)).unwrap_or(100)
}
