//! The overview pyramid: for each zoom 0–5 and geometry variant, the lowest image ID of every
//! global overview cell and how many public images (and panoramas) the cell holds, so that an
//! overview tile reads about `OVERVIEW_GRID²` entries instead of projecting every image under
//! it.
//!
//! The answer must equal the scan's (project each image into the tile, round to integer
//! tile-local units, keep the lowest ID per cell of [`OVERVIEW_GRID`] × `OVERVIEW_GRID` and
//! count the cell's images). At
//! extent 4096 a cell is 64 units, and a tile's origin lies on a multiple of 64 global units,
//! so a tile's cells are global cells, with two exceptions on the first unit of a cell: the
//! buffer edges (a point half a unit before the edge rounds onto it but lies outside), and
//! negative tile-local coordinates, which round half away from zero (−0.5 becomes −1, the
//! previous cell). Points on a cell's first unit therefore carry a class per axis saying where
//! they lie against that unit, and each (cell, class) pair keeps its own lowest ID and counts;
//! a tile cell's count is the sum over the pairs that land in it. Lowest-ID minima and sums do
//! not depend on insertion order, so batches merge into the pyramid in any order. Only public
//! images are added: a hidden image given new values (a reconstruction) takes a new slot but
//! stays out.
//!
//! Zoom levels are computed each from the locations, not from the next finer one: rounding at
//! zoom z is not a function of the rounded coordinates at z+1.
//!
//! Removing images (erasure, hiding) keeps the same answer: each removed image is taken off
//! its keys' counts; a key left with no image is dropped, and one whose lowest ID was a removed
//! image takes the lowest ID among the images still indexed whose location has that key, found
//! through the image R-tree in the cell's box (widened by a unit, and to the poles and the
//! antimeridian on the world's edges).

use std::cmp::Ordering;

use num_traits::ToPrimitive as _;

use streetlevel_mvt::{
    DEFAULT_EXTENT, ProjectionConfig, TileId, lon_lat_to_world, world_to_lon_lat,
};

use crate::image_record::{GeometryVariant, ImageRecord, slot};
use crate::indexes::{Indexes, lower_f32, upper_f32};
use crate::records::Records;
use crate::sequence_lines::SequenceLines;

/// Overview tiles keep at most one image per cell of a grid this many cells wide across the
/// tile (plus the buffer), so a tile never holds much more than `OVERVIEW_GRID²` points.
pub const OVERVIEW_GRID: u32 = 64;

/// The zooms the pyramid answers: 0 to 5.
pub(crate) const PYRAMID_ZOOMS: usize = 6;

/// Tile-local units per overview cell at the default extent.
const CELL_UNITS: u32 = DEFAULT_EXTENT / OVERVIEW_GRID;
/// [`CELL_UNITS`] for arithmetic on signed tile-local units.
const CELL: i64 = CELL_UNITS as i64;

/// The widest buffer answered from the pyramid (larger ones scan): below half a tile the
/// tile-local subtraction in the projector is exact, which the classes rely on.
const MAX_BUFFER: u32 = 1024;

/// Where a point lies against its rounded unit, recorded only when that unit is the first of
/// its cell (elsewhere rounding and clipping cannot move it out of its cell).
const PLAIN: u32 = 0;
/// Exactly half a unit before the unit (rounds up, but half away from zero when negative).
const HALF_BEFORE: u32 = 1;
/// Less than half a unit before it.
const BEFORE: u32 = 2;
/// Exactly on it.
const ON: u32 = 3;
/// After it.
const AFTER: u32 = 4;

/// Packs a global cell and the two classes: row (12 bits), column (12 bits), row class,
/// column class (3 bits each). Sorting on the key groups a row's cells by column.
fn pack(column: u32, row: u32, column_class: u32, row_class: u32) -> u32 {
    (row << 18) | (column << 6) | (row_class << 3) | column_class
}

fn unpack(key: u32) -> (u32, u32, u32, u32) {
    ((key >> 6) & 0xfff, key >> 18, key & 7, (key >> 3) & 7)
}

