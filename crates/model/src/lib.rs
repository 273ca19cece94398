#![doc = include_str!("../README.md")]

mod creator;
mod detection;
mod geometry;
mod id;
mod image;
mod map_feature;
mod organization;
mod sequence;
mod timestamp;

pub use creator::Creator;
pub use detection::Detection;
pub use geometry::Point;
pub use id::{
    CreatorId, DetectionId, EntityId, EntityKind, ImageId, MapFeatureId, MediaId, OrganizationId,
    ParseIdError, SequenceId,
};
pub use image::{CameraType, Image, ParseCameraTypeError};
pub use map_feature::{MapFeature, ObjectType};
pub use organization::Organization;
pub use sequence::Sequence;
pub use timestamp::{ParseTimestampError, Timestamp};
