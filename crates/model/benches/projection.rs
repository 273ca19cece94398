//! Cost of parsing a `fields` value and projecting an image, against serialising the result.
//!
//! The baseline is `serde_json::to_string` of the very object the projection builds: every
//! response pays it anyway, so projection is reported as a multiple of it.

use std::collections::HashMap;

use serde_json::Value;
use streetlevel_model::{
    CameraType, Creator, CreatorId, Detection, DetectionId, EntityKind, FieldSelection, Image,
    ImageId, MapFeatureId, MediaId, OrganizationId, Point, ProjectionContext, SequenceId,
    ThumbnailSize, Timestamp, project_image,
};

fn main() {
    divan::main();
}

/// The 27 image fields the Python SDK asks of any ID.
const SDK_FIELDS: &str = "id,altitude,atomic_scale,camera_parameters,camera_type,captured_at,\
compass_angle,computed_altitude,computed_compass_angle,computed_geometry,computed_rotation,\
creator,exif_orientation,geometry,height,make,model,thumb_256_url,thumb_1024_url,\
thumb_2048_url,thumb_original_url,merge_cc,mesh,quality_score,sequence,sfm_cluster,width";

/// What the web viewer asks when it finds neighbours in an S2 cell.
const VIEWER_FIELDS: &str = "id,computed_geometry,geometry,sequence";

fn image() -> Image {
    Image {
        id: ImageId(1_000_000_000_000_001),
        altitude: Some(74.5),
        atomic_scale: Some(1.02),
        camera_parameters: Some(vec![0.85, -0.1, 0.02]),
        camera_type: Some(CameraType::Perspective),
        captured_at: Timestamp(1_619_863_200_000),
        compass_angle: Some(91.5),
        computed_altitude: Some(73.25),
        computed_compass_angle: Some(92.75),
        computed_geometry: Some(Point::new(13.400_05, 52.520_01)),
        computed_rotation: Some([1.5, -0.25, 0.125]),
        creator: CreatorId(2_000_000_000_000_002),
        exif_orientation: Some(1),
        geometry: Point::new(13.4, 52.52),
        height: 3000,
        width: 4000,
        is_pano: false,
        make: Some("GoPro".to_owned()),
        model: Some("HERO9 Black".to_owned()),
        merge_cc: Some(42),
        mesh: Some(MediaId(3_000_000_000_000_003)),
        sequence: SequenceId::from("Xv3dNwF8b2kZqL0cQ7RrMa"),
        sfm_cluster: Some(MediaId(3_000_000_000_000_004)),
        quality_score: Some(0.75),
        organization: Some(OrganizationId(4_000_000_000_000_005)),
    }
}

struct Context {
    creators: HashMap<CreatorId, Creator>,
    detections: Vec<Detection>,
}

impl Context {
    fn new() -> Self {
        let creator = Creator {
            id: CreatorId(2_000_000_000_000_002),
            username: "alice".to_owned(),
        };
        let detections = (0..5)
            .map(|index| Detection {
                id: DetectionId(5_000_000_000_000_000 + index),
                created_at: Timestamp(1_619_863_200_000),
                geometry: "GmgKBm1weS1vchIYEgIAABgDIhAJ".repeat(4),
                image: ImageId(1_000_000_000_000_001),
                value: "regulatory--stop--g1".to_owned(),
                map_feature: Some(MapFeatureId(6_000_000_000_000_001)),
            })
            .collect();
        Context {
            creators: HashMap::from([(creator.id, creator)]),
            detections,
        }
    }
}

impl ProjectionContext for Context {
    fn creator(&self, id: CreatorId) -> Option<&Creator> {
        self.creators.get(&id)
    }

    fn image(&self, _id: ImageId) -> Option<&Image> {
        None
    }

    fn detections_of_image(&self, id: ImageId) -> Vec<&Detection> {
        self.detections
            .iter()
            .filter(|detection| detection.image == id)
            .collect()
    }

    fn thumbnail_url(&self, id: ImageId, size: ThumbnailSize) -> Option<String> {
        Some(format!(
            "https://cdn.example/{id}/{}.jpg?sig=0123456789abcdef0123456789abcdef",
            size.width().unwrap_or(0)
        ))
    }

    fn mesh_url(&self, id: MediaId) -> Option<String> {
        Some(format!(
            "https://cdn.example/mesh/{id}?sig=0123456789abcdef"
        ))
    }

    fn sfm_cluster_url(&self, id: MediaId) -> Option<String> {
        Some(format!(
            "https://cdn.example/cluster/{id}?sig=0123456789abcdef"
        ))
    }
}

fn selection(raw: &str) -> FieldSelection {
    FieldSelection::parse(raw, EntityKind::Image).expect("valid fields")
}

/// Parsing the SDK's 27 image fields.
#[divan::bench]
fn parse_sdk_fields() -> FieldSelection {
    selection(divan::black_box(SDK_FIELDS))
}

/// Parsing the viewer's four neighbour fields.
#[divan::bench]
fn parse_viewer_fields() -> FieldSelection {
    selection(divan::black_box(VIEWER_FIELDS))
}

/// Baseline: serialising the projected SDK object to text.
#[divan::bench]
fn baseline_serialize_sdk_object(bencher: divan::Bencher) {
    let object = Value::Object(project_image(
        &image(),
        &selection(SDK_FIELDS),
        &Context::new(),
    ));
    bencher.bench_local(|| serde_json::to_string(divan::black_box(&object)));
}

/// Projecting one image with the SDK's 27 fields.
#[divan::bench]
fn project_sdk_fields(bencher: divan::Bencher) {
    let (image, fields, context) = (image(), selection(SDK_FIELDS), Context::new());
    bencher.bench_local(|| project_image(divan::black_box(&image), &fields, &context));
}

/// Projecting one image with every field, five detections included.
#[divan::bench]
fn project_all_fields(bencher: divan::Bencher) {
    let (image, context) = (image(), Context::new());
    let fields = FieldSelection::all(EntityKind::Image);
    bencher.bench_local(|| project_image(divan::black_box(&image), &fields, &context));
}

/// Projecting one image with the viewer's four neighbour fields.
#[divan::bench]
fn project_viewer_fields(bencher: divan::Bencher) {
    let (image, fields, context) = (image(), selection(VIEWER_FIELDS), Context::new());
    bencher.bench_local(|| project_image(divan::black_box(&image), &fields, &context));
}
