//! Map features (spec 2.2).

use std::fmt;

use crate::{ImageId, MapFeatureId, Point, Timestamp};

/// Whether a map feature is a traffic sign or another point object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectType {
    /// A traffic sign (`regulatory--stop--g1`, ...).
    TrafficSign,
    /// Any other point object (`object--street-light`, ...).
    Point,
}

impl ObjectType {
    /// The name sent to clients: `traffic_sign` or `point`.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectType::TrafficSign => "traffic_sign",
            ObjectType::Point => "point",
        }
    }
}

impl fmt::Display for ObjectType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An object located from several detections in several images.
#[derive(Debug, Clone, PartialEq)]
pub struct MapFeature {
    /// The map feature ID.
    pub id: MapFeatureId,
    /// Compass angle the object faces, degrees.
    pub aligned_direction: Option<f64>,
    /// Capture time of the earliest contributing image.
    pub first_seen_at: Timestamp,
    /// Capture time of the latest contributing image.
    pub last_seen_at: Timestamp,
    /// Class name, `<group>--<subgroup>--<name>`.
    pub object_value: String,
    /// Traffic sign or point.
    pub object_type: ObjectType,
    /// Location.
    pub geometry: Point,
    /// Images the feature was derived from.
    pub images: Vec<ImageId>,
}
