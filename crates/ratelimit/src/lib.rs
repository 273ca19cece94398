#![doc = include_str!("../README.md")]

mod config;
mod error;
mod limits;
mod rejection;
mod sign_in;

pub use config::Config;
pub use error::RateLimitError;
pub use limits::{Class, RateLimits, Usage};
pub use rejection::Rejection;
pub use sign_in::{
    ClientAddr, HashingGate, HashingPass, SignInGuard, SignInLimits, SignInRefusal, SignInThrottle,
};

/// Governor's clocks, re-exported so callers can build a [`RateLimits`] with a fake clock
/// without depending on governor themselves.
pub use governor::clock;
