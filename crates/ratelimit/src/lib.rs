#![doc = include_str!("../README.md")]

mod config;
mod error;
mod limits;
mod rejection;

pub use config::Config;
pub use error::RateLimitError;
pub use limits::{Class, RateLimits, Usage};
pub use rejection::Rejection;

/// Governor's clocks, re-exported so callers can build a [`RateLimits`] with a fake clock
/// without depending on governor themselves.
pub use governor::clock;
