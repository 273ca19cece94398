//! Tests of projection to client JSON: every field of every kind, absent values, ID and
//! timestamp formats, and snapshots of whole objects.

use std::collections::HashMap;

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::{
    CameraType, DetectionId, EntityKind, MapFeatureId, ObjectType, OrganizationId, SequenceId,
    Timestamp,
};

/// 2021-05-01T10:00:00Z.
const MAY_FIRST: i64 = 1_619_863_200_000;

fn full_image() -> Image {
    Image {
        id: ImageId(1_000_000_000_000_001),
        altitude: Some(74.5),
        atomic_scale: Some(1.02),
        camera_parameters: Some(vec![0.85, -0.1, 0.02]),
        camera_type: Some(CameraType::Perspective),
        captured_at: Timestamp(MAY_FIRST),
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
        merge_cc: Some(9_007_199_254_740_993),
        mesh: Some(MediaId(3_000_000_000_000_003)),
        sequence: SequenceId::from("Xv3dNwF8b2kZqL0cQ7RrMa"),
        sfm_cluster: Some(MediaId(3_000_000_000_000_004)),
        quality_score: Some(0.75),
        organization: Some(OrganizationId(4_000_000_000_000_005)),
    }
}

/// An image with every optional field unknown.
fn sparse_image() -> Image {
    Image {
        id: ImageId(1_000_000_000_000_009),
        altitude: None,
        atomic_scale: None,
        camera_parameters: None,
        camera_type: None,
        captured_at: Timestamp(MAY_FIRST),
        compass_angle: None,
        computed_altitude: None,
        computed_compass_angle: None,
        computed_geometry: None,
        computed_rotation: None,
        creator: CreatorId(2_000_000_000_000_099),
        exif_orientation: None,
        geometry: Point::new(-0.5, 51.25),
        height: 1536,
        width: 2048,
        is_pano: true,
        make: None,
        model: None,
        merge_cc: None,
        mesh: None,
        sequence: SequenceId::from("sparse"),
        sfm_cluster: None,
        quality_score: None,
        organization: None,
    }
}

fn detection(id: u64, value: &str) -> Detection {
    Detection {
        id: DetectionId(id),
        created_at: Timestamp(MAY_FIRST + 86_400_000),
        geometry: "GmgKBm1weS1vchIYEgIAABgDIhAJ".to_owned(),
        image: ImageId(1_000_000_000_000_001),
        value: value.to_owned(),
        map_feature: Some(MapFeatureId(6_000_000_000_000_001)),
    }
}

fn map_feature() -> MapFeature {
    MapFeature {
        id: MapFeatureId(6_000_000_000_000_001),
        aligned_direction: Some(270.5),
        first_seen_at: Timestamp(MAY_FIRST),
        last_seen_at: Timestamp(MAY_FIRST + 3_600_000 + 999),
        object_value: "regulatory--stop--g1".to_owned(),
        object_type: ObjectType::TrafficSign,
        geometry: Point::new(13.4001, 52.5201),
        images: vec![
            ImageId(1_000_000_000_000_001),
            ImageId(1_000_000_000_000_009),
        ],
    }
}

fn organization() -> Organization {
    Organization {
        id: OrganizationId(4_000_000_000_000_005),
        slug: "acme-mapping".to_owned(),
        name: "Acme Mapping".to_owned(),
        description: Some("Streets of Berlin/Brandenburg".to_owned()),
    }
}

/// A context over a few entities, with fake signed URLs.
struct TestContext {
    creators: HashMap<CreatorId, Creator>,
    images: HashMap<ImageId, Image>,
    detections: Vec<Detection>,
}

impl TestContext {
    fn new() -> Self {
        let creator = Creator {
            id: CreatorId(2_000_000_000_000_002),
            username: "alice".to_owned(),
        };
        let image = full_image();
        TestContext {
            creators: HashMap::from([(creator.id, creator)]),
            images: HashMap::from([(image.id, image)]),
            detections: vec![
                detection(5_000_000_000_000_001, "regulatory--stop--g1"),
                detection(5_000_000_000_000_002, "object--street-light"),
            ],
        }
    }
}

