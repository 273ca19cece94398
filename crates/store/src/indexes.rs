//! The indexes over the records: the ID order, the image and sequence R-trees, the S2 order
//! and the map feature R-tree.
//!
//! Invariants kept here: each index covers exactly the records it was given (every visible
//! image, every sequence with visible images, every map feature, each once; hidden and
//! removed image slots are in none, see `image_record.rs`); the ID order lists image slots
//! in ascending ID order and the S2 order by the leaf cell of the original location; an
//! image's box in its tree contains both of its locations, a sequence's box every location
//! of its members (both variants), and `sequence_entries[s]` is the entry of sequence `s`
//! in the sequence tree.

use rstar::primitives::GeomWithData;
use rstar::{AABB, RStarInsertionStrategy, RTree, RTreeObject, RTreeParams};

use crate::image_record::{ImageRecord, slot};
use crate::records::Records;
use crate::s2::S2CellId;

/// Batches of at least this many images build their R-tree on a second thread.
const PARALLEL_INDEXING: usize = 50_000;

/// The `f32` nearest to `value` (infinite beyond `f32`'s range).
#[allow(clippy::cast_possible_truncation)] // the rounding is the point; callers correct it
fn nearest_f32(value: f64) -> f32 {
    value as f32
}

/// The largest `f32` not above `value`.
pub(crate) fn lower_f32(value: f64) -> f32 {
    let rounded = nearest_f32(value);
    if f64::from(rounded) > value {
        rounded.next_down()
    } else {
        rounded
    }
}

/// The smallest `f32` not below `value`.
pub(crate) fn upper_f32(value: f64) -> f32 {
    let rounded = nearest_f32(value);
    if f64::from(rounded) < value {
        rounded.next_up()
    } else {
        rounded
    }
}

/// An image in the R-tree: the box around its original and computed locations (in `f32`,
/// widened outwards so it always contains both) and its index in the image table. One tree
/// serves both geometry variants; queries check the exact `f64` location afterwards.
///
/// The box is kept as rstar's envelope, not as corners: bulk loading asks for it at every
/// comparison, and building it from corners each time was most of the tree's load time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ImageEntry {
    envelope: AABB<[f32; 2]>,
    pub(crate) index: u32,
}

impl RTreeObject for ImageEntry {
    type Envelope = AABB<[f32; 2]>;

