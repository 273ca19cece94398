//! The compact in-memory form of an image: fixed-size, no heap, strings and cameras interned;
//! and which of its two locations a coverage tile uses. The bottom of the store: everything
//! else builds on these records.

use streetlevel_model::{
    CameraType, CreatorId, Image, ImageId, MediaId, OrganizationId, Point, Timestamp,
};

/// A hash map with foldhash's fast hasher: the store's keys are its own (IDs, keys, names
/// from its database), so `SipHash`'s protection against chosen collisions buys nothing and
/// costs much of loading (docs/PERFORMANCE.md).
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// "No value" for the interned indices.
pub(crate) const NONE: u32 = u32::MAX;

/// The `u32` slot of the record at `index` in one of the store's vectors (images, sequences,
/// strings, camera lists...): the store keeps every reference to a record in 32 bits, with
/// [`NONE`] for none, so it holds fewer than 2^32 - 1 records of a kind.
pub(crate) fn slot(index: usize) -> u32 {
    u32::try_from(index)
        .ok()
        .filter(|&slot| slot != NONE)
        .expect("the store holds fewer than 2^32 - 1 records of a kind")
}

const IS_PANO: u8 = 1;
const HAS_MERGE_CC: u8 = 2;
const HAS_MESH: u8 = 4;
const HAS_SFM_CLUSTER: u8 = 8;
const HAS_EXIF_ORIENTATION: u8 = 16;
/// Withdrawn from public view: the record stays (so the image can be restored) but no index,
/// list or tile structure holds its slot.
const HIDDEN: u8 = 32;
/// Erased: the slot is a tombstone whose values were cleared; nothing refers to it.
const REMOVED: u8 = 64;

/// One image in 176 bytes. Optional floats are `NaN` when absent (a `Some(NaN)` reads back as
/// `None`: NaN has no JSON form anyway). Make, model, camera parameters and camera type are
/// one interned [`Camera`]: images of one camera share them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ImageRecord {
    pub(crate) id: u64,
    pub(crate) captured_at: i64,
    pub(crate) geometry: [f64; 2],
    pub(crate) computed_geometry: [f64; 2],
    pub(crate) altitude: f64,
    pub(crate) atomic_scale: f64,
    pub(crate) compass_angle: f64,
    pub(crate) computed_altitude: f64,
    pub(crate) computed_compass_angle: f64,
    pub(crate) quality_score: f64,
    pub(crate) computed_rotation: [f64; 3],
    pub(crate) merge_cc: u64,
    pub(crate) mesh: u64,
    pub(crate) sfm_cluster: u64,
    pub(crate) width: u32,
    pub(crate) height: u32,
    /// Index into the store's sequences.
    pub(crate) sequence: u32,
    /// Index into the store's creators.
    pub(crate) creator: u32,
    /// Index into the store's organizations, or [`NONE`].
    pub(crate) organization: u32,
    /// Index into the store's camera pool.
    pub(crate) camera: u32,
    exif_orientation: u8,
    flags: u8,
}

/// The fixed-size values of an image, as read from an [`Image`] or straight from a database
/// row, before the store resolves the names into indices.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecordValues {
    pub(crate) id: u64,
    pub(crate) captured_at: i64,
    pub(crate) geometry: [f64; 2],
    pub(crate) computed_geometry: Option<[f64; 2]>,
    pub(crate) altitude: Option<f64>,
    pub(crate) atomic_scale: Option<f64>,
    pub(crate) compass_angle: Option<f64>,
    pub(crate) computed_altitude: Option<f64>,
    pub(crate) computed_compass_angle: Option<f64>,
    pub(crate) quality_score: Option<f64>,
    pub(crate) computed_rotation: Option<[f64; 3]>,
    pub(crate) merge_cc: Option<u64>,
    pub(crate) mesh: Option<u64>,
    pub(crate) sfm_cluster: Option<u64>,
    pub(crate) width: u32,
    pub(crate) height: u32,
    pub(crate) exif_orientation: Option<u8>,
    pub(crate) is_pano: bool,
}