impl ProjectionContext for TestContext {
    fn creator(&self, id: CreatorId) -> Option<&Creator> {
        self.creators.get(&id)
    }

    fn image(&self, id: ImageId) -> Option<&Image> {
        self.images.get(&id)
    }

    fn detections_of_image(&self, id: ImageId) -> Vec<&Detection> {
        self.detections
            .iter()
            .filter(|detection| detection.image == id)
            .collect()
    }

    fn thumbnail_url(&self, id: ImageId, size: ThumbnailSize) -> Option<String> {
        let width = size
            .width()
            .map_or_else(|| "original".to_owned(), |width| width.to_string());
        Some(format!("https://cdn.example/{id}/{width}.jpg?sig=abc"))
    }

    fn mesh_url(&self, id: MediaId) -> Option<String> {
        Some(format!("https://cdn.example/mesh/{id}?sig=abc"))
    }

    fn sfm_cluster_url(&self, id: MediaId) -> Option<String> {
        Some(format!("https://cdn.example/cluster/{id}?sig=abc"))
    }
}

fn fields(raw: &str, kind: EntityKind) -> FieldSelection {
    FieldSelection::parse(raw, kind).unwrap()
}

fn image_json(image: &Image, raw: &str, context: &dyn ProjectionContext) -> Value {
    Value::Object(project_image(
        image,
        &fields(raw, EntityKind::Image),
        context,
    ))
}

fn contains_null(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.iter().any(contains_null),
        Value::Object(object) => object.values().any(contains_null),
        Value::Bool(_) | Value::Number(_) | Value::String(_) => false,
    }
}

fn keys(object: &Map<String, Value>) -> Vec<&str> {
    let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
    keys.sort_unstable();
    keys
}

fn snapshot(name: &str, value: &Value) {
    insta::with_settings!({ sort_maps => true, prepend_module_to_snapshot => false }, {
        insta::assert_json_snapshot!(name, value);
    });
}

#[test]
fn an_image_with_every_field() {
    let context = TestContext::new();
    let all = FieldSelection::all(EntityKind::Image);
    let object = project_image(&full_image(), &all, &context);
    assert_eq!(keys(&object), all.names().collect::<Vec<_>>());
    snapshot("image_all_fields", &Value::Object(object));
}

#[test]
fn a_map_feature_with_every_field() {
    let context = TestContext::new();
    let all = FieldSelection::all(EntityKind::MapFeature);
    let object = project_map_feature(&map_feature(), &all, &context);
    assert_eq!(keys(&object), all.names().collect::<Vec<_>>());
    snapshot("map_feature_all_fields", &Value::Object(object));
}

#[test]
fn a_detection_with_every_field() {
    let context = TestContext::new();
    let all = FieldSelection::all(EntityKind::Detection);
    let object = project_detection(
        &detection(5_000_000_000_000_001, "regulatory--stop--g1"),
        &all,
        &context,
    );
    assert_eq!(keys(&object), all.names().collect::<Vec<_>>());
    snapshot("detection_all_fields", &Value::Object(object));
}