/// The global cell and class of one coordinate in global units, or `None` outside the world
/// square (which valid locations never reach).
fn axis(global: f64, world_units: f64) -> Option<(u32, u32)> {
    let rounded = global.round();
    if !(0.0..=world_units).contains(&rounded) {
        return None;
    }
    let unit = rounded.to_u32()?;
    let column = unit / CELL_UNITS;
    // `partial_cmp` so that −0.0 counts as on 0, as the projector's clip test has it.
    let class = if i64::from(unit) % CELL != 0 {
        PLAIN
    } else if (rounded - global).partial_cmp(&0.5) == Some(Ordering::Equal) {
        HALF_BEFORE
    } else {
        match global.partial_cmp(&rounded) {
            Some(Ordering::Less) => BEFORE,
            Some(Ordering::Equal) => ON,
            _ => AFTER,
        }
    };
    Some((column, class))
}

/// The tile-local cell (−b ..= 64 + b) of a point in the global cell `local` cells from the
/// tile's origin with class `class`, or `None` when it lies outside the buffered tile.
fn local_cell(local: i64, class: u32, buffer_cells: i64) -> Option<i64> {
    let grid = i64::from(OVERVIEW_GRID);
    if class == PLAIN {
        return (-buffer_cells..grid + buffer_cells)
            .contains(&local)
            .then_some(local);
    }
    let unit = local * CELL;
    let buffer = buffer_cells * CELL;
    let far = grid * CELL + buffer;
    let inside = if unit == -buffer {
        matches!(class, ON | AFTER)
    } else if unit == far {
        matches!(class, HALF_BEFORE | BEFORE | ON)
    } else {
        unit > -buffer && unit < far
    };
    if !inside {
        return None;
    }
    // Negative tile-local coordinates round half away from zero: −k−0.5 becomes −k−1.
    Some(if class == HALF_BEFORE && unit <= 0 {
        local - 1
    } else {
        local
    })
}

/// What a (cell, class) key holds: the index of its image with the lowest ID, and how many
/// public images and panoramas have that key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    image: u32,
    images: u32,
    panoramas: u32,
}

impl Entry {
    /// The entry of one image.
    fn of(index: u32, is_pano: bool) -> Self {
        Entry {
            image: index,
            images: 1,
            panoramas: u32::from(is_pano),
        }
    }

    /// Both entries' images together, keeping the lower ID.
    fn join(self, other: Entry, id_of: &impl Fn(u32) -> u64) -> Entry {
        Entry {
            image: if id_of(other.image) < id_of(self.image) {
                other.image
            } else {
                self.image
            },
            images: self.images + other.images,
            panoramas: self.panoramas + other.panoramas,
        }
    }
}

/// How many images, and of them panoramas, one overview point stands for: every public image
/// in its tile cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CellCount {
    /// The images in the cell (`count`).
    pub images: u32,
    /// The panoramas among them (`pano_count`).
    pub panoramas: u32,
}

/// One zoom and variant: sorted keys with their entries.
#[derive(Debug, Default)]
struct Level {
    keys: Vec<u32>,
    entries: Vec<Entry>,
}

impl Level {
    /// Merges candidates `(key, entry)` (any order, repeats allowed), joining entries of the
    /// same key.
    fn merge(&mut self, mut fresh: Vec<(u32, Entry)>, id_of: &impl Fn(u32) -> u64) {
        if fresh.is_empty() {
            return;
        }
        fresh.sort_unstable_by_key(|&(key, _)| key);
        let mut joined: Vec<(u32, Entry)> = Vec::with_capacity(fresh.len());
        for (key, entry) in fresh {
            match joined.last_mut() {
                Some((last, kept)) if *last == key => *kept = kept.join(entry, id_of),
                _ => joined.push((key, entry)),
            }
        }
        let total = self.keys.len() + joined.len();
        let mut keys = Vec::with_capacity(total);
        let mut entries = Vec::with_capacity(total);
        let mut old = self.keys.iter().copied().zip(self.entries.iter().copied());
        let mut new = joined.into_iter();
        let mut next_old = old.next();
        let mut next_new = new.next();
        loop {
            let (key, entry) = match (next_old, next_new) {
                (Some((key, entry)), Some((fresh_key, fresh_entry))) => match key.cmp(&fresh_key) {
                    Ordering::Less => {
                        next_old = old.next();
                        (key, entry)
                    }
                    Ordering::Greater => {
                        next_new = new.next();
                        (fresh_key, fresh_entry)
                    }
                    Ordering::Equal => {
                        next_old = old.next();
                        next_new = new.next();
                        (key, entry.join(fresh_entry, id_of))
                    }
                },
                (Some(old_pair), None) => {
                    next_old = old.next();
                    old_pair
                }
                (None, Some(new_pair)) => {
                    next_new = new.next();
                    new_pair
                }
                (None, None) => break,
            };
            keys.push(key);
            entries.push(entry);
        }
        keys.shrink_to_fit();
        entries.shrink_to_fit();
        self.keys = keys;
        self.entries = entries;
    }

