//! Throttling a public form (the privacy request form): how often one client address may
//! send it, and how often everyone together may, so that a flood from many addresses is
//! bounded too. Every submission is charged before anything is stored.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock as _, Reference};
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::keyed::DashMapStateStore;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use streetlevel_model::Clock;

use crate::clock::GovernorClock;

/// How many submissions may come at once and how fast that allowance refills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FormLimits {
    /// Submissions from one client address: burst, then one per interval.
    pub per_address: (NonZeroU32, Duration),
    /// Submissions from every address together.
    pub overall: (NonZeroU32, Duration),
}

impl Default for FormLimits {
    /// Five from one address, then one a minute; a hundred from everyone, then one every
    /// six seconds (600 an hour at most).
    fn default() -> Self {
        let n = |value| NonZeroU32::new(value).unwrap_or(NonZeroU32::MIN);
        FormLimits {
            per_address: (n(5), Duration::from_secs(60)),
            overall: (n(100), Duration::from_secs(6)),
        }
    }
}

type Keyed = RateLimiter<IpAddr, DashMapStateStore<IpAddr>, GovernorClock, NoOpMiddleware<Nanos>>;
type Overall = RateLimiter<NotKeyed, InMemoryState, GovernorClock, NoOpMiddleware<Nanos>>;

/// The two limiters of one form. Thread-safe: share one for all submissions.
#[derive(Debug)]
pub struct FormThrottle {
    address: Keyed,
    overall: Overall,
    clock: GovernorClock,
}

impl FormThrottle {
    /// Throttles that read the time from `clock` (a `FakeClock` in tests).
    pub fn new(limits: FormLimits, clock: Arc<dyn Clock>) -> Self {
        let clock = GovernorClock(clock);
        let quota = |(burst, interval): (NonZeroU32, Duration)| {
            Quota::with_period(interval)
                .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
                .allow_burst(burst)
        };
        FormThrottle {
            address: RateLimiter::dashmap_with_clock(quota(limits.per_address), clock.clone()),
            overall: RateLimiter::direct_with_clock(quota(limits.overall), clock.clone()),
            clock,
        }
    }

    /// Charges one submission from `address` (unknown for in-process callers: only the
    /// overall limit then). `Err` holds how long to wait, in whole seconds, at least one.
    pub fn check(&self, address: Option<IpAddr>) -> Result<(), Duration> {
        let now = self.clock.now();
        let wait = |not_until: governor::NotUntil<Nanos>| {
            let wait: Duration = not_until.earliest_possible().duration_since(now).into();
            Duration::from_secs(wait.as_secs() + 1)
        };
        if let Some(address) = address {
            self.address.check_key(&address).map_err(wait)?;
        }
        self.overall.check().map_err(wait)
    }

    /// Forgets addresses whose allowance has refilled; call it now and then.
    pub fn retain_recent(&self) {
        self.address.retain_recent();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use streetlevel_model::FakeClock;

    #[test]
    fn one_address_gets_its_burst_then_waits_and_others_share_the_overall_limit() {
        let clock = Arc::new(FakeClock::new(streetlevel_model::Timestamp(1_000_000_000)));
        let n = |value| NonZeroU32::new(value).unwrap();
        let throttle = FormThrottle::new(
            FormLimits {
                per_address: (n(2), Duration::from_secs(60)),
                overall: (n(3), Duration::from_secs(10)),
            },
            clock.clone(),
        );
        let one: IpAddr = "192.0.2.1".parse().unwrap();
        let two: IpAddr = "192.0.2.2".parse().unwrap();
        assert!(throttle.check(Some(one)).is_ok());
        assert!(throttle.check(Some(one)).is_ok());
        let wait = throttle.check(Some(one)).unwrap_err();
        assert!(wait >= Duration::from_secs(1) && wait <= Duration::from_secs(61));
        assert!(throttle.check(Some(two)).is_ok());
        // The overall burst (3) is spent: a third address waits too.
        assert!(throttle.check(Some("192.0.2.3".parse().unwrap())).is_err());
        clock.advance(Duration::from_secs(61));
        assert!(throttle.check(Some(one)).is_ok());
    }
}
