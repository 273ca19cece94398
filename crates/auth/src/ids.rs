//! Identifiers of apps and users.

use std::fmt;
use std::str::FromStr;

use crate::AuthError;

/// An app's public client ID (the `client_id` of the OAuth flow).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientId(pub u64);

/// A user account's ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserId(pub u64);

impl fmt::Display for ClientId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, formatter)
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, formatter)
    }
}

impl FromStr for ClientId {
    type Err = AuthError;

    /// Decimal digits only: `u64::from_str` would also accept a leading `+`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || AuthError::InvalidClientId(text.to_owned());
        if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
            return Err(invalid());
        }
        text.parse().map(ClientId).map_err(|_| invalid())
    }
}

/// Database integers are signed; IDs are generated below `i64::MAX`.
pub(crate) fn to_sql(id: u64) -> i64 {
    i64::try_from(id).unwrap_or(i64::MAX)
}

pub(crate) fn from_sql(id: i64) -> u64 {
    u64::try_from(id).unwrap_or(0)
}
