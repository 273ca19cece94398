//! Detection geometry: round trips through base64 within one pixel, typed errors, and an
//! independent decoder reading what we write.

#![allow(clippy::unwrap_used, clippy::panic)] // Helpers of tests fail loudly.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use proptest::prelude::*;
use streetlevel_detection::{
    DETECTION_EXTENT, DetectionError, LAYER_NAME, decode_normalized, decode_pixels, encode_pixels,
};
use streetlevel_mvt::geo::{Coord, LineString, MapCoords, MultiPolygon, Polygon, point, polygon};
use streetlevel_mvt::{Geometry, MvtError, TileBuilder, Value};

fn rectangle(min_x: f64, min_y: f64, max_x: f64, max_y: f64) -> LineString<f64> {
    LineString::new(vec![
        Coord { x: min_x, y: min_y },
        Coord { x: max_x, y: min_y },
        Coord { x: max_x, y: max_y },
        Coord { x: min_x, y: max_y },
    ])
}

/// `decoded` is `original` within one pixel per vertex, in order: the same vertices, the
/// same cyclic sequence, read from any starting vertex in either direction (the encoder
/// orients rings as the specification wants and may start a reversed ring elsewhere).
fn assert_ring_close(original: &LineString<f64>, decoded: &LineString<f64>) {
    // Closed rings repeat their first vertex; compare the open sequences.
    let open = |ring: &LineString<f64>| ring.0[..ring.0.len() - 1].to_vec();
    let (original, decoded) = (open(original), open(decoded));
    assert_eq!(decoded.len(), original.len(), "{decoded:?} vs {original:?}");
    let close =
        |a: &Coord<f64>, b: &Coord<f64>| (a.x - b.x).abs() <= 1.0 && (a.y - b.y).abs() <= 1.0;
    let count = original.len();
    let matches = (0..count).any(|shift| {
        let forward =
            (0..count).all(|index| close(&decoded[index], &original[(index + shift) % count]));
        let backward = (0..count)
            .all(|index| close(&decoded[index], &original[(shift + count - index) % count]));
        forward || backward
    });
    assert!(
        matches,
        "{decoded:?} is not {original:?} within a pixel per vertex"
    );
}

/// A simple ring around `centre` (normalized image coordinates): vertices at increasing
/// angles with varying radii, in either winding.
fn star(centre: (f64, f64), radii: &[f64], jitter: &[f64], clockwise: bool) -> LineString<f64> {
    let count = f64::from(u32::try_from(radii.len()).unwrap());
    let mut ring: Vec<Coord<f64>> = radii
        .iter()
        .zip(jitter)
        .zip(0_u32..)
        .map(|((radius, jitter), index)| {
            let angle = std::f64::consts::TAU * (f64::from(index) + jitter) / count;
            Coord {
                x: centre.0 + radius * angle.cos(),
                y: centre.1 + radius * angle.sin(),
            }
        })
        .collect();
    if clockwise {
        ring.reverse();
    }
    LineString::new(ring)
}

/// One star-shaped polygon of 3 to 12 vertices with an optional star-shaped hole, each in
/// either winding, in normalized coordinates around `centre` (radius at most 0.2).
fn star_polygon(centre: (f64, f64)) -> impl Strategy<Value = Polygon<f64>> {
    (3usize..=12, 3usize..=8).prop_flat_map(move |(outer, inner)| {
        (
            prop::collection::vec(0.1..0.2f64, outer),
            prop::collection::vec(0.0..0.5f64, outer),
            any::<bool>(),
            prop::option::of((
                prop::collection::vec(0.02..0.06f64, inner),
                prop::collection::vec(0.0..0.5f64, inner),
                any::<bool>(),
            )),
        )
            .prop_map(move |(radii, jitter, clockwise, hole)| {
                let holes = hole
                    .map(|(radii, jitter, clockwise)| star(centre, &radii, &jitter, clockwise))
                    .into_iter()
                    .collect();
                Polygon::new(star(centre, &radii, &jitter, clockwise), holes)
            })
    })
}