#[test]
fn each_image_field_alone() {
    let context = TestContext::new();
    let image = full_image();
    let check = |raw: &str, expected: Value| {
        let mut expected_object = expected.as_object().cloned().unwrap();
        expected_object.insert("id".to_owned(), json!("1000000000000001"));
        assert_eq!(
            image_json(&image, raw, &context),
            Value::Object(expected_object),
            "{raw}"
        );
    };
    check("id", json!({}));
    check("altitude", json!({"altitude": 74.5}));
    check("atomic_scale", json!({"atomic_scale": 1.02}));
    check(
        "camera_parameters",
        json!({"camera_parameters": [0.85, -0.1, 0.02]}),
    );
    check("camera_type", json!({"camera_type": "perspective"}));
    check("captured_at", json!({"captured_at": 1_619_863_200_000_i64}));
    check("compass_angle", json!({"compass_angle": 91.5}));
    check("computed_altitude", json!({"computed_altitude": 73.25}));
    check(
        "computed_compass_angle",
        json!({"computed_compass_angle": 92.75}),
    );
    check(
        "computed_geometry",
        json!({"computed_geometry": {"type": "Point", "coordinates": [13.400_05, 52.520_01]}}),
    );
    check(
        "computed_rotation",
        json!({"computed_rotation": [1.5, -0.25, 0.125]}),
    );
    check(
        "creator",
        json!({"creator": {"id": "2000000000000002", "username": "alice"}}),
    );
    check("creator.id", json!({"creator": {"id": "2000000000000002"}}));
    check(
        "detections.value",
        json!({"detections": {"data": [
            {"id": "5000000000000001", "value": "regulatory--stop--g1"},
            {"id": "5000000000000002", "value": "object--street-light"},
        ]}}),
    );
    check("exif_orientation", json!({"exif_orientation": 1}));
    check(
        "geometry",
        json!({"geometry": {"type": "Point", "coordinates": [13.4, 52.52]}}),
    );
    check("height", json!({"height": 3000}));
    check("width", json!({"width": 4000}));
    check("is_pano", json!({"is_pano": false}));
    check("make", json!({"make": "GoPro"}));
    check("model", json!({"model": "HERO9 Black"}));
    check("merge_cc", json!({"merge_cc": 9_007_199_254_740_993_u64}));
    check(
        "mesh",
        json!({"mesh": {"id": "3000000000000003", "url": "https://cdn.example/mesh/3000000000000003?sig=abc"}}),
    );
    check("mesh.id", json!({"mesh": {"id": "3000000000000003"}}));
    check(
        "sfm_cluster.url",
        json!({"sfm_cluster": {"id": "3000000000000004", "url": "https://cdn.example/cluster/3000000000000004?sig=abc"}}),
    );
    check(
        "organization",
        json!({"organization": {"id": "4000000000000005"}}),
    );
    check("quality_score", json!({"quality_score": 0.75}));
    check("sequence", json!({"sequence": "Xv3dNwF8b2kZqL0cQ7RrMa"}));
    check(
        "thumb_256_url",
        json!({"thumb_256_url": "https://cdn.example/1000000000000001/256.jpg?sig=abc"}),
    );
    check(
        "thumb_1024_url",
        json!({"thumb_1024_url": "https://cdn.example/1000000000000001/1024.jpg?sig=abc"}),
    );
    check(
        "thumb_2048_url",
        json!({"thumb_2048_url": "https://cdn.example/1000000000000001/2048.jpg?sig=abc"}),
    );
    check(
        "thumb_original_url",
        json!({"thumb_original_url": "https://cdn.example/1000000000000001/original.jpg?sig=abc"}),
    );
}

#[test]
fn every_image_field_written_straight_out_is_the_projected_one() {
    let context = TestContext::new();
    let all = FieldSelection::all(EntityKind::Image);
    for image in [full_image(), sparse_image()] {
        let built = serde_json::to_vec(&project_image(&image, &all, &context)).unwrap();
        let written = serde_json::to_vec(&ImageObject::new(&image, &all, &context)).unwrap();
        assert_eq!(
            String::from_utf8(written).unwrap(),
            String::from_utf8(built).unwrap()
        );
    }
}

#[test]
fn only_the_selected_fields_are_projected() {
    let context = TestContext::new();
    let value = image_json(&full_image(), "geometry,captured_at", &context);
    assert_eq!(
        value,
        json!({
            "id": "1000000000000001",
            "captured_at": 1_619_863_200_000_i64,
            "geometry": {"type": "Point", "coordinates": [13.4, 52.52]},
        })
    );
}

