//! Search filters (spec 4.3, 4.5, 4.7), cursors and pages.
//!
//! Semantics shared by every search:
//! - A bounding box is inclusive on all four edges.
//! - Time ranges are inclusive: `start` means "at or after", `end` "at or before".
//! - Value patterns match the whole value, case-sensitively; `*` matches any run of characters
//!   (also none). A list of patterns matches when any one of them does.
//! - Results come in ascending ID order. A page that is not the last carries a [`Cursor`]; the
//!   next page holds the results with IDs above it, so paging continues exactly where it left
//!   off, also when entities were added in between: new ones with higher IDs appear later.
//! - A cursor is the bare last ID, nothing more: an entity added with an ID below a cursor is
//!   not returned by that cursor's later pages (a client paging at the time never sees it).
//!   Writers must therefore hand out increasing IDs, as the fixtures generator does (one
//!   increasing counter for every kind).

use std::fmt;
use std::str::FromStr;

use streetlevel_model::{ImageId, OrganizationId, Point, SequenceId, Timestamp};

use crate::StoreError;

/// A longitude/latitude box, inclusive on all edges. It does not cross the antimeridian.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoundingBox {
    min_lon: f64,
    min_lat: f64,
    max_lon: f64,
    max_lat: f64,
}

impl BoundingBox {
    /// A box from `left, bottom, right, top` in degrees (the order of the `bbox` parameter).
    pub fn new(min_lon: f64, min_lat: f64, max_lon: f64, max_lat: f64) -> Result<Self, StoreError> {
        if ![min_lon, min_lat, max_lon, max_lat]
            .iter()
            .all(|value| value.is_finite())
        {
            return Err(StoreError::InvalidBoundingBox("coordinates must be finite"));
        }
        if min_lon > max_lon || min_lat > max_lat {
            return Err(StoreError::InvalidBoundingBox("minimum exceeds maximum"));
        }
        Ok(BoundingBox {
            min_lon,
            min_lat,
            max_lon,
            max_lat,
        })
    }

    /// Western edge.
    pub fn min_lon(&self) -> f64 {
        self.min_lon
    }

    /// Southern edge.
    pub fn min_lat(&self) -> f64 {
        self.min_lat
    }

    /// Eastern edge.
    pub fn max_lon(&self) -> f64 {
        self.max_lon
    }

    /// Northern edge.
    pub fn max_lat(&self) -> f64 {
        self.max_lat
    }

    /// Whether the point lies inside or on the edge of the box.
    pub fn contains(&self, point: Point) -> bool {
        point.lon >= self.min_lon
            && point.lon <= self.max_lon
            && point.lat >= self.min_lat
            && point.lat <= self.max_lat
    }
}

/// An inclusive time range; either end may be open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeRange {
    /// At or after this time.
    pub start: Option<Timestamp>,
    /// At or before this time.
    pub end: Option<Timestamp>,
}

impl TimeRange {
    /// Whether `time` lies in the range.
    pub fn contains(&self, time: Timestamp) -> bool {
        self.start.is_none_or(|start| time >= start) && self.end.is_none_or(|end| time <= end)
    }

    /// Whether neither end is set.
    pub fn is_unbounded(&self) -> bool {
        self.start.is_none() && self.end.is_none()
    }
}

/// Image search (spec 4.3 and the web viewer's `image_ids`). Every set filter must match.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ImageFilter {
    /// The original `geometry` lies in the box.
    pub bbox: Option<BoundingBox>,
    /// Owned by the creator with this username (exact).
    pub creator_username: Option<String>,
    /// Panorama or not.
    pub is_pano: Option<bool>,
    /// Camera make, compared case-insensitively (ASCII).
    pub make: Option<String>,
    /// Camera model, compared case-insensitively (ASCII).
    pub model: Option<String>,
    /// Contributed to this organization.
    pub organization_id: Option<OrganizationId>,
    /// In one of these sequences.
    pub sequence_ids: Option<Vec<SequenceId>>,
    /// Capture time range (`start_captured_at`, `end_captured_at`).
    pub captured_at: TimeRange,
    /// One of these IDs.
    pub image_ids: Option<Vec<ImageId>>,
}

impl ImageFilter {
    /// The combination rules of spec 4.3: `is_pano` needs `creator_username` or `bbox`;
    /// `make` and `model` need `bbox`. Returns the name of the first offending filter.
    pub fn check_combinations(&self) -> Result<(), &'static str> {
        if self.is_pano.is_some() && self.creator_username.is_none() && self.bbox.is_none() {
            return Err("is_pano");
        }
        if self.make.is_some() && self.bbox.is_none() {
            return Err("make");
        }
        if self.model.is_some() && self.bbox.is_none() {
            return Err("model");
        }
        Ok(())
    }
}