proptest! {
    #[test]
    fn pixel_polygon_round_trips_within_one_pixel(
        // Up to 8192 pixels a grid cell is at most two pixels, so rounding to the grid moves
        // a vertex by at most one.
        width in 64u32..=8192,
        height in 64u32..=8192,
        polygons in (1usize..=3).prop_flat_map(|count| {
            let centres = [(0.25, 0.25), (0.75, 0.3), (0.5, 0.75)];
            centres[..count].iter().map(|centre| star_polygon(*centre)).collect::<Vec<_>>()
        }),
    ) {
        let (width_f, height_f) = (f64::from(width), f64::from(height));
        let polygons: Vec<Polygon<f64>> = polygons
            .iter()
            .map(|polygon| polygon.map_coords(|coord| Coord { x: coord.x * width_f, y: coord.y * height_f }))
            .collect();
        let geometry = encode_pixels(&MultiPolygon::new(polygons.clone()), width, height).unwrap();
        let decoded = decode_pixels(&geometry, width, height).unwrap();
        prop_assert_eq!(decoded.0.len(), polygons.len());
        for (original, decoded) in polygons.iter().zip(&decoded.0) {
            assert_ring_close(original.exterior(), decoded.exterior());
            prop_assert_eq!(decoded.interiors().len(), original.interiors().len());
            for (original, decoded) in original.interiors().iter().zip(decoded.interiors()) {
                assert_ring_close(original, decoded);
            }
        }
    }

    #[test]
    fn arbitrary_strings_never_panic(text in ".{0,64}", width in 0u32..10, height in 0u32..10) {
        let _ = decode_pixels(&text, width, height);
        let _ = decode_normalized(&text);
    }
}

fn tile_base64(build: impl FnOnce(&mut TileBuilder)) -> String {
    let mut tile = TileBuilder::new();
    build(&mut tile);
    STANDARD.encode(tile.encode())
}

#[test]
fn spec_example_normalizes_by_the_extent() {
    let geometry = tile_base64(|tile| {
        let square: Geometry = polygon![(x: 1024, y: 2048), (x: 3072, y: 2048), (x: 3072, y: 4096), (x: 1024, y: 4096)].into();
        tile.layer(LAYER_NAME, 4096)
            .unwrap()
            .add_feature(None, &square, &[])
            .unwrap();
    });
    let normalized = decode_normalized(&geometry).unwrap();
    let xs: Vec<f64> = normalized.0[0]
        .exterior()
        .coords()
        .map(|coord| coord.x)
        .collect();
    let ys: Vec<f64> = normalized.0[0]
        .exterior()
        .coords()
        .map(|coord| coord.y)
        .collect();
    assert!(
        xs.iter()
            .all(|x| [0.25, 0.75].iter().any(|want| (x - want).abs() < 1e-12))
    );
    assert!(
        ys.iter()
            .all(|y| [0.5, 1.0].iter().any(|want| (y - want).abs() < 1e-12))
    );
    let pixels = decode_pixels(&geometry, 800, 600).unwrap();
    let first = pixels.0[0].exterior().0[0];
    assert!([200.0, 600.0].contains(&first.x) && [300.0, 600.0].contains(&first.y));
}

#[test]
fn any_layer_name_is_accepted() {
    let geometry = tile_base64(|tile| {
        let square: Geometry = polygon![(x: 0, y: 0), (x: 10, y: 0), (x: 10, y: 10)].into();
        tile.layer("whatever", 4096)
            .unwrap()
            .add_feature(Some(3), &square, &[("k", Value::Int(1))])
            .unwrap();
    });
    assert_eq!(decode_normalized(&geometry).unwrap().0.len(), 1);
}

#[test]
fn errors_are_typed() {
    assert!(matches!(
        decode_normalized("not base64!"),
        Err(DetectionError::InvalidBase64(_))
    ));
    assert_eq!(decode_normalized(""), Err(DetectionError::NoPolygon));
    let point = tile_base64(|tile| {
        tile.layer("l", 4096)
            .unwrap()
            .add_feature(None, &point!(x: 1, y: 1).into(), &[])
            .unwrap();
    });
    assert_eq!(decode_normalized(&point), Err(DetectionError::NoPolygon));
    let square: Geometry = polygon![(x: 0, y: 0), (x: 10, y: 0), (x: 10, y: 10)].into();
    let two = tile_base64(|tile| {
        let layer = tile.layer("l", 4096).unwrap();
        layer.add_feature(None, &square, &[]).unwrap();
        layer.add_feature(None, &square, &[]).unwrap();
    });
    assert_eq!(
        decode_normalized(&two),
        Err(DetectionError::TooManyFeatures(2))
    );
    let two_layers = tile_base64(|tile| {
        tile.layer("a", 4096)
            .unwrap()
            .add_feature(None, &square, &[])
            .unwrap();
        tile.layer("b", 4096)
            .unwrap()
            .add_feature(None, &square, &[])
            .unwrap();
    });
    assert_eq!(
        decode_normalized(&two_layers),
        Err(DetectionError::TooManyFeatures(2))
    );
    let small_extent = tile_base64(|tile| {
        tile.layer("l", 512)
            .unwrap()
            .add_feature(None, &square, &[])
            .unwrap();
    });
    assert_eq!(
        decode_normalized(&small_extent),
        Err(DetectionError::UnexpectedExtent {
            found: 512,
            expected: DETECTION_EXTENT
        })
    );
    let valid = tile_base64(|tile| {
        tile.layer("l", 4096)
            .unwrap()
            .add_feature(None, &square, &[])
            .unwrap();
    });
    assert_eq!(
        decode_pixels(&valid, 0, 10),
        Err(DetectionError::ZeroImageSize {
            width: 0,
            height: 10
        })
    );
    assert_eq!(
        decode_pixels(&valid, 10, 0),
        Err(DetectionError::ZeroImageSize {
            width: 10,
            height: 0
        })
    );
    assert!(matches!(
        decode_normalized(&STANDARD.encode([0x1a, 0x80])),
        Err(DetectionError::Tile(MvtError::Protobuf(_)))
    ));
    let tiny = MultiPolygon::new(vec![Polygon::new(rectangle(1.0, 1.0, 1.1, 1.1), vec![])]);
    assert_eq!(
        encode_pixels(&tiny, 4096, 4096),
        Err(DetectionError::EmptyPolygon)
    );
    let nan = MultiPolygon::new(vec![Polygon::new(
        rectangle(f64::NAN, 1.0, 10.0, 10.0),
        vec![],
    )]);
    assert_eq!(
        encode_pixels(&nan, 100, 100),
        Err(DetectionError::NonFiniteCoordinate)
    );
    assert_eq!(
        encode_pixels(&tiny, 0, 1),
        Err(DetectionError::ZeroImageSize {
            width: 0,
            height: 1
        })
    );
}

