//! Areas: sequences of own imagery whose images lie within `area_metres` of each other (two
//! walks crossing a square, a drive recorded in two sequences) are reconstructed by one job,
//! so that the engine sees them together and `merge_cc` joins them where it matched them. A
//! job claimed for one sequence takes its area along: the sequences near it, and the ones
//! near those, up to [`MAX_AREA_SEQUENCES`] sequences and [`MAX_AREA_IMAGES`] images.
//!
//! How an area is split (`plan.rs`): a small area is one engine run over all its images,
//! matched along each sequence and, across them, with each image's nearest neighbours by GPS
//! position; a larger one is each sequence's own overlapping parts plus a *crossing part* per
//! place where two sequences come near each other (a few images of each around their closest
//! approach, matched across), whose model shares images with both sequences' parts and so
//! joins their components.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::PoisonError;

use streetlevel_model::{Image, SequenceId};
use streetlevel_store::{BoundingBox, ImageFilter};

use super::Reconstructor;
use crate::SfmError;

/// An area takes at most this many sequences…
pub(super) const MAX_AREA_SEQUENCES: usize = 16;
/// …and at most this many images (a sequence that would pass it is left to its own job).
pub(super) const MAX_AREA_IMAGES: usize = 3000;

/// Images searched around at a time when looking for neighbours (their box, grown by the
/// area's distance, is one search of the store's spatial index).
const SEARCH_RUN: usize = 16;

/// Metres per degree of latitude (a sphere of the Earth's mean radius).
const METRES_PER_DEGREE: f64 = 6_371_000.0 * std::f64::consts::PI / 180.0;

impl Reconstructor {
    /// The sequences reconstructed with `lead` (itself among them), by key, with their
    /// images (public and hidden, in capture order); only `lead` when areas are off or
    /// nothing of own imagery lies near it.
    pub(super) fn area(&self, lead: &str) -> Result<Vec<(String, Vec<Image>)>, SfmError> {
        let distance = self.settings.area_metres;
        let store = self.store.read().unwrap_or_else(PoisonError::into_inner);
        let lead_images = store.sequence_images_held(&SequenceId(lead.to_owned()));
        if distance <= 0.0 || lead_images.is_empty() {
            return Ok(vec![(lead.to_owned(), lead_images)]);
        }
        drop(store);
        // Own imagery: sequences with a job, or with an image never reconstructed (the
        // original service's imagery has its meshes and no job).
        let mut own: HashSet<String> = self
            .queue
            .jobs()?
            .into_iter()
            .map(|job| job.sequence)
            .collect();
        let store = self.store.read().unwrap_or_else(PoisonError::into_inner);
        own.extend(
            store
                .sequence_summaries()
                .into_iter()
                .filter(|summary| summary.without_mesh > 0)
                .map(|summary| summary.sequence.0),
        );
        let mut total = lead_images.len();
        let mut members: BTreeMap<String, Vec<Image>> = BTreeMap::new();
        let mut frontier = vec![(lead.to_owned(), lead_images)];
        let mut seen: BTreeSet<String> = BTreeSet::from([lead.to_owned()]);
        while let Some((sequence, images)) = frontier.pop() {
            for candidate in nearby_sequences(&store, &images, distance) {
                if members.len() + 1 >= MAX_AREA_SEQUENCES {
                    break;
                }
                if !own.contains(&candidate) || !seen.insert(candidate.clone()) {
                    continue;
                }
                let theirs = store.sequence_images_held(&SequenceId(candidate.clone()));
                if theirs.is_empty()
                    || total + theirs.len() > MAX_AREA_IMAGES
                    || !within(&images, &theirs, distance)
                {
                    continue;
                }
                total += theirs.len();
                frontier.push((candidate.clone(), theirs.clone()));
                members.insert(candidate, theirs);
            }
            members.entry(sequence).or_insert(images);
        }
        Ok(members.into_iter().collect())
    }
}

/// The sequences with a public image within `distance` metres of the box of some run of
/// `images` (candidates: [`within`] says whether they really come that near).
fn nearby_sequences(
    store: &streetlevel_store::Store,
    images: &[Image],
    distance: f64,
) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for run in images.chunks(SEARCH_RUN) {
        let (mut west, mut south, mut east, mut north) = (180.0, 90.0, -180.0, -90.0_f64);
        for image in run {
            west = f64::min(west, image.geometry.lon);
            east = f64::max(east, image.geometry.lon);
            south = f64::min(south, image.geometry.lat);
            north = f64::max(north, image.geometry.lat);
        }
        let grow_lat = distance / METRES_PER_DEGREE;
        let grow_lon = grow_lat / north.abs().max(south.abs()).to_radians().cos().max(0.01);
        let Ok(bbox) = BoundingBox::new(
            (west - grow_lon).max(-180.0),
            (south - grow_lat).max(-90.0),
            (east + grow_lon).min(180.0),
            (north + grow_lat).min(90.0),
        ) else {
            continue;
        };
        let filter = ImageFilter {
            bbox: Some(bbox),
            ..ImageFilter::default()
        };
        let mut after = None;
        loop {
            let page = store.search_images(&filter, 2000, after);
            found.extend(page.items.into_iter().map(|image| image.sequence.0));
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
    }
    found
}

