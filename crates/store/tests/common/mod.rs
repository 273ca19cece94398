//! Random data sets for the store's tests, built deterministically from a seed.

#![allow(dead_code, clippy::unwrap_used, clippy::panic)]

use std::collections::{HashMap, HashSet};

use num_traits::ToPrimitive as _;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use streetlevel_model::{
    CameraType, Creator, CreatorId, Detection, DetectionId, Image, ImageId, MapFeature,
    MapFeatureId, MediaId, ObjectType, Organization, OrganizationId, Point, Sequence, SequenceId,
    Timestamp,
};
use streetlevel_mvt::generalise::LineGeneralisation;
use streetlevel_mvt::geo::{Coord, LineString, MultiLineString};
use streetlevel_mvt::{Geometry, TileProjector};
use streetlevel_store::{
    CellCount, GeometryVariant, OVERVIEW_GRID, Store, TileImage, TileSequence,
};

pub const VALUES: [&str; 5] = [
    "regulatory--stop--g1",
    "regulatory--yield--g1",
    "object--street-light",
    "object--fire-hydrant",
    "warning--curve-left--g2",
];
pub const PATTERNS: [&str; 7] = [
    "regulatory--*",
    "*--g1",
    "object--street-light",
    "*",
    "*light*",
    "nothing*",
    "warning--curve-left--g2",
];
pub const MAKES: [&str; 4] = ["Apple", "apple", "GoPro", "Sony"];
pub const MODELS: [&str; 3] = ["iPhone 12", "HERO9 Black", "RX100"];

/// Everything a test inserts.
#[derive(Debug, Clone, Default)]
pub struct Dataset {
    pub creators: Vec<Creator>,
    pub organizations: Vec<Organization>,
    pub sequences: Vec<Sequence>,
    pub images: Vec<Image>,
    pub map_features: Vec<MapFeature>,
    pub detections: Vec<Detection>,
}

/// Hands out IDs unique across every kind, some above `i64::MAX`.
pub struct Ids {
    used: HashSet<u64>,
}

impl Ids {
    pub fn new() -> Self {
        Ids {
            used: HashSet::new(),
        }
    }

    pub fn next(&mut self, rng: &mut StdRng) -> u64 {
        loop {
            let id = if rng.random_bool(0.05) {
                u64::MAX - rng.random_range(0..100_000)
            } else {
                rng.random_range(1..10_000_000)
            };
            if self.used.insert(id) {
                return id;
            }
        }
    }
}

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// A point in a small area around Lund, on a coarse grid so that boxes often hit edges.
pub fn random_point(rng: &mut StdRng) -> Point {
    let lon = 13.15 + f64::from(rng.random_range(0..80u32)) * 0.001;
    let lat = 55.68 + f64::from(rng.random_range(0..40u32)) * 0.001;
    Point::new(lon, lat)
}

pub fn random_time(rng: &mut StdRng) -> Timestamp {
    Timestamp(1_600_000_000_000 + rng.random_range(0..100i64) * 1000)
}

/// Creators, organizations and sequences (some sequences only named by images).
pub fn base(rng: &mut StdRng, ids: &mut Ids) -> Dataset {
    let creators: Vec<Creator> = (0..4)
        .map(|number| Creator {
            id: CreatorId(ids.next(rng)),
            username: format!("user{number}"),
        })
        .collect();
    let organizations: Vec<Organization> = (0..2)
        .map(|number| Organization {
            id: OrganizationId(ids.next(rng)),
            slug: format!("org{number}"),
            name: format!("Organization {number}"),
            description: (number == 0).then(|| String::from("Maps the city")),
        })
        .collect();
    let sequences = (0..5)
        .map(|number| Sequence {
            id: SequenceId(format!("seq{number}")),
            creator: creators[number % creators.len()].id,
            organization: (number % 2 == 0).then(|| organizations[0].id),
            image_ids: Vec::new(),
        })
        .collect();
    Dataset {
        creators,
        organizations,
        sequences,
        ..Dataset::default()
    }
}

