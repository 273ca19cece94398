//! Detection geometry: round trips through base64 within one pixel, typed errors, and an
//! independent decoder reading what we write.

#![allow(clippy::unwrap_used, clippy::panic)] // Helpers of tests fail loudly.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use proptest::prelude::*;
use streetlevel_detection::{
    DETECTION_EXTENT, DetectionError, LAYER_NAME, decode_normalized, decode_pixels, encode_pixels,
};
use streetlevel_mvt::geo::{Coord, LineString, MultiPolygon, Polygon, point, polygon};
use streetlevel_mvt::{Geometry, MvtError, TileBuilder, Value};

fn rectangle(min_x: f64, min_y: f64, max_x: f64, max_y: f64) -> LineString<f64> {
    LineString::new(vec![
        Coord { x: min_x, y: min_y },
        Coord { x: max_x, y: min_y },
        Coord { x: max_x, y: max_y },
        Coord { x: min_x, y: max_y },
    ])
}

/// Every vertex of `decoded` lies within one pixel of a vertex of `original`, and the rings
/// have as many vertices.
fn assert_ring_close(original: &LineString<f64>, decoded: &LineString<f64>) {
    assert_eq!(
        decoded.0.len(),
        original.0.len(),
        "{decoded:?} vs {original:?}"
    );
    for vertex in decoded.coords() {
        assert!(
            original
                .coords()
                .any(|candidate| (candidate.x - vertex.x).abs() <= 1.0
                    && (candidate.y - vertex.y).abs() <= 1.0),
            "{vertex:?} is not within a pixel of {original:?}"
        );
    }
}

proptest! {
    #[test]
    fn pixel_polygon_round_trips_within_one_pixel(
        width in 1u32..=8192,
        height in 1u32..=8192,
        corners in (0.0..0.3f64, 0.0..0.3f64, 0.7..1.0f64, 0.7..1.0f64),
        second in any::<bool>(),
    ) {
        let (width_f, height_f) = (f64::from(width), f64::from(height));
        let (min_x, min_y, max_x, max_y) = corners;
        // Grid cells are at most two pixels; keep shapes many cells wide.
        prop_assume!(width >= 64 && height >= 64);
        let outer = rectangle(min_x * width_f, min_y * height_f, max_x * width_f, max_y * height_f);
        let hole = rectangle(0.4 * width_f, 0.4 * height_f, 0.6 * width_f, 0.6 * height_f);
        let mut polygons = vec![Polygon::new(outer.clone(), vec![hole.clone()])];
        if second {
            polygons.push(Polygon::new(rectangle(0.0, 0.0, 0.1 * width_f, 0.1 * height_f), vec![]));
        }
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