/// The horizontal distance between two positions (metres; exact enough over a street).
pub(super) fn metres(a: &Image, b: &Image) -> f64 {
    let north = (b.geometry.lat - a.geometry.lat) * METRES_PER_DEGREE;
    let east = (b.geometry.lon - a.geometry.lon)
        * METRES_PER_DEGREE
        * f64::midpoint(a.geometry.lat, b.geometry.lat)
            .to_radians()
            .cos();
    north.hypot(east)
}

/// Whether some image of `a` lies within `distance` metres of some image of `b`.
fn within(a: &[Image], b: &[Image], distance: f64) -> bool {
    a.iter()
        .any(|one| b.iter().any(|other| metres(one, other) <= distance))
}

/// The crossing parts of an area split into parts: for each two sequences (`ranges`: each
/// one's images in the plan, `positions` their east and north) and each place where they come
/// within `distance` metres of each other (contacts further apart along the first sequence
/// than two windows are separate places), the `window` images of each on either side of
/// their closest approach there.
pub(super) fn crossing_parts(
    positions: &[[f64; 2]],
    ranges: &[std::ops::Range<usize>],
    distance: f64,
    window: usize,
) -> Vec<Vec<usize>> {
    let mut parts = Vec::new();
    for (index, first) in ranges.iter().enumerate() {
        for second in &ranges[index + 1..] {
            // Each image of the first with its nearest image of the second, when near.
            let contacts: Vec<(usize, usize, f64)> = first
                .clone()
                .filter_map(|one| {
                    second
                        .clone()
                        .map(|other| {
                            let (p, q) = (positions[one], positions[other]);
                            (other, (p[0] - q[0]).hypot(p[1] - q[1]))
                        })
                        .min_by(|a, b| a.1.total_cmp(&b.1))
                        .filter(|&(_, metres)| metres <= distance)
                        .map(|(other, metres)| (one, other, metres))
                })
                .collect();
            let mut places: Vec<(usize, usize, f64)> = Vec::new();
            for contact in contacts {
                match places.last_mut() {
                    Some(place) if contact.0 <= place.0 + 2 * window => {
                        if contact.2 < place.2 {
                            *place = contact;
                        }
                    }
                    _ => places.push(contact),
                }
            }
            for (one, other, _) in places {
                let around = |at: usize, range: &std::ops::Range<usize>| {
                    at.saturating_sub(window).max(range.start)..(at + window + 1).min(range.end)
                };
                parts.push(around(one, first).chain(around(other, second)).collect());
            }
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Positions along a straight line from `start`, `step` metres apart, heading `toward`.
    fn walk(start: [f64; 2], toward: [f64; 2], step: f64, count: u32) -> Vec<[f64; 2]> {
        (0..count)
            .map(|index| {
                let along = step * f64::from(index);
                [start[0] + toward[0] * along, start[1] + toward[1] * along]
            })
            .collect()
    }

    #[test]
    fn two_walks_crossing_get_one_crossing_part_around_the_crossing() {
        // One walk east through (0, 0), one north through it: their 10th images meet.
        let mut positions = walk([-40.0, 0.0], [1.0, 0.0], 4.0, 21);
        positions.extend(walk([0.0, -40.0], [0.0, 1.0], 4.0, 21));
        let parts = crossing_parts(&positions, &[0..21, 21..42], 25.0, 5);
        assert_eq!(parts.len(), 1, "{parts:?}");
        let expected: Vec<usize> = (5..=15).chain(26..=36).collect();
        assert_eq!(parts[0], expected);
    }

    #[test]
    fn walks_further_apart_than_the_distance_get_none_and_two_visits_get_two() {
        let mut positions = walk([0.0, 0.0], [1.0, 0.0], 4.0, 20);
        positions.extend(walk([0.0, 30.0], [1.0, 0.0], 4.0, 20));
        assert!(crossing_parts(&positions, &[0..20, 20..40], 25.0, 5).is_empty());
        // A walk out and back along a street another walk crosses: two places, far apart
        // along the first walk.
        let mut positions = walk([-60.0, 0.0], [1.0, 0.0], 4.0, 31);
        positions.extend(walk([60.0, 2.0], [-1.0, 0.0], 4.0, 31));
        positions.extend(walk([0.0, -60.0], [0.0, 1.0], 4.0, 31));
        let parts = crossing_parts(&positions, &[0..62, 62..93], 10.0, 3);
        assert_eq!(parts.len(), 2, "{parts:?}");
        assert_eq!(parts[0][..7], [12, 13, 14, 15, 16, 17, 18]);
        assert_eq!(parts[1][..7], [43, 44, 45, 46, 47, 48, 49]);
        for part in &parts {
            assert_eq!(part[7..], [74, 75, 76, 77, 78, 79, 80]);
        }
    }
}
