//! The records: every entity in its table, and the lookups from keys to table slots.
//!
//! Invariants kept here, by the only code that writes these tables:
//! - a slot, once given, never moves: every index stored elsewhere (image records' links,
//!   index entries, tile structures) stays valid;
//! - every key map (sequence keys, creator and organization IDs, usernames, map feature and
//!   detection IDs) maps a key to the slot holding it, and an image record's links name
//!   existing slots ([`NONE`] for no organization or camera value);
//! - only visible slots (neither hidden nor removed, see `image_record.rs`) are in the
//!   creators', organizations' and sequences' image lists; `hidden` maps the ID of every
//!   hidden image to its slot, and a removed slot (a tombstone) is in no list and no map; the
//!   detections of a hidden image are in no map or list but `hidden_detections`, and those of
//!   an erased image in none;
//! - after [`Records::sort_new_image_lists`], every creator's and organization's image list
//!   is in ID order and every sequence's members in capture order (ties by ID); after
//!   [`Records::sort_new_detection_lists`], the detection lists per image and per map feature
//!   are in ID order.

use std::collections::BTreeMap;

use streetlevel_model::{
    Creator, CreatorId, Detection, Image, ImageId, MapFeature, Organization, OrganizationId,
    Sequence, SequenceId,
};

use crate::image_record::{
    Camera, CameraPool, FastMap, ImageRecord, Interner, NONE, ParameterPool, RecordLinks,
    RecordNames, RecordValues, ResolvedNames, slot,
};

/// Batches of at least this many images drop the slack of their lists after sorting.
const LARGE_BATCH: usize = 50_000;

#[derive(Debug)]
pub(crate) struct SequenceRecord {
    pub(crate) id: SequenceId,
    /// Set when the sequence itself was inserted (not only images naming it).
    pub(crate) explicit: Option<(CreatorId, Option<OrganizationId>)>,
    /// Image indices in capture order (ties by ID).
    pub(crate) members: Vec<u32>,
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

/// The entity tables and their key lookups (see the module documentation). Readers get
/// shared slices and records; only the `push_*` and `sort_*` methods write.
#[derive(Debug, Default)]
pub(crate) struct Records {
    images: Vec<ImageRecord>,
    strings: Interner,
    camera_parameters: ParameterPool,
    cameras: CameraPool,
    sequences: Vec<SequenceRecord>,
    sequence_index: FastMap<Box<str>, u32>,
    creators: Vec<CreatorRecord>,
    creator_index: FastMap<u64, u32>,
    username_index: FastMap<String, u32>,
    organizations: Vec<OrganizationRecord>,
    organization_index: FastMap<u64, u32>,
    map_features: Vec<MapFeature>,
    map_feature_ids: BTreeMap<u64, u32>,
    detections: Vec<Detection>,
    detection_ids: BTreeMap<u64, u32>,
    detections_by_image: FastMap<u64, Slots>,
    detections_by_map_feature: FastMap<u64, Slots>,
    /// The slots of hidden images, by ID.
    hidden: FastMap<u64, u32>,
    /// The detection slots of hidden images, by image ID: out of `detection_ids` and the
    /// per-image and per-map-feature lists until their image is restored.
    hidden_detections: FastMap<u64, Slots>,
}

/// The detection slots of one image or map feature. Most images have one detection (the
/// fixture sets: 3.18M detections in 3.13M images), which then needs no allocation of its own.
#[derive(Debug)]
enum Slots {
    One(u32),
    Many(Vec<u32>),
}

impl Slots {
    fn push(&mut self, slot: u32) {
        match self {
            Slots::One(first) => *self = Slots::Many(vec![*first, slot]),
            Slots::Many(slots) => slots.push(slot),
        }
    }

    fn as_slice(&self) -> &[u32] {
        match self {
            Slots::One(slot) => std::slice::from_ref(slot),
            Slots::Many(slots) => slots,
        }
    }

    /// Removes every slot in `gone`; `false` when none is left.
    fn retain_not_in(&mut self, gone: &std::collections::HashSet<u32>) -> bool {
        match self {
            Slots::One(slot) => !gone.contains(slot),
            Slots::Many(slots) => {
                slots.retain(|slot| !gone.contains(slot));
                !slots.is_empty()
            }
        }
    }

