//! Generalisation of a line layer below its full-detail zoom, as tile builders do: which of a
//! tile's lines to keep so that the tile stays small enough for a renderer and still draws
//! what can be seen at that zoom.
//!
//! The rule ([`LineGeneralisation::select`]), applied to lines already clipped to the buffered
//! tile and simplified at its resolution (one unit, see [`crate::simplify`]):
//!
//! 1. **Drop lines shorter than a pixel.** A renderer draws a tile [`PIXELS_PER_TILE`] pixels
//!    wide (the size `MapLibre` draws vector tiles at), so a pixel is `extent / 512` units (8 at the
//!    default extent). A line whose length in the tile is under that is dropped.
//! 2. **Longest first.** The remaining lines are taken by length in the tile, longest first
//!    (the ones that draw the most), ties in the order given.
//! 3. **Coalesce lines that share a path.** Each line taken marks the pixels it passes
//!    through (its vertices and points along each segment at most half a pixel apart). A line
//!    each of whose pixels is marked already or has a marked neighbour (of the eight around
//!    it: a line within a pixel or so of a drawn one, as GPS tracks along one street are)
//!    adds nothing visible: it is left out, and the lines drawn before it stand for it.
//! 4. **Thin to a budget.** At most [`MAX_FEATURES`] lines and [`MAX_VERTICES`] vertices in
//!    all are kept: once the features are used up the rest is dropped, and a line whose
//!    vertices would pass the vertex budget is skipped.
//!
//! The kept lines are returned in the order given, so a caller's feature order (e.g. by key)
//! holds. The rule reads only the integer geometries and their order, so the same lines give
//! the same answer on every machine and in every run.
//!
//! The budget bounds a tile whatever the data: 4,096 features with a few properties each
//! (wide IDs and a 22-character key: under 100 bytes) and 32,768 vertices (at most 2 varint
//! bytes per coordinate inside a buffered tile) stay under 500 KB even before compression.

use geo::{Coord, MultiLineString};

/// Pixels across a tile as renderers draw it: `MapLibre` and `Mapbox GL` draw vector
/// tiles 512 pixels wide.
pub const PIXELS_PER_TILE: u32 = 512;

/// At most this many lines in one generalised tile.
pub const MAX_FEATURES: usize = 4096;

/// At most this many vertices over all lines of one generalised tile.
pub const MAX_VERTICES: usize = 32_768;

/// The generalisation of one line layer at one zoom (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineGeneralisation {
    /// Tile-local units per pixel: shorter lines are dropped, and paths are compared on a
    /// grid of cells this wide.
    pub pixel: u32,
    /// At most this many lines are kept.
    pub max_features: usize,
    /// At most this many vertices are kept over all lines.
    pub max_vertices: usize,
}

impl LineGeneralisation {
    /// The generalisation for a tile of `extent` units at zoom `z` of a layer shown in full
    /// detail from `full_zoom`: `None` at or above `full_zoom` (every line kept), the rule of
    /// the module documentation below it.
    pub fn for_zoom(z: u8, full_zoom: u8, extent: u32) -> Option<Self> {
        (z < full_zoom).then(|| Self {
            pixel: (extent / PIXELS_PER_TILE).max(1),
            max_features: MAX_FEATURES,
            max_vertices: MAX_VERTICES,
        })
    }

    /// Which of `lines` (tile-local, clipped and simplified) the tile keeps: their positions
    /// in `lines`, ascending.
    pub fn select(&self, lines: &[&MultiLineString<i32>]) -> Vec<usize> {
        let pixel = i64::from(self.pixel.max(1));
        let mut candidates: Vec<(f64, usize)> = lines
            .iter()
            .enumerate()
            .map(|(position, line)| (length(line), position))
            .filter(|(length, _)| *length >= f64::from(self.pixel.max(1)))
            .collect();
        // Longest first; `total_cmp` orders the (finite) lengths the same on every machine.
        candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));

        let mut grid = PixelGrid::around(candidates.iter().map(|&(_, p)| lines[p]), pixel);
        let mut cells = Vec::new();
        let mut kept = Vec::new();
        let mut vertices = 0usize;
        for (_, position) in candidates {
            if kept.len() >= self.max_features {
                break;
            }
            let line = lines[position];
            let count: usize = line.iter().map(|part| part.0.len()).sum();
            if vertices + count > self.max_vertices {
                continue;
            }
            cells.clear();
            for part in line {
                grid.trace(&part.0, &mut cells);
            }
            if cells.iter().all(|&cell| grid.is_drawn(cell)) {
                continue;
            }
            for &cell in &cells {
                grid.mark(cell);
            }
            vertices += count;
            kept.push(position);
        }
        kept.sort_unstable();
        kept
    }
}

/// The length of a line in tile units: the sum of its segments' lengths.
fn length(lines: &MultiLineString<i32>) -> f64 {
    lines
        .iter()
        .flat_map(|line| line.0.windows(2))
        .map(|pair| {
            let dx = f64::from(pair[1].x) - f64::from(pair[0].x);
            let dy = f64::from(pair[1].y) - f64::from(pair[0].y);
            dx.hypot(dy)
        })
        .sum()
}

/// A bitmap of pixels over the box around some lines, with one pixel of margin all round.
struct PixelGrid {
    pixel: i64,
    min_column: i64,
    min_row: i64,
    columns: usize,
    bits: Vec<u64>,
}

