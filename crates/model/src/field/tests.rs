//! Tests of field selection parsing: encodings, order, duplicates, nesting and unknown names.

use proptest::prelude::*;

use super::*;

const KINDS: [EntityKind; 4] = [
    EntityKind::Image,
    EntityKind::MapFeature,
    EntityKind::Detection,
    EntityKind::Organization,
];

/// The image fields the Python SDK asks of any ID to learn whether it is an image.
const SDK_IMAGE_FIELDS: [&str; 27] = [
    "id",
    "altitude",
    "atomic_scale",
    "camera_parameters",
    "camera_type",
    "captured_at",
    "compass_angle",
    "computed_altitude",
    "computed_compass_angle",
    "computed_geometry",
    "computed_rotation",
    "creator",
    "exif_orientation",
    "geometry",
    "height",
    "make",
    "model",
    "thumb_256_url",
    "thumb_1024_url",
    "thumb_2048_url",
    "thumb_original_url",
    "merge_cc",
    "mesh",
    "quality_score",
    "sequence",
    "sfm_cluster",
    "width",
];

fn check(raw: &str, kind: EntityKind, expected: &str) {
    let selection = FieldSelection::parse(raw, kind)
        .unwrap_or_else(|error| panic!("{raw:?} on {kind}: {error}"));
    assert_eq!(selection.to_string(), expected, "{raw:?} on {kind}");
}

fn check_rejected(raw: &str, kind: EntityKind, field: &str) {
    assert_eq!(
        FieldSelection::parse(raw, kind),
        Err(FieldError::NonexistingField {
            field: field.to_owned(),
            kind
        }),
        "{raw:?} on {kind}"
    );
}

/// Every selectable leaf of `kind` as a dotted path.
fn leaf_paths(kind: EntityKind) -> Vec<String> {
    FieldSelection::all(kind)
        .to_string()
        .split(',')
        .map(str::to_owned)
        .collect()
}

/// Every name a client may write for `kind`: the leaves and the object fields alone.
fn requestable_paths(kind: EntityKind) -> Vec<String> {
    let mut paths = leaf_paths(kind);
    paths.extend(
        Node::from_kind(kind)
            .fields()
            .iter()
            .filter(|(_, nested)| nested.is_some())
            .map(|(name, _)| (*name).to_owned()),
    );
    paths.push("detections.image".to_owned());
    paths.retain(|path| FieldSelection::parse(path, kind).is_ok());
    paths
}

#[test]
fn empty_or_blank_means_id_only() {
    for kind in KINDS {
        for raw in ["", " ", ",", ",,", "%2C", " , %2c ,"] {
            check(raw, kind, "id");
        }
        assert_eq!(
            FieldSelection::parse("", kind),
            Ok(FieldSelection::id_only(kind))
        );
    }
}

#[test]
fn id_is_always_selected() {
    check("geometry", EntityKind::Image, "geometry,id");
    check("name", EntityKind::Organization, "id,name");
    check(
        "creator.username",
        EntityKind::Image,
        "creator.id,creator.username,id",
    );
    check(
        "image.geometry",
        EntityKind::Detection,
        "id,image.geometry,image.id",
    );
    assert!(
        FieldSelection::parse("value", EntityKind::Detection)
            .unwrap()
            .contains("id")
    );
}

#[test]
fn commas_may_arrive_encoded_twice() {
    for raw in [
        "id,geometry,captured_at",
        "id%2Cgeometry%2Ccaptured_at",
        "id%2cgeometry%2ccaptured_at",
        "id%2Cgeometry,captured_at",
        "%2Cid,,geometry%2c%2C captured_at%2C",
    ] {
        check(raw, EntityKind::Image, "captured_at,geometry,id");
    }
}

#[test]
fn other_escapes_are_not_decoded() {
    // `%2E` is not a comma: the item is taken as a (nonexisting) name.
    check_rejected("creator%2Eid", EntityKind::Image, "creator%2Eid");
    check_rejected("id%2", EntityKind::Image, "id%2");
}

#[test]
fn whitespace_around_names_is_ignored() {
    check(
        "  id , geometry\t,\ncaptured_at ",
        EntityKind::Image,
        "captured_at,geometry,id",
    );
    check(
        " creator . username ",
        EntityKind::Image,
        "creator.id,creator.username,id",
    );
}