#[test]
fn absent_image_values_are_omitted_never_null() {
    let context = TestContext::new();
    let object = project_image(
        &sparse_image(),
        &FieldSelection::all(EntityKind::Image),
        &context,
    );
    // The creator is unknown to the context: only its ID. No detections of this image.
    assert_eq!(
        Value::Object(object.clone()),
        json!({
            "captured_at": 1_619_863_200_000_i64,
            "creator": {"id": "2000000000000099"},
            "detections": {"data": []},
            "geometry": {"type": "Point", "coordinates": [-0.5, 51.25]},
            "height": 1536,
            "id": "1000000000000009",
            "is_pano": true,
            "sequence": "sparse",
            "thumb_1024_url": "https://cdn.example/1000000000000009/1024.jpg?sig=abc",
            "thumb_2048_url": "https://cdn.example/1000000000000009/2048.jpg?sig=abc",
            "thumb_256_url": "https://cdn.example/1000000000000009/256.jpg?sig=abc",
            "thumb_original_url": "https://cdn.example/1000000000000009/original.jpg?sig=abc",
            "width": 2048,
        })
    );
}

#[test]
fn what_the_context_does_not_know_is_omitted() {
    let value = image_json(
        &full_image(),
        "creator,mesh,sfm_cluster,thumb_2048_url,detections",
        &NoContext,
    );
    assert_eq!(
        value,
        json!({
            "id": "1000000000000001",
            "creator": {"id": "2000000000000002"},
            "detections": {"data": []},
            "mesh": {"id": "3000000000000003"},
            "sfm_cluster": {"id": "3000000000000004"},
        })
    );
}

#[test]
fn non_finite_numbers_are_omitted() {
    let mut image = full_image();
    image.altitude = Some(f64::NAN);
    image.compass_angle = Some(f64::INFINITY);
    image.camera_parameters = Some(vec![0.85, f64::NAN, 0.0]);
    image.computed_rotation = Some([0.0, f64::NEG_INFINITY, 0.0]);
    image.computed_geometry = Some(Point::new(f64::NAN, 52.0));
    image.geometry = Point::new(13.0, f64::INFINITY);
    let value = image_json(
        &image,
        "altitude,compass_angle,camera_parameters,computed_rotation,computed_geometry,geometry",
        &NoContext,
    );
    assert_eq!(value, json!({"id": "1000000000000001"}));
}

#[test]
fn spherical_cameras_are_sent_as_equirectangular() {
    let mut image = full_image();
    image.camera_type = Some("spherical".parse().unwrap());
    assert_eq!(
        image_json(&image, "camera_type", &NoContext)["camera_type"],
        json!("equirectangular")
    );
    image.camera_type = Some(CameraType::Fisheye);
    assert_eq!(
        image_json(&image, "camera_type", &NoContext)["camera_type"],
        json!("fisheye")
    );
}

#[test]
fn ids_are_strings_even_beyond_two_to_the_53() {
    let mut image = sparse_image();
    image.id = ImageId(u64::MAX);
    image.creator = CreatorId(9_007_199_254_740_993);
    image.organization = Some(OrganizationId(18_000_000_000_000_000_001));
    image.mesh = Some(MediaId(1));
    let value = image_json(
        &image,
        "creator.id,organization,mesh.id,sequence",
        &NoContext,
    );
    assert_eq!(
        value,
        json!({
            "id": "18446744073709551615",
            "creator": {"id": "9007199254740993"},
            "organization": {"id": "18000000000000000001"},
            "mesh": {"id": "1"},
            "sequence": "sparse",
        })
    );
}