impl PixelGrid {
    fn around<'a>(lines: impl Iterator<Item = &'a MultiLineString<i32>>, pixel: i64) -> Self {
        let mut bounds: Option<(i64, i64, i64, i64)> = None;
        for coord in lines
            .flat_map(MultiLineString::iter)
            .flat_map(|part| &part.0)
        {
            let (x, y) = (i64::from(coord.x), i64::from(coord.y));
            let (min_x, min_y, max_x, max_y) = bounds.unwrap_or((x, y, x, y));
            bounds = Some((min_x.min(x), min_y.min(y), max_x.max(x), max_y.max(y)));
        }
        let (min_x, min_y, max_x, max_y) = bounds.unwrap_or_default();
        let min_column = min_x.div_euclid(pixel) - 1;
        let min_row = min_y.div_euclid(pixel) - 1;
        let columns = usize::try_from(max_x.div_euclid(pixel) + 2 - min_column).unwrap_or(0);
        let rows = usize::try_from(max_y.div_euclid(pixel) + 2 - min_row).unwrap_or(0);
        Self {
            pixel,
            min_column,
            min_row,
            columns,
            bits: vec![0; (columns * rows).div_ceil(64)],
        }
    }

    /// The cell of a point inside the grid's box (never on its margin).
    fn cell(&self, x: i64, y: i64) -> usize {
        let column = usize::try_from(x.div_euclid(self.pixel) - self.min_column).unwrap_or(0);
        let row = usize::try_from(y.div_euclid(self.pixel) - self.min_row).unwrap_or(0);
        row * self.columns + column
    }

    /// Appends the cells of a line's vertices and of points along each segment at most half
    /// a pixel apart (exact integer steps, so the same on every machine).
    fn trace(&self, line: &[Coord<i32>], cells: &mut Vec<usize>) {
        let half = (self.pixel / 2).max(1);
        for (index, coord) in line.iter().enumerate() {
            let (x, y) = (i64::from(coord.x), i64::from(coord.y));
            if let Some(next) = line.get(index + 1) {
                let (dx, dy) = (i64::from(next.x) - x, i64::from(next.y) - y);
                let span = dx.abs().max(dy.abs());
                let steps = ((span + half - 1) / half).max(1);
                for step in 0..steps {
                    cells.push(self.cell(x + dx * step / steps, y + dy * step / steps));
                }
            } else {
                cells.push(self.cell(x, y));
            }
        }
    }

    fn is_marked(&self, cell: usize) -> bool {
        self.bits
            .get(cell / 64)
            .is_some_and(|word| word & (1 << (cell % 64)) != 0)
    }

    /// Whether the cell or one of the eight around it is marked (the margin keeps them all
    /// inside the grid).
    fn is_drawn(&self, cell: usize) -> bool {
        [cell - self.columns, cell, cell + self.columns]
            .into_iter()
            .any(|middle| (middle - 1..=middle + 1).any(|cell| self.is_marked(cell)))
    }

    fn mark(&mut self, cell: usize) {
        if let Some(word) = self.bits.get_mut(cell / 64) {
            *word |= 1 << (cell % 64);
        }
    }
}

#[cfg(test)]
mod tests {
    use geo::LineString;

    use super::*;

    fn line(coords: &[(i32, i32)]) -> MultiLineString<i32> {
        MultiLineString::new(vec![LineString::from(coords.to_vec())])
    }

    fn rule() -> LineGeneralisation {
        LineGeneralisation::for_zoom(8, 14, 4096).unwrap()
    }

    #[test]
    fn full_detail_zooms_have_no_generalisation() {
        assert_eq!(LineGeneralisation::for_zoom(14, 14, 4096), None);
        assert_eq!(LineGeneralisation::for_zoom(15, 14, 4096), None);
        assert_eq!(rule().pixel, 8);
        assert_eq!(LineGeneralisation::for_zoom(13, 14, 256).unwrap().pixel, 1);
    }

    #[test]
    fn lines_shorter_than_a_pixel_are_dropped() {
        let short = line(&[(100, 100), (104, 103)]);
        let exactly = line(&[(100, 100), (100, 108)]);
        assert_eq!(rule().select(&[&short, &exactly]), vec![1]);
    }

    #[test]
    fn a_line_on_a_drawn_path_is_coalesced_into_it() {
        let long = line(&[(0, 0), (400, 0), (400, 400)]);
        // Along the same street a few units off (in the next row of pixels), then a part of
        // it only.
        let beside = line(&[(0, 9), (400, 9)]);
        let part = line(&[(100, 2), (300, 2)]);
        // Off the path by more than a pixel: kept.
        let other = line(&[(0, 40), (400, 40)]);
        assert_eq!(rule().select(&[&part, &beside, &long, &other]), vec![2, 3]);
        // The longer line wins whatever the order given.
        assert_eq!(rule().select(&[&long, &beside, &part]), vec![0]);
    }

    #[test]
    fn the_budget_keeps_the_longest_lines() {
        let lines: Vec<MultiLineString<i32>> = (0..20)
            .map(|row| line(&[(0, row * 20), (100 + row, row * 20)]))
            .collect();
        let references: Vec<&MultiLineString<i32>> = lines.iter().collect();
        let features = LineGeneralisation {
            max_features: 3,
            ..rule()
        };
        assert_eq!(features.select(&references), vec![17, 18, 19]);
        // Two vertices each: a budget of 7 takes three lines.
        let vertices = LineGeneralisation {
            max_vertices: 7,
            ..rule()
        };
        assert_eq!(vertices.select(&references), vec![17, 18, 19]);
    }

    #[test]
    fn nothing_in_nothing_out() {
        assert!(rule().select(&[]).is_empty());
        let empty = MultiLineString::<i32>::new(vec![]);
        assert!(rule().select(&[&empty]).is_empty());
    }
}