#[test]
fn order_and_duplicates_do_not_matter() {
    let expected = FieldSelection::parse("id,geometry,is_pano", EntityKind::Image).unwrap();
    for raw in [
        "is_pano,geometry",
        "geometry,geometry,is_pano,id,id",
        "is_pano,id,geometry,is_pano",
    ] {
        assert_eq!(
            FieldSelection::parse(raw, EntityKind::Image),
            Ok(expected.clone())
        );
    }
}

#[test]
fn nested_fields_of_an_image() {
    check(
        "detections.value",
        EntityKind::Image,
        "detections.id,detections.value,id",
    );
    check(
        "detections.geometry,detections.image",
        EntityKind::Image,
        "detections.geometry,detections.id,detections.image.geometry,detections.image.id,id",
    );
    check(
        "detections.image.geometry,detections.created_at",
        EntityKind::Image,
        "detections.created_at,detections.id,detections.image.geometry,detections.image.id,id",
    );
    check("creator.id", EntityKind::Image, "creator.id,id");
    check("mesh.url", EntityKind::Image, "id,mesh.id,mesh.url");
    check("mesh.id", EntityKind::Image, "id,mesh.id");
    check(
        "sfm_cluster.url",
        EntityKind::Image,
        "id,sfm_cluster.id,sfm_cluster.url",
    );
    check("organization.id", EntityKind::Image, "id,organization.id");
}

#[test]
fn nested_fields_of_a_detection_and_a_map_feature() {
    check("image.id", EntityKind::Detection, "id,image.id");
    check(
        "image.geometry,value",
        EntityKind::Detection,
        "id,image.geometry,image.id,value",
    );
    check("images.id", EntityKind::MapFeature, "id,images.id");
    check(
        "images.geometry",
        EntityKind::MapFeature,
        "id,images.geometry,images.id",
    );
}

#[test]
fn an_object_alone_selects_its_defaults() {
    check(
        "creator",
        EntityKind::Image,
        "creator.id,creator.username,id",
    );
    check("mesh", EntityKind::Image, "id,mesh.id,mesh.url");
    check(
        "sfm_cluster",
        EntityKind::Image,
        "id,sfm_cluster.id,sfm_cluster.url",
    );
    check("organization", EntityKind::Image, "id,organization.id");
    check(
        "detections",
        EntityKind::Image,
        "detections.geometry,detections.id,detections.value,id",
    );
    check("image", EntityKind::Detection, "id,image.geometry,image.id");
    check(
        "images",
        EntityKind::MapFeature,
        "id,images.geometry,images.id",
    );
}

#[test]
fn an_object_and_its_sub_fields_select_the_union() {
    let expected = "detections.created_at,detections.geometry,detections.id,detections.value,id";
    check(
        "detections,detections.created_at",
        EntityKind::Image,
        expected,
    );
    check(
        "detections.created_at,detections",
        EntityKind::Image,
        expected,
    );
    check(
        "creator.id,creator",
        EntityKind::Image,
        "creator.id,creator.username,id",
    );
}

#[test]
fn nested_selections_are_reachable() {
    let selection = FieldSelection::parse(
        "creator.username,detections.image.geometry",
        EntityKind::Image,
    )
    .unwrap();
    assert_eq!(selection.kind(), Some(EntityKind::Image));
    assert!(selection.contains("creator"));
    assert!(!selection.contains("mesh"));
    assert!(!selection.contains("creator.username"));
    let creator = selection.nested("creator").unwrap();
    assert_eq!(creator.kind(), None);
    assert_eq!(creator.names().collect::<Vec<_>>(), ["id", "username"]);
    let detections = selection.nested("detections").unwrap();
    assert_eq!(detections.kind(), Some(EntityKind::Detection));
    let image = detections.nested("image").unwrap();
    assert_eq!(image.names().collect::<Vec<_>>(), ["geometry", "id"]);
    assert_eq!(selection.nested("id"), None);
    assert_eq!(selection.nested("mesh"), None);
    assert_eq!(selection.len(), 3);
    assert!(!selection.is_empty());
    assert_eq!(
        selection
            .iter()
            .map(|(name, nested)| (name, nested.is_some()))
            .collect::<Vec<_>>(),
        [("creator", true), ("detections", true), ("id", false)]
    );
}

#[test]
fn every_sdk_image_field_is_an_image_field() {
    let all = SDK_IMAGE_FIELDS.join(",");
    let selection = FieldSelection::parse(&all, EntityKind::Image).unwrap();
    for field in SDK_IMAGE_FIELDS {
        assert!(selection.contains(field), "{field}");
    }
    assert_eq!(selection.len(), 27);
    // Beyond the SDK's list: docs/API.md's `organization`, and the spec's `is_pano` and
    // `detections`.
    check(
        "organization,is_pano",
        EntityKind::Image,
        "id,is_pano,organization.id",
    );
    assert!(
        FieldSelection::parse("detections", EntityKind::Image)
            .unwrap()
            .contains("detections")
    );
}