    fn bytes(&self) -> usize {
        self.keys.capacity() * std::mem::size_of::<u32>()
            + self.entries.capacity() * std::mem::size_of::<Entry>()
    }
}

/// Candidates of one zoom and variant while a batch is read: consecutive images usually share
/// a cell (sequences are walked in order), so only runs are kept.
#[derive(Default)]
struct Runs {
    current: Option<(u32, Entry)>,
    done: Vec<(u32, Entry)>,
}

impl Runs {
    fn add(&mut self, key: u32, entry: Entry, id_of: &impl Fn(u32) -> u64) {
        match &mut self.current {
            Some((current, kept)) if *current == key => *kept = kept.join(entry, id_of),
            _ => {
                if let Some(current) = self.current.replace((key, entry)) {
                    self.done.push(current);
                }
            }
        }
    }

    fn finish(mut self) -> Vec<(u32, Entry)> {
        self.done.extend(self.current.take());
        self.done
    }
}

/// The pyramid of both variants (see the module documentation), and the precomputed
/// sequence lines of z6–11 (see `sequence_lines.rs`): everything the store keeps for cheap
/// low-zoom tiles, up to date after each batch of images.
#[derive(Debug, Default)]
pub(crate) struct OverviewPyramid {
    pyramid: Pyramid,
    /// Simplified sequence lines for z6–11.
    sequence_lines: SequenceLines,
}

/// Batches of at least this many images update the pyramid and the sequence lines on two
/// threads.
const PARALLEL_BATCH: usize = 50_000;

/// The lowest IDs and counts per cell.
#[derive(Debug)]
struct Pyramid {
    /// `levels[zoom * 2 + variant]`, variant 0 original, 1 computed.
    levels: Vec<Level>,
    /// False once a location fell outside the world square; queries then scan.
    exact: bool,
}

impl Default for Pyramid {
    fn default() -> Self {
        Pyramid {
            levels: (0..PYRAMID_ZOOMS * 2).map(|_| Level::default()).collect(),
            exact: true,
        }
    }
}

fn variant_slot(variant: GeometryVariant) -> usize {
    match variant {
        GeometryVariant::Original => 0,
        GeometryVariant::Computed => 1,
    }
}

/// The global units across the world at `zoom` (the projector's scale).
fn world_units(zoom: usize) -> f64 {
    f64::from(1u32 << zoom) * f64::from(DEFAULT_EXTENT)
}

impl OverviewPyramid {
    /// Adds images `first_new..` of `records` (an image's index is its position), members
    /// of the sequences `touched`, once those sequences' member lists are sorted.
    pub(crate) fn add(&mut self, records: &Records, first_new: usize, touched: &[u32]) {
        let images = records.images();
        let Some(new) = images.get(first_new..) else {
            return;
        };
        if new.is_empty() {
            return;
        }
        let lines = &mut self.sequence_lines;
        let pyramid = &mut self.pyramid;
        if new.len() >= PARALLEL_BATCH {
            std::thread::scope(|scope| {
                scope.spawn(|| lines.update(records, touched));
                pyramid.add(images, first_new);
            });
        } else {
            lines.update(records, touched);
            pyramid.add(images, first_new);
        }
    }

    /// Takes the image slots `removed` (with their records as they were) out of the pyramid
    /// and recomputes the lines of the sequences `touched`, once the records' lists and the
    /// `indexes` no longer hold the slots.
    pub(crate) fn remove(
        &mut self,
        records: &Records,
        indexes: &Indexes,
        removed: &[(u32, ImageRecord)],
        touched: &[u32],
    ) {
        self.sequence_lines.update(records, touched);
        self.pyramid.remove(records, indexes, removed);
    }

