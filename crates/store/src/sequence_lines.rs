//! Sequence lines simplified ahead of time for the sequence tiles of z6–11, where a tile
//! holds thousands of sequences and projecting, clipping and simplifying every image of each
//! on request took 0.1–0.4 s at 1M images.
//!
//! For each sequence of at least [`MIN_MEMBERS`] images, each variant and each zoom, this
//! keeps the positions (in capture order) of the vertices that simplification keeps, computed
//! on the whole line in global units at that zoom (`world × 2^z × extent`). A tile's
//! tile-local coordinates are global units minus the tile's origin, an exact subtraction
//! there, and simplification (radial pass and Ramer–Douglas–Peucker) only compares vertex
//! differences, which that subtraction leaves unchanged: so for a sequence lying wholly inside
//! the buffered tile (nothing to clip) the tile keeps exactly these vertices, and a query
//! only projects and rounds them. Sequences that cross the tile's edge, short ones, other
//! extents and tolerances go the full way.
//!
//! Exactness rests on the projector's `y` being the exact Mercator formula: `streetlevel-mvt`'s
//! fast projection replaces it near a tile by a polynomial within about 1e-9 units, so since
//! then a tile can keep other vertices than these only when one of simplification's distance
//! comparisons lies within that of a tie (the proptests, comparing with the full path on random
//! walks, have not met one).

use streetlevel_mvt::geo::{Coord, LineString};
use streetlevel_mvt::simplify::{DEFAULT_TOLERANCE, simplify_line_string};
use streetlevel_mvt::{DEFAULT_EXTENT, ProjectionConfig, TileProjector, lon_lat_to_world};

use crate::image_record::{GeometryVariant, ImageRecord};
use crate::indexes::SequenceEntry;
use crate::records::Records;

/// The first zoom with precomputed lines.
pub(crate) const FIRST_ZOOM: u8 = 6;
/// The last zoom with precomputed lines (above it tiles hold few images each).
pub(crate) const LAST_ZOOM: u8 = 11;
const ZOOMS: usize = (LAST_ZOOM - FIRST_ZOOM + 1) as usize;
/// Lists per sequence: one per zoom and variant.
const LISTS: usize = ZOOMS * 2;
/// Shorter sequences are cheap to project on request and not worth a header.
const MIN_MEMBERS: usize = 8;
/// Header: the end of each list.
const HEADER: usize = LISTS;
/// Tile-local units a sequence must stay inside the buffered tile's edge to use its
/// precomputed line: far above the projector's rounding, so "inside" never depends on it.
const MARGIN: f64 = 1e-6;

/// The precomputed lines of every sequence, by sequence index. An empty slice: none.
#[derive(Debug, Default)]
pub(crate) struct SequenceLines {
    lines: Vec<Box<[u16]>>,
}

fn variant_slot(variant: GeometryVariant) -> usize {
    match variant {
        GeometryVariant::Original => 0,
        GeometryVariant::Computed => 1,
    }
}

/// What one sequence's precomputed line says for a tile.
pub(crate) enum Precomputed<'a> {
    /// Nothing precomputed for this sequence, zoom or configuration, or the sequence reaches
    /// the tile's edge: compute it in full.
    No,
    /// The line lies wholly inside the buffered tile and these are the positions (in capture
    /// order) of the vertices it keeps.
    Kept(&'a [u16]),
}

impl SequenceLines {
    /// Recomputes the lines of these sequences (after their member lists were sorted).
    pub(crate) fn update(&mut self, records: &Records, touched: &[u32]) {
        let sequences = records.sequences();
        if self.lines.len() < sequences.len() {
            self.lines.resize_with(sequences.len(), Box::default);
        }
        for &sequence in touched {
            let members = &sequences[sequence as usize].members;
            self.lines[sequence as usize] = compute(records.images(), members);
        }
    }