#[test]
fn image_detections_carry_their_image() {
    // The context does not know the image: the detections use the one being projected.
    struct DetectionsOnly(Vec<Detection>);
    impl ProjectionContext for DetectionsOnly {
        fn creator(&self, _id: CreatorId) -> Option<&Creator> {
            None
        }
        fn image(&self, _id: ImageId) -> Option<&Image> {
            None
        }
        fn detections_of_image(&self, _id: ImageId) -> Vec<&Detection> {
            self.0.iter().collect()
        }
        fn thumbnail_url(&self, _id: ImageId, _size: ThumbnailSize) -> Option<String> {
            None
        }
        fn mesh_url(&self, _id: MediaId) -> Option<String> {
            None
        }
        fn sfm_cluster_url(&self, _id: MediaId) -> Option<String> {
            None
        }
    }
    let context = DetectionsOnly(vec![detection(5_000_000_000_000_001, "object--bench")]);
    assert_eq!(
        image_json(
            &full_image(),
            "detections.image.geometry,detections.created_at",
            &context
        ),
        json!({
            "id": "1000000000000001",
            "detections": {"data": [{
                "id": "5000000000000001",
                "created_at": "2021-05-02T10:00:00+0000",
                "image": {"id": "1000000000000001", "geometry": {"type": "Point", "coordinates": [13.4, 52.52]}},
            }]},
        })
    );
    assert_eq!(
        image_json(&full_image(), "detections", &context),
        json!({
            "id": "1000000000000001",
            "detections": {"data": [{
                "id": "5000000000000001",
                "value": "object--bench",
                "geometry": "GmgKBm1weS1vchIYEgIAABgDIhAJ",
            }]},
        })
    );
}

#[test]
fn each_detection_field_alone() {
    let context = TestContext::new();
    let detection = detection(5_000_000_000_000_002, "object--street-light");
    let check = |raw: &str, context: &dyn ProjectionContext, expected: Value| {
        let object = project_detection(&detection, &fields(raw, EntityKind::Detection), context);
        assert_eq!(Value::Object(object), expected, "{raw}");
    };
    check("", &context, json!({"id": "5000000000000002"}));
    check(
        "created_at",
        &context,
        json!({"id": "5000000000000002", "created_at": "2021-05-02T10:00:00+0000"}),
    );
    check(
        "geometry",
        &context,
        json!({"id": "5000000000000002", "geometry": "GmgKBm1weS1vchIYEgIAABgDIhAJ"}),
    );
    check(
        "value",
        &context,
        json!({"id": "5000000000000002", "value": "object--street-light"}),
    );
    // The Python SDK asks for `image` and reads `image.geometry` (docs/CLIENTS.md).
    check(
        "image",
        &context,
        json!({"id": "5000000000000002", "image": {
            "id": "1000000000000001",
            "geometry": {"type": "Point", "coordinates": [13.4, 52.52]},
        }}),
    );
    check(
        "image.geometry",
        &context,
        json!({"id": "5000000000000002", "image": {
            "id": "1000000000000001",
            "geometry": {"type": "Point", "coordinates": [13.4, 52.52]},
        }}),
    );
    // An image the context does not know keeps only its ID.
    check(
        "image.geometry",
        &NoContext,
        json!({"id": "5000000000000002", "image": {"id": "1000000000000001"}}),
    );
}