/// Map feature search (spec 4.5). Every set filter must match.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MapFeatureFilter {
    /// The feature's location lies in the box.
    pub bbox: Option<BoundingBox>,
    /// `object_value` matches one of these patterns (`*` wildcards).
    pub object_values: Option<Vec<String>>,
    /// `first_seen_at` range.
    pub first_seen_at: TimeRange,
    /// `last_seen_at` range.
    pub last_seen_at: TimeRange,
}

/// Detection search (spec 4.7). Every set filter must match.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DetectionFilter {
    /// The original `geometry` of the detection's image lies in the box.
    pub bbox: Option<BoundingBox>,
    /// The detection's image was captured in this range.
    pub captured_at: TimeRange,
    /// `value` matches one of these patterns (`*` wildcards).
    pub values: Option<Vec<String>>,
}

/// Where the next page starts: after the entity with this ID. Its text form (`Display`,
/// `FromStr`) is opaque to clients.
///
/// It holds no snapshot: pages after it return what matches with a higher ID at the time they
/// are asked, so entities added meanwhile with an ID below it are skipped. Writers use
/// increasing IDs so that nothing is skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cursor(u64);

impl Cursor {
    /// A cursor continuing after `id`.
    pub fn after(id: u64) -> Self {
        Cursor(id)
    }

    /// The last ID of the previous page.
    pub fn last_id(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a{:x}", self.0)
    }
}

impl FromStr for Cursor {
    type Err = StoreError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || StoreError::InvalidCursor(text.to_owned());
        let hex = text.strip_prefix('a').ok_or_else(invalid)?;
        if hex.is_empty() || hex.len() > 16 || !hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
            return Err(invalid());
        }
        u64::from_str_radix(hex, 16)
            .map(Cursor)
            .map_err(|_| invalid())
    }
}

/// One page of search results.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The results, in ascending ID order.
    pub items: Vec<T>,
    /// Present when more results exist after this page.
    pub next: Option<Cursor>,
}

/// Whether `value` matches `pattern`, where `*` in the pattern matches any run of characters.
pub fn wildcard_match(pattern: &str, value: &str) -> bool {
    let pattern = pattern.as_bytes();
    let value = value.as_bytes();
    let (mut p, mut v) = (0, 0);
    // Position of the last `*` seen and the value position it was tried at.
    let mut backtrack: Option<(usize, usize)> = None;
    while v < value.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            backtrack = Some((p, v));
            p += 1;
        } else if p < pattern.len() && pattern[p] == value[v] {
            p += 1;
            v += 1;
        } else if let Some((star, tried)) = backtrack {
            p = star + 1;
            v = tried + 1;
            backtrack = Some((star, tried + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&byte| byte == b'*')
}

/// Whether `value` matches any of `patterns` (no list means no restriction).
pub(crate) fn matches_any(patterns: Option<&[String]>, value: &str) -> bool {
    patterns.is_none_or(|patterns| {
        patterns
            .iter()
            .any(|pattern| wildcard_match(pattern, value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_runs() {
        let check = |pattern: &str, value: &str, expected: bool| {
            assert_eq!(
                wildcard_match(pattern, value),
                expected,
                "{pattern} {value}"
            );
        };
        check("regulatory--stop--g1", "regulatory--stop--g1", true);
        check("regulatory--stop--g1", "regulatory--stop--g2", false);
        check("regulatory--*", "regulatory--stop--g1", true);
        check("*--stop--*", "regulatory--stop--g1", true);
        check("*", "", true);
        check("a*b*c", "aXbYbZc", true);
        check("a*b*c", "aXbYbZ", false);
        check("*g1", "regulatory--stop--g1", true);
        check("object--*", "regulatory--stop--g1", false);
        check("", "x", false);
    }

    #[test]
    fn cursors_round_trip_as_text() {
        let cursor = Cursor::after(1_000_000_000_000_001);
        assert_eq!(cursor.to_string().parse::<Cursor>().ok(), Some(cursor));
        for bad in ["", "a", "12", "ag", "a11111111111111111"] {
            assert!(bad.parse::<Cursor>().is_err(), "{bad}");
        }
    }

    #[test]
    fn time_ranges_are_inclusive() {
        let range = TimeRange {
            start: Some(Timestamp(10)),
            end: Some(Timestamp(20)),
        };
        assert!(range.contains(Timestamp(10)) && range.contains(Timestamp(20)));
        assert!(!range.contains(Timestamp(9)) && !range.contains(Timestamp(21)));
    }
}