pub fn random_image(rng: &mut StdRng, ids: &mut Ids, base: &Dataset) -> Image {
    let geometry = random_point(rng);
    let computed_geometry = rng.random_bool(0.8).then(|| {
        Point::new(
            geometry.lon + rng.random_range(-0.0005..0.0005),
            geometry.lat + rng.random_range(-0.0005..0.0005),
        )
    });
    let sequence_number = rng.random_range(0..7);
    let creator = base.creators[rng.random_range(0..base.creators.len())].id;
    let full = rng.random_bool(0.7);
    Image {
        id: ImageId(ids.next(rng)),
        altitude: full.then(|| rng.random_range(0.0..100.0)),
        atomic_scale: full.then(|| rng.random_range(0.5..1.5)),
        camera_parameters: full.then(|| vec![0.85, rng.random_range(-0.1..0.1), 0.0]),
        camera_type: full.then_some(CameraType::Perspective),
        captured_at: random_time(rng),
        compass_angle: full.then(|| rng.random_range(0.0..360.0)),
        computed_altitude: full.then(|| rng.random_range(0.0..100.0)),
        computed_compass_angle: full.then(|| rng.random_range(0.0..360.0)),
        computed_geometry,
        computed_rotation: full.then(|| [0.1, rng.random_range(-1.0..1.0), 0.3]),
        creator,
        exif_orientation: full.then_some(1),
        geometry,
        height: 3000,
        width: 4000,
        is_pano: rng.random_bool(0.2),
        make: rng
            .random_bool(0.8)
            .then(|| MAKES[rng.random_range(0..MAKES.len())].to_owned()),
        model: rng
            .random_bool(0.8)
            .then(|| MODELS[rng.random_range(0..MODELS.len())].to_owned()),
        merge_cc: full.then(|| rng.random_range(1..5)),
        mesh: full.then(|| MediaId(rng.random_range(1..1_000_000))),
        sequence: SequenceId(format!("seq{sequence_number}")),
        sfm_cluster: full.then(|| MediaId(rng.random_range(1..1_000_000))),
        quality_score: full.then(|| rng.random_range(0.0..1.0)),
        organization: rng
            .random_bool(0.5)
            .then(|| base.organizations[rng.random_range(0..base.organizations.len())].id),
    }
}

pub fn random_map_feature(rng: &mut StdRng, ids: &mut Ids, images: &[Image]) -> MapFeature {
    let first = random_time(rng);
    let value = VALUES[rng.random_range(0..VALUES.len())];
    MapFeature {
        id: MapFeatureId(ids.next(rng)),
        aligned_direction: rng.random_bool(0.5).then(|| rng.random_range(0.0..360.0)),
        first_seen_at: first,
        last_seen_at: Timestamp(first.0 + rng.random_range(0..50_000)),
        object_value: value.to_owned(),
        object_type: if value.starts_with("object") {
            ObjectType::Point
        } else {
            ObjectType::TrafficSign
        },
        geometry: random_point(rng),
        images: images
            .iter()
            .take(rng.random_range(0..3))
            .map(|image| image.id)
            .collect(),
    }
}

pub fn random_detection(
    rng: &mut StdRng,
    ids: &mut Ids,
    images: &[Image],
    features: &[MapFeature],
) -> Detection {
    // Now and then a detection of an image that does not exist.
    let image = if images.is_empty() || rng.random_bool(0.05) {
        ImageId(ids.next(rng))
    } else {
        images[rng.random_range(0..images.len())].id
    };
    Detection {
        id: DetectionId(ids.next(rng)),
        created_at: random_time(rng),
        geometry: String::from(
            "GjAKBm1weS1vchIUEgIAABgDIgwJAAAaAAQgAAAPGgARGgJpZBoEdHlwZSgBMIAgeAI=",
        ),
        image,
        value: VALUES[rng.random_range(0..VALUES.len())].to_owned(),
        map_feature: (!features.is_empty() && rng.random_bool(0.7))
            .then(|| features[rng.random_range(0..features.len())].id),
    }
}

/// A full random data set of about `n_images` images.
pub fn dataset(seed: u64, n_images: usize) -> Dataset {
    let mut rng = rng(seed);
    let mut ids = Ids::new();
    let mut data = base(&mut rng, &mut ids);
    data.images = (0..n_images)
        .map(|_| random_image(&mut rng, &mut ids, &data))
        .collect();
    data.map_features = (0..n_images / 2)
        .map(|_| random_map_feature(&mut rng, &mut ids, &data.images))
        .collect();
    data.detections = (0..n_images)
        .map(|_| random_detection(&mut rng, &mut ids, &data.images, &data.map_features))
        .collect();
    data
}

/// Inserts everything, dependencies first.
pub fn insert_all(store: &mut Store, data: &Dataset) {
    store.insert_creators(&data.creators).unwrap();
    store.insert_organizations(&data.organizations).unwrap();
    store.insert_sequences(&data.sequences).unwrap();
    store.insert_images(&data.images).unwrap();
    store.insert_map_features(&data.map_features).unwrap();
    store.insert_detections(&data.detections).unwrap();
}