#[test]
fn padding_is_optional_on_input() {
    let valid = tile_base64(|tile| {
        let square: Geometry = polygon![(x: 0, y: 0), (x: 10, y: 0), (x: 10, y: 10)].into();
        tile.layer("l", 4096)
            .unwrap()
            .add_feature(None, &square, &[])
            .unwrap();
    });
    let unpadded = valid.trim_end_matches('=');
    assert_eq!(decode_normalized(unpadded), decode_normalized(&valid));
}

#[test]
fn mvt_reader_reads_our_detection_geometry() {
    let polygons = MultiPolygon::new(vec![Polygon::new(
        rectangle(100.0, 100.0, 900.0, 700.0),
        vec![rectangle(300.0, 300.0, 500.0, 500.0)],
    )]);
    let geometry = encode_pixels(&polygons, 1024, 768).unwrap();
    let bytes = STANDARD.decode(&geometry).unwrap();
    let reader = mvt_reader::Reader::new(bytes).unwrap();
    assert_eq!(
        reader.get_layer_names().unwrap(),
        vec![LAYER_NAME.to_owned()]
    );
    assert_eq!(
        reader.get_layer_metadata().unwrap()[0].extent,
        DETECTION_EXTENT
    );
    let features = reader.get_features_as::<i32>(0).unwrap();
    assert_eq!(features.len(), 1);
    // mvt-reader returns a one-element multi-polygon for a polygon with holes.
    let theirs = match &features[0].geometry {
        streetlevel_mvt::geo::Geometry::Polygon(polygon) => polygon.clone(),
        streetlevel_mvt::geo::Geometry::MultiPolygon(polygons) if polygons.0.len() == 1 => {
            polygons.0[0].clone()
        }
        other => panic!("not one polygon: {other:?}"),
    };
    let ours = decode_normalized(&geometry).unwrap();
    let scaled: Vec<Coord<f64>> = theirs
        .exterior()
        .coords()
        .map(|coord| Coord {
            x: f64::from(coord.x) / 4096.0,
            y: f64::from(coord.y) / 4096.0,
        })
        .collect();
    assert_eq!(scaled, ours.0[0].exterior().0);
    assert_eq!(theirs.interiors().len(), 1);
}

#[test]
fn vertices_outside_the_grid_are_returned_as_they_are() {
    let geometry = tile_base64(|tile| {
        let beyond: Geometry =
            polygon![(x: -512, y: -512), (x: 4608, y: -512), (x: 4608, y: 2048)].into();
        tile.layer(LAYER_NAME, DETECTION_EXTENT)
            .unwrap()
            .add_feature(None, &beyond, &[])
            .unwrap();
    });
    let normalized = decode_normalized(&geometry).unwrap();
    let xs: Vec<f64> = normalized.0[0].exterior().coords().map(|c| c.x).collect();
    assert!(
        [-0.125, 1.125]
            .iter()
            .all(|want| xs.iter().any(|x| (x - want).abs() < 1e-12)),
        "{xs:?}"
    );
    let pixels = decode_pixels(&geometry, 800, 600).unwrap();
    assert!(
        pixels.0[0]
            .exterior()
            .coords()
            .any(|c| (c.x + 100.0).abs() < 1e-9 && (c.y + 75.0).abs() < 1e-9)
    );
}