impl RecordValues {
    pub(crate) fn of(image: &Image) -> Self {
        RecordValues {
            id: image.id.0,
            captured_at: image.captured_at.0,
            geometry: [image.geometry.lon, image.geometry.lat],
            computed_geometry: image.computed_geometry.map(|point| [point.lon, point.lat]),
            altitude: image.altitude,
            atomic_scale: image.atomic_scale,
            compass_angle: image.compass_angle,
            computed_altitude: image.computed_altitude,
            computed_compass_angle: image.computed_compass_angle,
            quality_score: image.quality_score,
            computed_rotation: image.computed_rotation,
            merge_cc: image.merge_cc,
            mesh: image.mesh.map(|mesh| mesh.0),
            sfm_cluster: image.sfm_cluster.map(|cluster| cluster.0),
            width: image.width,
            height: image.height,
            exif_orientation: image.exif_orientation,
            is_pano: image.is_pano,
        }
    }
}

/// The names an image refers to, borrowed from an [`Image`] or a database row; the store
/// resolves them into indices.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecordNames<'a> {
    pub(crate) sequence: &'a str,
    pub(crate) creator: CreatorId,
    pub(crate) organization: Option<OrganizationId>,
    pub(crate) make: Option<&'a str>,
    pub(crate) model: Option<&'a str>,
    pub(crate) camera_parameters: Option<&'a [f64]>,
    pub(crate) camera_type: Option<CameraType>,
}

impl<'a> RecordNames<'a> {
    pub(crate) fn of(image: &'a Image) -> Self {
        RecordNames {
            sequence: image.sequence.as_str(),
            creator: image.creator,
            organization: image.organization,
            make: image.make.as_deref(),
            model: image.model.as_deref(),
            camera_parameters: image.camera_parameters.as_deref(),
            camera_type: image.camera_type,
        }
    }
}

/// The indices an image record refers to, resolved by the store before building it.
pub(crate) struct RecordLinks {
    pub(crate) sequence: u32,
    pub(crate) creator: u32,
    pub(crate) organization: u32,
    pub(crate) camera: u32,
}

/// What the store resolves indices back to when rebuilding an [`Image`].
pub(crate) struct ResolvedNames<'a> {
    pub(crate) sequence: &'a streetlevel_model::SequenceId,
    pub(crate) creator: CreatorId,
    pub(crate) organization: Option<OrganizationId>,
    pub(crate) make: Option<&'a str>,
    pub(crate) model: Option<&'a str>,
    pub(crate) camera_parameters: Option<&'a [f64]>,
    pub(crate) camera_type: Option<CameraType>,
}

fn encode(value: Option<f64>) -> f64 {
    value.unwrap_or(f64::NAN)
}

fn decode(value: f64) -> Option<f64> {
    (!value.is_nan()).then_some(value)
}

impl ImageRecord {
    pub(crate) fn new(values: &RecordValues, links: &RecordLinks) -> Self {
        let mut flags = 0;
        if values.is_pano {
            flags |= IS_PANO;
        }
        if values.merge_cc.is_some() {
            flags |= HAS_MERGE_CC;
        }
        if values.mesh.is_some() {
            flags |= HAS_MESH;
        }
        if values.sfm_cluster.is_some() {
            flags |= HAS_SFM_CLUSTER;
        }
        if values.exif_orientation.is_some() {
            flags |= HAS_EXIF_ORIENTATION;
        }
        ImageRecord {
            id: values.id,
            captured_at: values.captured_at,
            geometry: values.geometry,
            computed_geometry: values.computed_geometry.unwrap_or([f64::NAN; 2]),
            altitude: encode(values.altitude),
            atomic_scale: encode(values.atomic_scale),
            compass_angle: encode(values.compass_angle),
            computed_altitude: encode(values.computed_altitude),
            computed_compass_angle: encode(values.computed_compass_angle),
            quality_score: encode(values.quality_score),
            computed_rotation: values.computed_rotation.unwrap_or([f64::NAN; 3]),
            merge_cc: values.merge_cc.unwrap_or(0),
            mesh: values.mesh.unwrap_or(0),
            sfm_cluster: values.sfm_cluster.unwrap_or(0),
            width: values.width,
            height: values.height,
            sequence: links.sequence,
            creator: links.creator,
            organization: links.organization,
            camera: links.camera,
            exif_orientation: values.exif_orientation.unwrap_or(0),
            flags,
        }
    }

