//! Tile content: what the coverage tiles (original or computed geometry) and the map feature
//! tiles hold, as domain data with tile-local geometries from `streetlevel-mvt`'s projector.
//! The server adds the layer names and encodes.
//!
//! The queries work at any zoom; the spec uses `tile_images` and the map feature tiles at z14,
//! `tile_sequences` at z6–14 and `tile_overview` at z0–5.
//!
//! The top of the store's tile code: these queries read the records, the indexes and the
//! low-zoom structures (`overview.rs`, `sequence_lines.rs`), none of which depends on them.

use std::collections::HashMap;

use num_traits::ToPrimitive as _;
use rstar::AABB;
use streetlevel_model::{
    CreatorId, ImageId, MapFeature, ObjectType, OrganizationId, SequenceId, Timestamp,
};
use streetlevel_mvt::generalise::LineGeneralisation;
use streetlevel_mvt::geo::{Coord, LineString, MultiLineString};
use streetlevel_mvt::simplify::tolerance_for_zoom;
use streetlevel_mvt::{Geometry, ProjectionConfig, TileId, TileProjector};

use crate::image_record::GeometryVariant;
use crate::indexes::{lower_f32, upper_f32};
use crate::overview::{CellCount, OVERVIEW_GRID};
use crate::sequence_lines::Precomputed;
use crate::{Store, StoreError};

/// The highest zoom of the coverage tiles: lines are neither simplified nor generalised
/// there, so the sequence layer holds every sequence crossing the tile in full.
pub const MAX_COVERAGE_ZOOM: u8 = 14;

/// An image in a tile (the `image` and `overview` layers).
#[derive(Debug, Clone, PartialEq)]
pub struct TileImage<'a> {
    /// The image ID (`id`).
    pub id: ImageId,
    /// Its point in tile-local coordinates.
    pub geometry: Geometry,
    /// Capture time (`captured_at`, ms).
    pub captured_at: Timestamp,
    /// The owner (`creator_id`).
    pub creator_id: CreatorId,
    /// The sequence (`sequence_id`).
    pub sequence_id: &'a SequenceId,
    /// The organization (`organization_id`), if any.
    pub organization_id: Option<OrganizationId>,
    /// Whether it is a panorama (`is_pano`).
    pub is_pano: bool,
    /// Compass angle of the variant (computed falls back to original), degrees.
    pub compass_angle: Option<f64>,
    /// In the `overview` layer, the public images (and panoramas) of the tile cell this point
    /// stands for (`count`, `pano_count`); `None` in the `image` layer.
    pub cell: Option<CellCount>,
}

/// A sequence crossing a tile (the `sequence` layer).
#[derive(Debug, Clone, PartialEq)]
pub struct TileSequence<'a> {
    /// The sequence key (`id`).
    pub id: &'a SequenceId,
    /// The first image in capture order (`image_id`).
    pub image_id: ImageId,
    /// Capture time of the first image (`captured_at`).
    pub captured_at: Timestamp,
    /// The owner of the first image (`creator_id`).
    pub creator_id: CreatorId,
    /// The organization of the first image (`organization_id`).
    pub organization_id: Option<OrganizationId>,
    /// Whether the first image is a panorama (`is_pano`).
    pub is_pano: bool,
    /// The polyline in capture order, clipped to the buffered tile and simplified for the
    /// zoom: one or more lines in tile-local coordinates.
    pub geometry: Geometry,
}

/// A map feature in a `point` or `traffic_sign` tile.
#[derive(Debug, Clone, PartialEq)]
pub struct TileMapFeature<'a> {
    /// The feature (`id`, `value`, `first_seen_at`, `last_seen_at`).
    pub feature: &'a MapFeature,
    /// Its point in tile-local coordinates.
    pub geometry: Geometry,
}

/// How one sequence tile query projects its sequences.
struct SequenceProjectors {
    /// Clips and simplifies with the zoom's tolerance.
    simplifying: TileProjector,
    /// Clips only, for lines simplified in advance.
    plain: TileProjector,
    /// The configuration of `simplifying`.
    config: ProjectionConfig,
    /// Whether precomputed lines may be used.
    precomputed: bool,
}

/// The lon/lat box to ask the R-trees for a buffered tile: mvt's buffered bounds, widened a
/// little against rounding, and to the poles at the map's top and bottom edge (Web Mercator
/// puts everything beyond ±85.05° on the edge rows).
fn query_envelope(tile: TileId, config: &ProjectionConfig) -> AABB<[f32; 2]> {
    const SLACK: f64 = 1e-7;
    let bounds = tile.buffered_bounds(config.extent, config.buffer);
    let last_row = TileId::tiles_per_axis(tile.z()) - 1;
    let min_lat = if tile.y() == last_row {
        -90.0
    } else {
        bounds.min_lat - SLACK
    };
    let max_lat = if tile.y() == 0 {
        90.0
    } else {
        bounds.max_lat + SLACK
    };
    AABB::from_corners(
        [lower_f32(bounds.min_lon - SLACK), lower_f32(min_lat)],
        [upper_f32(bounds.max_lon + SLACK), upper_f32(max_lat)],
    )
}