#[test]
fn sdk_image_fields_are_rejected_for_every_other_kind() {
    let all = SDK_IMAGE_FIELDS.join(",");
    for kind in [
        EntityKind::MapFeature,
        EntityKind::Detection,
        EntityKind::Organization,
    ] {
        // The request as the SDK sends it fails on the first image-only field.
        check_rejected(&all, kind, "altitude");
        let other_fields = Node::from_kind(kind).fields();
        for field in SDK_IMAGE_FIELDS {
            if other_fields.iter().any(|(name, _)| *name == field) {
                // `id` and `geometry` are shared with map features and detections.
                assert!(matches!(field, "id" | "geometry"), "{field} on {kind}");
                continue;
            }
            check_rejected(field, kind, field);
            check_rejected(&format!("id,{field}"), kind, field);
        }
    }
}

#[test]
fn every_field_is_rejected_on_kinds_that_lack_it() {
    for kind in KINDS {
        let own = requestable_paths(kind);
        for other in KINDS {
            for path in requestable_paths(other) {
                if own.contains(&path) {
                    continue;
                }
                let result = FieldSelection::parse(&path, kind);
                let Err(FieldError::NonexistingField {
                    field,
                    kind: error_kind,
                }) = result
                else {
                    panic!("{path} accepted on {kind}");
                };
                assert_eq!(error_kind, kind);
                assert_eq!(field, path);
            }
        }
    }
}

#[test]
fn unknown_names_are_rejected_with_the_graph_message() {
    let error = FieldSelection::parse("id,nope,geometry", EntityKind::Image).unwrap_err();
    assert_eq!(
        error.to_string(),
        "Tried accessing nonexisting field (nope) on node type (Image)"
    );
    let error = FieldSelection::parse("slug", EntityKind::MapFeature).unwrap_err();
    assert_eq!(
        error.to_string(),
        "Tried accessing nonexisting field (slug) on node type (MapFeature)"
    );
    check_rejected("ID", EntityKind::Image, "ID");
    check_rejected("Geometry", EntityKind::Detection, "Geometry");
    check_rejected("object_values", EntityKind::MapFeature, "object_values");
}

#[test]
fn malformed_paths_are_rejected() {
    check_rejected("creator.email", EntityKind::Image, "creator.email");
    check_rejected("altitude.value", EntityKind::Image, "altitude.value");
    check_rejected("id.id", EntityKind::Organization, "id.id");
    check_rejected("creator.", EntityKind::Image, "creator.");
    check_rejected(" creator . ", EntityKind::Image, "creator.");
    check_rejected(".id", EntityKind::Image, ".id");
    check_rejected("creator..id", EntityKind::Image, "creator..id");
    check_rejected(
        "detections.image.altitude",
        EntityKind::Image,
        "detections.image.altitude",
    );
    check_rejected(
        "detections.image.geometry.type",
        EntityKind::Image,
        "detections.image.geometry.type",
    );
    check_rejected("image.creator", EntityKind::Detection, "image.creator");
    check_rejected("organization.name", EntityKind::Image, "organization.name");
}

#[test]
fn all_selects_every_field_at_every_level() {
    assert_eq!(
        FieldSelection::all(EntityKind::Image).to_string(),
        "altitude,atomic_scale,camera_parameters,camera_type,captured_at,compass_angle,\
         computed_altitude,computed_compass_angle,computed_geometry,computed_rotation,\
         creator.id,creator.username,detections.created_at,detections.geometry,detections.id,\
         detections.image.geometry,detections.image.id,detections.value,exif_orientation,\
         geometry,height,id,is_pano,make,merge_cc,mesh.id,mesh.url,model,organization.id,\
         quality_score,sequence,sfm_cluster.id,sfm_cluster.url,thumb_1024_url,thumb_2048_url,\
         thumb_256_url,thumb_original_url,width"
    );
    assert_eq!(
        FieldSelection::all(EntityKind::MapFeature).to_string(),
        "aligned_direction,first_seen_at,geometry,id,images.geometry,images.id,last_seen_at,\
         object_type,object_value"
    );
    assert_eq!(
        FieldSelection::all(EntityKind::Detection).to_string(),
        "created_at,geometry,id,image.geometry,image.id,value"
    );
    assert_eq!(
        FieldSelection::all(EntityKind::Organization).to_string(),
        "description,id,name,slug"
    );
    for kind in KINDS {
        let all = FieldSelection::all(kind);
        assert_eq!(
            FieldSelection::parse(&all.to_string(), kind),
            Ok(all.clone())
        );
        assert_eq!(all.kind(), Some(kind));
    }
}