#[test]
fn each_map_feature_field_alone() {
    let context = TestContext::new();
    let feature = map_feature();
    let check = |raw: &str, expected: Value| {
        let object = project_map_feature(&feature, &fields(raw, EntityKind::MapFeature), &context);
        let mut expected_object = expected.as_object().cloned().unwrap();
        expected_object.insert("id".to_owned(), json!("6000000000000001"));
        assert_eq!(
            Value::Object(object),
            Value::Object(expected_object),
            "{raw}"
        );
    };
    check("", json!({}));
    check("aligned_direction", json!({"aligned_direction": 270.5}));
    check(
        "first_seen_at",
        json!({"first_seen_at": "2021-05-01T10:00:00+0000"}),
    );
    // Milliseconds are dropped from the text form.
    check(
        "last_seen_at",
        json!({"last_seen_at": "2021-05-01T11:00:00+0000"}),
    );
    check(
        "object_value",
        json!({"object_value": "regulatory--stop--g1"}),
    );
    check("object_type", json!({"object_type": "traffic_sign"}));
    check(
        "geometry",
        json!({"geometry": {"type": "Point", "coordinates": [13.4001, 52.5201]}}),
    );
    check(
        "images.id",
        json!({"images": {"data": [{"id": "1000000000000001"}, {"id": "1000000000000009"}]}}),
    );
    // Named alone, `images` brings each image's geometry, as the original service answers
    // (map editors pick the image nearest the feature from it). Only the first image is
    // known to the context.
    let with_geometry = json!({"images": {"data": [
        {"id": "1000000000000001", "geometry": {"type": "Point", "coordinates": [13.4, 52.52]}},
        {"id": "1000000000000009"},
    ]}});
    check("images", with_geometry.clone());
    check("images.geometry", with_geometry.clone());
    check("images,images.id", with_geometry);
}

#[test]
fn a_hidden_image_is_left_out_of_a_map_features_images() {
    /// The test context, with the second image of the feature hidden.
    struct Hiding(TestContext);
    impl ProjectionContext for Hiding {
        fn creator(&self, id: CreatorId) -> Option<&Creator> {
            self.0.creator(id)
        }
        fn image(&self, id: ImageId) -> Option<&Image> {
            self.0.image(id)
        }
        fn detections_of_image(&self, id: ImageId) -> Vec<&Detection> {
            self.0.detections_of_image(id)
        }
        fn thumbnail_url(&self, id: ImageId, size: ThumbnailSize) -> Option<String> {
            self.0.thumbnail_url(id, size)
        }
        fn mesh_url(&self, id: MediaId) -> Option<String> {
            self.0.mesh_url(id)
        }
        fn sfm_cluster_url(&self, id: MediaId) -> Option<String> {
            self.0.sfm_cluster_url(id)
        }
        fn is_hidden(&self, id: ImageId) -> bool {
            id == ImageId(1_000_000_000_000_009)
        }
    }
    let object = project_map_feature(
        &map_feature(),
        &fields("images.id", EntityKind::MapFeature),
        &Hiding(TestContext::new()),
    );
    assert_eq!(
        object["images"],
        json!({"data": [{"id": "1000000000000001"}]})
    );
}

#[test]
fn absent_map_feature_values_are_omitted() {
    let mut feature = map_feature();
    feature.aligned_direction = None;
    feature.images.clear();
    feature.object_type = ObjectType::Point;
    let object = project_map_feature(
        &feature,
        &FieldSelection::all(EntityKind::MapFeature),
        &NoContext,
    );
    assert!(!object.contains_key("aligned_direction"));
    assert_eq!(object["images"], json!({"data": []}));
    assert_eq!(object["object_type"], json!("point"));
    assert!(!contains_null(&Value::Object(object)));
}

#[test]
fn each_organization_field_alone() {
    let organization = organization();
    let check = |raw: &str, expected: Value| {
        let object = project_organization(&organization, &fields(raw, EntityKind::Organization));
        assert_eq!(Value::Object(object), expected, "{raw}");
    };
    check("", json!({"id": "4000000000000005"}));
    check(
        "slug",
        json!({"id": "4000000000000005", "slug": "acme-mapping"}),
    );
    check(
        "name",
        json!({"id": "4000000000000005", "name": "Acme Mapping"}),
    );
    check(
        "description",
        json!({"id": "4000000000000005", "description": "Streets of Berlin/Brandenburg"}),
    );
    let mut without_description = organization.clone();
    without_description.description = None;
    assert_eq!(
        Value::Object(project_organization(
            &without_description,
            &FieldSelection::all(EntityKind::Organization)
        )),
        json!({"id": "4000000000000005", "slug": "acme-mapping", "name": "Acme Mapping"})
    );
}