    /// Sorts the slots by `key` (one slot is sorted).
    fn sort_by_key(&mut self, key: impl Fn(&u32) -> u64) {
        if let Slots::Many(slots) = self
            && !slots.is_sorted_by_key(&key)
        {
            slots.sort_unstable_by_key(key);
        }
    }
}

/// Adds `slot` to the list of `key`.
fn push_slot(lists: &mut FastMap<u64, Slots>, key: u64, slot: u32) {
    match lists.entry(key) {
        std::collections::hash_map::Entry::Occupied(mut list) => list.get_mut().push(slot),
        std::collections::hash_map::Entry::Vacant(list) => {
            list.insert(Slots::One(slot));
        }
    }
}

/// Adds `(key, slot)` pairs to an ordered map: built at once when the map is empty (a load:
/// the pairs come sorted, or nearly, and a bulk build beats walking the tree for each),
/// else inserted one by one.
fn insert_all(map: &mut BTreeMap<u64, u32>, pairs: impl Iterator<Item = (u64, u32)>) {
    if map.is_empty() {
        *map = pairs.collect();
    } else {
        map.extend(pairs);
    }
}

impl Records {
    // ---- reads ---------------------------------------------------------------------------

    /// The image table; an image's index is its position.
    pub(crate) fn images(&self) -> &[ImageRecord] {
        &self.images
    }

    pub(crate) fn image(&self, index: u32) -> &ImageRecord {
        &self.images[index as usize]
    }

    /// The sequence table; a sequence's index is its position.
    pub(crate) fn sequences(&self) -> &[SequenceRecord] {
        &self.sequences
    }

    pub(crate) fn sequence(&self, index: u32) -> &SequenceRecord {
        &self.sequences[index as usize]
    }

    /// The slot of the sequence with this key.
    pub(crate) fn sequence_slot_of(&self, key: &str) -> Option<u32> {
        self.sequence_index.get(key).copied()
    }

    pub(crate) fn creator(&self, index: u32) -> &CreatorRecord {
        &self.creators[index as usize]
    }

    /// The slot of the creator with this ID (also one known only from its images).
    pub(crate) fn creator_slot_of(&self, id: CreatorId) -> Option<u32> {
        self.creator_index.get(&id.0).copied()
    }

    /// The slot of the inserted creator with this username.
    pub(crate) fn username_slot(&self, username: &str) -> Option<u32> {
        self.username_index.get(username).copied()
    }

    pub(crate) fn organizations(&self) -> &[OrganizationRecord] {
        &self.organizations
    }

    pub(crate) fn organization(&self, index: u32) -> &OrganizationRecord {
        &self.organizations[index as usize]
    }

    /// The slot of the organization with this ID (also one known only from its images).
    pub(crate) fn organization_slot_of(&self, id: OrganizationId) -> Option<u32> {
        self.organization_index.get(&id.0).copied()
    }

    /// The ID of the organization in slot `index`, `None` for [`NONE`].
    pub(crate) fn organization_id_at(&self, index: u32) -> Option<OrganizationId> {
        (index != NONE).then(|| self.organizations[index as usize].id)
    }

    /// The slot of the hidden image with this ID.
    pub(crate) fn hidden_slot(&self, id: u64) -> Option<u32> {
        self.hidden.get(&id).copied()
    }

    /// The IDs of every hidden image, unordered.
    pub(crate) fn hidden_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.hidden.keys().copied()
    }

    /// The interned makes and models.
    pub(crate) fn strings(&self) -> &Interner {
        &self.strings
    }

    pub(crate) fn cameras(&self) -> &CameraPool {
        &self.cameras
    }

    pub(crate) fn map_features(&self) -> &[MapFeature] {
        &self.map_features
    }

    /// Map feature slots by ID, in ID order.
    pub(crate) fn map_feature_ids(&self) -> &BTreeMap<u64, u32> {
        &self.map_feature_ids
    }

    pub(crate) fn detections(&self) -> &[Detection] {
        &self.detections
    }

    /// Detection slots by ID, in ID order.
    pub(crate) fn detection_ids(&self) -> &BTreeMap<u64, u32> {
        &self.detection_ids
    }

