//! What each write touched, so that a tile cache drops only the tiles a write changed instead
//! of everything: a short log of the areas written, keyed by the generation the write made.

use std::collections::{HashSet, VecDeque};

use crate::Store;
use crate::image_record::ImageRecord;

/// Which tile sets an area's change shows in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TouchedContent {
    /// Images and sequences: the coverage tile sets (both geometry variants).
    Coverage,
    /// Map features: the point and traffic sign tile sets.
    MapFeatures,
}

/// A lon/lat box a write changed (edges included), and which content changed there.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TouchedArea {
    /// What changed.
    pub content: TouchedContent,
    /// West edge, degrees.
    pub min_lon: f64,
    /// South edge, degrees.
    pub min_lat: f64,
    /// East edge, degrees.
    pub max_lon: f64,
    /// North edge, degrees.
    pub max_lat: f64,
}

impl TouchedArea {
    fn around(content: TouchedContent, points: impl IntoIterator<Item = [f64; 2]>) -> Option<Self> {
        let mut area = TouchedArea {
            content,
            min_lon: f64::INFINITY,
            min_lat: f64::INFINITY,
            max_lon: f64::NEG_INFINITY,
            max_lat: f64::NEG_INFINITY,
        };
        for [lon, lat] in points {
            if lon.is_nan() || lat.is_nan() {
                continue;
            }
            area.min_lon = area.min_lon.min(lon);
            area.min_lat = area.min_lat.min(lat);
            area.max_lon = area.max_lon.max(lon);
            area.max_lat = area.max_lat.max(lat);
        }
        (area.min_lon <= area.max_lon).then_some(area)
    }

    fn union(self, other: TouchedArea) -> TouchedArea {
        TouchedArea {
            content: self.content,
            min_lon: self.min_lon.min(other.min_lon),
            min_lat: self.min_lat.min(other.min_lat),
            max_lon: self.max_lon.max(other.max_lon),
            max_lat: self.max_lat.max(other.max_lat),
        }
    }
}

/// How many areas the log keeps; a cache further behind than that drops everything.
const LOG_AREAS: usize = 4096;
/// One write records at most this many areas of each content; more are merged into one box.
const AREAS_PER_WRITE: usize = 256;

/// The log of touched areas, oldest first.
#[derive(Debug, Default)]
pub(crate) struct ChangeLog {
    entries: VecDeque<(u64, TouchedArea)>,
    /// Writes up to this generation are no longer in the log.
    forgotten_through: u64,
}

impl ChangeLog {
    fn record(&mut self, generation: u64, areas: Vec<TouchedArea>) {
        let areas = if areas.len() > AREAS_PER_WRITE {
            let mut merged: Vec<TouchedArea> = Vec::new();
            for area in areas {
                match merged.iter_mut().find(|kept| kept.content == area.content) {
                    Some(kept) => *kept = kept.union(area),
                    None => merged.push(area),
                }
            }
            merged
        } else {
            areas
        };
        for area in areas {
            self.entries.push_back((generation, area));
        }
        while self.entries.len() > LOG_AREAS {
            if let Some((forgotten, _)) = self.entries.pop_front() {
                self.forgotten_through = self.forgotten_through.max(forgotten);
            }
        }
    }
}

impl Store {
    /// The areas that writes after `generation` touched, each with the generation of its
    /// write, oldest first; `None` when the log no longer reaches back that far (treat
    /// everything as changed). Writes that change no tile (creators, organizations,
    /// detections, sequences' own fields) record nothing.
    pub fn touched_since(&self, generation: u64) -> Option<Vec<(u64, TouchedArea)>> {
        if generation < self.changes.forgotten_through {
            return None;
        }
        Some(
            self.changes
                .entries
                .iter()
                .filter(|(written, _)| *written > generation)
                .copied()
                .collect(),
        )
    }

    /// Records that the write which made the current generation added the image records
    /// from `first_new` on: each sequence they joined changed along its whole length (its
    /// line, and its first image's properties).
    pub(crate) fn record_new_images(&mut self, first_new: usize) {
        let images = self.records.images();
        let sequences: HashSet<u32> = images[first_new..]
            .iter()
            .map(|record| record.sequence)
            .collect();
        let areas = sequences
            .into_iter()
            .filter_map(|sequence| {
                let members = &self.records.sequences().get(sequence as usize)?.members;
                TouchedArea::around(
                    TouchedContent::Coverage,
                    members.iter().flat_map(|&index| {
                        let record = &images[index as usize];
                        [record.geometry, record.computed_geometry]
                    }),
                )
            })
            .collect();
        let generation = self.generation();
        self.changes.record(generation, areas);
    }

    /// Records that the write which made the current generation took the images `removed`
    /// (their records as they were) out of view: each sequence they left changed along its
    /// whole length as it was, their own locations included.
    pub(crate) fn record_removed_images(
        &mut self,
        removed: &[(u32, ImageRecord)],
        touched: &[u32],
    ) {
        let images = self.records.images();
        let mut areas: Vec<TouchedArea> = touched
            .iter()
            .filter_map(|&sequence| {
                let members = &self.records.sequences().get(sequence as usize)?.members;
                let left = removed
                    .iter()
                    .filter(|(_, record)| record.sequence == sequence)
                    .flat_map(|(_, record)| [record.geometry, record.computed_geometry]);
                TouchedArea::around(
                    TouchedContent::Coverage,
                    members
                        .iter()
                        .flat_map(|&index| {
                            let record = &images[index as usize];
                            [record.geometry, record.computed_geometry]
                        })
                        .chain(left),
                )
            })
            .collect();
        // A map feature's properties name its images.
        areas.extend(removed.iter().filter_map(|(_, record)| {
            TouchedArea::around(
                TouchedContent::MapFeatures,
                [record.geometry, record.computed_geometry],
            )
        }));
        let generation = self.generation();
        self.changes.record(generation, areas);
    }

    /// Records that the write which made the current generation added the map features from
    /// `first_new` on.
    pub(crate) fn record_new_map_features(&mut self, first_new: usize) {
        let areas = self.records.map_features()[first_new..]
            .iter()
            .filter_map(|feature| {
                TouchedArea::around(
                    TouchedContent::MapFeatures,
                    [[feature.geometry.lon, feature.geometry.lat]],
                )
            })
            .collect();
        let generation = self.generation();
        self.changes.record(generation, areas);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn area(lon: f64) -> TouchedArea {
        TouchedArea {
            content: TouchedContent::Coverage,
            min_lon: lon,
            min_lat: 0.0,
            max_lon: lon,
            max_lat: 0.0,
        }
    }

    #[test]
    fn log_forgets_the_oldest_and_merges_large_writes() {
        let mut log = ChangeLog::default();
        log.record(
            1,
            (0..=AREAS_PER_WRITE)
                .map(|i| area(f64::from(u32::try_from(i).unwrap())))
                .collect(),
        );
        assert_eq!(log.entries.len(), 1);
        assert!(
            (log.entries[0].1.max_lon - f64::from(u32::try_from(AREAS_PER_WRITE).unwrap())).abs()
                < 1e-9
        );
        for generation in 2..=(LOG_AREAS as u64 + 1) {
            log.record(generation, vec![area(0.0)]);
        }
        assert_eq!(log.entries.len(), LOG_AREAS);
        assert_eq!(log.forgotten_through, 1);
    }
}
