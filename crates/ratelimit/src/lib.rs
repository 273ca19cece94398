#![doc = include_str!("../README.md")]

mod address;
mod clock;
mod config;
mod error;
mod forms;
mod limits;
mod memory;
mod rejection;
mod shared;
mod sign_in;

pub use address::per_address_key;
pub use config::Config;
pub use error::RateLimitError;
pub use forms::{FormLimits, FormThrottle};
pub use limits::{Class, RateLimits, Usage};
pub use rejection::Rejection;
pub use shared::RedisConfig;
pub use sign_in::{
    ClientAddr, HashingGate, HashingPass, SignInGuard, SignInLimits, SignInRefusal, SignInThrottle,
};