    /// The detection slots of the image with this ID, in ID order.
    pub(crate) fn detections_of_image(&self, id: u64) -> Option<&[u32]> {
        self.detections_by_image.get(&id).map(Slots::as_slice)
    }

    /// The detection slots of the map feature with this ID, in ID order.
    pub(crate) fn detections_of_map_feature(&self, id: u64) -> Option<&[u32]> {
        self.detections_by_map_feature.get(&id).map(Slots::as_slice)
    }

    /// The image in slot `index`, rebuilt from its compact record.
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

    /// The IDs of the images in these slots.
    pub(crate) fn ids_of(&self, indices: &[u32]) -> Vec<ImageId> {
        indices
            .iter()
            .map(|&index| ImageId(self.images[index as usize].id))
            .collect()
    }

    /// The greatest ID of a map feature, detection, organization or creator (images are
    /// the indexes' to answer).
    pub(crate) fn greatest_id_but_images(&self) -> Option<u64> {
        [
            self.map_feature_ids.keys().next_back().copied(),
            self.detection_ids.keys().next_back().copied(),
            self.organization_index.keys().max().copied(),
            self.creator_index.keys().max().copied(),
        ]
        .into_iter()
        .flatten()
        .max()
    }

    /// Bytes of the structures kept per image or per sequence here: the image records, the
    /// image lists of creators, organizations and sequences, the sequence records and the
    /// sequence key index (its entries and control bytes). Vectors count at their capacity.
    pub(crate) fn image_bytes(&self) -> usize {
        let records = std::mem::size_of::<ImageRecord>() * self.images.capacity();
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
        records + lists + sequence_records + sequence_index
    }

    // ---- writes --------------------------------------------------------------------------

    /// Makes room for a batch of `count` images: by the batch, but by at least an eighth of
    /// the table (doubling would leave up to half the table's records unused, up to 88 bytes
    /// per image, an eighth at most 22, and small batches still grow geometrically).
    pub(crate) fn reserve_images(&mut self, count: usize) {
        let len = self.images.len();
        if len + count > self.images.capacity() {
            self.images.reserve_exact(count.max(len / 8));
        }
    }

    /// Gives back what loading left unused in the image table (which grew by doubling while
    /// rows came in: loading does not count them first) and the pools.
    pub(crate) fn shrink_pools(&mut self) {
        self.images.shrink_to_fit();
        self.cameras.shrink_to_fit();
        self.camera_parameters.shrink_to_fit();
    }

