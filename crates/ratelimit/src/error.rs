//! The crate's error type.

/// What can go wrong when building the limiters.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RateLimitError {
    /// The tile window must be a positive duration.
    #[error("the tile quota window must be longer than zero")]
    ZeroWindow,
    /// The Redis URL of the shared quotas is not one the client accepts.
    #[error("invalid Redis URL: {0}")]
    RedisUrl(String),
}
