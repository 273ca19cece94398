//! Sign-in throttling: how often one account, one client address, and one account from one
//! address may try a password, for the web sign-in and the uploader's `POST /login` alike.
//!
//! Every attempt is charged, successful or not, before the password is hashed, so a flood
//! costs the server a map lookup instead of an argon2 hash. The pair (account, address) is
//! the tight limit a guesser meets; an account alone has a looser one, so that an attacker
//! guessing from many addresses is slowed while its owner, who tries rarely, still gets
//! through between the attacker's attempts once the attack pauses (no lasting lock-out).

use std::net::IpAddr;
use std::num::{NonZeroU32, NonZeroUsize};
use std::time::Duration;

use std::sync::Arc;

use governor::clock::{Clock as _, Reference};
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::keyed::DashMapStateStore;
use governor::{Quota, RateLimiter};
use streetlevel_model::Clock;

use crate::clock::GovernorClock;

/// How many attempts each key may make at once and how fast that allowance refills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignInLimits {
    /// Attempts on one account from one address: burst, then one per interval.
    pub per_account_and_address: (NonZeroU32, Duration),
    /// Attempts from one address on any account.
    pub per_address: (NonZeroU32, Duration),
    /// Attempts on one account from any address.
    pub per_account: (NonZeroU32, Duration),
}

impl Default for SignInLimits {
    fn default() -> Self {
        let n = |value| NonZeroU32::new(value).unwrap_or(NonZeroU32::MIN);
        SignInLimits {
            per_account_and_address: (n(5), Duration::from_secs(30)),
            per_address: (n(30), Duration::from_secs(2)),
            per_account: (n(30), Duration::from_secs(10)),
        }
    }
}

type Limiter<K> = RateLimiter<K, DashMapStateStore<K>, GovernorClock, NoOpMiddleware<Nanos>>;

/// The three sign-in limiters. Thread-safe: share one (in an `Arc`) for all sign-ins.
#[derive(Debug)]
pub struct SignInThrottle {
    pair: Limiter<(String, IpAddr)>,
    address: Limiter<IpAddr>,
    account: Limiter<String>,
    clock: GovernorClock,
}

impl SignInThrottle {
    /// Throttles that read the time from `clock` (a `FakeClock` in tests).
    pub fn new(limits: SignInLimits, clock: Arc<dyn Clock>) -> Self {
        let clock = GovernorClock(clock);
        let quota = |(burst, interval): (NonZeroU32, Duration)| {
            Quota::with_period(interval)
                .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
                .allow_burst(burst)
        };
        SignInThrottle {
            pair: RateLimiter::dashmap_with_clock(
                quota(limits.per_account_and_address),
                clock.clone(),
            ),
            address: RateLimiter::dashmap_with_clock(quota(limits.per_address), clock.clone()),
            account: RateLimiter::dashmap_with_clock(quota(limits.per_account), clock.clone()),
            clock,
        }
    }

    /// Charges one sign-in attempt on `account` (compared without case) from `address`
    /// (unknown for in-process callers). `Err` holds how long to wait before trying again.
    pub fn check(&self, account: &str, address: Option<IpAddr>) -> Result<(), Duration> {
        let account = account.trim().to_lowercase();
        let now = self.clock.now();
        let wait = |not_until: governor::NotUntil<Nanos>| {
            let wait: Duration = not_until.earliest_possible().duration_since(now).into();
            // Whole seconds for `Retry-After`, never 0.
            Duration::from_secs(wait.as_secs() + 1)
        };
        if let Some(address) = address {
            self.pair
                .check_key(&(account.clone(), address))
                .map_err(wait)?;
            self.address.check_key(&address).map_err(wait)?;
        }
        self.account.check_key(&account).map_err(wait)
    }

    /// Forgets keys whose allowance has refilled; call it periodically.
    pub fn retain_recent(&self) {
        self.pair.retain_recent();
        self.address.retain_recent();
        self.account.retain_recent();
    }
}

/// The address of the client a request came from: the server puts it in the request's
/// extensions, so that whoever handles a sign-in can throttle by address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub std::net::SocketAddr);

/// Why a sign-in was not let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignInRefusal {
    /// Too many attempts: try again after this long (HTTP 429 with `Retry-After`).
    Throttled(Duration),
    /// Every password-hashing slot is taken and the queue is full (HTTP 503).
    Busy,
}

/// Bounds how many password hashes run at once and how many wait: argon2 takes about 19 MiB
/// and tens of milliseconds each, so an unbounded flood exhausts memory and stalls the
/// machine. A pass holds its slot until dropped.
#[derive(Debug)]
pub struct HashingGate {
    state: std::sync::Mutex<(usize, usize)>,
    freed: std::sync::Condvar,
    running: usize,
    waiting: usize,
    wait: Duration,
}

/// A slot of a [`HashingGate`], released when dropped.
#[derive(Debug)]
pub struct HashingPass<'a> {
    gate: &'a HashingGate,
}