    fn envelope(&self) -> Self::Envelope {
        self.envelope
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
        ImageEntry {
            envelope: AABB::from_corners(min, max),
            index,
        }
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
    pub(crate) fn around<'a>(
        records: impl Iterator<Item = &'a ImageRecord>,
        index: u32,
    ) -> Option<Self> {
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

/// A map feature in its R-tree: its point and its slot.
pub(crate) type MapFeatureEntry = GeomWithData<[f64; 2], u32>;

/// The indexes (see the module documentation).
#[derive(Debug)]
pub(crate) struct Indexes {
    /// Image slots in ascending ID order (the ID lookup, by binary search).
    id_order: Vec<u32>,
    image_tree: RTree<ImageEntry, ImageTreeParams>,
    /// Image slots sorted by the leaf S2 cell of their original location (computed from the
    /// record when searching, rather than stored).
    s2_images: Vec<u32>,
    /// The entry of each sequence in `sequence_tree`, by sequence slot (`None`: no images).
    sequence_entries: Vec<Option<SequenceEntry>>,
    /// One box per sequence around all locations of its images.
    sequence_tree: RTree<SequenceEntry>,
    map_feature_tree: RTree<MapFeatureEntry>,
}

impl Default for Indexes {
    fn default() -> Self {
        Indexes {
            id_order: Vec::new(),
            image_tree: RTree::new_with_params(),
            s2_images: Vec::new(),
            sequence_entries: Vec::new(),
            sequence_tree: RTree::new(),
            map_feature_tree: RTree::new(),
        }
    }
}

/// The leaf S2 cell of an image's original location.
fn s2_leaf(images: &[ImageRecord], index: u32) -> u64 {
    let [lon, lat] = images[index as usize].geometry;
    S2CellId::from_lat_lng(lat, lon).raw()
}

impl Indexes {
    /// The box around every image's locations, `[west, south, east, north]` (widened to
    /// `f32`), `None` without images.
    pub(crate) fn image_extent(&self) -> Option<[f64; 4]> {
        let envelope = self.image_tree.root().envelope();
        let (lower, upper) = (envelope.lower(), envelope.upper());
        extent(
            self.image_tree.size(),
            [lower[0], lower[1], upper[0], upper[1]].map(f64::from),
        )
    }

    /// The box around every map feature, as [`Indexes::image_extent`].
    pub(crate) fn map_feature_extent(&self) -> Option<[f64; 4]> {
        let envelope = self.map_feature_tree.root().envelope();
        let (lower, upper) = (envelope.lower(), envelope.upper());
        extent(
            self.map_feature_tree.size(),
            [lower[0], lower[1], upper[0], upper[1]],
        )
    }

    // ---- reads ---------------------------------------------------------------------------

    /// Image slots in ascending ID order.
    pub(crate) fn id_order(&self) -> &[u32] {
        &self.id_order
    }

    /// The slot of the image with this ID, by binary search over the ID order.
    pub(crate) fn image_index(&self, records: &Records, id: u64) -> Option<u32> {
        let &last = self.id_order.last()?;
        if id > records.image(last).id {
            return None;
        }
        let position = self
            .id_order
            .binary_search_by_key(&id, |&index| records.image(index).id)
            .ok()?;
        Some(self.id_order[position])
    }

    /// The greatest image ID.
    pub(crate) fn greatest_image_id(&self, records: &Records) -> Option<u64> {
        self.id_order.last().map(|&index| records.image(index).id)
    }

    /// The slots of the images whose box meets `envelope`, in no particular order.
    pub(crate) fn images_meeting(&self, envelope: &AABB<[f32; 2]>) -> impl Iterator<Item = u32> {
        self.image_tree
            .locate_in_envelope_intersecting(envelope)
            .map(|entry| entry.index)
    }

    /// The entries of the sequences whose box meets `envelope`, in no particular order.
    pub(crate) fn sequences_meeting(
        &self,
        envelope: &AABB<[f32; 2]>,
    ) -> impl Iterator<Item = &SequenceEntry> {
        self.sequence_tree.locate_in_envelope_intersecting(envelope)
    }

    /// The entry of sequence slot `index`, if it has images.
    pub(crate) fn sequence_entry(&self, index: u32) -> Option<&SequenceEntry> {
        self.sequence_entries.get(index as usize)?.as_ref()
    }

    /// The slots of the map features whose point lies in `envelope`.
    pub(crate) fn map_features_in(&self, envelope: &AABB<[f64; 2]>) -> impl Iterator<Item = u32> {
        self.map_feature_tree
            .locate_in_envelope(envelope)
            .map(|entry| entry.data)
    }

    /// The image slots whose original location lies in the S2 cell, in no particular order.
    pub(crate) fn images_in_s2_cell(&self, records: &Records, cell: S2CellId) -> &[u32] {
        let images = records.images();
        let start = self
            .s2_images
            .partition_point(|&index| s2_leaf(images, index) < cell.range_min());
        let end = start
            + self.s2_images[start..]
                .partition_point(|&index| s2_leaf(images, index) <= cell.range_max());
        &self.s2_images[start..end]
    }

    /// Bytes held per image and per sequence: the ID order, the image R-tree, the S2 order,
    /// the sequence entries and the sequence R-tree.
    pub(crate) fn image_bytes(&self) -> usize {
        self.id_order.capacity() * 4
            + r_tree_bytes(self.image_tree.root())
            + self.s2_images.capacity() * 4
            + self.sequence_entries.capacity() * std::mem::size_of::<Option<SequenceEntry>>()
            + r_tree_bytes(self.sequence_tree.root())
    }

    // ---- writes --------------------------------------------------------------------------

    /// Adds images `first_new..` of `records` (whose lists are sorted), members of the
    /// sequences `touched`, to every image and sequence index. `alongside` runs on this
    /// thread while a large batch's R-tree is built on a second one.
    pub(crate) fn add_images(
        &mut self,
        records: &Records,
        first_new: usize,
        touched: &[u32],
        alongside: impl FnOnce(),
    ) {
        let images = records.images();
        if images.len() == first_new {
            return;
        }
        let Self {
            id_order,
            image_tree,
            s2_images,
            sequence_entries,
            sequence_tree,
            ..
        } = self;
        let everything_but_the_tree = || {
            Self::update_sequences(sequence_entries, sequence_tree, records, touched);
            Self::extend_id_order(id_order, images, first_new);
            Self::extend_s2_index(s2_images, images, first_new);
            alongside();
        };
        if images.len() - first_new >= PARALLEL_INDEXING {
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

    /// Recomputes the boxes of the `touched` sequences; rebuilds the tree when they are at
    /// least as many as it holds, else replaces their entries one by one.
    fn update_sequences(
        entries: &mut Vec<Option<SequenceEntry>>,
        tree: &mut RTree<SequenceEntry>,
        records: &Records,
        touched: &[u32],
    ) {
        let sequences = records.sequences();
        if entries.len() < sequences.len() {
            entries.resize(sequences.len(), None);
        }
        let rebuild = touched.len() >= tree.size();
        for &sequence in touched {
            let members = &records.sequence(sequence).members;
            let entry =
                SequenceEntry::around(members.iter().map(|&index| records.image(index)), sequence);
            let old = std::mem::replace(&mut entries[sequence as usize], entry);
            if !rebuild {
                if let Some(old) = old {
                    tree.remove(&old);
                }
                if let Some(entry) = entry {
                    tree.insert(entry);
                }
            }
        }
        if rebuild {
            *tree = RTree::bulk_load(entries.iter().flatten().copied().collect());
        }
    }

    /// Adds images `first_new..` to the ID order: appended when their IDs follow the last one
    /// (loading, ascending inserts), else merged.
    fn extend_id_order(id_order: &mut Vec<u32>, images: &[ImageRecord], first_new: usize) {
        let by_id = |index: &u32| images[*index as usize].id;
        let mut added: Vec<u32> = (slot(first_new)..slot(images.len()))
            .filter(|&index| images[index as usize].is_visible())
            .collect();
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
            .filter(|(_, record)| record.is_visible())
            .map(|(offset, record)| ImageEntry::new(record, slot(first_new + offset)));
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
        let leaf = |index: u32| s2_leaf(images, index);
        let mut added: Vec<(u64, u32)> = (slot(first_new)..slot(images.len()))
            .filter(|&index| images[index as usize].is_visible())
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

    /// Takes the image `slots` out of every image index: `removed` holds their records as they
    /// were before (the R-tree finds entries by box, and a removed record's values are
    /// cleared). Then recomputes the boxes of the sequences `touched` (whose member lists no
    /// longer hold the slots).
    pub(crate) fn remove_images(
        &mut self,
        records: &Records,
        removed: &[(u32, ImageRecord)],
        touched: &[u32],
    ) {
        if removed.is_empty() {
            return;
        }
        let gone: std::collections::HashSet<u32> = removed.iter().map(|&(slot, _)| slot).collect();
        self.id_order.retain(|slot| !gone.contains(slot));
        self.s2_images.retain(|slot| !gone.contains(slot));
        if removed.len().saturating_mul(4) >= self.image_tree.size() {
            let kept: Vec<ImageEntry> = self
                .image_tree
                .iter()
                .filter(|entry| !gone.contains(&entry.index))
                .copied()
                .collect();
            self.image_tree = RTree::bulk_load_with_params(kept);
        } else {
            for (slot, record) in removed {
                self.image_tree.remove(&ImageEntry::new(record, *slot));
            }
        }
        Self::update_sequences(
            &mut self.sequence_entries,
            &mut self.sequence_tree,
            records,
            touched,
        );
    }

    /// Adds map features `first_new..` of `records` to their R-tree.
    pub(crate) fn add_map_features(&mut self, records: &Records, first_new: usize) {
        let features = records.map_features();
        let entries = features[first_new..]
            .iter()
            .enumerate()
            .map(|(offset, feature)| {
                GeomWithData::new(
                    [feature.geometry.lon, feature.geometry.lat],
                    slot(first_new + offset),
                )
            });
        if features.len() - first_new >= self.map_feature_tree.size() {
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

fn extent(size: usize, corners: [f64; 4]) -> Option<[f64; 4]> {
    (size > 0).then_some(corners)
}
