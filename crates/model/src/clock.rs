//! The one source of time every crate takes: injected, so tests control expiry, rate-limit
//! windows and signed URL lifetimes with one fake.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::Timestamp;

/// A source of the current wall-clock time.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> Timestamp;

    /// The current time in whole seconds since the Unix epoch (0 before it).
    fn now_unix_seconds(&self) -> u64 {
        u64::try_from(self.now().millis().div_euclid(1000)).unwrap_or(0)
    }
}

/// A shared clock is a clock, so one instance can be handed to every part of the service.
impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Timestamp {
        (**self).now()
    }
}

/// The system's wall clock, for production.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX))
    }
}

/// A clock that stands still until told to move; clones share the same time.
#[derive(Debug, Clone, Default)]
pub struct FakeClock {
    millis: Arc<AtomicI64>,
}

impl FakeClock {
    /// A fake clock showing `start`.
    pub fn new(start: Timestamp) -> Self {
        Self {
            millis: Arc::new(AtomicI64::new(start.0)),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.millis.fetch_add(duration_millis(by), Ordering::SeqCst);
    }

    /// Sets the clock to `to`.
    pub fn set(&self, to: Timestamp) {
        self.millis.store(to.0, Ordering::SeqCst);
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.millis.load(Ordering::SeqCst))
    }
}

/// A duration in whole milliseconds, saturating.
pub fn duration_millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_clock_clones_share_one_time() {
        let clock = FakeClock::new(Timestamp(1_500));
        let shared: Arc<dyn Clock> = Arc::new(clock.clone());
        clock.advance(Duration::from_millis(2_600));
        assert_eq!(shared.now(), Timestamp(4_100));
        assert_eq!(shared.now_unix_seconds(), 4);
        clock.set(Timestamp(-1));
        assert_eq!(shared.now_unix_seconds(), 0);
    }

    #[test]
    fn system_clock_is_after_2020() {
        assert!(SystemClock.now_unix_seconds() > 1_577_836_800);
    }
}