impl Store {
    fn projector(tile: TileId, config: &ProjectionConfig) -> Result<TileProjector, StoreError> {
        Ok(TileProjector::new(tile, *config)?)
    }

    fn tile_image(
        &self,
        index: u32,
        geometry: Geometry,
        variant: GeometryVariant,
    ) -> TileImage<'_> {
        let record = self.records.image(index);
        TileImage {
            id: ImageId(record.id),
            geometry,
            captured_at: Timestamp(record.captured_at),
            creator_id: self.records.creator(record.creator).id,
            sequence_id: &self.records.sequence(record.sequence).id,
            organization_id: self.organization_id_at(record.organization),
            is_pano: record.is_pano(),
            compass_angle: record.compass(variant.is_computed()),
            cell: None,
        }
    }

    /// Image indices whose `variant` point falls in the buffered tile, with their geometry.
    /// `(id, index, geometry)` of the images whose `variant` point falls in the buffered tile,
    /// in no particular order.
    fn images_in_tile(
        &self,
        tile: TileId,
        config: &ProjectionConfig,
        variant: GeometryVariant,
    ) -> Result<Vec<(u64, u32, Geometry)>, StoreError> {
        let projector = Self::projector(tile, config)?;
        Ok(self
            .indexes
            .images_meeting(&query_envelope(tile, config))
            .filter_map(|index| {
                let record = self.records.image(index);
                let [lon, lat] = variant.point(record);
                projector
                    .point(lon, lat)
                    .map(|geometry| (record.id, index, geometry))
            })
            .collect())
    }

    /// The images of a tile (the `image` layer, z14), in ID order: every image whose
    /// `variant` location lies in the tile grown by `config.buffer` units.
    pub fn tile_images(
        &self,
        tile: TileId,
        config: &ProjectionConfig,
        variant: GeometryVariant,
    ) -> Result<Vec<TileImage<'_>>, StoreError> {
        let mut found = self.images_in_tile(tile, config, variant)?;
        // Sort on the ID carried along: looking it up per comparison is a cache miss each.
        found.sort_unstable_by_key(|(id, _, _)| *id);
        Ok(found
            .into_iter()
            .map(|(_, index, geometry)| self.tile_image(index, geometry, variant))
            .collect())
    }

    /// The overview points of a tile (the `overview` layer, z0–5), in ID order: the images of
    /// the buffered tile thinned to the one with the lowest ID per cell of a grid of
    /// [`OVERVIEW_GRID`] cells across the tile, each with the count of its cell's images and
    /// panoramas ([`TileImage::cell`]). The same data gives the same answer.
    ///
    /// At z0–5 with the default extent and a buffer of whole cells (0, 64, … up to 1024
    /// units) this reads a precomputed pyramid of lowest IDs per cell; otherwise it scans like
    /// [`Store::tile_overview_by_scan`], which gives the same answer.
    pub fn tile_overview(
        &self,
        tile: TileId,
        config: &ProjectionConfig,
        variant: GeometryVariant,
    ) -> Result<Vec<TileImage<'_>>, StoreError> {
        let projector = Self::projector(tile, config)?;
        let Some(chosen) = self
            .overview
            .tile(tile, config, variant, |index| self.records.image(index).id)
        else {
            return self.tile_overview_by_scan(tile, config, variant);
        };
        Ok(chosen
            .into_iter()
            .filter_map(|(_, index, count)| {
                let [lon, lat] = variant.point(self.records.image(index));
                let geometry = projector.point(lon, lat)?;
                Some(TileImage {
                    cell: Some(count),
                    ..self.tile_image(index, geometry, variant)
                })
            })
            .collect())
    }

    /// [`Store::tile_overview`] computed by projecting every image under the tile: linear in
    /// those images. The reference for tests and benchmarks, and the path for configurations
    /// the pyramid does not answer.
    pub fn tile_overview_by_scan(
        &self,
        tile: TileId,
        config: &ProjectionConfig,
        variant: GeometryVariant,
    ) -> Result<Vec<TileImage<'_>>, StoreError> {
        let cell_size = f64::from(config.extent) / f64::from(OVERVIEW_GRID);
        let mut kept: HashMap<(i64, i64), (u64, u32, Geometry, CellCount)> = HashMap::new();
        for (id, index, geometry) in self.images_in_tile(tile, config, variant)? {
            let Some(cell) = overview_cell(&geometry, cell_size) else {
                continue;
            };
            let is_pano = self.records.image(index).is_pano();
            let slot =
                kept.entry(cell)
                    .or_insert((id, index, geometry.clone(), CellCount::default()));
            if id < slot.0 {
                (slot.0, slot.1, slot.2) = (id, index, geometry);
            }
            slot.3.images += 1;
            slot.3.panoramas += u32::from(is_pano);
        }
        let mut chosen: Vec<(u64, u32, Geometry, CellCount)> = kept.into_values().collect();
        chosen.sort_unstable_by_key(|(id, _, _, _)| *id);
        Ok(chosen
            .into_iter()
            .map(|(_, index, geometry, count)| TileImage {
                cell: Some(count),
                ..self.tile_image(index, geometry, variant)
            })
            .collect())
    }

    /// Heap bytes held by the overview pyramid behind [`Store::tile_overview`] (on top of
    /// [`Store::image_memory_bytes`]).
    pub fn overview_memory_bytes(&self) -> usize {
        self.overview.bytes()
    }

    /// The sequences crossing a tile (the `sequence` layer, z6–14), ordered by key: each
    /// sequence's polyline of `variant` locations in capture order, clipped to the buffered
    /// tile and simplified with `config.tolerance` below z14 (none at z14). A sequence that
    /// leaves and re-enters the tile has several lines.
    ///
    /// At z14 every sequence crossing the tile is there. Below z14 the tile is generalised
    /// with [`LineGeneralisation`] (mvt's rule: sequences shorter than a pixel left out,
    /// sequences whose path is drawn already coalesced into the longer ones drawing it, and at
    /// most 4,096 sequences and 32,768 vertices, longest first), so that no tile grows past
    /// what a renderer draws smoothly however dense the data.
    ///
    /// At z6–11 with the default extent and tolerance, sequences lying wholly inside the
    /// buffered tile use lines simplified when their images were inserted; the answer is the
    /// same as [`Store::tile_sequences_by_scan`]'s.
    pub fn tile_sequences(
        &self,
        tile: TileId,
        config: &ProjectionConfig,
        variant: GeometryVariant,
    ) -> Result<Vec<TileSequence<'_>>, StoreError> {
        self.sequences_in_tile(tile, config, variant, true)
    }

    /// [`Store::tile_sequences`] computed by projecting, clipping and simplifying every image
    /// of every sequence near the tile (then generalised the same way): the reference for
    /// tests and benchmarks.
    pub fn tile_sequences_by_scan(
        &self,
        tile: TileId,
        config: &ProjectionConfig,
        variant: GeometryVariant,
    ) -> Result<Vec<TileSequence<'_>>, StoreError> {
        self.sequences_in_tile(tile, config, variant, false)
    }

    fn sequences_in_tile(
        &self,
        tile: TileId,
        config: &ProjectionConfig,
        variant: GeometryVariant,
        precomputed: bool,
    ) -> Result<Vec<TileSequence<'_>>, StoreError> {
        let config = ProjectionConfig {
            tolerance: tolerance_for_zoom(tile.z(), MAX_COVERAGE_ZOOM, config.tolerance),
            ..*config
        };
        let projectors = SequenceProjectors {
            simplifying: Self::projector(tile, &config)?,
            // Precomputed lines are simplified already (simplifying again could drop more).
            plain: Self::projector(
                tile,
                &ProjectionConfig {
                    tolerance: 0.0,
                    ..config
                },
            )?,
            config,
            precomputed,
        };
        // One entry per sequence, so no repeats. Sorting on a key prefix carried along saves
        // following every key's pointer at each comparison (a cache miss each at 10M images).
        let mut candidates: Vec<(u128, u32)> = self
            .indexes
            .sequences_meeting(&query_envelope(tile, &config))
            .map(|entry| {
                let key = self.records.sequence(entry.index).id.as_str();
                (key_prefix(key), entry.index)
            })
            .collect();
        candidates.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0).then_with(|| {
                self.records
                    .sequence(a.1)
                    .id
                    .cmp(&self.records.sequence(b.1).id)
            })
        });
        let sequences: Vec<TileSequence<'_>> = candidates
            .into_iter()
            .filter_map(|(_, sequence)| self.tile_sequence(sequence, &projectors, variant))
            .collect();
        Ok(generalise(sequences, tile.z(), config.extent))
    }

    fn tile_sequence(
        &self,
        sequence: u32,
        projectors: &SequenceProjectors,
        variant: GeometryVariant,
    ) -> Option<TileSequence<'_>> {
        let record = self.records.sequence(sequence);
        let first = self.records.image(*record.members.first()?);
        let coord = |index: u32| {
            let [x, y] = variant.point(self.records.image(index));
            Coord { x, y }
        };
        let kept = match self.indexes.sequence_entry(sequence) {
            Some(entry) if projectors.precomputed => self.overview.sequence_lines().kept(
                sequence,
                entry,
                &projectors.simplifying,
                &projectors.config,
                variant,
            ),
            _ => Precomputed::No,
        };
        // A one-image sequence has no line to draw.
        let geometry = match kept {
            Precomputed::Kept(positions) => {
                let line: LineString<f64> = positions
                    .iter()
                    .filter_map(|&position| record.members.get(usize::from(position)))
                    .map(|&index| coord(index))
                    .collect();
                projectors
                    .plain
                    .multi_line_string(&MultiLineString::new(vec![line]))?
            }
            Precomputed::No => {
                let line: LineString<f64> = record.members.iter().map(|&i| coord(i)).collect();
                projectors
                    .simplifying
                    .multi_line_string(&MultiLineString::new(vec![line]))?
            }
        };
        Some(TileSequence {
            id: &record.id,
            image_id: ImageId(first.id),
            captured_at: Timestamp(first.captured_at),
            creator_id: self.records.creator(first.creator).id,
            organization_id: self.organization_id_at(first.organization),
            is_pano: first.is_pano(),
            geometry,
        })
    }

    /// Heap bytes held by the precomputed sequence lines behind [`Store::tile_sequences`]
    /// (on top of [`Store::image_memory_bytes`]).
    pub fn sequence_lines_memory_bytes(&self) -> usize {
        self.overview.sequence_lines().bytes()
    }

    /// The map features of one type in a tile (the `point` or `traffic_sign` layer, z14), in
    /// ID order, with the buffer of `config`.
    pub fn tile_map_features(
        &self,
        tile: TileId,
        config: &ProjectionConfig,
        object_type: ObjectType,
    ) -> Result<Vec<TileMapFeature<'_>>, StoreError> {
        let projector = Self::projector(tile, config)?;
        let envelope = query_envelope(tile, config);
        let lower = envelope.lower();
        let upper = envelope.upper();
        let envelope = AABB::from_corners(
            [f64::from(lower[0]), f64::from(lower[1])],
            [f64::from(upper[0]), f64::from(upper[1])],
        );
        let mut found: Vec<TileMapFeature<'_>> = self
            .indexes
            .map_features_in(&envelope)
            .map(|index| &self.records.map_features()[index as usize])
            .filter(|feature| feature.object_type == object_type)
            .filter_map(|feature| {
                projector
                    .point(feature.geometry.lon, feature.geometry.lat)
                    .map(|geometry| TileMapFeature { feature, geometry })
            })
            .collect();
        found.sort_unstable_by_key(|item| item.feature.id);
        Ok(found)
    }
}

