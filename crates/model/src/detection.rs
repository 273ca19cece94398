//! Detections (spec 2.3).

use crate::{DetectionId, ImageId, MapFeatureId, Timestamp};

/// An object detected in one image.
#[derive(Debug, Clone, PartialEq)]
pub struct Detection {
    /// The detection ID.
    pub id: DetectionId,
    /// When the detection was created.
    pub created_at: Timestamp,
    /// The segmentation polygon: a base64 vector tile with one polygon feature, extent 4096.
    pub geometry: String,
    /// The image the detection belongs to.
    pub image: ImageId,
    /// Class name of the detected object.
    pub value: String,
    /// The map feature this detection contributes to, if any.
    pub map_feature: Option<MapFeatureId>,
}