    pub(crate) fn to_image(self, names: &ResolvedNames<'_>) -> Image {
        let flag = |bit: u8| self.flags & bit != 0;
        Image {
            id: ImageId(self.id),
            altitude: decode(self.altitude),
            atomic_scale: decode(self.atomic_scale),
            camera_parameters: names.camera_parameters.map(<[f64]>::to_vec),
            camera_type: names.camera_type,
            captured_at: Timestamp(self.captured_at),
            compass_angle: decode(self.compass_angle),
            computed_altitude: decode(self.computed_altitude),
            computed_compass_angle: decode(self.computed_compass_angle),
            computed_geometry: self.computed_point(),
            computed_rotation: (!self.computed_rotation[0].is_nan())
                .then_some(self.computed_rotation),
            creator: names.creator,
            exif_orientation: flag(HAS_EXIF_ORIENTATION).then_some(self.exif_orientation),
            geometry: self.point(),
            height: self.height,
            width: self.width,
            is_pano: self.is_pano(),
            make: names.make.map(str::to_owned),
            model: names.model.map(str::to_owned),
            merge_cc: flag(HAS_MERGE_CC).then_some(self.merge_cc),
            mesh: flag(HAS_MESH).then_some(MediaId(self.mesh)),
            sequence: names.sequence.clone(),
            sfm_cluster: flag(HAS_SFM_CLUSTER).then_some(MediaId(self.sfm_cluster)),
            quality_score: decode(self.quality_score),
            organization: names.organization,
        }
    }

    /// The mesh of the image, if it has one.
    pub(crate) fn mesh_id(&self) -> Option<MediaId> {
        (self.flags & HAS_MESH != 0).then_some(MediaId(self.mesh))
    }

    /// The `SfM` cluster of the image, if it has one.
    pub(crate) fn sfm_cluster_id(&self) -> Option<MediaId> {
        (self.flags & HAS_SFM_CLUSTER != 0).then_some(MediaId(self.sfm_cluster))
    }

    pub(crate) fn is_pano(&self) -> bool {
        self.flags & IS_PANO != 0
    }

    /// Whether the slot is a tombstone (an erased image, or a hidden one restored into a new
    /// slot).
    pub(crate) fn is_removed(&self) -> bool {
        self.flags & REMOVED != 0
    }

    /// Whether the image is withdrawn from public view (its slot in no index or list).
    pub(crate) fn is_hidden(&self) -> bool {
        self.flags & HIDDEN != 0
    }

    /// Whether the slot holds a public image: neither hidden nor removed. Only these slots
    /// are in the indexes, lists and tile structures.
    pub(crate) fn is_visible(&self) -> bool {
        self.flags & (HIDDEN | REMOVED) == 0
    }

    /// Marks the image hidden (or visible again).
    pub(crate) fn set_hidden(&mut self, hidden: bool) {
        if hidden {
            self.flags |= HIDDEN;
        } else {
            self.flags &= !HIDDEN;
        }
    }