// Brute-force answers of the tile queries, for the tile and overview tests.

/// The location of `variant` (computed falls back to original).
pub fn variant_point(image: &Image, variant: GeometryVariant) -> Point {
    match variant {
        GeometryVariant::Computed => image.computed_geometry.unwrap_or(image.geometry),
        GeometryVariant::Original => image.geometry,
    }
}

/// The tile item the brute force expects for `image` at `geometry`: the computed variant's
/// compass angle falls back to the original one.
pub fn expected_tile_image(
    image: &Image,
    geometry: Geometry,
    variant: GeometryVariant,
) -> TileImage<'_> {
    let compass_angle = match variant {
        GeometryVariant::Computed => image.computed_compass_angle.or(image.compass_angle),
        GeometryVariant::Original => image.compass_angle,
    };
    TileImage {
        id: image.id,
        geometry,
        captured_at: image.captured_at,
        creator_id: image.creator,
        sequence_id: &image.sequence,
        organization_id: image.organization,
        is_pano: image.is_pano,
        compass_angle,
        cell: None,
    }
}

pub fn brute_tile_images<'a>(
    images: &'a [Image],
    projector: &TileProjector,
    variant: GeometryVariant,
) -> Vec<TileImage<'a>> {
    let mut found: Vec<TileImage<'a>> = images
        .iter()
        .filter_map(|image| {
            let point = variant_point(image, variant);
            projector
                .point(point.lon, point.lat)
                .map(|geometry| expected_tile_image(image, geometry, variant))
        })
        .collect();
    found.sort_by_key(|row| row.id);
    found
}

pub fn brute_overview<'a>(found: &[TileImage<'a>], extent: u32) -> Vec<TileImage<'a>> {
    let cell_size = f64::from(extent) / f64::from(OVERVIEW_GRID);
    let mut best: HashMap<(i64, i64), (&TileImage<'a>, CellCount)> = HashMap::new();
    for row in found {
        let Geometry::Points(points) = &row.geometry else {
            panic!("not a point")
        };
        let point = points.0[0];
        let cell = (
            (f64::from(point.x()) / cell_size).floor().to_i64().unwrap(),
            (f64::from(point.y()) / cell_size).floor().to_i64().unwrap(),
        );
        let slot = best.entry(cell).or_insert((row, CellCount::default()));
        if row.id < slot.0.id {
            slot.0 = row;
        }
        slot.1.images += 1;
        slot.1.panoramas += u32::from(row.is_pano);
    }
    let mut kept: Vec<TileImage<'a>> = best
        .into_values()
        .map(|(row, count)| TileImage {
            cell: Some(count),
            ..row.clone()
        })
        .collect();
    kept.sort_by_key(|row| row.id);
    kept
}

pub fn brute_sequences<'a>(
    images: &'a [Image],
    projector: &TileProjector,
    variant: GeometryVariant,
) -> Vec<TileSequence<'a>> {
    let mut by_sequence: HashMap<&SequenceId, Vec<&Image>> = HashMap::new();
    for image in images {
        by_sequence.entry(&image.sequence).or_default().push(image);
    }
    let mut found = Vec::new();
    for (id, mut members) in by_sequence {
        members.sort_by_key(|image| (image.captured_at, image.id));
        let line: LineString<f64> = members
            .iter()
            .map(|image| {
                let point = variant_point(image, variant);
                Coord {
                    x: point.lon,
                    y: point.lat,
                }
            })
            .collect();
        if let Some(geometry) = projector.multi_line_string(&MultiLineString::new(vec![line])) {
            let first = members[0];
            found.push(TileSequence {
                id,
                image_id: first.id,
                captured_at: first.captured_at,
                creator_id: first.creator,
                organization_id: first.organization,
                is_pano: first.is_pano,
                geometry,
            });
        }
    }
    found.sort_by_key(|item| item.id);
    // Below z14 the tile keeps what mvt's generalisation chooses, in key order.
    let transform = projector.transform();
    match LineGeneralisation::for_zoom(transform.tile().z(), 14, transform.extent()) {
        None => found,
        Some(rule) => {
            let lines: Vec<&MultiLineString<i32>> = found
                .iter()
                .map(|item| match &item.geometry {
                    Geometry::LineStrings(lines) => lines,
                    other => panic!("a sequence as {other:?}"),
                })
                .collect();
            let chosen = rule.select(&lines);
            found
                .into_iter()
                .enumerate()
                .filter(|(position, _)| chosen.binary_search(position).is_ok())
                .map(|(_, item)| item)
                .collect()
        }
    }
}
