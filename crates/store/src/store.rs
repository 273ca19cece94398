//! The store: entities in compact in-memory tables with their indices, written through to
//! `SQLite` when opened on a data directory.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rstar::primitives::GeomWithData;
use rstar::{AABB, RStarInsertionStrategy, RTree, RTreeObject, RTreeParams};
use streetlevel_model::{
    Creator, CreatorId, Detection, DetectionId, EntityId, EntityKind, Image, ImageId, MapFeature,
    MapFeatureId, MediaId, Organization, OrganizationId, Sequence, SequenceId,
};

use crate::changes::ChangeLog;
use crate::image_record::{
    Camera, CameraPool, ImageRecord, Interner, NONE, ParameterPool, RecordLinks, RecordNames,
    RecordValues, ResolvedNames,
};
use crate::overview::OverviewPyramid;
use crate::s2::S2CellId;
use crate::tiles::SequenceEntry;
use crate::{StoreError, sqlite};

/// The file name of the database inside the data directory.
pub const DATABASE_FILE: &str = "streetlevel.sqlite";
/// The name of the media folder inside the data directory.
pub const MEDIA_DIR: &str = "media";

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
    fn new(record: &ImageRecord, index: u32) -> Self {
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

/// Batches of at least this many images build their R-tree and S2 entries on two threads.
const PARALLEL_INDEXING: usize = 50_000;

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

#[derive(Debug)]
pub(crate) struct SequenceRecord {
    pub(crate) id: SequenceId,
    /// Set when the sequence itself was inserted (not only images naming it).
    pub(crate) explicit: Option<(CreatorId, Option<OrganizationId>)>,
    /// Image indices in capture order (ties by ID).
    pub(crate) members: Vec<u32>,
    /// Its entry in the sequence R-tree, if it has images.
    pub(crate) entry: Option<SequenceEntry>,
}

#[derive(Debug)]
pub(crate) struct CreatorRecord {
    pub(crate) id: CreatorId,
    /// `None` while the creator is known only from its images.
    pub(crate) creator: Option<Creator>,
    /// Image indices in ID order.
    pub(crate) images: Vec<u32>,
}

#[derive(Debug)]
pub(crate) struct OrganizationRecord {
    pub(crate) id: OrganizationId,
    pub(crate) organization: Option<Organization>,
    /// Image indices in ID order.
    pub(crate) images: Vec<u32>,
}

/// The in-memory store of images, sequences, map features, detections, organizations and
/// creators, optionally backed by `SQLite`.
///
/// Concurrency: every query takes `&self` and every write `&mut self`; the store is `Send` and
/// `Sync`, so a server shares it as `Arc<RwLock<Store>>`. Writes go to `SQLite` first (one
/// transaction per call) and then to memory, and bump [`Store::generation`].
#[derive(Debug)]
pub struct Store {
    pub(crate) database: Option<Mutex<rusqlite::Connection>>,
    pub(crate) generation: u64,
    pub(crate) images: Vec<ImageRecord>,
    /// Image indices in ascending ID order (the ID lookup, by binary search).
    pub(crate) id_order: Vec<u32>,
    pub(crate) image_tree: RTree<ImageEntry, ImageTreeParams>,
    /// Image indices sorted by the leaf S2 cell of their original location (computed from the
    /// record when searching, rather than stored).
    pub(crate) s2_images: Vec<u32>,
    /// One box per sequence around all locations of its images.
    pub(crate) sequence_tree: RTree<SequenceEntry>,
    pub(crate) strings: Interner,
    pub(crate) camera_parameters: ParameterPool,
    pub(crate) cameras: CameraPool,
    pub(crate) sequences: Vec<SequenceRecord>,
    pub(crate) sequence_index: HashMap<Box<str>, u32>,
    pub(crate) creators: Vec<CreatorRecord>,
    pub(crate) creator_index: HashMap<u64, u32>,
    pub(crate) username_index: HashMap<String, u32>,
    pub(crate) organizations: Vec<OrganizationRecord>,
    pub(crate) organization_index: HashMap<u64, u32>,
    pub(crate) map_features: Vec<MapFeature>,
    pub(crate) map_feature_ids: BTreeMap<u64, u32>,
    pub(crate) map_feature_tree: RTree<GeomWithData<[f64; 2], u32>>,
    pub(crate) detections: Vec<Detection>,
    pub(crate) detection_ids: BTreeMap<u64, u32>,
    pub(crate) detections_by_image: HashMap<u64, Vec<u32>>,
    pub(crate) detections_by_map_feature: HashMap<u64, Vec<u32>>,
    /// Precomputed low-zoom tile data: lowest image ID per overview cell at z0–5 and
    /// simplified sequence lines at z6–11 (see `overview.rs`).
    pub(crate) overview: OverviewPyramid,
    /// The newest entry of `SQLite`'s write log this store holds (see `batch.rs`).
    pub(crate) followed_write: i64,
    /// Content hashes of imported images, for a store without `SQLite` (with one, the
    /// database answers).
    pub(crate) image_hashes: HashMap<[u8; 32], ImageId>,
    /// The least ID [`Store::reserve_ids`] may hand out next (the database keeps its own).
    pub(crate) next_id: u64,
    /// The areas recent writes touched, for tile caches (`changes.rs`).
    pub(crate) changes: ChangeLog,
}

impl Store {
    /// An empty store without persistence, for tests and tools.
    pub fn in_memory() -> Self {
        Store {
            database: None,
            generation: 0,
            images: Vec::new(),
            id_order: Vec::new(),
            image_tree: RTree::new_with_params(),
            s2_images: Vec::new(),
            sequence_tree: RTree::new(),
            strings: Interner::default(),
            camera_parameters: ParameterPool::default(),
            cameras: CameraPool::default(),
            sequences: Vec::new(),
            sequence_index: HashMap::new(),
            creators: Vec::new(),
            creator_index: HashMap::new(),
            username_index: HashMap::new(),
            organizations: Vec::new(),
            organization_index: HashMap::new(),
            map_features: Vec::new(),
            map_feature_ids: BTreeMap::new(),
            map_feature_tree: RTree::new(),
            detections: Vec::new(),
            detection_ids: BTreeMap::new(),
            detections_by_image: HashMap::new(),
            detections_by_map_feature: HashMap::new(),
            overview: OverviewPyramid::default(),
            followed_write: 0,
            image_hashes: HashMap::new(),
            next_id: 1,
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
        let connection = sqlite::open(&Self::database_path(data_dir))?;
        let mut store = Store::in_memory();
        sqlite::load(&connection, &mut store)?;
        store.database = Some(Mutex::new(connection));
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

    /// A counter that changes on every successful write (caches key on it).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The number of images.
    pub fn image_count(&self) -> usize {
        self.images.len()
    }

    /// The number of map features.
    pub fn map_feature_count(&self) -> usize {
        self.map_features.len()
    }

    /// The number of detections.
    pub fn detection_count(&self) -> usize {
        self.detections.len()
    }

    /// The number of sequences (also those known only from their images).
    pub fn sequence_count(&self) -> usize {
        self.sequences.len()
    }

    // ---- lookups -------------------------------------------------------------------------

    /// Which kind of entity holds `id` in the global ID space, if any.
    pub fn kind_of(&self, id: EntityId) -> Option<EntityKind> {
        if self.image_index(id.0).is_some() {
            Some(EntityKind::Image)
        } else if self.map_feature_ids.contains_key(&id.0) {
            Some(EntityKind::MapFeature)
        } else if self.detection_ids.contains_key(&id.0) {
            Some(EntityKind::Detection)
        } else if self
            .organization_index
            .get(&id.0)
            .is_some_and(|&index| self.organizations[index as usize].organization.is_some())
        {
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
            .images
            .iter()
            .position(|record| record.mesh_id() == Some(mesh))?;
        Some(self.image_at(index as u32))
    }

    /// One image of this `SfM` cluster (clusters are runs of one sequence, so the sequence's
    /// images give the rest). A scan, for the same reason as [`Store::image_with_mesh`].
    pub fn image_with_sfm_cluster(&self, cluster: MediaId) -> Option<Image> {
        let index = self
            .images
            .iter()
            .position(|record| record.sfm_cluster_id() == Some(cluster))?;
        Some(self.image_at(index as u32))
    }

    /// The images with these IDs that exist, in the order asked.
    pub fn images(&self, ids: &[ImageId]) -> Vec<Image> {
        ids.iter().filter_map(|&id| self.image(id)).collect()
    }

    /// The map feature with this ID.
    pub fn map_feature(&self, id: MapFeatureId) -> Option<&MapFeature> {
        let index = *self.map_feature_ids.get(&id.0)?;
        self.map_features.get(index as usize)
    }

    /// The detection with this ID.
    pub fn detection(&self, id: DetectionId) -> Option<&Detection> {
        let index = *self.detection_ids.get(&id.0)?;
        self.detections.get(index as usize)
    }

    /// The organization with this ID (only inserted organizations, not ones merely named by
    /// images).
    pub fn organization(&self, id: OrganizationId) -> Option<&Organization> {
        let index = *self.organization_index.get(&id.0)?;
        self.organizations[index as usize].organization.as_ref()
    }

    /// The creator with this ID.
    pub fn creator(&self, id: CreatorId) -> Option<&Creator> {
        let index = *self.creator_index.get(&id.0)?;
        self.creators[index as usize].creator.as_ref()
    }

    /// The creator with this username (exact).
    pub fn creator_by_username(&self, username: &str) -> Option<&Creator> {
        let index = *self.username_index.get(username)?;
        self.creators[index as usize].creator.as_ref()
    }

    /// The sequence with this key, its `image_ids` in capture order (ties by ID). A sequence
    /// that was never inserted but is named by images takes creator and organization from its
    /// first image.
    pub fn sequence(&self, id: &SequenceId) -> Option<Sequence> {
        let record = &self.sequences[*self.sequence_index.get(id.as_str())? as usize];
        let first = record
            .members
            .first()
            .map(|&index| &self.images[index as usize]);
        let (creator, organization) = match (record.explicit, first) {
            (Some(explicit), _) => explicit,
            (None, Some(first)) => (
                self.creators[first.creator as usize].id,
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
        let record = &self.sequences[*self.sequence_index.get(id.as_str())? as usize];
        Some(self.member_ids(record))
    }

    /// The IDs of the images owned by a creator, in ID order.
    pub fn images_of_creator(&self, id: CreatorId) -> Vec<ImageId> {
        self.creator_index
            .get(&id.0)
            .map(|&index| self.ids_of(&self.creators[index as usize].images))
            .unwrap_or_default()
    }

    /// The IDs of the images owned by the creator with this username, in ID order.
    pub fn images_of_username(&self, username: &str) -> Vec<ImageId> {
        self.username_index
            .get(username)
            .map(|&index| self.ids_of(&self.creators[index as usize].images))
            .unwrap_or_default()
    }

    /// The IDs of the images contributed to an organization, in ID order.
    pub fn images_of_organization(&self, id: OrganizationId) -> Vec<ImageId> {
        self.organization_index
            .get(&id.0)
            .map(|&index| self.ids_of(&self.organizations[index as usize].images))
            .unwrap_or_default()
    }

    /// The detections in an image, in ID order.
    pub fn detections_of_image(&self, id: ImageId) -> Vec<&Detection> {
        self.detections_at(self.detections_by_image.get(&id.0))
    }

    /// The detections contributing to a map feature, in ID order.
    pub fn detections_of_map_feature(&self, id: MapFeatureId) -> Vec<&Detection> {
        self.detections_at(self.detections_by_map_feature.get(&id.0))
    }

    /// The images whose original `geometry` lies in the S2 cell (any level), in ID order.
    /// Every image lies in exactly one cell of each level.
    pub fn images_in_s2_cell(&self, cell: S2CellId) -> Vec<Image> {
        let start = self
            .s2_images
            .partition_point(|&index| self.s2_leaf(index) < cell.range_min());
        let end = start
            + self.s2_images[start..]
                .partition_point(|&index| self.s2_leaf(index) <= cell.range_max());
        let mut indices = self.s2_images[start..end].to_vec();
        indices.sort_unstable_by_key(|&index| self.images[index as usize].id);
        indices
            .into_iter()
            .map(|index| self.image_at(index))
            .collect()
    }

    /// The lowest ID held by two kinds of entity, with both kinds (in [`Store::kind_of`]'s
    /// order, so the first is the one `kind_of` answers). Inserts refuse such IDs, but
    /// `SQLite` keys are per table, so a load checks: an entity of a later kind whose ID
    /// `kind_of` places in an earlier kind is shared (one lookup per map feature, detection
    /// and organization; images, the bulk, come first and are never looked up).
    pub(crate) fn first_shared_id(&self) -> Option<(u64, EntityKind, EntityKind)> {
        let map_features = self
            .map_feature_ids
            .keys()
            .map(|&id| (id, EntityKind::MapFeature));
        let detections = self
            .detection_ids
            .keys()
            .map(|&id| (id, EntityKind::Detection));
        let organizations = self
            .organizations
            .iter()
            .filter(|record| record.organization.is_some())
            .map(|record| (record.id.0, EntityKind::Organization));
        map_features
            .chain(detections)
            .chain(organizations)
            .filter_map(|(id, kind)| {
                let first = self.kind_of(EntityId(id))?;
                (first != kind).then_some((id, first, kind))
            })
            // On equal IDs the earlier kind, as the chain lists them.
            .min_by_key(|&(id, ..)| id)
    }

    // ---- helpers shared with search and tiles ---------------------------------------------

    /// The index of the image with this ID, by binary search over the ID order.
    pub(crate) fn image_index(&self, id: u64) -> Option<u32> {
        let &last = self.id_order.last()?;
        if id > self.images[last as usize].id {
            return None;
        }
        let position = self
            .id_order
            .binary_search_by_key(&id, |&index| self.images[index as usize].id)
            .ok()?;
        Some(self.id_order[position])
    }

    /// The leaf S2 cell of an image's original location.
    fn s2_leaf(&self, index: u32) -> u64 {
        let [lon, lat] = self.images[index as usize].geometry;
        S2CellId::from_lat_lng(lat, lon).raw()
    }

    pub(crate) fn image_at(&self, index: u32) -> Image {
        let record = &self.images[index as usize];
        let camera = self.cameras.get(record.camera);
        record.to_image(&ResolvedNames {
            sequence: &self.sequences[record.sequence as usize].id,
            creator: self.creators[record.creator as usize].id,
            organization: self.organization_id_at(record.organization),
            make: camera.and_then(|camera| self.strings.get(camera.make)),
            model: camera.and_then(|camera| self.strings.get(camera.model)),
            camera_parameters: camera
                .and_then(|camera| self.camera_parameters.get(camera.parameters)),
            camera_type: camera.and_then(|camera| camera.kind),
        })
    }

    pub(crate) fn organization_id_at(&self, index: u32) -> Option<OrganizationId> {
        (index != NONE).then(|| self.organizations[index as usize].id)
    }

    fn member_ids(&self, record: &SequenceRecord) -> Vec<ImageId> {
        self.ids_of(&record.members)
    }

    fn ids_of(&self, indices: &[u32]) -> Vec<ImageId> {
        indices
            .iter()
            .map(|&index| ImageId(self.images[index as usize].id))
            .collect()
    }

    fn detections_at(&self, indices: Option<&Vec<u32>>) -> Vec<&Detection> {
        indices
            .map(|indices| {
                indices
                    .iter()
                    .map(|&index| &self.detections[index as usize])
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Approximate bytes held by the image table and the structures kept per image or per
    /// sequence: the image records, the ID order, the image R-tree, the S2 index, the image
    /// lists of creators, organizations and sequences, the sequence records, the sequence key
    /// index (its entries and control bytes) and the sequence R-tree. Vectors count at their
    /// capacity.
    ///
    /// Not counted: the text of strings (sequence keys, usernames, makes, models), the camera
    /// pool and camera parameter lists (shared by all images of a camera), the creator and
    /// organization records and their hash maps, map features and detections, and the
    /// low-zoom structures ([`Store::overview_memory_bytes`],
    /// [`Store::sequence_lines_memory_bytes`]).
    pub fn image_memory_bytes(&self) -> usize {
        let record = std::mem::size_of::<ImageRecord>() * self.images.capacity();
        let id_index = self.id_order.capacity() * 4;
        let tree = r_tree_bytes(self.image_tree.root());
        let s2 = self.s2_images.capacity() * 4;
        let lists: usize = self
            .creators
            .iter()
            .map(|creator| creator.images.capacity() * 4)
            .chain(
                self.organizations
                    .iter()
                    .map(|org| org.images.capacity() * 4),
            )
            .chain(self.sequences.iter().map(|seq| seq.members.capacity() * 4))
            .sum();
        let sequence_records = std::mem::size_of::<SequenceRecord>() * self.sequences.capacity();
        // A hash table holds an entry and one control byte per slot.
        let sequence_index =
            self.sequence_index.capacity() * (std::mem::size_of::<(Box<str>, u32)>() + 1);
        let sequence_tree = r_tree_bytes(self.sequence_tree.root());
        record + id_index + tree + s2 + lists + sequence_records + sequence_index + sequence_tree
    }

    // ---- writes --------------------------------------------------------------------------

    /// Inserts images: checked, written to `SQLite` in one transaction, then to memory.
    /// Images may name sequences, creators and organizations not inserted (yet).
    pub fn insert_images(&mut self, images: &[Image]) -> Result<(), StoreError> {
        let mut batch = HashSet::new();
        for image in images {
            self.check_new_image(image, &mut batch)?;
        }
        Self::check_capacity(self.images.len() + images.len(), "images")?;
        self.write(|transaction| sqlite::insert_images(transaction, images))?;
        let first_new = self.images.len();
        if first_new + images.len() > self.images.capacity() {
            // Grow by the batch, but by at least an eighth of the table: doubling would leave
            // up to half the table's records unused (up to 88 bytes per image), an eighth at
            // most 22, and small batches still grow the table geometrically.
            self.images.reserve_exact(images.len().max(first_new / 8));
        }
        for image in images {
            self.push_image(&RecordValues::of(image), &RecordNames::of(image));
        }
        self.index_new_images(first_new);
        self.generation += 1;
        self.record_new_images(first_new);
        Ok(())
    }

    /// Inserts sequences (creator and organization; `image_ids` are ignored, since a
    /// sequence's images are the images naming it).
    pub fn insert_sequences(&mut self, sequences: &[Sequence]) -> Result<(), StoreError> {
        let mut batch = HashSet::new();
        for sequence in sequences {
            let explicit = self
                .sequence_index
                .get(sequence.id.as_str())
                .is_some_and(|&index| self.sequences[index as usize].explicit.is_some());
            if explicit || !batch.insert(&sequence.id) {
                return Err(StoreError::DuplicateKey {
                    what: "sequence",
                    key: sequence.id.to_string(),
                });
            }
        }
        self.write(|transaction| sqlite::insert_sequences(transaction, sequences))?;
        for sequence in sequences {
            self.push_sequence(sequence);
        }
        self.generation += 1;
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
            if self.username_index.contains_key(&creator.username)
                || !usernames.insert(creator.username.as_str())
            {
                return Err(StoreError::DuplicateKey {
                    what: "username",
                    key: creator.username.clone(),
                });
            }
        }
        self.write(|transaction| sqlite::insert_creators(transaction, creators))?;
        for creator in creators {
            self.push_creator(creator);
        }
        self.generation += 1;
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
        self.write(|transaction| sqlite::insert_organizations(transaction, organizations))?;
        for organization in organizations {
            self.push_organization(organization);
        }
        self.generation += 1;
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
        Self::check_capacity(self.map_features.len() + features.len(), "map features")?;
        self.write(|transaction| sqlite::insert_map_features(transaction, features))?;
        let first_new = self.map_features.len();
        for feature in features {
            self.push_map_feature(feature);
        }
        self.index_new_map_features(first_new);
        self.generation += 1;
        self.record_new_map_features(first_new);
        Ok(())
    }

    /// Inserts detections. Their image and map feature may be inserted later.
    pub fn insert_detections(&mut self, detections: &[Detection]) -> Result<(), StoreError> {
        let mut batch = HashSet::new();
        for detection in detections {
            self.check_new_id(detection.id.0, &mut batch)?;
        }
        Self::check_capacity(self.detections.len() + detections.len(), "detections")?;
        self.write(|transaction| sqlite::insert_detections(transaction, detections))?;
        let first_new = self.detections.len();
        for detection in detections {
            self.push_detection(detection);
        }
        self.index_new_detections(first_new);
        self.generation += 1;
        Ok(())
    }

    pub(crate) fn check_new_id(&self, id: u64, batch: &mut HashSet<u64>) -> Result<(), StoreError> {
        if let Some(existing) = self.kind_of(EntityId(id)) {
            return Err(StoreError::DuplicateId { id, existing });
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
    /// an immediate transaction and rolls it back. A store without `SQLite` always can.
    pub fn check_writable(&self, patience: std::time::Duration) -> Result<(), StoreError> {
        let Some(database) = &self.database else {
            return Ok(());
        };
        let mut connection = database
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        connection.busy_timeout(patience)?;
        let result = connection
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .and_then(rusqlite::Transaction::rollback);
        connection.busy_timeout(streetlevel_sqlite::BUSY_TIMEOUT)?;
        Ok(result?)
    }

    pub(crate) fn write(
        &self,
        statements: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let Some(database) = &self.database else {
            return Ok(());
        };
        // A poisoned lock only means another writer panicked mid-call; SQLite rolled back.
        let mut connection = database
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Immediate: a writer that reads before it writes (ID allocation, duplicate checks)
        // must not find its lock upgrade refused by another process's writer.
        let transaction =
            connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        statements(&transaction)?;
        transaction.commit()?;
        Ok(())
    }

    // ---- in-memory application, shared with loading -----------------------------------------

    fn creator_slot(&mut self, id: CreatorId) -> u32 {
        if let Some(&index) = self.creator_index.get(&id.0) {
            return index;
        }
        let index = self.creators.len() as u32;
        self.creators.push(CreatorRecord {
            id,
            creator: None,
            images: Vec::new(),
        });
        self.creator_index.insert(id.0, index);
        index
    }

    fn organization_slot(&mut self, id: OrganizationId) -> u32 {
        if let Some(&index) = self.organization_index.get(&id.0) {
            return index;
        }
        let index = self.organizations.len() as u32;
        self.organizations.push(OrganizationRecord {
            id,
            organization: None,
            images: Vec::new(),
        });
        self.organization_index.insert(id.0, index);
        index
    }

    fn sequence_slot(&mut self, id: &str) -> u32 {
        // Images come in runs of one sequence: check the newest sequence before hashing.
        if let Some(last) = self.sequences.last()
            && last.id.as_str() == id
        {
            return (self.sequences.len() - 1) as u32;
        }
        if let Some(&index) = self.sequence_index.get(id) {
            return index;
        }
        let index = self.sequences.len() as u32;
        self.sequences.push(SequenceRecord {
            id: SequenceId(id.to_owned()),
            explicit: None,
            members: Vec::new(),
            entry: None,
        });
        self.sequence_index.insert(id.into(), index);
        index
    }

    pub(crate) fn push_creator(&mut self, creator: &Creator) {
        let index = self.creator_slot(creator.id);
        self.creators[index as usize].creator = Some(creator.clone());
        self.username_index.insert(creator.username.clone(), index);
    }

    pub(crate) fn push_organization(&mut self, organization: &Organization) {
        let index = self.organization_slot(organization.id);
        self.organizations[index as usize].organization = Some(organization.clone());
    }

    pub(crate) fn push_sequence(&mut self, sequence: &Sequence) {
        let index = self.sequence_slot(sequence.id.as_str());
        self.sequences[index as usize].explicit = Some((sequence.creator, sequence.organization));
    }

    /// Appends an image to the table and its lists; [`Store::index_new_images`] then sorts
    /// the lists and fills the ID order and the spatial indices.
    pub(crate) fn push_image(&mut self, values: &RecordValues, names: &RecordNames<'_>) {
        let index = self.images.len() as u32;
        let creator = self.creator_slot(names.creator);
        let organization = names
            .organization
            .map_or(NONE, |id| self.organization_slot(id));
        let sequence = self.sequence_slot(names.sequence);
        let camera = Camera {
            make: names.make.map_or(NONE, |make| self.strings.intern(make)),
            model: names.model.map_or(NONE, |model| self.strings.intern(model)),
            parameters: names
                .camera_parameters
                .map_or(NONE, |parameters| self.camera_parameters.intern(parameters)),
            kind: names.camera_type,
        };
        let links = RecordLinks {
            sequence,
            creator,
            organization,
            camera: self.cameras.intern(camera),
        };
        self.images.push(ImageRecord::new(values, &links));
        self.creators[creator as usize].images.push(index);
        if organization != NONE {
            self.organizations[organization as usize].images.push(index);
        }
        self.sequences[sequence as usize].members.push(index);
    }

    /// Sorts the lists touched by images `first_new..` and adds those images to the ID order,
    /// the R-tree and the S2 index.
    pub(crate) fn index_new_images(&mut self, first_new: usize) {
        if self.images.len() == first_new {
            return;
        }
        let parallel = self.images.len() - first_new >= PARALLEL_INDEXING;
        let Self {
            images,
            image_tree,
            creators,
            organizations,
            sequences,
            sequence_tree,
            id_order,
            s2_images,
            overview,
            ..
        } = self;
        let images: &[ImageRecord] = images;
        let mut everything_but_the_tree = || {
            Self::index_new_images_except_tree_parts(
                images,
                creators,
                organizations,
                sequences,
                sequence_tree,
                id_order,
                s2_images,
                first_new,
            );
            overview.add(images, sequences, first_new);
        };
        if parallel {
            // The R-tree, the slowest part, reads only the records: large batches (loading)
            // build it on a second thread while this one does the rest.
            std::thread::scope(|scope| {
                scope.spawn(|| Self::extend_image_tree(image_tree, images, first_new));
                everything_but_the_tree();
            });
        } else {
            Self::extend_image_tree(image_tree, images, first_new);
            everything_but_the_tree();
        }
    }

    /// Everything [`Store::index_new_images`] does but the image R-tree and the overview
    /// pyramid, on the fields it needs (so that the tree can be built at the same time).
    #[allow(clippy::too_many_arguments)]
    fn index_new_images_except_tree_parts(
        images: &[ImageRecord],
        creators: &mut [CreatorRecord],
        organizations: &mut [OrganizationRecord],
        sequences: &mut [SequenceRecord],
        sequence_tree: &mut RTree<SequenceEntry>,
        id_order: &mut Vec<u32>,
        s2_images: &mut Vec<u32>,
        first_new: usize,
    ) {
        let new = &images[first_new..];
        // After a large batch (loading) the lists drop the slack of growing by doubling.
        let large = new.len() >= PARALLEL_INDEXING;
        let by_id = |index: &u32| images[*index as usize].id;
        let by_capture = |index: &u32| {
            let record = &images[*index as usize];
            (record.captured_at, record.id)
        };
        let new_creators: HashSet<u32> = new.iter().map(|record| record.creator).collect();
        for creator in new_creators {
            let list = &mut creators[creator as usize].images;
            if !list.is_sorted_by_key(by_id) {
                list.sort_unstable_by_key(by_id);
            }
            if large {
                list.shrink_to_fit();
            }
        }
        let new_organizations: HashSet<u32> = new
            .iter()
            .map(|record| record.organization)
            .filter(|&organization| organization != NONE)
            .collect();
        for organization in new_organizations {
            let list = &mut organizations[organization as usize].images;
            if !list.is_sorted_by_key(by_id) {
                list.sort_unstable_by_key(by_id);
            }
            if large {
                list.shrink_to_fit();
            }
        }
        let new_sequences: HashSet<u32> = new.iter().map(|record| record.sequence).collect();
        let rebuild_sequences = new_sequences.len() >= sequence_tree.size();
        for &sequence in &new_sequences {
            let record = &mut sequences[sequence as usize];
            if !record.members.is_sorted_by_key(by_capture) {
                record.members.sort_unstable_by_key(by_capture);
            }
            if large {
                record.members.shrink_to_fit();
            }
            let entry = SequenceEntry::around(
                record.members.iter().map(|&index| images[index as usize]),
                sequence,
            );
            let old = std::mem::replace(&mut record.entry, entry);
            if !rebuild_sequences {
                if let Some(old) = old {
                    sequence_tree.remove(&old);
                }
                if let Some(entry) = entry {
                    sequence_tree.insert(entry);
                }
            }
        }
        if rebuild_sequences {
            *sequence_tree =
                RTree::bulk_load(sequences.iter().filter_map(|record| record.entry).collect());
        }
        Self::extend_id_order(id_order, images, first_new);
        Self::extend_s2_index(s2_images, images, first_new);
    }

    /// Adds images `first_new..` to the ID order: appended when their IDs follow the last one
    /// (loading, ascending inserts), else merged.
    fn extend_id_order(id_order: &mut Vec<u32>, images: &[ImageRecord], first_new: usize) {
        let by_id = |index: &u32| images[*index as usize].id;
        let mut added: Vec<u32> = (first_new as u32..images.len() as u32).collect();
        if !added.is_sorted_by_key(by_id) {
            added.sort_unstable_by_key(by_id);
        }
        let follows = match (id_order.last(), added.first()) {
            (Some(last), Some(first)) => by_id(last) < by_id(first),
            _ => true,
        };
        if follows {
            id_order.reserve_exact(added.len());
            id_order.extend(added);
            return;
        }
        *id_order = merge_sorted(id_order, &added, |index| by_id(index));
    }

    fn extend_image_tree(
        tree: &mut RTree<ImageEntry, ImageTreeParams>,
        images: &[ImageRecord],
        first_new: usize,
    ) {
        let new = &images[first_new..];
        let entries = new
            .iter()
            .enumerate()
            .map(|(offset, record)| ImageEntry::new(record, (first_new + offset) as u32));
        if new.len().saturating_mul(4) >= tree.size() {
            // Bulk loading everything beats inserting one by one for batches of this size.
            let mut all: Vec<ImageEntry> = Vec::with_capacity(tree.size() + new.len());
            all.extend(tree.iter().copied());
            all.extend(entries);
            *tree = RTree::bulk_load_with_params(all);
        } else {
            for entry in entries {
                tree.insert(entry);
            }
        }
    }

    /// Adds images `first_new..` to the S2 index: sorted among themselves by leaf cell, then
    /// merged in, finding each one's place by binary search (leaf cells are computed, not
    /// stored, so a merge reads only `log n` old leaves per new image).
    fn extend_s2_index(s2_images: &mut Vec<u32>, images: &[ImageRecord], first_new: usize) {
        let leaf = |index: u32| {
            let [lon, lat] = images[index as usize].geometry;
            S2CellId::from_lat_lng(lat, lon).raw()
        };
        let mut added: Vec<(u64, u32)> = (first_new as u32..images.len() as u32)
            .map(|index| (leaf(index), index))
            .collect();
        added.sort_unstable();
        let mut merged = Vec::with_capacity(s2_images.len() + added.len());
        let mut start = 0;
        for (cell, index) in added {
            let end = start + s2_images[start..].partition_point(|&old| leaf(old) <= cell);
            merged.extend_from_slice(&s2_images[start..end]);
            merged.push(index);
            start = end;
        }
        merged.extend_from_slice(&s2_images[start..]);
        *s2_images = merged;
    }

    pub(crate) fn push_map_feature(&mut self, feature: &MapFeature) {
        let index = self.map_features.len() as u32;
        self.map_features.push(feature.clone());
        self.map_feature_ids.insert(feature.id.0, index);
    }

    pub(crate) fn index_new_map_features(&mut self, first_new: usize) {
        let entries = self.map_features[first_new..]
            .iter()
            .enumerate()
            .map(|(offset, feature)| {
                GeomWithData::new(
                    [feature.geometry.lon, feature.geometry.lat],
                    (first_new + offset) as u32,
                )
            });
        if self.map_features.len() - first_new >= self.map_feature_tree.size() {
            let all: Vec<_> = self
                .map_feature_tree
                .iter()
                .copied()
                .chain(entries)
                .collect();
            self.map_feature_tree = RTree::bulk_load(all);
        } else {
            for entry in entries.collect::<Vec<_>>() {
                self.map_feature_tree.insert(entry);
            }
        }
    }

    pub(crate) fn push_detection(&mut self, detection: &Detection) {
        let index = self.detections.len() as u32;
        self.detections.push(detection.clone());
        self.detection_ids.insert(detection.id.0, index);
        self.detections_by_image
            .entry(detection.image.0)
            .or_default()
            .push(index);
        if let Some(feature) = detection.map_feature {
            self.detections_by_map_feature
                .entry(feature.0)
                .or_default()
                .push(index);
        }
    }

    pub(crate) fn index_new_detections(&mut self, first_new: usize) {
        let detections = &self.detections;
        let by_id = |index: &u32| detections[*index as usize].id;
        for detection in &detections[first_new..] {
            if let Some(list) = self.detections_by_image.get_mut(&detection.image.0)
                && !list.is_sorted_by_key(by_id)
            {
                list.sort_unstable_by_key(by_id);
            }
            if let Some(feature) = detection.map_feature
                && let Some(list) = self.detections_by_map_feature.get_mut(&feature.0)
                && !list.is_sorted_by_key(by_id)
            {
                list.sort_unstable_by_key(by_id);
            }
        }
    }
}

/// Bytes held by an R-tree below (and including the children of) `node`: every child is one
/// node enum in its parent's vector (counted at its length; bulk loading sizes them exactly),
/// plus the allocator's header of each vector.
fn r_tree_bytes<T: RTreeObject>(node: &rstar::ParentNode<T>) -> usize {
    const ALLOCATION_HEADER: usize = 16;
    let children = node.children();
    let own = std::mem::size_of_val(children) + ALLOCATION_HEADER;
    own + children
        .iter()
        .map(|child| match child {
            rstar::RTreeNode::Parent(parent) => r_tree_bytes(parent),
            rstar::RTreeNode::Leaf(_) => 0,
        })
        .sum::<usize>()
}

/// Merges two lists sorted by `key` into one (`a` first on ties).
fn merge_sorted<K: Ord>(a: &[u32], b: &[u32], key: impl Fn(&u32) -> K) -> Vec<u32> {
    let mut merged = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if key(&b[j]) < key(&a[i]) {
            merged.push(b[j]);
            j += 1;
        } else {
            merged.push(a[i]);
            i += 1;
        }
    }
    merged.extend_from_slice(&a[i..]);
    merged.extend_from_slice(&b[j..]);
    merged
}

#[cfg(test)]
mod tests {
    use streetlevel_model::{Point, Timestamp};

    use super::*;

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
            geometry: Point::new(13.0 + number as f64 * 1e-3, 55.0),
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
            own_sequences >= one_sequence + (N_IMAGES as usize - 1) * per_sequence,
            "{one_sequence} {own_sequences} {per_sequence}"
        );
    }
}
