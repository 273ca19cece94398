//! Lifetimes, password-hashing cost and which PKCE methods are accepted.

use std::time::Duration;

/// The cost of argon2id password hashing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PasswordParams {
    /// Memory in KiB.
    pub memory_kib: u32,
    /// Passes over memory.
    pub iterations: u32,
    /// Lanes.
    pub parallelism: u32,
}

impl Default for PasswordParams {
    /// OWASP's recommended argon2id setting: 19 MiB, 2 passes, 1 lane.
    fn default() -> Self {
        Self {
            memory_kib: 19 * 1024,
            iterations: 2,
            parallelism: 1,
        }
    }
}

impl PasswordParams {
    /// The cheapest setting argon2 accepts: for tests only.
    pub const INSECURE_FAST: PasswordParams = PasswordParams {
        memory_kib: 8,
        iterations: 1,
        parallelism: 1,
    };
}

/// Lifetimes of the things the store issues, and protocol choices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// How long a user access token is valid (`expires_in`).
    pub user_token_lifetime: Duration,
    /// How long after expiry a user access token is still accepted as a `refresh_token`.
    pub refresh_grace: Duration,
    /// How long an authorization code may wait before it is exchanged (10 minutes, RFC 6749).
    pub code_lifetime: Duration,
    /// How long a browser session lasts.
    pub session_lifetime: Duration,
    /// Password hashing cost.
    pub password: PasswordParams,
    /// Whether an authorization request may use PKCE's `plain` method (also implied by a
    /// `code_challenge` without a method). Off by default: `plain` protects nothing once the
    /// authorization request leaks, so RFC 9700 section 2.1.1 asks for `S256`.
    pub allow_plain_pkce: bool,
    /// How long a token found valid is remembered in memory before it is read from the
    /// database again. Revocations by this process take effect at once; this bounds how late
    /// one made by another process sharing the database (the CLI, a second server) does.
    /// Zero reads every token from the database.
    pub token_cache_ttl: Duration,
    /// How many tokens found valid are remembered at most; zero remembers none.
    pub token_cache_entries: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            user_token_lifetime: Duration::from_secs(30 * 24 * 3600),
            refresh_grace: Duration::from_secs(24 * 3600),
            code_lifetime: Duration::from_secs(10 * 60),
            session_lifetime: Duration::from_secs(14 * 24 * 3600),
            password: PasswordParams::default(),
            allow_plain_pkce: false,
            token_cache_ttl: Duration::from_secs(1),
            token_cache_entries: 10_000,
        }
    }
}

impl Config {
    /// The defaults with the cheapest password hashing: for tests and fixtures.
    pub fn insecure_fast() -> Self {
        Self {
            password: PasswordParams::INSECURE_FAST,
            ..Self::default()
        }
    }
}