    /// Turns the slot into a tombstone: every value is cleared (nothing of the image stays in
    /// memory but its former links, which keep the tables' shapes), and the flag set.
    pub(crate) fn clear(&mut self) {
        let links = RecordLinks {
            sequence: self.sequence,
            creator: self.creator,
            organization: self.organization,
            camera: self.camera,
        };
        let values = RecordValues {
            id: 0,
            captured_at: 0,
            geometry: [0.0, 0.0],
            computed_geometry: None,
            altitude: None,
            atomic_scale: None,
            compass_angle: None,
            computed_altitude: None,
            computed_compass_angle: None,
            quality_score: None,
            computed_rotation: None,
            merge_cc: None,
            mesh: None,
            sfm_cluster: None,
            width: 0,
            height: 0,
            exif_orientation: None,
            is_pano: false,
        };
        *self = ImageRecord::new(&values, &links);
        self.flags = REMOVED;
    }

    /// The original location.
    pub(crate) fn point(&self) -> Point {
        Point::new(self.geometry[0], self.geometry[1])
    }

    /// The computed location, if any.
    pub(crate) fn computed_point(&self) -> Option<Point> {
        (!self.computed_geometry[0].is_nan())
            .then(|| Point::new(self.computed_geometry[0], self.computed_geometry[1]))
    }

    /// The compass angle, computed when `computed` and present, else the original.
    pub(crate) fn compass(&self, computed: bool) -> Option<f64> {
        if computed && !self.computed_compass_angle.is_nan() {
            return Some(self.computed_compass_angle);
        }
        decode(self.compass_angle)
    }
}

/// Which location of an image a coverage tile uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GeometryVariant {
    /// The original `geometry` (tile set `svc1_public`).
    Original,
    /// `computed_geometry`, falling back to `geometry` when absent (`svc1_computed_public`).
    Computed,
}

impl GeometryVariant {
    /// The location of this variant (lon, lat).
    pub(crate) fn point(self, record: &ImageRecord) -> [f64; 2] {
        match self {
            GeometryVariant::Computed if !record.computed_geometry[0].is_nan() => {
                record.computed_geometry
            }
            _ => record.geometry,
        }
    }

    pub(crate) fn is_computed(self) -> bool {
        self == GeometryVariant::Computed
    }
}

/// A camera as images name it: make, model (interned strings or [`NONE`]), parameters (index
/// into the [`ParameterPool`] or [`NONE`]) and type. Images share one entry per distinct
/// combination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Camera {
    pub(crate) make: u32,
    pub(crate) model: u32,
    pub(crate) parameters: u32,
    pub(crate) kind: Option<CameraType>,
}

/// The cameras images name. A camera without parameters is stored once (sets have a
/// handful of makes and models); one with parameters is stored once per run of images with
/// that parameter list (see [`ParameterPool`]: a list is shared only along a run, so a
/// lookup table over such cameras would only grow).
#[derive(Debug, Default)]
pub(crate) struct CameraPool {
    cameras: Vec<Camera>,
    /// Cameras without parameters, by value.
    index: FastMap<Camera, u32>,
}

impl CameraPool {
    pub(crate) fn intern(&mut self, camera: Camera) -> u32 {
        if camera.parameters == NONE {
            if let Some(&index) = self.index.get(&camera) {
                return index;
            }
            let index = self.push(camera);
            self.index.insert(camera, index);
            return index;
        }
        match self.cameras.last() {
            Some(last) if *last == camera => slot(self.cameras.len() - 1),
            _ => self.push(camera),
        }
    }

    fn push(&mut self, camera: Camera) -> u32 {
        let index = slot(self.cameras.len());
        self.cameras.push(camera);
        index
    }

    pub(crate) fn get(&self, index: u32) -> Option<&Camera> {
        self.cameras.get(index as usize)
    }

    /// Gives back the room a growing table left unused.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.cameras.shrink_to_fit();
    }

    /// Every camera, by index.
    pub(crate) fn all(&self) -> &[Camera] {
        &self.cameras
    }

    /// Which cameras pass `keep`, by index.
    pub(crate) fn matching(&self, keep: impl Fn(&Camera) -> bool) -> Vec<bool> {
        self.cameras.iter().map(keep).collect()
    }
}