    /// The overview of `tile` as `(id, index, cell count)` in ID order, or `None` when the
    /// pyramid cannot answer exactly (zoom above 5, another extent, a buffer that is not whole
    /// cells).
    pub(crate) fn tile(
        &self,
        tile: TileId,
        config: &ProjectionConfig,
        variant: GeometryVariant,
        id_of: impl Fn(u32) -> u64,
    ) -> Option<Vec<(u64, u32, CellCount)>> {
        self.pyramid.tile(tile, config, variant, id_of)
    }

    /// Heap bytes held by the pyramid (without the sequence lines).
    pub(crate) fn bytes(&self) -> usize {
        self.pyramid.bytes()
    }

    /// The precomputed sequence lines.
    pub(crate) fn sequence_lines(&self) -> &SequenceLines {
        &self.sequence_lines
    }
}

impl Pyramid {
    fn add(&mut self, images: &[ImageRecord], first_new: usize) {
        let new = &images[first_new..];
        let id_of = |index: u32| images[index as usize].id;
        let mut runs: Vec<Runs> = (0..PYRAMID_ZOOMS * 2).map(|_| Runs::default()).collect();
        let mut exact = true;
        for (offset, record) in new.iter().enumerate() {
            // A hidden image given new values takes a new slot but stays out of view.
            if !record.is_visible() {
                continue;
            }
            let index = slot(first_new + offset);
            let entry = Entry::of(index, record.is_pano());
            let original = GeometryVariant::Original.point(record);
            let computed = GeometryVariant::Computed.point(record);
            let original_world = lon_lat_to_world(original[0], original[1]);
            let computed_world = if computed.map(f64::to_bits) == original.map(f64::to_bits) {
                original_world
            } else {
                lon_lat_to_world(computed[0], computed[1])
            };
            for (slot, (world_x, world_y)) in
                [original_world, computed_world].into_iter().enumerate()
            {
                for zoom in 0..PYRAMID_ZOOMS {
                    let units = world_units(zoom);
                    match (axis(world_x * units, units), axis(world_y * units, units)) {
                        (Some((column, column_class)), Some((row, row_class))) => runs
                            [zoom * 2 + slot]
                            .add(pack(column, row, column_class, row_class), entry, &id_of),
                        _ => exact = false,
                    }
                }
            }
        }
        for (level, runs) in self.levels.iter_mut().zip(runs) {
            level.merge(runs.finish(), &id_of);
        }
        self.exact &= exact;
    }