/// The sequences a tile at zoom `z` keeps of `sequences` (clipped and simplified, in key
/// order): all of them at [`MAX_COVERAGE_ZOOM`] and above, [`LineGeneralisation`]'s choice
/// below, in the same order.
fn generalise(sequences: Vec<TileSequence<'_>>, z: u8, extent: u32) -> Vec<TileSequence<'_>> {
    let Some(rule) = LineGeneralisation::for_zoom(z, MAX_COVERAGE_ZOOM, extent) else {
        return sequences;
    };
    // Sequence geometries are always lines; anything else would be left out.
    let (positions, lines): (Vec<usize>, Vec<&MultiLineString<i32>>) = sequences
        .iter()
        .enumerate()
        .filter_map(|(position, sequence)| match &sequence.geometry {
            Geometry::LineStrings(lines) => Some((position, lines)),
            _ => None,
        })
        .unzip();
    let mut keep = vec![false; sequences.len()];
    for chosen in rule.select(&lines) {
        keep[positions[chosen]] = true;
    }
    sequences
        .into_iter()
        .zip(keep)
        .filter_map(|(sequence, keep)| keep.then_some(sequence))
        .collect()
}

/// The first 16 bytes of a key, zero-padded, as a number that orders like the keys: equal
/// prefixes leave the order to the whole keys.
fn key_prefix(key: &str) -> u128 {
    let mut bytes = [0u8; 16];
    let length = key.len().min(16);
    bytes[..length].copy_from_slice(&key.as_bytes()[..length]);
    u128::from_be_bytes(bytes)
}

/// The overview grid cell of a one-point geometry.
pub(crate) fn overview_cell(geometry: &Geometry, cell_size: f64) -> Option<(i64, i64)> {
    let Geometry::Points(points) = geometry else {
        return None;
    };
    let point = points.0.first()?;
    Some((
        (f64::from(point.x()) / cell_size).floor().to_i64()?,
        (f64::from(point.y()) / cell_size).floor().to_i64()?,
    ))
}