    fn creator_slot(&mut self, id: CreatorId) -> u32 {
        if let Some(&index) = self.creator_index.get(&id.0) {
            return index;
        }
        let index = slot(self.creators.len());
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
        let index = slot(self.organizations.len());
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
            return slot(self.sequences.len() - 1);
        }
        if let Some(&index) = self.sequence_index.get(id) {
            return index;
        }
        let index = slot(self.sequences.len());
        self.sequences.push(SequenceRecord {
            id: SequenceId(id.to_owned()),
            explicit: None,
            members: Vec::new(),
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

    /// Forgets that the sequence with this key was inserted (erasure left it without images).
    pub(crate) fn forget_sequence(&mut self, key: &str) {
        if let Some(&index) = self.sequence_index.get(key) {
            self.sequences[index as usize].explicit = None;
        }
    }

    pub(crate) fn push_sequence(&mut self, sequence: &Sequence) {
        let index = self.sequence_slot(sequence.id.as_str());
        self.sequences[index as usize].explicit = Some((sequence.creator, sequence.organization));
    }

    /// Appends an image to the table and its lists; [`Records::sort_new_image_lists`] then
    /// sorts the lists.
    pub(crate) fn push_image(&mut self, values: &RecordValues, names: &RecordNames<'_>) {
        self.push_image_hidden(values, names, false);
    }

    /// [`Records::push_image`], or with `hidden` the image of a hidden row: its slot joins no
    /// list, only the map of hidden images.
    pub(crate) fn push_image_hidden(
        &mut self,
        values: &RecordValues,
        names: &RecordNames<'_>,
        hidden: bool,
    ) {
        let index = slot(self.images.len());
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
        let mut record = ImageRecord::new(values, &links);
        if hidden {
            record.set_hidden(true);
            self.images.push(record);
            self.hidden.insert(values.id, index);
            return;
        }
        self.images.push(record);
        self.join_lists(index);
    }

    /// Adds the visible slot `index` to its creator's, organization's and sequence's lists.
    fn join_lists(&mut self, index: u32) {
        let record = self.images[index as usize];
        self.creators[record.creator as usize].images.push(index);
        if record.organization != NONE {
            self.organizations[record.organization as usize]
                .images
                .push(index);
        }
        self.sequences[record.sequence as usize].members.push(index);
    }

    /// Takes the visible `slots` out of their creators', organizations' and sequences'
    /// lists (which stay sorted) and returns the sequences they left, ascending.
    fn leave_lists(&mut self, slots: &[u32]) -> Vec<u32> {
        let gone: std::collections::HashSet<u32> = slots.iter().copied().collect();
        let records: Vec<ImageRecord> = slots
            .iter()
            .map(|&slot| self.images[slot as usize])
            .collect();
        let mut creators: Vec<u32> = records.iter().map(|record| record.creator).collect();
        let mut organizations: Vec<u32> = records
            .iter()
            .map(|record| record.organization)
            .filter(|&organization| organization != NONE)
            .collect();
        let mut sequences: Vec<u32> = records.iter().map(|record| record.sequence).collect();
        for list in [&mut creators, &mut organizations, &mut sequences] {
            list.sort_unstable();
            list.dedup();
        }
        for creator in creators {
            self.creators[creator as usize]
                .images
                .retain(|slot| !gone.contains(slot));
        }
        for organization in organizations {
            self.organizations[organization as usize]
                .images
                .retain(|slot| !gone.contains(slot));
        }
        for &sequence in &sequences {
            self.sequences[sequence as usize]
                .members
                .retain(|slot| !gone.contains(slot));
        }
        sequences
    }

    /// Hides the visible `slots`: out of every list, into the map of hidden images. Returns
    /// the sequences they left, ascending.
    pub(crate) fn hide(&mut self, slots: &[u32]) -> Vec<u32> {
        let sequences = self.leave_lists(slots);
        for &slot in slots {
            let record = &mut self.images[slot as usize];
            record.set_hidden(true);
            let id = record.id;
            self.hidden.insert(id, slot);
            self.hide_detections_of(id);
        }
        sequences
    }

    /// Moves the detections of image `id` out of view, into `hidden_detections`.
    pub(crate) fn hide_detections_of(&mut self, id: u64) {
        let Some(slots) = self.detections_by_image.remove(&id) else {
            return;
        };
        let gone: std::collections::HashSet<u32> = slots.as_slice().iter().copied().collect();
        self.drop_detection_links(&gone);
        self.hidden_detections.insert(id, slots);
    }

    /// Takes the detection slots `gone` out of the ID map and the per-map-feature lists.
    fn drop_detection_links(&mut self, gone: &std::collections::HashSet<u32>) {
        for &slot in gone {
            let detection = &self.detections[slot as usize];
            self.detection_ids.remove(&detection.id.0);
            if let Some(feature) = detection.map_feature
                && let Some(list) = self.detections_by_map_feature.get_mut(&feature.0)
                && !list.retain_not_in(gone)
            {
                self.detections_by_map_feature.remove(&feature.0);
            }
        }
    }

    /// Brings the detections of the restored image `id` back into view, lists sorted.
    fn restore_detections_of(&mut self, id: u64) {
        let Some(mut slots) = self.hidden_detections.remove(&id) else {
            return;
        };
        let detections = &self.detections;
        let by_id = |index: &u32| detections[*index as usize].id.0;
        slots.sort_by_key(by_id);
        for &slot in slots.as_slice() {
            let detection = &detections[slot as usize];
            self.detection_ids.insert(detection.id.0, slot);
            if let Some(feature) = detection.map_feature {
                push_slot(&mut self.detections_by_map_feature, feature.0, slot);
                if let Some(list) = self.detections_by_map_feature.get_mut(&feature.0) {
                    list.sort_by_key(by_id);
                }
            }
        }
        self.detections_by_image.insert(id, slots);
    }

    /// Makes the hidden image in `slot` visible again in a new slot at the end of the table
    /// (slots never move, so the old one becomes a tombstone); the caller then sorts the new
    /// slots' lists and indexes them, as for pushed images.
    pub(crate) fn restore(&mut self, slot: u32) {
        let mut record = self.images[slot as usize];
        self.hidden.remove(&record.id);
        self.restore_detections_of(record.id);
        record.set_hidden(false);
        let index = crate::image_record::slot(self.images.len());
        self.images.push(record);
        self.join_lists(index);
        self.images[slot as usize].clear();
    }

    /// Erases the images in `slots` (visible or hidden): out of every list and map, their
    /// slots tombstones. Returns the sequences that visible ones left, ascending.
    pub(crate) fn erase(&mut self, slots: &[u32]) -> Vec<u32> {
        let visible: Vec<u32> = slots
            .iter()
            .copied()
            .filter(|&slot| self.images[slot as usize].is_visible())
            .collect();
        let sequences = self.leave_lists(&visible);
        for &slot in slots {
            let record = &mut self.images[slot as usize];
            if record.is_hidden() {
                self.hidden.remove(&record.id);
            }
            record.clear();
        }
        sequences
    }

    /// Drops the detections of the images `image_ids` from the ID map and the per-image and
    /// per-map-feature lists (their slots stay, unreachable), and takes the images out of every
    /// map feature's image list. Returns the map features whose list changed.
    pub(crate) fn unlink_images(&mut self, image_ids: &std::collections::HashSet<u64>) -> Vec<u32> {
        let mut gone = std::collections::HashSet::new();
        for id in image_ids {
            if let Some(slots) = self.detections_by_image.remove(id) {
                gone.extend(slots.as_slice().iter().copied());
            }
            self.hidden_detections.remove(id);
        }
        self.drop_detection_links(&gone);
        let mut changed = Vec::new();
        for (index, feature) in self.map_features.iter_mut().enumerate() {
            if feature
                .images
                .iter()
                .any(|image| image_ids.contains(&image.0))
            {
                feature.images.retain(|image| !image_ids.contains(&image.0));
                changed.push(slot(index));
            }
        }
        changed
    }

    /// Appends the images of `other`, a load's second half read into records of its own on
    /// another thread, with their links turned into this table's slots: each name, camera
    /// and parameter list of `other` is resolved once here, not once per image. Only the
    /// images are taken (with the sequences, creators, organizations, makes, models and
    /// cameras they name), as if pushed one by one in `other`'s order;
    /// [`Records::sort_new_image_lists`] then sorts the lists.
    pub(crate) fn append_images(&mut self, other: &Records) {
        let strings: Vec<u32> = other
            .strings
            .all()
            .iter()
            .map(|text| self.strings.intern(text))
            .collect();
        let string = |index: u32| {
            if index == NONE {
                NONE
            } else {
                strings[index as usize]
            }
        };
        let first_list = self.camera_parameters.append(&other.camera_parameters);
        let cameras: Vec<u32> = other
            .cameras
            .all()
            .iter()
            .map(|camera| {
                self.cameras.intern(Camera {
                    make: string(camera.make),
                    model: string(camera.model),
                    parameters: if camera.parameters == NONE {
                        NONE
                    } else {
                        first_list + camera.parameters
                    },
                    kind: camera.kind,
                })
            })
            .collect();
        let sequences: Vec<u32> = other
            .sequences
            .iter()
            .map(|sequence| self.sequence_slot(sequence.id.as_str()))
            .collect();
        let creators: Vec<u32> = other
            .creators
            .iter()
            .map(|creator| self.creator_slot(creator.id))
            .collect();
        let organizations: Vec<u32> = other
            .organizations
            .iter()
            .map(|organization| self.organization_slot(organization.id))
            .collect();
        self.images.reserve_exact(other.images.len());
        for record in &other.images {
            let index = slot(self.images.len());
            let mut record = *record;
            record.sequence = sequences[record.sequence as usize];
            record.creator = creators[record.creator as usize];
            if record.organization != NONE {
                record.organization = organizations[record.organization as usize];
            }
            record.camera = cameras[record.camera as usize];
            if record.is_hidden() {
                self.hidden.insert(record.id, index);
                self.images.push(record);
                continue;
            }
            if record.organization != NONE {
                self.organizations[record.organization as usize]
                    .images
                    .push(index);
            }
            self.creators[record.creator as usize].images.push(index);
            self.sequences[record.sequence as usize].members.push(index);
            self.images.push(record);
        }
    }

    /// Sorts the lists that images `first_new..` joined and returns the sequences they
    /// belong to, ascending.
    pub(crate) fn sort_new_image_lists(&mut self, first_new: usize) -> Vec<u32> {
        let Self {
            images,
            creators,
            organizations,
            sequences,
            ..
        } = self;
        let new = &images[first_new..];
        // After a large batch (loading) the lists drop the slack of growing by doubling.
        let large = new.len() >= LARGE_BATCH;
        let by_id = |index: &u32| images[*index as usize].id;
        let by_capture = |index: &u32| {
            let record = &images[*index as usize];
            (record.captured_at, record.id)
        };
        // Each list was sorted before the batch, which appended its slots in table order: only
        // from the last old slot on can a list be out of order. When the whole table is in ID
        // order (a load), slots appended in table order are in ID order too.
        let unsorted_from = |list: &[u32]| {
            list.partition_point(|&index| (index as usize) < first_new)
                .saturating_sub(1)
        };
        let in_id_order = first_new == 0 && images.is_sorted_by_key(|record| record.id);
        let sort = |list: &mut Vec<u32>| {
            if !in_id_order && !list[unsorted_from(list)..].is_sorted_by_key(by_id) {
                list.sort_unstable_by_key(by_id);
            }
            if large {
                list.shrink_to_fit();
            }
        };
        for creator in touched(new.iter().map(|record| record.creator), creators.len()) {
            sort(&mut creators[creator as usize].images);
        }
        // `NONE` (no organization) becomes the slot after the last, left out below.
        let organizations_touched = touched(
            new.iter()
                .map(|record| record.organization.min(slot(organizations.len()))),
            organizations.len() + 1,
        );
        for &organization in &organizations_touched {
            if let Some(organization) = organizations.get_mut(organization as usize) {
                sort(&mut organization.images);
            }
        }
        let sequences_touched = touched(new.iter().map(|record| record.sequence), sequences.len());
        for &sequence in &sequences_touched {
            let members = &mut sequences[sequence as usize].members;
            if !members[unsorted_from(members)..].is_sorted_by_key(by_capture) {
                members.sort_unstable_by_key(by_capture);
            }
            if large {
                members.shrink_to_fit();
            }
        }
        sequences_touched
    }

    /// Appends map features to the table.
    pub(crate) fn push_map_features(&mut self, features: Vec<MapFeature>) {
        let first = self.map_features.len();
        insert_all(
            &mut self.map_feature_ids,
            features
                .iter()
                .enumerate()
                .map(|(offset, feature)| (feature.id.0, slot(first + offset))),
        );
        append(&mut self.map_features, features);
    }

    /// Appends detections to the table and their lists; [`Records::sort_new_detection_lists`]
    /// then sorts the lists.
    pub(crate) fn push_detections(&mut self, detections: Vec<Detection>) {
        let first = self.detections.len();
        self.detections_by_image.reserve(detections.len());
        let hidden = &self.hidden;
        for (offset, detection) in detections.iter().enumerate() {
            let index = slot(first + offset);
            if hidden.contains_key(&detection.image.0) {
                // Out of view with its image (sorted when the image is restored).
                push_slot(&mut self.hidden_detections, detection.image.0, index);
                continue;
            }
            push_slot(&mut self.detections_by_image, detection.image.0, index);
            if let Some(feature) = detection.map_feature {
                push_slot(&mut self.detections_by_map_feature, feature.0, index);
            }
        }
        insert_all(
            &mut self.detection_ids,
            detections
                .iter()
                .enumerate()
                .filter(|(_, detection)| !hidden.contains_key(&detection.image.0))
                .map(|(offset, detection)| (detection.id.0, slot(first + offset))),
        );
        append(&mut self.detections, detections);
    }

    /// Sorts the detection lists that detections `first_new..` joined: after a load every
    /// list, in table order, rather than looking each detection's lists up.
    pub(crate) fn sort_new_detection_lists(&mut self, first_new: usize) {
        let detections = &self.detections;
        let by_id = |index: &u32| detections[*index as usize].id.0;
        if first_new == 0 {
            for list in self
                .detections_by_image
                .values_mut()
                .chain(self.detections_by_map_feature.values_mut())
            {
                list.sort_by_key(by_id);
            }
            return;
        }
        for detection in &detections[first_new..] {
            if let Some(list) = self.detections_by_image.get_mut(&detection.image.0) {
                list.sort_by_key(by_id);
            }
            if let Some(feature) = detection.map_feature
                && let Some(list) = self.detections_by_map_feature.get_mut(&feature.0)
            {
                list.sort_by_key(by_id);
            }
        }
    }
}

/// Appends `new` to `table`, taking `new`'s allocation when `table` is empty.
fn append<T>(table: &mut Vec<T>, new: Vec<T>) {
    if table.is_empty() {
        *table = new;
    } else {
        table.extend(new);
    }
}

/// The distinct slots of `slots` (each below `count`), ascending: marked in a table of
/// `count` flags when they are as many (a load), else sorted.
fn touched(slots: impl ExactSizeIterator<Item = u32>, count: usize) -> Vec<u32> {
    if slots.len() >= count {
        let mut seen = vec![false; count];
        for marked in slots {
            seen[marked as usize] = true;
        }
        return (0..count).filter(|&index| seen[index]).map(slot).collect();
    }
    let mut slots: Vec<u32> = slots.collect();
    slots.sort_unstable();
    slots.dedup();
    slots
}

#[cfg(test)]
mod tests {
    use streetlevel_model::{CameraType, Point, Timestamp};

    use super::*;

    /// Images whose cameras, parameter lists, sequences and creators come in runs, so that a
    /// split falls inside runs.
    fn image(number: u64) -> Image {
        Image {
            id: ImageId(100 + number),
            altitude: None,
            atomic_scale: None,
            camera_parameters: (number % 7 != 6)
                .then(|| vec![0.8, f64::from(u32::try_from(number / 3).unwrap())]),
            camera_type: number.is_multiple_of(5).then_some(CameraType::Fisheye),
            captured_at: Timestamp(1_000 - number.cast_signed()),
            compass_angle: None,
            computed_altitude: None,
            computed_compass_angle: None,
            computed_geometry: None,
            computed_rotation: None,
            creator: CreatorId(number / 6),
            exif_orientation: None,
            geometry: Point::new(13.0, 55.0),
            height: 1,
            width: 1,
            is_pano: false,
            make: (number % 4 != 3).then(|| format!("make{}", number / 8)),
            model: (number % 3 != 2).then(|| String::from("model")),
            merge_cc: None,
            mesh: None,
            sequence: SequenceId(format!("s{}", number / 5)),
            sfm_cluster: None,
            quality_score: None,
            organization: number
                .is_multiple_of(2)
                .then_some(OrganizationId(number / 9)),
        }
    }

    fn pushed(images: &[Image]) -> Records {
        let mut records = Records::default();
        for image in images {
            records.push_image(&RecordValues::of(image), &RecordNames::of(image));
        }
        records
    }

    #[test]
    fn appending_a_second_half_is_pushing_its_images_one_by_one() {
        let images: Vec<Image> = (0..60).map(image).collect();
        let whole = pushed(&images);
        for split in [0, 1, 7, 8, 20, 33, 59, 60] {
            let mut halves = pushed(&images[..split]);
            halves.append_images(&pushed(&images[split..]));
            for index in 0..u32::try_from(images.len()).unwrap() {
                assert_eq!(halves.image_at(index), images[index as usize], "{split}");
            }
            // The same pools: a run that the split cuts is still stored once.
            assert_eq!(halves.cameras.all(), whole.cameras.all(), "{split}");
            assert_eq!(halves.camera_parameters, whole.camera_parameters, "{split}");
            assert_eq!(halves.strings.all(), whole.strings.all(), "{split}");
            let lists = |records: &Records| {
                (
                    records
                        .sequences
                        .iter()
                        .map(|sequence| (sequence.id.clone(), sequence.members.clone()))
                        .collect::<Vec<_>>(),
                    records
                        .creators
                        .iter()
                        .map(|creator| (creator.id, creator.images.clone()))
                        .collect::<Vec<_>>(),
                    records
                        .organizations
                        .iter()
                        .map(|organization| (organization.id, organization.images.clone()))
                        .collect::<Vec<_>>(),
                )
            };
            assert_eq!(lists(&halves), lists(&whole), "{split}");
        }
    }
}