    fn remove(&mut self, records: &Records, indexes: &Indexes, removed: &[(u32, ImageRecord)]) {
        let variants = [GeometryVariant::Original, GeometryVariant::Computed];
        // The keys whose lowest ID was a removed image, per level; every key a removed image
        // had loses it from its counts.
        let mut orphaned: Vec<Vec<u32>> = vec![Vec::new(); self.levels.len()];
        for (slot, record) in removed {
            for (variant_index, variant) in variants.into_iter().enumerate() {
                let [lon, lat] = variant.point(record);
                let (world_x, world_y) = lon_lat_to_world(lon, lat);
                for zoom in 0..PYRAMID_ZOOMS {
                    let units = world_units(zoom);
                    let (Some((column, column_class)), Some((row, row_class))) =
                        (axis(world_x * units, units), axis(world_y * units, units))
                    else {
                        continue;
                    };
                    let key = pack(column, row, column_class, row_class);
                    let level = &mut self.levels[zoom * 2 + variant_index];
                    let Ok(position) = level.keys.binary_search(&key) else {
                        continue;
                    };
                    let entry = &mut level.entries[position];
                    entry.images = entry.images.saturating_sub(1);
                    if record.is_pano() {
                        entry.panoramas = entry.panoramas.saturating_sub(1);
                    }
                    if entry.image == *slot || entry.images == 0 {
                        orphaned[zoom * 2 + variant_index].push(key);
                    }
                }
            }
        }
        let images = records.images();
        for (level_index, mut keys) in orphaned.into_iter().enumerate() {
            if keys.is_empty() {
                continue;
            }
            keys.sort_unstable();
            keys.dedup();
            let zoom = level_index / 2;
            let variant = variants[level_index % 2];
            let units = world_units(zoom);
            let level = &mut self.levels[level_index];
            let mut dropped = std::collections::HashSet::new();
            for key in keys {
                let Ok(position) = level.keys.binary_search(&key) else {
                    continue;
                };
                if level.entries[position].images == 0 {
                    dropped.insert(position);
                    continue;
                }
                let lowest = cell_candidates(indexes, key, units)
                    .filter(|&index| {
                        let [lon, lat] = variant.point(&images[index as usize]);
                        let (world_x, world_y) = lon_lat_to_world(lon, lat);
                        matches!(
                            (axis(world_x * units, units), axis(world_y * units, units)),
                            (Some((column, column_class)), Some((row, row_class)))
                                if pack(column, row, column_class, row_class) == key
                        )
                    })
                    .min_by_key(|&index| images[index as usize].id);
                match lowest {
                    Some(index) => level.entries[position].image = index,
                    // Counts say an image is left, the index says none: cannot happen while
                    // both see the same images; the key goes rather than point at a gone one.
                    None => {
                        dropped.insert(position);
                    }
                }
            }
            if !dropped.is_empty() {
                let (keys, entries): (Vec<u32>, Vec<Entry>) = level
                    .keys
                    .iter()
                    .zip(&level.entries)
                    .enumerate()
                    .filter(|(position, _)| !dropped.contains(position))
                    .map(|(_, (&key, &entry))| (key, entry))
                    .unzip();
                level.keys = keys;
                level.entries = entries;
            }
        }
    }

    fn tile(
        &self,
        tile: TileId,
        config: &ProjectionConfig,
        variant: GeometryVariant,
        id_of: impl Fn(u32) -> u64,
    ) -> Option<Vec<(u64, u32, CellCount)>> {
        let zoom = usize::from(tile.z());
        if !self.exact
            || zoom >= PYRAMID_ZOOMS
            || config.extent != DEFAULT_EXTENT
            || i64::from(config.buffer) % CELL != 0
            || config.buffer > MAX_BUFFER
        {
            return None;
        }
        let level = &self.levels[zoom * 2 + variant_slot(variant)];
        let buffer_cells = i64::from(config.buffer) / CELL;
        let grid = i64::from(OVERVIEW_GRID);
        let last = grid << zoom;
        let origin_x = i64::from(tile.x()) * grid;
        let origin_y = i64::from(tile.y()) * grid;
        let span = grid + 2 * buffer_cells + 1;
        let mut best: Vec<Option<(u64, u32, CellCount)>> =
            vec![None; usize::try_from(span * span).ok()?];
        let first_column = (origin_x - buffer_cells).max(0);
        let last_column = (origin_x + grid + buffer_cells).min(last);
        for row in (origin_y - buffer_cells).max(0)..=(origin_y + grid + buffer_cells).min(last) {
            // All three at least 0 and at most `last`, 12 bits.
            let (first_column, last_column, row) = (
                u32::try_from(first_column).ok()?,
                u32::try_from(last_column).ok()?,
                u32::try_from(row).ok()?,
            );
            let low = pack(first_column, row, 0, 0);
            let high = pack(last_column, row, 7, 7);
            let start = level.keys.partition_point(|&key| key < low);
            let end = level.keys.partition_point(|&key| key <= high);
            for (&key, entry) in level.keys[start..end]
                .iter()
                .zip(&level.entries[start..end])
            {
                let (column, row, column_class, row_class) = unpack(key);
                let local_x = i64::from(column) - origin_x;
                let Some(x) = local_cell(local_x, column_class, buffer_cells) else {
                    continue;
                };
                let Some(y) = local_cell(i64::from(row) - origin_y, row_class, buffer_cells) else {
                    continue;
                };
                // `local_cell` keeps `x` and `y` within the buffer: never negative.
                let slot = &mut best
                    [usize::try_from((y + buffer_cells) * span + x + buffer_cells).ok()?];
                let id = id_of(entry.image);
                let (kept_id, kept_index, count) =
                    slot.get_or_insert((id, entry.image, CellCount::default()));
                if id < *kept_id {
                    (*kept_id, *kept_index) = (id, entry.image);
                }
                count.images += entry.images;
                count.panoramas += entry.panoramas;
            }
        }
        let mut chosen: Vec<(u64, u32, CellCount)> = best.into_iter().flatten().collect();
        chosen.sort_unstable_by_key(|&(id, _, _)| id);
        Some(chosen)
    }

