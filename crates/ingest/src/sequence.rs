//! Cutting images into sequences, with the rules of the uploader (`mapillary_tools`
//! `process_sequence_properties.py`): group by camera, sort by time, drop null-island
//! positions and duplicates, refuse sequences that move too fast, and cut on time gaps,
//! distance jumps and a maximum length.

use std::collections::BTreeMap;
use std::fmt;

use crate::Metadata;

/// The thresholds of [`cut`]; the defaults are the uploader's.
#[derive(Debug, Clone, PartialEq)]
pub struct CutRules {
    /// A sequence is cut between two images more than this many seconds apart.
    pub cutoff_time_seconds: f64,
    /// A sequence is cut between two kept images more than this many metres apart.
    pub cutoff_distance_meters: f64,
    /// An image at most this many metres from the previous kept image...
    pub duplicate_distance_meters: f64,
    /// ...whose compass angle differs from it by at most this many degrees (or either has
    /// none) is a duplicate.
    pub duplicate_angle_degrees: f64,
    /// A sequence whose average speed is over this is dropped whole.
    pub max_speed_kmh: f64,
    /// A sequence is cut once it has this many images (at least 1 is used).
    pub max_images: usize,
}

impl Default for CutRules {
    fn default() -> Self {
        CutRules {
            cutoff_time_seconds: 60.0,
            cutoff_distance_meters: 100.0,
            duplicate_distance_meters: 0.1,
            duplicate_angle_degrees: 5.0,
            max_speed_kmh: 400.0,
            max_images: 1000,
        }
    }
}

/// Why [`cut`] left an image out of every sequence.
#[derive(Debug, Clone, PartialEq)]
pub enum DropReason {
    /// The position is exactly latitude 0, longitude 0, where GPS receivers without a fix
    /// put images.
    NullIsland,
    /// The image is at the same place, facing the same way, as the kept image `of` (an index
    /// into the items) taken just before it.
    Duplicate {
        /// The kept image it duplicates.
        of: usize,
    },
    /// The image belongs to a stretch of images whose average speed is impossible.
    TooFast {
        /// The average speed of that stretch.
        speed_kmh: f64,
    },
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DropReason::NullIsland => f.write_str("gps position is null island (0, 0)"),
            DropReason::Duplicate { of } => {
                write!(f, "duplicate of image {of}: same place and direction")
            }
            DropReason::TooFast { speed_kmh } => {
                write!(f, "captured too fast: average speed {speed_kmh:.0} km/h")
            }
        }
    }
}

/// The result of [`cut`]: every item is in exactly one sequence or dropped once.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Cut {
    /// Indices into the items, each sequence in capture order; sequences ordered by their
    /// first image's capture time (then index).
    pub sequences: Vec<Vec<usize>>,
    /// Dropped items with the reason, in index order.
    pub dropped: Vec<(usize, DropReason)>,
}

/// Cuts `items` into sequences. The steps, in order:
/// 1. group by camera: `camera_uuid`, `make`, `model`, `width` and `height` all equal;
/// 2. sort each group by capture time, equal times in index order;
/// 3. drop images at exactly (0, 0) ([`DropReason::NullIsland`]);
/// 4. cut where two consecutive images are more than `cutoff_time_seconds` apart;
/// 5. in each piece, drop an image within `duplicate_distance_meters` of the previous kept
///    image when their compass angles differ by at most `duplicate_angle_degrees` or either
///    has none ([`DropReason::Duplicate`]);
/// 6. drop a whole piece of at least 2 images whose average speed (the sum of distances
///    between consecutive kept images over the time from the first to the last) is over
///    `max_speed_kmh` ([`DropReason::TooFast`]); a piece taken within one instant is not
///    judged. This is the uploader's rule: it judges sequences, not single images, so one
///    GPS glitch in a slow sequence does not drop it, and what the uploader accepted is never
///    dropped here;
/// 7. cut where two consecutive kept images are more than `cutoff_distance_meters` apart,
///    and after every `max_images` images.
///
/// Distances are haversine distances on a sphere of the Earth's mean radius (the uploader
/// uses chords on the WGS 84 ellipsoid; the two differ by well under 1%). The uploader cuts
/// at `max_images` before removing duplicates; here sequences are cut after, so a full
/// sequence has exactly `max_images` images.
pub fn cut(items: &[Metadata], rules: &CutRules) -> Cut {
    let mut groups: BTreeMap<CameraKey<'_>, Vec<usize>> = BTreeMap::new();
    for (index, item) in items.iter().enumerate() {
        groups.entry(CameraKey::of(item)).or_default().push(index);
    }
    let mut result = Cut::default();
    for mut group in groups.into_values() {
        group.sort_by_key(|&index| (items[index].captured_at, index));
        group.retain(|&index| {
            let item = &items[index];
            let null_island = item.latitude == 0.0 && item.longitude == 0.0;
            if null_island {
                result.dropped.push((index, DropReason::NullIsland));
            }
            !null_island
        });
        for piece in split_by_time(items, &group, rules.cutoff_time_seconds) {
            let kept = drop_duplicates(items, &piece, rules, &mut result.dropped);
            if let Some(speed_kmh) = average_speed_kmh(items, &kept)
                && speed_kmh > rules.max_speed_kmh
            {
                let reason = DropReason::TooFast { speed_kmh };
                result
                    .dropped
                    .extend(kept.iter().map(|&index| (index, reason.clone())));
                continue;
            }
            result
                .sequences
                .extend(split_by_distance_and_length(items, &kept, rules));
        }
    }
    result.sequences.sort_by_key(|sequence| {
        sequence
            .first()
            .map(|&index| (items[index].captured_at, index))
    });
    result.dropped.sort_by_key(|&(index, _)| index);
    result
}