#[test]
fn field_tables_are_sorted_and_unique() {
    for node in [
        Node::Image,
        Node::MapFeature,
        Node::Detection,
        Node::Organization,
        Node::Creator,
        Node::Media,
        Node::OrganizationRef,
        Node::ImageRef,
    ] {
        let names: Vec<&str> = node.fields().iter().map(|(name, _)| *name).collect();
        assert!(names.windows(2).all(|pair| pair[0] < pair[1]), "{node:?}");
        assert!(names.contains(&"id"), "{node:?}");
        for default in node.default_fields() {
            assert!(names.contains(default), "{node:?} {default}");
        }
    }
}

/// A separator between items: a comma, an encoded comma, or an empty item in between.
fn separator() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![",", "%2C", "%2c", ",,", " , ", "\t,"])
}

fn padding() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["", " ", "  ", "\t"])
}

fn kind() -> impl Strategy<Value = EntityKind> {
    prop::sample::select(KINDS.to_vec())
}

/// A kind and a list of its valid names (duplicates likely), with separators and padding.
fn request() -> impl Strategy<Value = (EntityKind, Vec<String>, String)> {
    kind().prop_flat_map(|kind| {
        let paths = requestable_paths(kind);
        (
            Just(kind),
            prop::collection::vec(
                (
                    prop::sample::select(paths),
                    separator(),
                    padding(),
                    padding(),
                ),
                0..24,
            ),
        )
            .prop_map(|(kind, items)| {
                let names: Vec<String> = items.iter().map(|(name, ..)| name.clone()).collect();
                let mut raw = String::new();
                for (name, separator, before, after) in &items {
                    raw.push_str(before);
                    raw.push_str(name);
                    raw.push_str(after);
                    raw.push_str(separator);
                }
                (kind, names, raw)
            })
    })
}

proptest! {
    #[test]
    fn valid_requests_parse_whatever_the_order_and_encoding(
        (kind, names, raw) in request(),
        seed in any::<u64>(),
    ) {
        let selection = FieldSelection::parse(&raw, kind).unwrap();
        prop_assert!(selection.contains("id"));
        for name in &names {
            let top = name.split('.').next().unwrap();
            prop_assert!(selection.contains(top), "{} missing from {}", name, selection);
        }
        // The same names in another order, plain commas, each once: the same selection.
        let mut shuffled = names.clone();
        shuffled.sort();
        shuffled.dedup();
        let rotation = if shuffled.is_empty() { 0 } else { usize::try_from(seed % shuffled.len() as u64).unwrap() };
        shuffled.rotate_left(rotation);
        shuffled.reverse();
        prop_assert_eq!(FieldSelection::parse(&shuffled.join(","), kind), Ok(selection.clone()));
        // The text form round-trips.
        prop_assert_eq!(FieldSelection::parse(&selection.to_string(), kind), Ok(selection));
    }

    #[test]
    fn unknown_names_are_rejected_on_every_kind(
        kind in kind(),
        name in "[a-z_]{1,24}",
        prefix in prop::collection::vec(prop::sample::select(vec!["id", "geometry", "value"]), 0..3),
    ) {
        let known = Node::from_kind(kind).fields().iter().any(|(field, _)| *field == name);
        prop_assume!(!known);
        let mut items: Vec<&str> = prefix.into_iter().filter(|item| FieldSelection::parse(item, kind).is_ok()).collect();
        items.push(&name);
        prop_assert_eq!(
            FieldSelection::parse(&items.join(","), kind),
            Err(FieldError::NonexistingField { field: name.clone(), kind })
        );
    }

    #[test]
    fn arbitrary_input_never_panics_and_accepted_input_round_trips(
        kind in kind(),
        raw in "[a-z_.,% 2Cc]{0,64}",
    ) {
        if let Ok(selection) = FieldSelection::parse(&raw, kind) {
            prop_assert!(selection.contains("id"));
            prop_assert_eq!(FieldSelection::parse(&selection.to_string(), kind), Ok(selection));
        }
    }
}
