#![doc = include_str!("../README.md")]

pub mod clock;
mod creator;
mod detection;
pub mod field;
mod geometry;
mod id;
mod image;
mod map_feature;
mod organization;
pub mod projection;
mod sequence;
mod timestamp;

pub use clock::{Clock, FakeClock, SystemClock};
pub use creator::Creator;
pub use detection::Detection;
pub use field::{FieldError, FieldSelection};
pub use geometry::Point;
pub use id::{
    CreatorId, DetectionId, EntityId, EntityKind, ImageId, MapFeatureId, MediaId, OrganizationId,
    ParseIdError, SequenceId,
};
pub use image::{CameraType, Image, ParseCameraTypeError};
pub use map_feature::{MapFeature, ObjectType};
pub use organization::Organization;
pub use projection::{
    ImageObject, NoContext, ProjectionContext, ThumbnailSize, collection, project_detection,
    project_image, project_map_feature, project_organization, project_sequence_image_ids,
};
pub use sequence::Sequence;
pub use timestamp::{ParseTimestampError, Timestamp};
