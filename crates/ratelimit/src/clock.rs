//! Governor measures time through its own `Clock` trait; this adapter makes it read the
//! service's one clock, so the fake clock of a test moves quotas, windows and sign-in
//! allowances along with token and URL expiry.

use std::fmt;
use std::sync::Arc;

use governor::nanos::Nanos;
use streetlevel_model::Clock;

/// The service's clock, as governor wants it: nanoseconds since the Unix epoch.
///
/// The wall clock is not monotonic: if it steps back, governor sees no time pass until it
/// catches up (its arithmetic saturates), which delays refills but never grants extra calls.
#[derive(Clone)]
pub(crate) struct GovernorClock(pub(crate) Arc<dyn Clock>);

impl governor::clock::Clock for GovernorClock {
    type Instant = Nanos;

    fn now(&self) -> Nanos {
        let millis = u64::try_from(self.0.now().millis()).unwrap_or(0);
        Nanos::from(millis.saturating_mul(1_000_000))
    }
}

impl fmt::Debug for GovernorClock {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("GovernorClock")
    }
}
