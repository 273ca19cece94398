//! The compact in-memory form of an image: fixed-size, no heap, strings interned.

use std::collections::HashMap;

use streetlevel_model::{
    CameraType, CreatorId, Image, ImageId, MediaId, OrganizationId, Point, Timestamp,
};

/// "No value" for the interned indices.
pub(crate) const NONE: u32 = u32::MAX;

const IS_PANO: u8 = 1;
const HAS_MERGE_CC: u8 = 2;
const HAS_MESH: u8 = 4;
const HAS_SFM_CLUSTER: u8 = 8;
const HAS_EXIF_ORIENTATION: u8 = 16;

/// One image, about 180 bytes. Optional floats are `NaN` when absent (a `Some(NaN)` reads back
/// as `None`: NaN has no JSON form anyway).
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
    /// Interned string, or [`NONE`].
    pub(crate) make: u32,
    /// Interned string, or [`NONE`].
    pub(crate) model: u32,
    /// Index into the camera parameter pool, or [`NONE`].
    pub(crate) camera_parameters: u32,
    camera_type: u8,
    exif_orientation: u8,
    flags: u8,
}

/// The indices an image record refers to, resolved by the store before building it.
pub(crate) struct RecordLinks {
    pub(crate) sequence: u32,
    pub(crate) creator: u32,
    pub(crate) organization: u32,
    pub(crate) make: u32,
    pub(crate) model: u32,
    pub(crate) camera_parameters: u32,
}

/// What the store resolves indices back to when rebuilding an [`Image`].
pub(crate) struct RecordNames<'a> {
    pub(crate) sequence: &'a streetlevel_model::SequenceId,
    pub(crate) creator: CreatorId,
    pub(crate) organization: Option<OrganizationId>,
    pub(crate) make: Option<&'a str>,
    pub(crate) model: Option<&'a str>,
    pub(crate) camera_parameters: Option<&'a [f64]>,
}

fn encode(value: Option<f64>) -> f64 {
    value.unwrap_or(f64::NAN)
}

fn decode(value: f64) -> Option<f64> {
    (!value.is_nan()).then_some(value)
}

impl ImageRecord {
    pub(crate) fn new(image: &Image, links: &RecordLinks) -> Self {
        let mut flags = 0;
        if image.is_pano {
            flags |= IS_PANO;
        }
        if image.merge_cc.is_some() {
            flags |= HAS_MERGE_CC;
        }
        if image.mesh.is_some() {
            flags |= HAS_MESH;
        }
        if image.sfm_cluster.is_some() {
            flags |= HAS_SFM_CLUSTER;
        }
        if image.exif_orientation.is_some() {
            flags |= HAS_EXIF_ORIENTATION;
        }
        ImageRecord {
            id: image.id.0,
            captured_at: image.captured_at.0,
            geometry: [image.geometry.lon, image.geometry.lat],
            computed_geometry: image
                .computed_geometry
                .map_or([f64::NAN; 2], |point| [point.lon, point.lat]),
            altitude: encode(image.altitude),
            atomic_scale: encode(image.atomic_scale),
            compass_angle: encode(image.compass_angle),
            computed_altitude: encode(image.computed_altitude),
            computed_compass_angle: encode(image.computed_compass_angle),
            quality_score: encode(image.quality_score),
            computed_rotation: image.computed_rotation.unwrap_or([f64::NAN; 3]),
            merge_cc: image.merge_cc.unwrap_or(0),
            mesh: image.mesh.map_or(0, |mesh| mesh.0),
            sfm_cluster: image.sfm_cluster.map_or(0, |cluster| cluster.0),
            width: image.width,
            height: image.height,
            sequence: links.sequence,
            creator: links.creator,
            organization: links.organization,
            make: links.make,
            model: links.model,
            camera_parameters: links.camera_parameters,
            camera_type: match image.camera_type {
                None => 0,
                Some(CameraType::Perspective) => 1,
                Some(CameraType::Fisheye) => 2,
                Some(CameraType::Equirectangular) => 3,
            },
            exif_orientation: image.exif_orientation.unwrap_or(0),
            flags,
        }
    }

    pub(crate) fn to_image(self, names: &RecordNames<'_>) -> Image {
        let flag = |bit: u8| self.flags & bit != 0;
        Image {
            id: ImageId(self.id),
            altitude: decode(self.altitude),
            atomic_scale: decode(self.atomic_scale),
            camera_parameters: names.camera_parameters.map(<[f64]>::to_vec),
            camera_type: match self.camera_type {
                1 => Some(CameraType::Perspective),
                2 => Some(CameraType::Fisheye),
                3 => Some(CameraType::Equirectangular),
                _ => None,
            },
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

/// Strings stored once: makes and models.
#[derive(Debug, Default)]
pub(crate) struct Interner {
    strings: Vec<Box<str>>,
    index: HashMap<Box<str>, u32>,
}

impl Interner {
    pub(crate) fn intern(&mut self, text: &str) -> u32 {
        if let Some(&index) = self.index.get(text) {
            return index;
        }
        let index = self.strings.len() as u32;
        self.strings.push(text.into());
        self.index.insert(text.into(), index);
        index
    }

    pub(crate) fn get(&self, index: u32) -> Option<&str> {
        self.strings.get(index as usize).map(AsRef::as_ref)
    }

    /// Indices of the strings equal to `text` ignoring ASCII case.
    pub(crate) fn matching_ignore_case(&self, text: &str) -> Vec<u32> {
        self.strings
            .iter()
            .enumerate()
            .filter(|(_, candidate)| candidate.eq_ignore_ascii_case(text))
            .map(|(index, _)| index as u32)
            .collect()
    }
}

/// Camera parameter lists stored once (cameras of one model share them).
#[derive(Debug, Default)]
pub(crate) struct ParameterPool {
    lists: Vec<Box<[f64]>>,
    index: HashMap<Box<[u64]>, u32>,
}

impl ParameterPool {
    pub(crate) fn intern(&mut self, parameters: &[f64]) -> u32 {
        let key: Box<[u64]> = parameters.iter().map(|value| value.to_bits()).collect();
        if let Some(&index) = self.index.get(&key) {
            return index;
        }
        let index = self.lists.len() as u32;
        self.lists.push(parameters.into());
        self.index.insert(key, index);
        index
    }

    pub(crate) fn get(&self, index: u32) -> Option<&[f64]> {
        self.lists.get(index as usize).map(AsRef::as_ref)
    }
}
