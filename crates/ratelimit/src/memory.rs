//! The in-memory quota backend: governor GCRA limiters for entity and search calls and a
//! fixed-window counter for tiles, in this process only, timed by the service's clock.

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
use crate::limits::{Class, Usage, percent};
use crate::{Config, RateLimitError, Rejection};

type KeyedLimiter =
    RateLimiter<u64, DashMapStateStore<u64>, GovernorClock, StateInformationMiddleware>;

/// One tile window of one app: which window, and how many tiles it has fetched in it.
#[derive(Debug, Clone, Copy)]
struct TileWindow {
    index: u64,
    count: u32,
}

/// Every app's quotas, held by this process.
#[derive(Debug)]
pub(crate) struct MemoryQuotas {
    entity: KeyedLimiter,
    search: KeyedLimiter,
    tiles: Mutex<HashMap<u64, TileWindow>>,
    tiles_per_window: NonZeroU32,
    tiles_window: Duration,
    clock: GovernorClock,
    start: Nanos,
    trace_member: Arc<str>,
}

impl MemoryQuotas {
    /// Limiters that read the time from `clock` (a `FakeClock` in tests).
    pub(crate) fn new(config: &Config, clock: Arc<dyn Clock>) -> Result<Self, RateLimitError> {
        let clock = GovernorClock(clock);
        if config.tiles_window.is_zero() {
            return Err(RateLimitError::ZeroWindow);
        }
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
            trace_member: config.trace_member().into(),
        })
    }

    /// Charges one call of `class` to the app `app_id`; a refused call costs nothing.
    pub(crate) fn check(&self, app_id: u64, class: Class) -> Result<Usage, Rejection> {
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

    /// Forgets apps that would start from a full quota anyway.
    pub(crate) fn retain_recent(&self) {
        self.entity.retain_recent();
        self.search.retain_recent();
        self.entity.shrink_to_fit();
        self.search.shrink_to_fit();
        let (index, _) = self.window_position();
        let mut windows = self.tiles.lock().unwrap_or_else(PoisonError::into_inner);
        windows.retain(|_, window| window.index == index);
        windows.shrink_to_fit();
    }

    /// How many per-app entries the limiters hold.
    pub(crate) fn len(&self) -> usize {
        let tiles = self
            .tiles
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        self.entity.len() + self.search.len() + tiles
    }
}
