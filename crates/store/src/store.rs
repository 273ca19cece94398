//! The store: entities in compact in-memory tables with their indices, written through to
//! its database (`SQLite` or PostgreSQL) when opened on a data directory or a location.
//!
//! A [`Store`] is four parts, each keeping its own invariants in its own file: the records
//! (`records.rs`: entity tables and key lookups), the indexes over them (`indexes.rs`: ID
//! order, R-trees, S2 order), the low-zoom tile structures (`overview.rs` with
//! `sequence_lines.rs`) and persistence (`persistence.rs`: the database and what goes with
//! it). This file keeps the one invariant across them: after every write, the indexes and
//! tile structures cover exactly the records (the `index_new_*` methods).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use streetlevel_db::{Conn, Database, Location};
use streetlevel_model::{
    Creator, CreatorId, Detection, DetectionId, EntityId, EntityKind, Image, ImageId, MapFeature,
    MapFeatureId, MediaId, Organization, OrganizationId, Sequence, SequenceId,
};

use crate::changes::ChangeLog;
use crate::image_record::{NONE, RecordNames, RecordValues, slot};
use crate::indexes::Indexes;
use crate::overview::OverviewPyramid;
use crate::persistence::Persistence;
use crate::records::{Records, SequenceRecord};
use crate::s2::S2CellId;
use crate::{StoreError, sql};

/// The file name of the database inside the data directory.
pub const DATABASE_FILE: &str = "streetlevel.sqlite";
/// The name of the media folder inside the data directory.
pub const MEDIA_DIR: &str = "media";

/// The in-memory store of images, sequences, map features, detections, organizations and
/// creators, optionally backed by a database (`SQLite` or PostgreSQL).
///
/// Concurrency: every query takes `&self` and every write `&mut self`; the store is `Send` and
/// `Sync`, so a server shares it as `Arc<RwLock<Store>>`. Writes go to the database first (one
/// transaction per call) and then to memory, and bump [`Store::generation`].
#[derive(Debug)]
pub struct Store {
    /// The entity tables and their key lookups.
    pub(crate) records: Records,
    /// The ID order, R-trees and S2 order over the records.
    pub(crate) indexes: Indexes,
    /// Precomputed low-zoom tile data: lowest image ID per overview cell at z0–5 and
    /// simplified sequence lines at z6–11.
    pub(crate) overview: OverviewPyramid,
    /// The database written through, the write log position, the ID allocator's floor.
    pub(crate) persistence: Persistence,
    generation: u64,
    /// How many times images were erased from memory: a batch written meanwhile is loaded
    /// from the database instead of from itself (see [`Store::add_written`]).
    pub(crate) erasures: u64,
    /// The areas recent writes touched, for tile caches (`changes.rs`).
    pub(crate) changes: ChangeLog,
}

impl Store {
    /// An empty store without persistence, for tests and tools.
    pub fn in_memory() -> Self {
        Store {
            records: Records::default(),
            indexes: Indexes::default(),
            overview: OverviewPyramid::default(),
            persistence: Persistence::default(),
            generation: 0,
            erasures: 0,
            changes: ChangeLog::default(),
        }
    }