impl HashingGate {
    /// At most `running` hashes at once and `waiting` more queued, each for at most `wait`.
    pub fn new(running: usize, waiting: usize, wait: Duration) -> Self {
        HashingGate {
            state: std::sync::Mutex::new((0, 0)),
            freed: std::sync::Condvar::new(),
            running: running.max(1),
            waiting,
            wait,
        }
    }

    /// One slot per core, four times as many waiting, for at most two seconds.
    pub fn for_this_machine() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        Self::new(cores, 4 * cores, Duration::from_secs(2))
    }

    /// A slot, waiting for one if the queue has room; [`SignInRefusal::Busy`] otherwise.
    pub fn enter(&self) -> Result<HashingPass<'_>, SignInRefusal> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if state.0 >= self.running {
            if state.1 >= self.waiting {
                return Err(SignInRefusal::Busy);
            }
            state.1 += 1;
            let (mut waited, _) = self
                .freed
                .wait_timeout_while(state, self.wait, |state| state.0 >= self.running)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            waited.1 -= 1;
            if waited.0 >= self.running {
                return Err(SignInRefusal::Busy);
            }
            state = waited;
        }
        state.0 += 1;
        Ok(HashingPass { gate: self })
    }
}

impl Drop for HashingPass<'_> {
    fn drop(&mut self) {
        let mut state = self
            .gate
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.0 -= 1;
        self.gate.freed.notify_one();
    }
}

/// The sign-in checks in order: the throttle, then a hashing slot.
#[derive(Debug)]
pub struct SignInGuard {
    /// Attempts per account and address.
    pub throttle: SignInThrottle,
    /// Password hashes at once.
    pub hashing: HashingGate,
}

impl SignInGuard {
    /// The default limits and a hashing gate sized for this machine, on `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        SignInGuard {
            throttle: SignInThrottle::new(SignInLimits::default(), clock),
            hashing: HashingGate::for_this_machine(),
        }
    }

    /// Lets one sign-in attempt through: hash the password while the pass lives.
    pub fn admit(
        &self,
        account: &str,
        address: Option<IpAddr>,
    ) -> Result<HashingPass<'_>, SignInRefusal> {
        self.throttle
            .check(account, address)
            .map_err(SignInRefusal::Throttled)?;
        self.hashing.enter()
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use streetlevel_model::{FakeClock, Timestamp};

    use super::*;

    fn throttle() -> (SignInThrottle, FakeClock) {
        let clock = FakeClock::new(Timestamp(1_700_000_000_000));
        (
            SignInThrottle::new(SignInLimits::default(), Arc::new(clock.clone())),
            clock,
        )
    }

    const LAPTOP: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)));
    const OWNER: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)));

    #[test]
    fn a_guesser_is_stopped_after_five_tries_and_waits_its_interval() {
        let (throttle, clock) = throttle();
        for _ in 0..5 {
            assert_eq!(throttle.check("alice", LAPTOP), Ok(()));
        }
        let wait = throttle.check("Alice ", LAPTOP).unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_secs(31),
            "{wait:?}"
        );
        // The owner, elsewhere, still signs in.
        assert_eq!(throttle.check("alice", OWNER), Ok(()));
        clock.advance(Duration::from_secs(30));
        assert_eq!(throttle.check("alice", LAPTOP), Ok(()));
        assert!(throttle.check("alice", LAPTOP).is_err());
    }

    #[test]
    fn one_address_trying_many_accounts_is_stopped_too() {
        let (throttle, _) = throttle();
        for index in 0..30 {
            assert_eq!(throttle.check(&format!("user{index}"), LAPTOP), Ok(()));
        }
        assert!(throttle.check("someone-else", LAPTOP).is_err());
        assert_eq!(throttle.check("someone-else", OWNER), Ok(()));
    }

    #[test]
    fn an_account_attacked_from_everywhere_recovers_when_the_attack_pauses() {
        let (throttle, clock) = throttle();
        for index in 0..30_u8 {
            let address = Some(IpAddr::V4(Ipv4Addr::new(203, 0, 113, index)));
            assert_eq!(throttle.check("bob", address), Ok(()));
        }
        assert!(throttle.check("bob", OWNER).is_err());
        clock.advance(Duration::from_secs(10));
        assert_eq!(throttle.check("bob", OWNER), Ok(()));
    }

    #[test]
    fn the_hashing_gate_queues_then_refuses() {
        let gate = HashingGate::new(1, 1, Duration::from_millis(300));
        let first = gate.enter().unwrap();
        std::thread::scope(|scope| {
            // One waits for the slot and gets it when the first is dropped ...
            let waiter = scope.spawn(|| gate.enter().map(drop));
            // ... while the queue is full, a third is refused at once.
            let refused = loop {
                let state = *gate.state.lock().unwrap();
                if state.1 == 1 {
                    break gate.enter().map(drop);
                }
                std::thread::yield_now();
            };
            assert_eq!(refused, Err(SignInRefusal::Busy));
            drop(first);
            assert_eq!(waiter.join().unwrap(), Ok(()));
        });
        // A waiter whose slot never frees gives up.
        let held = gate.enter().unwrap();
        assert_eq!(gate.enter().map(drop), Err(SignInRefusal::Busy));
        drop(held);
        assert!(gate.enter().is_ok());
    }
}