/// Strings stored once: makes and models.
#[derive(Debug, Default)]
pub(crate) struct Interner {
    strings: Vec<Box<str>>,
    index: FastMap<Box<str>, u32>,
}

impl Interner {
    pub(crate) fn intern(&mut self, text: &str) -> u32 {
        if let Some(&index) = self.index.get(text) {
            return index;
        }
        let index = slot(self.strings.len());
        self.strings.push(text.into());
        self.index.insert(text.into(), index);
        index
    }

    pub(crate) fn get(&self, index: u32) -> Option<&str> {
        self.strings.get(index as usize).map(AsRef::as_ref)
    }

    /// Every string, by index.
    pub(crate) fn all(&self) -> &[Box<str>] {
        &self.strings
    }

    /// Indices of the strings equal to `text` ignoring ASCII case.
    pub(crate) fn matching_ignore_case(&self, text: &str) -> Vec<u32> {
        self.strings
            .iter()
            .enumerate()
            .filter(|(_, candidate)| candidate.eq_ignore_ascii_case(text))
            .map(|(index, _)| slot(index))
            .collect()
    }
}

/// Camera parameter lists, end to end in one vector so that storing one allocates nothing of
/// its own. A list equal (bit for bit) to the one stored last is stored once: images come in
/// runs of one camera. Others are not looked up: sets calibrate each image (every one of the
/// fixture set's lists differs), where lookup tables over lists and cameras took a fifth of
/// loading's CPU time and saved nothing; where lists repeat across runs, a repeat costs its
/// values again (24 bytes for the usual three).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ParameterPool {
    /// Every list, end to end.
    values: Vec<f64>,
    /// Where each list ends in `values`.
    ends: Vec<usize>,
}

impl ParameterPool {
    /// The index of a list equal to `parameters`.
    pub(crate) fn intern(&mut self, parameters: &[f64]) -> u32 {
        if let Some(last) = self.ends.len().checked_sub(1)
            && self
                .get(slot(last))
                .is_some_and(|stored| same_bits(stored, parameters))
        {
            return slot(last);
        }
        self.values.extend_from_slice(parameters);
        self.ends.push(self.values.len());
        slot(self.ends.len() - 1)
    }

    pub(crate) fn get(&self, index: u32) -> Option<&[f64]> {
        let index = index as usize;
        let end = *self.ends.get(index)?;
        let start = if index == 0 { 0 } else { self.ends[index - 1] };
        self.values.get(start..end)
    }

    /// Appends the lists of `other` and returns where its first list now is: `other`'s
    /// list `i` is list `returned + i` here. A first list equal to the one stored last is not
    /// stored again (as [`ParameterPool::intern`] would not store it), so then the returned
    /// index is that last list's.
    pub(crate) fn append(&mut self, other: &ParameterPool) -> u32 {
        let stored = self.ends.len();
        let repeats_last = match (other.get(0), stored.checked_sub(1)) {
            (Some(first), Some(last)) => self
                .get(slot(last))
                .is_some_and(|last| same_bits(last, first)),
            _ => false,
        };
        let skip = usize::from(repeats_last);
        let skipped_values = if repeats_last { other.ends[0] } else { 0 };
        let base = self.values.len();
        self.values
            .extend_from_slice(&other.values[skipped_values..]);
        self.ends.extend(
            other.ends[skip..]
                .iter()
                .map(|&end| base + end - skipped_values),
        );
        slot(stored - skip)
    }

    /// Gives back the room growing tables left unused.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.values.shrink_to_fit();
        self.ends.shrink_to_fit();
    }
}

/// Whether two lists are equal bit for bit (so `NaN`s compare equal and `-0.0` differs from
/// `0.0`).
fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.to_bits() == b.to_bits())
}
