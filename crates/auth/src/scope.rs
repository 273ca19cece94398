//! The permissions an app may ask for: `read`, `write`, `upload`.

use std::fmt;

use crate::AuthError;

/// One permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Read data.
    Read,
    /// Change data.
    Write,
    /// Upload images.
    Upload,
    /// Have pictures blurred by `POST /blur/` (Panoramax's blur API): for a client token of
    /// an app that is a blur client, such as a Panoramax instance. Not in [`Scopes::ALL`].
    Blur,
}

impl Scope {
    /// Every scope, in canonical order.
    pub const ALL: [Scope; 4] = [Scope::Read, Scope::Write, Scope::Upload, Scope::Blur];

    /// The scope's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Upload => "upload",
            Self::Blur => "blur",
        }
    }

    fn bit(self) -> u8 {
        match self {
            Self::Read => 1,
            Self::Write => 2,
            Self::Upload => 4,
            Self::Blur => 8,
        }
    }
}

/// A set of scopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Scopes(u8);

impl Scopes {
    /// No scope at all.
    pub const NONE: Scopes = Scopes(0);
    /// Only `read`.
    pub const READ: Scopes = Scopes(1);
    /// `read`, `write` and `upload` (not `blur`, which an operator grants on its own).
    pub const ALL: Scopes = Scopes(7);

    /// The set holding exactly `scopes`.
    pub fn from_scopes(scopes: &[Scope]) -> Self {
        Scopes(scopes.iter().fold(0, |bits, scope| bits | scope.bit()))
    }

    /// Parses scope names separated by commas, spaces or both (`read,write`, `read write`).
    /// An empty list is the empty set; an unknown name is an error.
    pub fn parse(text: &str) -> Result<Self, AuthError> {
        let mut bits = 0;
        for name in text.split([',', ' ']).filter(|name| !name.is_empty()) {
            let scope = Scope::ALL
                .into_iter()
                .find(|scope| scope.as_str() == name)
                .ok_or_else(|| AuthError::InvalidScope(name.to_owned()))?;
            bits |= scope.bit();
        }
        Ok(Scopes(bits))
    }

    /// Whether `scope` is in the set.
    pub fn contains(self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }

    /// Whether every scope of `self` is in `other`.
    pub fn is_subset_of(self, other: Scopes) -> bool {
        self.0 & !other.0 == 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The scopes of the set, in canonical order.
    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL
            .into_iter()
            .filter(move |scope| self.contains(*scope))
    }
}

impl fmt::Display for Scopes {
    /// Comma-separated names in canonical order, such as `read,write`.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, scope) in self.iter().enumerate() {
            if index > 0 {
                formatter.write_str(",")?;
            }
            formatter.write_str(scope.as_str())?;
        }
        Ok(())
    }
}