    /// The precomputed answer for `sequence`, whose images lie in the box of `entry`, in the
    /// tile of `projector`, made with `config` (its tolerance already the one for the zoom).
    pub(crate) fn kept(
        &self,
        sequence: u32,
        entry: &SequenceEntry,
        projector: &TileProjector,
        config: &ProjectionConfig,
        variant: GeometryVariant,
    ) -> Precomputed<'_> {
        let z = projector.transform().tile().z();
        let (extent, buffer) = (config.extent, config.buffer);
        let same_tolerance =
            config.tolerance.partial_cmp(&DEFAULT_TOLERANCE) == Some(std::cmp::Ordering::Equal);
        if !(FIRST_ZOOM..=LAST_ZOOM).contains(&z) || extent != DEFAULT_EXTENT || !same_tolerance {
            return Precomputed::No;
        }
        let Some(line) = self.lines.get(sequence as usize) else {
            return Precomputed::No;
        };
        if line.len() < HEADER {
            return Precomputed::No;
        }
        // The box holds every location of both variants, and the projection is monotonic:
        // its corners inside (with a margin against rounding) put the whole line inside.
        let low = -f64::from(buffer) + MARGIN;
        let high = f64::from(extent) + f64::from(buffer) - MARGIN;
        let transform = projector.transform();
        let (west, north) = transform.to_local(f64::from(entry.min[0]), f64::from(entry.max[1]));
        let (east, south) = transform.to_local(f64::from(entry.max[0]), f64::from(entry.min[1]));
        if !(west >= low && north >= low && east <= high && south <= high) {
            return Precomputed::No;
        }
        let list = usize::from(z - FIRST_ZOOM) * 2 + variant_slot(variant);
        let start = if list == 0 {
            HEADER
        } else {
            usize::from(line[list - 1])
        };
        let end = usize::from(line[list]);
        line.get(start..end)
            .map_or(Precomputed::No, Precomputed::Kept)
    }

    /// Heap bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.lines.capacity() * std::mem::size_of::<Box<[u16]>>()
            + self
                .lines
                .iter()
                .map(|line| line.len() * std::mem::size_of::<u16>())
                .sum::<usize>()
    }
}

fn end_of(header: &[u16; HEADER]) -> usize {
    usize::from(header[HEADER - 1]).max(HEADER)
}

/// The header and lists of one sequence, or an empty slice when it is too short or too long
/// for `u16` positions.
fn compute(images: &[ImageRecord], members: &[u32]) -> Box<[u16]> {
    if members.len() < MIN_MEMBERS || members.len() > usize::from(u16::MAX) {
        return Box::default();
    }
    let worlds: Vec<Vec<(f64, f64)>> = [GeometryVariant::Original, GeometryVariant::Computed]
        .into_iter()
        .map(|variant| {
            members
                .iter()
                .map(|&index| {
                    let [lon, lat] = variant.point(&images[index as usize]);
                    lon_lat_to_world(lon, lat)
                })
                .collect()
        })
        .collect();
    let mut header = [0u16; HEADER];
    // Lists zoom-major, variant-minor, as `SequenceLines::kept` reads them.
    let mut lists: Vec<Vec<u16>> = Vec::with_capacity(LISTS);
    for zoom in FIRST_ZOOM..=LAST_ZOOM {
        let units = f64::from(1u32 << zoom) * f64::from(DEFAULT_EXTENT);
        for world in &worlds {
            let line: LineString<f64> = world
                .iter()
                .map(|&(x, y)| Coord {
                    x: x * units,
                    y: y * units,
                })
                .collect();
            let simplified = simplify_line_string(&line, DEFAULT_TOLERANCE);
            // The result is a subsequence of the line: find its positions in order.
            let mut positions = Vec::with_capacity(simplified.0.len());
            let mut next = 0;
            for coord in &simplified.0 {
                while next < line.0.len() && line.0[next] != *coord {
                    next += 1;
                }
                if next == line.0.len() {
                    // Not a subsequence after all: keep nothing precomputed.
                    return Box::default();
                }
                let Ok(position) = u16::try_from(next) else {
                    // Too long for 16-bit positions: keep nothing precomputed.
                    return Box::default();
                };
                positions.push(position);
                next += 1;
            }
            lists.push(positions);
        }
    }
    let mut end = HEADER;
    for (list, positions) in lists.iter().enumerate() {
        end += positions.len();
        let Ok(end) = u16::try_from(end) else {
            return Box::default();
        };
        header[list] = end;
    }
    let mut all: Vec<u16> = Vec::with_capacity(end_of(&header));
    all.extend_from_slice(&header);
    for positions in lists {
        all.extend(positions);
    }
    all.into_boxed_slice()
}
