//! Identifiers. Numeric IDs share one space across every entity kind; sequence IDs are opaque
//! strings.

use std::fmt;
use std::str::FromStr;

/// The kinds of entity that can be fetched by ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntityKind {
    /// An image (spec 2.1).
    Image,
    /// A map feature (spec 2.2).
    MapFeature,
    /// A detection (spec 2.3).
    Detection,
    /// An organization (spec 2.4).
    Organization,
}

impl EntityKind {
    /// The node type name used in Graph-style error messages (`Image`, `MapFeature`, ...).
    pub fn node_type(self) -> &'static str {
        match self {
            EntityKind::Image => "Image",
            EntityKind::MapFeature => "MapFeature",
            EntityKind::Detection => "Detection",
            EntityKind::Organization => "Organization",
        }
    }
}

impl fmt::Display for EntityKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.node_type())
    }
}

/// An ID that is not a decimal unsigned 64-bit integer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid id {0:?}: expected a decimal unsigned 64-bit integer")]
pub struct ParseIdError(pub String);

macro_rules! numeric_id {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl FromStr for $name {
            type Err = ParseIdError;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                // `u64::from_str` accepts a leading `+`; IDs never carry one.
                if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
                    return Err(ParseIdError(text.to_owned()));
                }
                text.parse().map($name).map_err(|_| ParseIdError(text.to_owned()))
            }
        }

        impl From<$name> for u64 {
            fn from(id: $name) -> u64 {
                id.0
            }
        }
    };
}

numeric_id!(
    /// A numeric entity ID of unknown kind, as it arrives in a URL path.
    EntityId
);
numeric_id!(
    /// The ID of an image.
    ImageId
);
numeric_id!(
    /// The ID of a map feature.
    MapFeatureId
);
numeric_id!(
    /// The ID of a detection.
    DetectionId
);
numeric_id!(
    /// The ID of an organization.
    OrganizationId
);
numeric_id!(
    /// The ID of a creator (the user who uploaded images).
    CreatorId
);
numeric_id!(
    /// The ID of a media object: a mesh or a structure-from-motion cluster.
    MediaId
);

/// The ID of a sequence: an opaque key such as `"Xv3dNwF8b2kZqL0cQ7RrMa"`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SequenceId(pub String);

impl SequenceId {
    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SequenceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for SequenceId {
    fn from(key: &str) -> Self {
        SequenceId(key.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_only_plain_decimal() {
        assert_eq!(
            "1000000000000001".parse(),
            Ok(ImageId(1_000_000_000_000_001))
        );
        assert_eq!("18446744073709551615".parse(), Ok(EntityId(u64::MAX)));
        for bad in [
            "",
            "+1",
            "-1",
            "1.0",
            "0x10",
            " 1",
            "18446744073709551616",
            "1a",
        ] {
            assert_eq!(
                bad.parse::<ImageId>(),
                Err(ParseIdError(bad.to_owned())),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn ids_display_as_decimal() {
        assert_eq!(MapFeatureId(42).to_string(), "42");
        assert_eq!(EntityKind::MapFeature.to_string(), "MapFeature");
    }
}