    fn bytes(&self) -> usize {
        self.levels.iter().map(Level::bytes).sum::<usize>()
            + self.levels.capacity() * std::mem::size_of::<Level>()
    }
}

/// The indexed image slots whose box meets the global cell of `key` at a zoom of `units`
/// global units across the world, widened by a unit (rounding moves a point by half of one)
/// and, on the world's edges, to the poles and the antimeridian (locations beyond the
/// projection's latitude limit are clamped onto its edge rows).
fn cell_candidates(indexes: &Indexes, key: u32, units: f64) -> impl Iterator<Item = u32> + '_ {
    let (column, row, _, _) = unpack(key);
    let cell = f64::from(CELL_UNITS);
    let west = (f64::from(column) * cell - 1.0) / units;
    let east = (f64::from(column + 1) * cell + 1.0) / units;
    let north = (f64::from(row) * cell - 1.0) / units;
    let south = (f64::from(row + 1) * cell + 1.0) / units;
    let (min_lon, max_lat) = world_to_lon_lat(west.clamp(0.0, 1.0), north.clamp(0.0, 1.0));
    let (max_lon, min_lat) = world_to_lon_lat(east.clamp(0.0, 1.0), south.clamp(0.0, 1.0));
    let min_lon = if west <= 0.0 { -180.0 } else { min_lon };
    let max_lon = if east >= 1.0 { 180.0 } else { max_lon };
    let max_lat = if north <= 0.0 { 90.0 } else { max_lat };
    let min_lat = if south >= 1.0 { -90.0 } else { min_lat };
    let envelope = rstar::AABB::from_corners(
        [lower_f32(min_lon), lower_f32(min_lat)],
        [upper_f32(max_lon), upper_f32(max_lat)],
    );
    indexes
        .images_meeting(&envelope)
        .collect::<Vec<u32>>()
        .into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        for (column, row, column_class, row_class) in [
            (0, 0, 0, 0),
            (2048, 2048, 4, 4),
            (17, 2000, 3, 1),
            (4095, 4095, 7, 7),
        ] {
            let key = pack(column, row, column_class, row_class);
            assert_eq!(unpack(key), (column, row, column_class, row_class));
        }
    }

    #[test]
    fn first_units_of_cells_get_classes() {
        assert_eq!(axis(127.5, 4096.0), Some((2, HALF_BEFORE)));
        assert_eq!(axis(127.7, 4096.0), Some((2, BEFORE)));
        assert_eq!(axis(128.0, 4096.0), Some((2, ON)));
        assert_eq!(axis(128.2, 4096.0), Some((2, AFTER)));
        assert_eq!(axis(130.0, 4096.0), Some((2, PLAIN)));
        assert_eq!(axis(4096.6, 4096.0), None);
    }

    #[test]
    fn buffer_edges_and_negative_halves() {
        // No buffer: the tile's first unit excludes points before it, the last unit (4096)
        // keeps points up to it.
        assert_eq!(local_cell(0, BEFORE, 0), None);
        assert_eq!(local_cell(0, ON, 0), Some(0));
        assert_eq!(local_cell(64, BEFORE, 0), Some(64));
        assert_eq!(local_cell(64, AFTER, 0), None);
        assert_eq!(local_cell(64, PLAIN, 0), None);
        // One cell of buffer: −0.5 rounds to −1, the previous cell.
        assert_eq!(local_cell(0, HALF_BEFORE, 1), Some(-1));
        assert_eq!(local_cell(0, BEFORE, 1), Some(0));
        assert_eq!(local_cell(-1, HALF_BEFORE, 1), None);
        assert_eq!(local_cell(-1, ON, 1), Some(-1));
        assert_eq!(local_cell(-2, PLAIN, 1), None);
    }
}