#[test]
fn slashes_are_not_escaped() {
    let text = serde_json::to_string(&image_json(
        &full_image(),
        "thumb_256_url",
        &TestContext::new(),
    ))
    .unwrap();
    assert!(
        text.contains(r#""https://cdn.example/1000000000000001/256.jpg?sig=abc""#),
        "{text}"
    );
}

#[test]
fn sequence_image_ids_and_collections() {
    let sequence = Sequence {
        id: SequenceId::from("Xv3dNwF8b2kZqL0cQ7RrMa"),
        creator: CreatorId(2),
        organization: None,
        image_ids: vec![ImageId(30), ImageId(10), ImageId(20)],
    };
    assert_eq!(
        Value::Object(project_sequence_image_ids(&sequence)),
        json!({"data": [{"id": "30"}, {"id": "10"}, {"id": "20"}]})
    );
    let organization_fields = fields("slug", EntityKind::Organization);
    assert_eq!(
        Value::Object(collection([project_organization(
            &organization(),
            &organization_fields
        )])),
        json!({"data": [{"id": "4000000000000005", "slug": "acme-mapping"}]})
    );
    assert_eq!(Value::Object(collection(Vec::new())), json!({"data": []}));
}

#[test]
fn thumbnail_sizes_name_their_fields() {
    let names: Vec<&str> = ThumbnailSize::ALL
        .iter()
        .map(|size| size.field_name())
        .collect();
    assert_eq!(
        names,
        [
            "thumb_256_url",
            "thumb_1024_url",
            "thumb_2048_url",
            "thumb_original_url"
        ]
    );
    for name in names {
        assert!(FieldSelection::all(EntityKind::Image).contains(name));
    }
    assert_eq!(ThumbnailSize::Original.width(), None);
    assert_eq!(ThumbnailSize::Px1024.width(), Some(1024));
}

fn optional<T: std::fmt::Debug + Clone>(
    strategy: impl Strategy<Value = T>,
) -> impl Strategy<Value = Option<T>> {
    prop::option::of(strategy)
}

fn any_float() -> impl Strategy<Value = f64> {
    prop_oneof![
        8 => -1.0e6..1.0e6_f64,
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
    ]
}

prop_compose! {
    fn any_image()(
        id in any::<u64>(),
        (altitude, atomic_scale, compass_angle, computed_altitude, computed_compass_angle, quality_score)
            in (optional(any_float()), optional(any_float()), optional(any_float()), optional(any_float()), optional(any_float()), optional(any_float())),
        camera_parameters in optional(prop::collection::vec(any_float(), 0..4)),
        camera_type in optional(prop::sample::select(vec![CameraType::Perspective, CameraType::Fisheye, CameraType::Equirectangular])),
        captured_at in any::<i64>(),
        computed_geometry in optional((any_float(), any_float())),
        computed_rotation in optional((any_float(), any_float(), any_float())),
        creator in any::<u64>(),
        exif_orientation in optional(1..=8_u8),
        geometry in (-180.0..=180.0_f64, -90.0..=90.0_f64),
        (height, width, is_pano) in (any::<u32>(), any::<u32>(), any::<bool>()),
        (make, model) in (optional("[ -~]{0,12}"), optional("[ -~]{0,12}")),
        merge_cc in optional(any::<u64>()),
        (mesh, sfm_cluster, organization) in (optional(any::<u64>()), optional(any::<u64>()), optional(any::<u64>())),
        sequence in "[A-Za-z0-9]{1,22}",
    ) -> Image {
        Image {
            id: ImageId(id),
            altitude,
            atomic_scale,
            camera_parameters,
            camera_type,
            captured_at: Timestamp(captured_at),
            compass_angle,
            computed_altitude,
            computed_compass_angle,
            computed_geometry: computed_geometry.map(|(lon, lat)| Point::new(lon, lat)),
            computed_rotation: computed_rotation.map(|(x, y, z)| [x, y, z]),
            creator: CreatorId(creator),
            exif_orientation,
            geometry: Point::new(geometry.0, geometry.1),
            height,
            width,
            is_pano,
            make,
            model,
            merge_cc,
            mesh: mesh.map(MediaId),
            sequence: SequenceId(sequence),
            sfm_cluster: sfm_cluster.map(MediaId),
            quality_score,
            organization: organization.map(OrganizationId),
        }
    }
}

fn any_image_selection() -> impl Strategy<Value = FieldSelection> {
    let paths: Vec<String> = FieldSelection::all(EntityKind::Image)
        .to_string()
        .split(',')
        .map(str::to_owned)
        .collect();
    prop::sample::subsequence(paths.clone(), 0..=paths.len())
        .prop_map(|chosen| FieldSelection::parse(&chosen.join(","), EntityKind::Image).unwrap())
}

proptest! {
    #[test]
    fn projected_images_never_hold_null_and_keep_their_ids(
        image in any_image(),
        selection in any_image_selection(),
    ) {
        let context = TestContext::new();
        let object = project_image(&image, &selection, &context);
        let value = Value::Object(object.clone());
        prop_assert!(!contains_null(&value), "{}", value);
        // Only selected fields, and the ID always, as a string that reads back.
        for key in object.keys() {
            prop_assert!(selection.contains(key), "{} not selected", key);
        }
        prop_assert_eq!(object["id"].as_str().map(str::parse::<ImageId>), Some(Ok(image.id)));
        // Fields that always have a value are always there when asked for.
        for always in ["captured_at", "geometry", "height", "width", "is_pano", "sequence", "creator"] {
            prop_assert_eq!(object.contains_key(always), selection.contains(always), "{}", always);
        }
        if selection.contains("captured_at") {
            prop_assert_eq!(object["captured_at"].as_i64(), Some(image.captured_at.millis()));
        }
        if let Some(creator) = selection.nested("creator") {
            let creator_id = image.creator.to_string();
            prop_assert_eq!(object["creator"]["id"].as_str(), Some(creator_id.as_str()));
            prop_assert_eq!(object["creator"].as_object().map(Map::len), Some(if creator.contains("username") && context.creator(image.creator).is_some() { 2 } else { 1 }));
        }
        // An optional field is present exactly when it has a finite value.
        if selection.contains("altitude") {
            prop_assert_eq!(object.contains_key("altitude"), image.altitude.is_some_and(f64::is_finite));
        }
        if selection.contains("mesh") {
            prop_assert_eq!(object.contains_key("mesh"), image.mesh.is_some());
        }
    }

    /// Writing an image straight out gives the bytes of the map `project_image` builds.
    #[test]
    fn images_written_straight_out_are_the_projected_maps(
        image in any_image(),
        selection in any_image_selection(),
    ) {
        let context = TestContext::new();
        let built = serde_json::to_string(&project_image(&image, &selection, &context)).unwrap();
        let written = serde_json::to_string(&ImageObject::new(&image, &selection, &context)).unwrap();
        prop_assert_eq!(written, built);
    }

    #[test]
    fn map_feature_timestamps_are_iso_strings(
        first in -62_135_596_800_000_i64..253_402_300_799_999,
        last in -62_135_596_800_000_i64..253_402_300_799_999,
    ) {
        let mut feature = map_feature();
        feature.first_seen_at = Timestamp(first);
        feature.last_seen_at = Timestamp(last);
        let object = project_map_feature(&feature, &fields("first_seen_at,last_seen_at", EntityKind::MapFeature), &NoContext);
        for (key, millis) in [("first_seen_at", first), ("last_seen_at", last)] {
            let text = object[key].as_str().unwrap();
            prop_assert!(text.ends_with("+0000"), "{}", text);
            // Back to the same second.
            let parsed = Timestamp::parse_iso8601(text).unwrap();
            prop_assert_eq!(parsed.millis(), millis.div_euclid(1000) * 1000);
        }
    }
}