/// What tells two cameras apart.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct CameraKey<'a> {
    camera_uuid: Option<&'a str>,
    make: Option<&'a str>,
    model: Option<&'a str>,
    width: u32,
    height: u32,
}

impl CameraKey<'_> {
    fn of(item: &Metadata) -> CameraKey<'_> {
        CameraKey {
            camera_uuid: item.camera_uuid.as_deref(),
            make: item.make.as_deref(),
            model: item.model.as_deref(),
            width: item.width,
            height: item.height,
        }
    }
}

/// `sorted` cut where consecutive images are more than `cutoff_seconds` apart.
fn split_by_time(items: &[Metadata], sorted: &[usize], cutoff_seconds: f64) -> Vec<Vec<usize>> {
    let mut pieces: Vec<Vec<usize>> = Vec::new();
    for &index in sorted {
        match pieces.last_mut() {
            Some(piece)
                if piece.last().is_some_and(|&previous| {
                    seconds_between(&items[previous], &items[index]) <= cutoff_seconds
                }) =>
            {
                piece.push(index);
            }
            _ => pieces.push(vec![index]),
        }
    }
    pieces
}

/// `piece` without the duplicates of the image kept before them, which go to `dropped`.
fn drop_duplicates(
    items: &[Metadata],
    piece: &[usize],
    rules: &CutRules,
    dropped: &mut Vec<(usize, DropReason)>,
) -> Vec<usize> {
    let mut kept: Vec<usize> = Vec::with_capacity(piece.len());
    for &index in piece {
        if let Some(&previous) = kept.last() {
            let (previous_item, item) = (&items[previous], &items[index]);
            let same_place =
                distance_meters(previous_item, item) <= rules.duplicate_distance_meters;
            let same_direction = match (previous_item.compass_angle, item.compass_angle) {
                (Some(a), Some(b)) => angle_between(a, b) <= rules.duplicate_angle_degrees,
                _ => true,
            };
            if same_place && same_direction {
                dropped.push((index, DropReason::Duplicate { of: previous }));
                continue;
            }
        }
        kept.push(index);
    }
    kept
}

/// The average speed over `piece`: `None` for fewer than 2 images or no time between the
/// first and the last.
fn average_speed_kmh(items: &[Metadata], piece: &[usize]) -> Option<f64> {
    let (&first, &last) = (piece.first()?, piece.last()?);
    let seconds = seconds_between(&items[first], &items[last]);
    if seconds <= 0.0 {
        return None;
    }
    let meters: f64 = piece
        .windows(2)
        .map(|pair| distance_meters(&items[pair[0]], &items[pair[1]]))
        .sum();
    Some(meters / seconds * 3.6)
}

/// `piece` cut where consecutive images are more than the cutoff distance apart and after
/// every `max_images`.
fn split_by_distance_and_length(
    items: &[Metadata],
    piece: &[usize],
    rules: &CutRules,
) -> Vec<Vec<usize>> {
    let max_images = rules.max_images.max(1);
    let mut sequences: Vec<Vec<usize>> = Vec::new();
    for &index in piece {
        match sequences.last_mut() {
            Some(sequence)
                if sequence.len() < max_images
                    && sequence.last().is_some_and(|&previous| {
                        distance_meters(&items[previous], &items[index])
                            <= rules.cutoff_distance_meters
                    }) =>
            {
                sequence.push(index);
            }
            _ => sequences.push(vec![index]),
        }
    }
    sequences
}

fn seconds_between(earlier: &Metadata, later: &Metadata) -> f64 {
    later.captured_at.seconds() - earlier.captured_at.seconds()
}

/// The difference of two compass angles, 0 to 180 degrees.
fn angle_between(a: f64, b: f64) -> f64 {
    let difference = (a - b).abs() % 360.0;
    if difference > 180.0 {
        360.0 - difference
    } else {
        difference
    }
}

/// The Earth's mean radius (IUGG), in metres.
const EARTH_RADIUS_METERS: f64 = 6_371_008.8;

/// The haversine distance between two images' positions.
pub(crate) fn distance_meters(a: &Metadata, b: &Metadata) -> f64 {
    let (latitude_a, latitude_b) = (a.latitude.to_radians(), b.latitude.to_radians());
    let half_latitude = (latitude_b - latitude_a) / 2.0;
    let half_longitude = (b.longitude - a.longitude).to_radians() / 2.0;
    let h = half_latitude.sin().powi(2)
        + latitude_a.cos() * latitude_b.cos() * half_longitude.sin().powi(2);
    2.0 * EARTH_RADIUS_METERS * h.sqrt().min(1.0).asin()
}
