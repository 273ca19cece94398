//! The spatial entries of the store's indexes: the boxes of images and sequences in their
//! R-trees, rounded outwards to `f32` so that a box always contains its exact locations.

use rstar::{AABB, RStarInsertionStrategy, RTreeObject, RTreeParams};

use crate::image_record::ImageRecord;

/// An image in the R-tree: the box around its original and computed locations (in `f32`,
/// widened outwards so it always contains both) and its index in the image table. One tree
/// serves both geometry variants; queries check the exact `f64` location afterwards.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ImageEntry {
    min: [f32; 2],
    max: [f32; 2],
    pub(crate) index: u32,
}

impl RTreeObject for ImageEntry {
    type Envelope = AABB<[f32; 2]>;

    fn envelope(&self) -> Self::Envelope {
        AABB::from_corners(self.min, self.max)
    }
}

impl ImageEntry {
    pub(crate) fn new(record: &ImageRecord, index: u32) -> Self {
        let mut min = [f32::INFINITY; 2];
        let mut max = [f32::NEG_INFINITY; 2];
        let mut add = |point: [f64; 2]| {
            for axis in 0..2 {
                min[axis] = min[axis].min(lower_f32(point[axis]));
                max[axis] = max[axis].max(upper_f32(point[axis]));
            }
        };
        add(record.geometry);
        if !record.computed_geometry[0].is_nan() {
            add(record.computed_geometry);
        }
        ImageEntry { min, max, index }
    }
}

/// Node sizes of the image R-tree: wider nodes than rstar's default (6) need fewer inner nodes
/// (each leaf entry takes rstar's 40-byte node either way), which saves memory, and bulk-loaded
/// trees of this width answer box queries as fast.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ImageTreeParams;

impl RTreeParams for ImageTreeParams {
    const MIN_SIZE: usize = 6;
    const MAX_SIZE: usize = 16;
    const REINSERTION_COUNT: usize = 4;
    type DefaultInsertionStrategy = RStarInsertionStrategy;
}

/// The largest `f32` not above `value`.
pub(crate) fn lower_f32(value: f64) -> f32 {
    let rounded = value as f32;
    if f64::from(rounded) > value {
        rounded.next_down()
    } else {
        rounded
    }
}

/// The smallest `f32` not below `value`.
pub(crate) fn upper_f32(value: f64) -> f32 {
    let rounded = value as f32;
    if f64::from(rounded) < value {
        rounded.next_up()
    } else {
        rounded
    }
}

/// A sequence in the sequence R-tree: the box around every location (both variants) of its
/// images.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SequenceEntry {
    pub(crate) min: [f32; 2],
    pub(crate) max: [f32; 2],
    pub(crate) index: u32,
}

impl RTreeObject for SequenceEntry {
    type Envelope = AABB<[f32; 2]>;

    fn envelope(&self) -> Self::Envelope {
        AABB::from_corners(self.min, self.max)
    }
}

impl SequenceEntry {
    pub(crate) fn around(records: impl Iterator<Item = ImageRecord>, index: u32) -> Option<Self> {
        let mut min = [f32::INFINITY; 2];
        let mut max = [f32::NEG_INFINITY; 2];
        let mut any = false;
        for record in records {
            any = true;
            for point in [record.geometry, record.computed_geometry] {
                if point[0].is_nan() {
                    continue;
                }
                for axis in 0..2 {
                    min[axis] = min[axis].min(lower_f32(point[axis]));
                    max[axis] = max[axis].max(upper_f32(point[axis]));
                }
            }
        }
        any.then_some(SequenceEntry { min, max, index })
    }
}