    /// Opens (creating if needed) the data directory `data_dir` with `streetlevel.sqlite` and
    /// `media/`, migrates the schema and loads every entity into memory.
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        for directory in [data_dir.to_path_buf(), Self::media_dir(data_dir)] {
            std::fs::create_dir_all(&directory).map_err(|source| StoreError::DataDirectory {
                path: directory.clone(),
                source,
            })?;
        }
        Self::open_location(&Location::Sqlite(Self::database_path(data_dir)))
    }

    /// Opens the database at `location` (a `SQLite` file, whose directory must exist, or a
    /// PostgreSQL URL; see `streetlevel-db`), migrates the schema and loads every entity
    /// into memory. On PostgreSQL the schema needs PostGIS (the first migration creates the
    /// extension if the role may).
    pub fn open_location(location: &Location) -> Result<Self, StoreError> {
        Self::open_database(Database::open(location)?)
    }

    /// Opens the store's tables in `database`, the process's one handle (a clone of it,
    /// shared with the other crates; see [`Store::open_location`]).
    pub fn open_database(database: Database) -> Result<Self, StoreError> {
        sql::migrate(&database)?;
        let mut store = Store::in_memory();
        sql::load(&database, &mut store)?;
        store.persistence.attach(database);
        Ok(store)
    }

    /// `data_dir/streetlevel.sqlite`.
    pub fn database_path(data_dir: &Path) -> PathBuf {
        data_dir.join(DATABASE_FILE)
    }

    /// `data_dir/media`.
    pub fn media_dir(data_dir: &Path) -> PathBuf {
        data_dir.join(MEDIA_DIR)
    }

    /// The store's database handle, if it has one: the process's one handle, for the other
    /// crates' tables in the same database.
    pub fn database(&self) -> Option<&Database> {
        self.persistence.database().map(|database| &**database)
    }

    /// Where the store's database is, if it has one.
    pub fn location(&self) -> Option<&Location> {
        self.persistence
            .database()
            .map(|database| database.location())
    }

    /// A counter that changes on every successful write (caches key on it).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Records that a write reached memory.
    pub(crate) fn bump_generation(&mut self) {
        self.generation += 1;
    }

    /// The box around every image's locations (original and computed), `[west, south, east,
    /// north]` in degrees, widened outwards to the index's `f32`; `None` without images.
    pub fn image_extent(&self) -> Option<[f64; 4]> {
        self.indexes.image_extent()
    }

    /// The box around every map feature, as [`Store::image_extent`].
    pub fn map_feature_extent(&self) -> Option<[f64; 4]> {
        self.indexes.map_feature_extent()
    }

    /// The number of public images (hidden ones are not counted).
    pub fn image_count(&self) -> usize {
        self.indexes.id_order().len()
    }

    /// The number of map features.
    pub fn map_feature_count(&self) -> usize {
        self.records.map_features().len()
    }

    /// The number of detections.
    pub fn detection_count(&self) -> usize {
        self.records.detections().len()
    }

    /// The number of sequences (also those known only from their images).
    pub fn sequence_count(&self) -> usize {
        self.records.sequences().len()
    }

    // ---- lookups -------------------------------------------------------------------------

    /// Which kind of entity holds `id` in the global ID space, if any.
    pub fn kind_of(&self, id: EntityId) -> Option<EntityKind> {
        if self.image_index(id.0).is_some() {
            Some(EntityKind::Image)
        } else if self.records.map_feature_ids().contains_key(&id.0) {
            Some(EntityKind::MapFeature)
        } else if self.records.detection_ids().contains_key(&id.0) {
            Some(EntityKind::Detection)
        } else if self.organization(OrganizationId(id.0)).is_some() {
            Some(EntityKind::Organization)
        } else {
            None
        }
    }

    /// The image with this ID, rebuilt from its compact record.
    pub fn image(&self, id: ImageId) -> Option<Image> {
        Some(self.image_at(self.image_index(id.0)?))
    }

    /// The image whose mesh this is.
    ///
    /// A scan of every image: a server renders a missing mesh once, on its first request, and
    /// keeps it on disk, so an index would cost memory for every image to save a few
    /// milliseconds once per mesh.
    pub fn image_with_mesh(&self, mesh: MediaId) -> Option<Image> {
        let index = self
            .records
            .images()
            .iter()
            .position(|record| record.is_visible() && record.mesh_id() == Some(mesh))?;
        Some(self.image_at(slot(index)))
    }

    /// One image of this `SfM` cluster (clusters are runs of one sequence, so the sequence's
    /// images give the rest). A scan, for the same reason as [`Store::image_with_mesh`].
    pub fn image_with_sfm_cluster(&self, cluster: MediaId) -> Option<Image> {
        let index =
            self.records.images().iter().position(|record| {
                record.is_visible() && record.sfm_cluster_id() == Some(cluster)
            })?;
        Some(self.image_at(slot(index)))
    }

    /// The images with these IDs that exist, in the order asked.
    pub fn images(&self, ids: &[ImageId]) -> Vec<Image> {
        ids.iter().filter_map(|&id| self.image(id)).collect()
    }

    /// The map feature with this ID.
    pub fn map_feature(&self, id: MapFeatureId) -> Option<&MapFeature> {
        let index = *self.records.map_feature_ids().get(&id.0)?;
        self.records.map_features().get(index as usize)
    }

    /// The detection with this ID.
    pub fn detection(&self, id: DetectionId) -> Option<&Detection> {
        let index = *self.records.detection_ids().get(&id.0)?;
        self.records.detections().get(index as usize)
    }

    /// The organization with this ID (only inserted organizations, not ones merely named by
    /// images).
    pub fn organization(&self, id: OrganizationId) -> Option<&Organization> {
        let index = self.records.organization_slot_of(id)?;
        self.records.organization(index).organization.as_ref()
    }

    /// The creator with this ID.
    pub fn creator(&self, id: CreatorId) -> Option<&Creator> {
        let index = self.records.creator_slot_of(id)?;
        self.records.creator(index).creator.as_ref()
    }

    /// The creator with this username (exact).
    pub fn creator_by_username(&self, username: &str) -> Option<&Creator> {
        let index = self.records.username_slot(username)?;
        self.records.creator(index).creator.as_ref()
    }

    /// The sequence with this key, its `image_ids` in capture order (ties by ID). A sequence
    /// that was never inserted but is named by images takes creator and organization from its
    /// first image.
    pub fn sequence(&self, id: &SequenceId) -> Option<Sequence> {
        let record = self
            .records
            .sequence(self.records.sequence_slot_of(id.as_str())?);
        let first = record
            .members
            .first()
            .map(|&index| self.records.image(index));
        let (creator, organization) = match (record.explicit, first) {
            // A sequence whose images are all hidden is out of public view.
            (Some(_), None)
                if self.sequence_has_hidden(self.records.sequence_slot_of(id.as_str())?) =>
            {
                return None;
            }
            (Some(explicit), _) => explicit,
            (None, Some(first)) => (
                self.records.creator(first.creator).id,
                self.organization_id_at(first.organization),
            ),
            (None, None) => return None,
        };
        Some(Sequence {
            id: record.id.clone(),
            creator,
            organization,
            image_ids: self.member_ids(record),
        })
    }

    /// The image IDs of a sequence in capture order, or `None` for an unknown sequence.
    pub fn sequence_image_ids(&self, id: &SequenceId) -> Option<Vec<ImageId>> {
        let record = self
            .records
            .sequence(self.records.sequence_slot_of(id.as_str())?);
        if record.members.is_empty() {
            // Known only from images all erased or hidden, or hidden whole: not public.
            return self.sequence(id).map(|sequence| sequence.image_ids);
        }
        Some(self.member_ids(record))
    }

    /// The IDs of the images owned by a creator, in ID order.
    pub fn images_of_creator(&self, id: CreatorId) -> Vec<ImageId> {
        self.records
            .creator_slot_of(id)
            .map(|index| self.records.ids_of(&self.records.creator(index).images))
            .unwrap_or_default()
    }

    /// The IDs of the images owned by the creator with this username, in ID order.
    pub fn images_of_username(&self, username: &str) -> Vec<ImageId> {
        self.records
            .username_slot(username)
            .map(|index| self.records.ids_of(&self.records.creator(index).images))
            .unwrap_or_default()
    }

    /// The IDs of the images contributed to an organization, in ID order.
    pub fn images_of_organization(&self, id: OrganizationId) -> Vec<ImageId> {
        self.records
            .organization_slot_of(id)
            .map(|index| {
                self.records
                    .ids_of(&self.records.organization(index).images)
            })
            .unwrap_or_default()
    }

    /// The detections in an image, in ID order.
    pub fn detections_of_image(&self, id: ImageId) -> Vec<&Detection> {
        self.detections_at(self.records.detections_of_image(id.0))
    }

    /// The detections contributing to a map feature, in ID order.
    pub fn detections_of_map_feature(&self, id: MapFeatureId) -> Vec<&Detection> {
        self.detections_at(self.records.detections_of_map_feature(id.0))
    }

    /// The images whose original `geometry` lies in the S2 cell (any level), in ID order.
    /// Every image lies in exactly one cell of each level.
    pub fn images_in_s2_cell(&self, cell: S2CellId) -> Vec<Image> {
        let mut indices = self.indexes.images_in_s2_cell(&self.records, cell).to_vec();
        indices.sort_unstable_by_key(|&index| self.records.image(index).id);
        indices
            .into_iter()
            .map(|index| self.image_at(index))
            .collect()
    }

    /// The lowest ID held by two kinds of entity, with both kinds (in [`Store::kind_of`]'s
    /// order, so the first is the one `kind_of` answers, and the second the next kind holding
    /// it). Inserts refuse such IDs, but database keys are per table, so a load checks: each
    /// pair of kinds is merged in ID order (every kind's IDs are sorted already), galloping
    /// through the longer side, so the images, the bulk, are mostly stepped over rather than
    /// looked up one by one.
    pub(crate) fn first_shared_id(&self) -> Option<(u64, EntityKind, EntityKind)> {
        let map_features: Vec<u64> = self.records.map_feature_ids().keys().copied().collect();
        let detections: Vec<u64> = self.records.detection_ids().keys().copied().collect();
        let mut organizations: Vec<u64> = self
            .records
            .organizations()
            .iter()
            .filter(|record| record.organization.is_some())
            .map(|record| record.id.0)
            .collect();
        organizations.sort_unstable();
        let id_order = self.indexes.id_order();
        let image_id = |position: usize| self.records.image(id_order[position]).id;
        let later = [
            (EntityKind::MapFeature, map_features.as_slice()),
            (EntityKind::Detection, detections.as_slice()),
            (EntityKind::Organization, organizations.as_slice()),
        ];
        let mut shared = Vec::new();
        for (position, &(kind, ids)) in later.iter().enumerate() {
            if let Some(id) = lowest_common(id_order.len(), image_id, ids) {
                shared.push((id, EntityKind::Image, kind));
            }
            for &(earlier, earlier_ids) in &later[..position] {
                if let Some(id) = lowest_common(earlier_ids.len(), |at| earlier_ids[at], ids) {
                    shared.push((id, earlier, kind));
                }
            }
        }
        // On equal IDs the earliest kind, then the next earliest.
        shared.into_iter().min()
    }

    // ---- helpers shared with search and tiles ---------------------------------------------

    /// The index of the image with this ID.
    pub(crate) fn image_index(&self, id: u64) -> Option<u32> {
        self.indexes.image_index(&self.records, id)
    }

    pub(crate) fn image_at(&self, index: u32) -> Image {
        self.records.image_at(index)
    }

    pub(crate) fn organization_id_at(&self, index: u32) -> Option<OrganizationId> {
        self.records.organization_id_at(index)
    }

    fn member_ids(&self, record: &SequenceRecord) -> Vec<ImageId> {
        self.records.ids_of(&record.members)
    }

    fn detections_at(&self, indices: Option<&[u32]>) -> Vec<&Detection> {
        let detections = self.records.detections();
        indices
            .map(|indices| {
                indices
                    .iter()
                    .map(|&index| &detections[index as usize])
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Approximate bytes held by the image table and the structures kept per image or per
    /// sequence: the image records, the ID order, the image R-tree, the S2 index, the image
    /// lists of creators, organizations and sequences, the sequence records, the sequence key
    /// index (its entries and control bytes), the sequence boxes and the sequence R-tree.
    /// Vectors count at their capacity.
    ///
    /// Not counted: the text of strings (sequence keys, usernames, makes, models), the camera
    /// pool and camera parameter lists (shared by all images of a camera), the creator and
    /// organization records and their hash maps, map features and detections, and the
    /// low-zoom structures ([`Store::overview_memory_bytes`],
    /// [`Store::sequence_lines_memory_bytes`]).
    pub fn image_memory_bytes(&self) -> usize {
        self.records.image_bytes() + self.indexes.image_bytes()
    }

    // ---- writes --------------------------------------------------------------------------

    /// Inserts images: checked, written to the database in one transaction, then to memory.
    /// Images may name sequences, creators and organizations not inserted (yet).
    pub fn insert_images(&mut self, images: &[Image]) -> Result<(), StoreError> {
        let mut batch = HashSet::new();
        for image in images {
            self.check_new_image(image, &mut batch)?;
        }
        Self::check_capacity(self.records.images().len() + images.len(), "images")?;
        self.write(|connection| sql::insert_images(connection, images))?;
        let first_new = self.records.images().len();
        self.records.reserve_images(images.len());
        for image in images {
            self.records
                .push_image(&RecordValues::of(image), &RecordNames::of(image));
        }
        self.index_new_images(first_new);
        self.bump_generation();
        self.record_new_images(first_new);
        Ok(())
    }

    /// Inserts sequences (creator and organization; `image_ids` are ignored, since a
    /// sequence's images are the images naming it).
    pub fn insert_sequences(&mut self, sequences: &[Sequence]) -> Result<(), StoreError> {
        let mut batch = HashSet::new();
        for sequence in sequences {
            let explicit = self
                .records
                .sequence_slot_of(sequence.id.as_str())
                .is_some_and(|index| self.records.sequence(index).explicit.is_some());
            if explicit || !batch.insert(&sequence.id) {
                return Err(StoreError::DuplicateKey {
                    what: "sequence",
                    key: sequence.id.to_string(),
                });
            }
        }
        self.write(|connection| sql::insert_sequences(connection, sequences))?;
        for sequence in sequences {
            self.records.push_sequence(sequence);
        }
        self.bump_generation();
        Ok(())
    }

    /// Inserts creators; IDs and usernames must be new.
    pub fn insert_creators(&mut self, creators: &[Creator]) -> Result<(), StoreError> {
        let mut ids = HashSet::new();
        let mut usernames = HashSet::new();
        for creator in creators {
            if self.creator(creator.id).is_some() || !ids.insert(creator.id) {
                return Err(StoreError::DuplicateKey {
                    what: "creator",
                    key: creator.id.to_string(),
                });
            }
            if self.records.username_slot(&creator.username).is_some()
                || !usernames.insert(creator.username.as_str())
            {
                return Err(StoreError::DuplicateKey {
                    what: "username",
                    key: creator.username.clone(),
                });
            }
        }
        self.write(|connection| sql::insert_creators(connection, creators))?;
        for creator in creators {
            self.records.push_creator(creator);
        }
        self.bump_generation();
        Ok(())
    }

    /// Inserts organizations; their IDs join the global ID space.
    pub fn insert_organizations(
        &mut self,
        organizations: &[Organization],
    ) -> Result<(), StoreError> {
        let mut batch = HashSet::new();
        for organization in organizations {
            self.check_new_id(organization.id.0, &mut batch)?;
        }
        self.write(|connection| sql::insert_organizations(connection, organizations))?;
        for organization in organizations {
            self.records.push_organization(organization);
        }
        self.bump_generation();
        Ok(())
    }

    /// Inserts map features.
    pub fn insert_map_features(&mut self, features: &[MapFeature]) -> Result<(), StoreError> {
        let mut batch = HashSet::new();
        for feature in features {
            self.check_new_id(feature.id.0, &mut batch)?;
            if !feature.geometry.is_valid() {
                return Err(StoreError::InvalidEntity {
                    what: "map feature",
                    id: feature.id.to_string(),
                    reason: "geometry out of range",
                });
            }
        }
        Self::check_capacity(self.map_feature_count() + features.len(), "map features")?;
        self.write(|connection| sql::insert_map_features(connection, features))?;
        let first_new = self.map_feature_count();
        self.records.push_map_features(features.to_vec());
        self.index_new_map_features(first_new);
        self.bump_generation();
        self.record_new_map_features(first_new);
        Ok(())
    }

    /// Inserts detections. Their image and map feature may be inserted later.
    pub fn insert_detections(&mut self, detections: &[Detection]) -> Result<(), StoreError> {
        let mut batch = HashSet::new();
        for detection in detections {
            self.check_new_id(detection.id.0, &mut batch)?;
        }
        Self::check_capacity(self.detection_count() + detections.len(), "detections")?;
        self.write(|connection| sql::insert_detections(connection, detections))?;
        let first_new = self.detection_count();
        self.records.push_detections(detections.to_vec());
        self.index_new_detections(first_new);
        self.bump_generation();
        Ok(())
    }

    pub(crate) fn check_new_id(&self, id: u64, batch: &mut HashSet<u64>) -> Result<(), StoreError> {
        if let Some(existing) = self.kind_of(EntityId(id)) {
            return Err(StoreError::DuplicateId { id, existing });
        }
        if self.records.hidden_slot(id).is_some() {
            return Err(StoreError::DuplicateId {
                id,
                existing: EntityKind::Image,
            });
        }
        if !batch.insert(id) {
            return Err(StoreError::DuplicateKey {
                what: "id in one batch",
                key: id.to_string(),
            });
        }
        Ok(())
    }

    pub(crate) fn check_capacity(total: usize, what: &'static str) -> Result<(), StoreError> {
        if total >= NONE as usize {
            return Err(StoreError::Full(what));
        }
        Ok(())
    }

    /// Whether the database takes a write lock within `patience` (a readiness probe): begins
    /// a write transaction and rolls it back. A store without a database always can.
    pub fn check_writable(&self, patience: std::time::Duration) -> Result<(), StoreError> {
        self.persistence.check_writable(patience)
    }

    /// Runs `statements` in one write transaction (nothing without a database); the caller
    /// applies the write to memory only after this succeeded.
    pub(crate) fn write(
        &self,
        statements: impl FnOnce(&mut dyn Conn) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.persistence.write(statements)
    }

    // ---- keeping indexes and tile structures up with the records -----------------------------

    /// Sorts the lists touched by images `first_new..` (pushed to the records) and adds those
    /// images to the indexes and the low-zoom tile structures.
    pub(crate) fn index_new_images(&mut self, first_new: usize) {
        if self.records.images().len() == first_new {
            return;
        }
        let touched = self.records.sort_new_image_lists(first_new);
        let Self {
            records,
            indexes,
            overview,
            ..
        } = self;
        let records: &Records = records;
        indexes.add_images(records, first_new, &touched, || {
            overview.add(records, first_new, &touched);
        });
    }

    /// Adds map features `first_new..` (pushed to the records) to their R-tree.
    pub(crate) fn index_new_map_features(&mut self, first_new: usize) {
        self.indexes.add_map_features(&self.records, first_new);
    }

    /// Sorts the lists touched by detections `first_new..` (pushed to the records).
    pub(crate) fn index_new_detections(&mut self, first_new: usize) {
        self.records.sort_new_detection_lists(first_new);
    }
}

/// The lowest value in both ascending sequences: `len` values read through `key`, and `ids`.
/// For each of `ids` it gallops from where the last one stopped (steps of 1, 2, 4, ... then a
/// binary search), so a long first sequence costs about `log` of each gap, not its length.
fn lowest_common(len: usize, key: impl Fn(usize) -> u64, ids: &[u64]) -> Option<u64> {
    let mut start = 0;
    for &id in ids {
        // Every value before `start` is below `id`.
        let mut step = 1;
        let mut end = start;
        while end < len && key(end) < id {
            start = end + 1;
            end = start.saturating_add(step).min(len);
            step *= 2;
        }
        // The first value not below `id` lies in `start..=end` (`end == len`: none).
        let (mut low, mut high) = (start, end);
        while low < high {
            let middle = low + (high - low) / 2;
            if key(middle) < id {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        start = low;
        if start == len {
            return None;
        }
        if key(start) == id {
            return Some(id);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use streetlevel_model::{Point, Timestamp};

    use proptest::prelude::*;

    use super::*;
    use crate::indexes::SequenceEntry;

    proptest! {
        #[test]
        fn lowest_common_is_the_lowest_value_of_both(
            first in proptest::collection::btree_set(0u64..300, 0..200),
            second in proptest::collection::btree_set(0u64..300, 0..40),
        ) {
            let first: Vec<u64> = first.into_iter().collect();
            let second: Vec<u64> = second.into_iter().collect();
            let expected = second.iter().copied().find(|value| first.contains(value));
            prop_assert_eq!(lowest_common(first.len(), |at| first[at], &second), expected);
        }
    }

    fn image(number: u64, sequence: &str) -> Image {
        Image {
            id: ImageId(1 + number),
            altitude: None,
            atomic_scale: None,
            camera_parameters: None,
            camera_type: None,
            captured_at: Timestamp(0),
            compass_angle: None,
            computed_altitude: None,
            computed_compass_angle: None,
            computed_geometry: None,
            computed_rotation: None,
            creator: CreatorId(1),
            exif_orientation: None,
            geometry: Point::new(
                13.0 + f64::from(u32::try_from(number).unwrap()) * 1e-3,
                55.0,
            ),
            height: 1,
            width: 1,
            is_pano: false,
            make: None,
            model: None,
            merge_cc: None,
            mesh: None,
            sequence: SequenceId(sequence.to_owned()),
            sfm_cluster: None,
            quality_score: None,
            organization: None,
        }
    }

    #[test]
    fn image_memory_counts_the_sequence_structures() {
        const N_IMAGES: u64 = 1000;
        let bytes = |sequence_of: &dyn Fn(u64) -> String| {
            let images: Vec<Image> = (0..N_IMAGES)
                .map(|number| image(number, &sequence_of(number)))
                .collect();
            let mut store = Store::in_memory();
            store.insert_images(&images).unwrap();
            store.image_memory_bytes()
        };
        let one_sequence = bytes(&|_| String::from("s"));
        let own_sequences = bytes(&|number| format!("s{number}"));
        // The image lists hold the same indices either way (one list or a thousand of one,
        // each of capacity one at least): what grows is the sequence records, index and tree.
        let per_sequence = std::mem::size_of::<SequenceRecord>()
            + std::mem::size_of::<(Box<str>, u32)>()
            + std::mem::size_of::<SequenceEntry>();
        assert!(
            own_sequences >= one_sequence + (usize::try_from(N_IMAGES).unwrap() - 1) * per_sequence,
            "{one_sequence} {own_sequences} {per_sequence}"
        );
    }
}
