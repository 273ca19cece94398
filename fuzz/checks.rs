//! What each fuzz target checks on one input, shared by the cargo-fuzz targets
//! (`fuzz_targets/*.rs`) and by the replay of the seeds and corpora as ordinary tests
//! (`crates/streetlevel/tests/fuzz_corpora.rs`), so the two cannot check different things.
//!
//! Each check panics on a broken invariant and returns whether the input decoded, so a replay
//! can tell that its round trips ran.

use std::collections::BTreeSet;

use streetlevel_mvt::geo::{Coord, LineString, MultiPolygon};
use streetlevel_mvt::{DecodedLayer, DecodedTile, Geometry, TileBuilder, Value};

/// What a kept feature must decode to: its layer, extent, id, properties and the geometry it
/// was encoded from.
type Kept = (String, u32, Option<u64>, Vec<(String, Value)>, Geometry);

/// Re-encodes every feature of `layers`; `None` when the encoder refuses one (deltas between
/// decoded `i32` coordinates may exceed 32 bits) or a layer.
fn reencode(layers: &[DecodedLayer]) -> Option<(Vec<u8>, Vec<Kept>)> {
    let mut builder = TileBuilder::new();
    let mut kept = Vec::new();
    for layer in layers {
        let out = builder.layer(&layer.name, layer.extent).ok()?;
        for feature in &layer.features {
            let properties: Vec<(&str, Value)> = feature
                .properties
                .iter()
                .map(|(key, value)| (key, value.clone()))
                .collect();
            if out
                .add_feature(feature.id, &feature.geometry, &properties)
                .ok()?
            {
                let properties = properties
                    .into_iter()
                    .map(|(key, value)| (key.to_owned(), value))
                    .collect();
                kept.push((
                    layer.name.clone(),
                    layer.extent,
                    feature.id,
                    properties,
                    feature.geometry.clone(),
                ));
            }
        }
    }
    Some((builder.encode(), kept))
}

/// Equal, with floats compared by their bits (a NaN property must survive as that NaN).
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(a), Value::Float(b)) => a.to_bits() == b.to_bits(),
        (Value::Double(a), Value::Double(b)) => a.to_bits() == b.to_bits(),
        _ => a == b,
    }
}

/// A line without consecutive repeated points, as the encoder writes it.
fn dedup(line: &LineString<i32>) -> Vec<Coord<i32>> {
    let mut out: Vec<Coord<i32>> = Vec::new();
    for coord in &line.0 {
        if out.last() != Some(coord) {
            out.push(*coord);
        }
    }
    out
}

fn polygon_vertices(polygons: &MultiPolygon<i32>) -> BTreeSet<(i32, i32)> {
    polygons
        .iter()
        .flat_map(|polygon| std::iter::once(polygon.exterior()).chain(polygon.interiors()))
        .flat_map(|ring| ring.coords().map(|coord| (coord.x, coord.y)))
        .collect()
}

/// The geometry a kept feature decodes to, against the one it was encoded from: points
/// exactly; lines as the original's without repeated points and without lines that then
/// have fewer than two; polygons with no vertex the original does not have.
fn check_geometry(decoded: &Geometry, original: &Geometry) {
    match (decoded, original) {
        (Geometry::Points(decoded), Geometry::Points(original)) => {
            assert_eq!(decoded, original, "points change in a round trip");
        }
        (Geometry::LineStrings(decoded), Geometry::LineStrings(original)) => {
            let expected: Vec<Vec<Coord<i32>>> = original
                .iter()
                .map(dedup)
                .filter(|line| line.len() >= 2)
                .collect();
            let got: Vec<Vec<Coord<i32>>> = decoded.iter().map(|line| line.0.clone()).collect();
            assert_eq!(got, expected, "lines change in a round trip");
        }
        (Geometry::Polygons(decoded), Geometry::Polygons(original)) => {
            let original_vertices = polygon_vertices(original);
            let new: Vec<_> = polygon_vertices(decoded)
                .difference(&original_vertices)
                .copied()
                .collect();
            assert!(new.is_empty(), "a round trip adds polygon vertices {new:?}");
            assert!(
                decoded.0.len() <= original.0.len(),
                "a round trip adds polygons"
            );
        }
        _ => panic!("a round trip changes the geometry type: {original:?} became {decoded:?}"),
    }
}

/// `decode_tile`: any bytes give a tile or an error, never a panic. A tile that decodes is
/// re-encoded: the features the encoder keeps (it drops geometries that are empty once
/// repeated points and degenerate parts are removed) must decode with the same layer, id,
/// properties and geometry (see [`check_geometry`]), and encoding that result again must give
/// the same bytes and geometries (the encoder's normalisation is a fixed point).
pub fn decode_tile(bytes: &[u8]) -> bool {
    let Ok(tile) = DecodedTile::decode(bytes) else {
        return false;
    };
    let Some((encoded, kept)) = reencode(&tile.layers) else {
        return true;
    };
    let again = DecodedTile::decode(&encoded).expect("our own encoding must decode");
    let decoded: Vec<_> = again
        .layers
        .iter()
        .flat_map(|layer| layer.features.iter().map(move |feature| (layer, feature)))
        .collect();
    assert_eq!(decoded.len(), kept.len(), "kept features must all decode");
    for ((layer, feature), (name, extent, id, properties, geometry)) in decoded.iter().zip(&kept) {
        assert_eq!(&layer.name, name);
        assert_eq!(layer.extent, *extent);
        assert_eq!(feature.id, *id);
        assert_eq!(feature.properties.len(), properties.len());
        for ((key, value), (want_key, want_value)) in feature.properties.iter().zip(properties) {
            assert_eq!(key, want_key);
            assert!(same_value(value, want_value), "{value:?} != {want_value:?}");
        }
        check_geometry(&feature.geometry, geometry);
    }
    let (twice, kept_twice) = reencode(&again.layers).expect("a normalised tile re-encodes");
    assert_eq!(
        twice, encoded,
        "re-encoding a normalised tile must give the same bytes"
    );
    for ((_, feature), (_, _, _, _, geometry)) in decoded.iter().zip(&kept_twice) {
        assert_eq!(&feature.geometry, geometry, "a normalised geometry changes");
    }
    true
}

/// Every vertex of `polygons` as exact bit patterns.
fn detection_vertices(polygons: &MultiPolygon<f64>) -> Vec<(f64, f64)> {
    polygons
        .iter()
        .flat_map(|polygon| std::iter::once(polygon.exterior()).chain(polygon.interiors()))
        .flat_map(|ring| ring.coords().map(|coord| (coord.x, coord.y)))
        .collect()
}

/// `decode_detection`: a detection geometry string and an image size give polygons or an
/// error, never a panic. Pixel and normalized decoding agree (pixels are normalized
/// coordinates times the size); a geometry that decodes re-encodes, from pixels and from
/// normalized coordinates alike, to the same string, whose polygons have only vertices of
/// the original (clamped to the image), and encoding those again gives the same string.
pub fn decode_detection(width: u16, height: u16, geometry: &str) -> bool {
    let (width, height) = (u32::from(width), u32::from(height));
    let pixels = streetlevel_detection::decode_pixels(geometry, width, height);
    let Ok(normalized) = streetlevel_detection::decode_normalized(geometry) else {
        assert!(pixels.is_err(), "pixels decode where normalized does not");
        return false;
    };
    let encoded = streetlevel_detection::encode_normalized(&normalized);
    if width > 0 && height > 0 {
        let pixels = pixels.expect("pixels decode where normalized does");
        let scaled = detection_vertices(&pixels);
        let unscaled = detection_vertices(&normalized);
        assert_eq!(scaled.len(), unscaled.len());
        for ((x, y), (nx, ny)) in scaled.iter().zip(&unscaled) {
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(1.0);
            assert!(
                close(*x, nx * f64::from(width)) && close(*y, ny * f64::from(height)),
                "pixel ({x}, {y}) is not ({nx}, {ny}) scaled to {width}x{height}"
            );
        }
        let from_pixels = streetlevel_detection::encode_pixels(&pixels, width, height);
        assert_eq!(
            from_pixels.as_ref().ok(),
            encoded.as_ref().ok(),
            "pixel and normalized encodings differ"
        );
    }
    let Ok(encoded) = encoded else {
        return true;
    };
    let again = streetlevel_detection::decode_normalized(&encoded)
        .expect("our own detection encoding must decode");
    let allowed: Vec<(f64, f64)> = detection_vertices(&normalized)
        .into_iter()
        .map(|(x, y)| (x.clamp(0.0, 1.0), y.clamp(0.0, 1.0)))
        .collect();
    for vertex in detection_vertices(&again) {
        assert!(
            allowed.contains(&vertex),
            "a round trip adds the vertex {vertex:?}"
        );
    }
    assert_eq!(
        streetlevel_detection::encode_normalized(&again).ok(),
        Some(encoded),
        "re-encoding a normalised detection must give the same string"
    );
    true
}

/// `read_metadata`: any bytes give metadata or an error, never a panic, and metadata that is
/// read keeps the documented ranges.
pub fn read_metadata(jpeg: &[u8]) -> bool {
    let Ok(metadata) = streetlevel_ingest::read_metadata(jpeg) else {
        return false;
    };
    assert!((-90.0..=90.0).contains(&metadata.latitude), "{metadata:?}");
    assert!(
        (-180.0..=180.0).contains(&metadata.longitude),
        "{metadata:?}"
    );
    assert!((1..=8).contains(&metadata.orientation), "{metadata:?}");
    if let Some(angle) = metadata.compass_angle {
        assert!((0.0..360.0).contains(&angle), "{metadata:?}");
    }
    if let Some(altitude) = metadata.altitude {
        assert!(altitude.is_finite(), "{metadata:?}");
    }
    assert!(metadata.width > 0 && metadata.height > 0, "{metadata:?}");
    assert_eq!(
        metadata.is_pano,
        metadata.camera_type == streetlevel_model::CameraType::Equirectangular
    );
    true
}

/// The most bytes a fuzzed zip's entries may inflate to in all (the budget
/// `streetlevel_import::fuzzing::zip_archive` opens archives with).
const FUZZ_ZIP_INFLATED_BYTES: usize = 16 << 20;

/// `upload_zip`: an uploaded archive is refused or read entry by entry as a job reads it,
/// never beyond its budget: the JPEG entries read sum to at most the inflated-size budget,
/// and their names are the archive's, each once.
pub fn upload_zip(bytes: &[u8]) -> bool {
    let Ok(entries) = streetlevel_import::fuzzing::zip_archive(bytes) else {
        return false;
    };
    assert!(!entries.is_empty(), "an accepted archive has a JPEG entry");
    let read: usize = entries
        .iter()
        .filter_map(|(_, read)| read.as_ref().ok())
        .sum();
    assert!(read <= FUZZ_ZIP_INFLATED_BYTES, "{read} bytes inflated");
    let names: BTreeSet<&str> = entries.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names.len(), entries.len(), "an entry name listed twice");
    true
}

/// `upload_image`: an uploaded file is cut at its end-of-image marker (never grown) or
/// refused; what it keeps is read by the metadata reader like any upload.
pub fn upload_image(bytes: &[u8]) -> bool {
    let Ok((kept, _estimate)) = streetlevel_import::fuzzing::upload_image(bytes) else {
        return false;
    };
    assert!(kept <= bytes.len(), "{kept} bytes kept of {}", bytes.len());
    read_metadata(&bytes[..kept])
}

/// `upload_manifest`: a manifest gives 1 to 20,000 handles or a refusal.
pub fn upload_manifest(bytes: &[u8]) -> bool {
    let Ok(handles) = streetlevel_import::fuzzing::manifest(bytes) else {
        return false;
    };
    assert!((1..=20_000).contains(&handles.len()), "{}", handles.len());
    true
}

/// `query_string`: the hand-written query string decoder and the route table on any text:
/// a value or a 400, never a panic; a decoded query gives back each name's last value, and
/// its typed readers refuse or accept without panicking.
pub fn query_string(text: &str) -> bool {
    let _ = streetlevel_server::Route::of(text);
    let _ = streetlevel_server::Route::of(&format!("/{text}"));
    let Ok(query) = streetlevel_server::query::Query::parse(text) else {
        return false;
    };
    for (name, _) in query.pairs() {
        assert!(query.get(name).is_some(), "{name:?} was decoded");
        let _ = query.int(name, 0_u64, 1_000);
        let _ = query.boolean(name);
        let _ = query.timestamp(name);
        let _ = query.bbox(name);
        let _ = query.list(name);
    }
    true
}

/// The arrival time the video targets read with (2026-11-01 UTC): the clock of last resort.
const FUZZ_VIDEO_ARRIVAL: f64 = 1_793_491_200.0;

/// `read_video`: a video's container (top-level boxes, `moov` through `mp4-atom`, the sample
/// tables), its CAMM or GoPro GPS track read from the samples the tables point at, the
/// uploader's checks of that track and its clock, as `Video::read` reads an uploaded or
/// imported file: a video or a refusal, never a panic, and no allocation beyond what the
/// bytes hold (see `MAX_SAMPLES`). A video read keeps its ranges: a picture track among its
/// tracks, at most `MAX_SAMPLES` samples a track, a GPS track sorted in time with positions
/// on the globe, a finite clock; the frames planned from it (by distance and by interval) are
/// in order, on the globe, with a bearing in [0, 360).
pub fn read_video(bytes: &[u8]) -> bool {
    use streetlevel_video::{MAX_SAMPLES, Sampling, Video};
    let Ok(video) = Video::from_reader(
        &mut std::io::Cursor::new(bytes),
        bytes.len() as u64,
        None,
        FUZZ_VIDEO_ARRIVAL,
    ) else {
        return false;
    };
    assert!(video.track().is_video(), "{:?}", video.track());
    for track in &video.container.tracks {
        assert!(track.samples.len() as u64 <= MAX_SAMPLES);
    }
    assert!(!video.gps.is_empty());
    for pair in video.gps.windows(2) {
        assert!(pair[0].time <= pair[1].time, "{pair:?}");
    }
    for point in &video.gps {
        assert!(point.time.is_finite() && point.time >= 0.0, "{point:?}");
        assert!((-90.0..=90.0).contains(&point.lat), "{point:?}");
        assert!((-180.0..=180.0).contains(&point.lon), "{point:?}");
    }
    assert!(
        video.capture_clock.start.is_finite(),
        "{:?}",
        video.capture_clock
    );
    for sampling in [Sampling::default(), Sampling::Interval(1.0)] {
        let frames = video.plan(sampling);
        for pair in frames.windows(2) {
            assert!(pair[0].frame < pair[1].frame, "{pair:?}");
        }
        for frame in &frames {
            assert!(frame.lat.is_finite() && frame.lon.is_finite(), "{frame:?}");
            if let Some(direction) = frame.direction {
                assert!((0.0..360.0).contains(&direction), "{frame:?}");
            }
        }
    }
    true
}

/// `camm_sample`: one CAMM sample gives a GPS point (types 5 and 6) or nothing, never a
/// panic; a type 6 point carries its fix, a time only when finite and positive, an altitude
/// only when finite.
pub fn camm_sample(bytes: &[u8]) -> bool {
    let Some(gps) = streetlevel_video::camm::decode(bytes) else {
        return false;
    };
    let kind = u16::from_le_bytes([bytes[2], bytes[3]]);
    assert!(kind == 5 || kind == 6, "type {kind} decoded");
    assert_eq!(gps.fix.is_some(), kind == 6, "{gps:?}");
    if let Some(time) = gps.time {
        assert!(time.is_finite() && time > 0.0, "{gps:?}");
    }
    if let Some(alt) = gps.alt {
        assert!(alt.is_finite(), "{gps:?}");
    }
    true
}

/// `gpmf_payload`: one GoPro GPMF payload gives its GPS points (GPS5, GPS9) and device name,
/// never a panic, and never more points than its bytes hold (a GPS9 row takes at least 9
/// bytes, a GPS5 row 20).
pub fn gpmf_payload(bytes: &[u8]) -> bool {
    let payload = streetlevel_video::gpmf::parse(bytes);
    assert!(
        payload.points.len() * 9 <= bytes.len(),
        "{} points from {} bytes",
        payload.points.len(),
        bytes.len()
    );
    if let Some(name) = &payload.device_name {
        assert!(!name.is_empty() && name.trim() == name, "{name:?}");
    }
    !payload.points.is_empty()
}

/// `gpx_track`: a GPX document gives its track points or an error, never a panic, never more
/// than `MAX_GPX_POINTS` nor more than its bytes hold; a time read is finite.
pub fn gpx_track(bytes: &[u8]) -> bool {
    let Ok(points) = streetlevel_video::gpx::parse(bytes) else {
        return false;
    };
    assert!(points.len() <= streetlevel_video::gpx::MAX_GPX_POINTS);
    assert!(
        points.len() * 16 <= bytes.len(),
        "{} points from {} bytes",
        points.len(),
        bytes.len()
    );
    for point in &points {
        if let Some(time) = point.time {
            assert!(time.is_finite(), "{point:?}");
        }
    }
    !points.is_empty()
}

/// `accept_encoding`: the hand-written `Accept-Encoding` reader (`preferred_coding`), on any
/// header values (one a line): never a panic, identity when nothing compressed is on offer,
/// never a coding that is not on offer, and a coding that wins with both on offer still wins
/// when only it is. Whether a compressed coding was chosen for some offer is what "decodes".
pub fn accept_encoding(bytes: &[u8]) -> bool {
    use streetlevel_server::reply::{Coding, preferred_coding};
    let mut headers = http::HeaderMap::new();
    for line in bytes.split(|&byte| byte == b'\n') {
        if let Ok(value) = http::HeaderValue::from_bytes(line) {
            headers.append(http::header::ACCEPT_ENCODING, value);
        }
    }
    assert_eq!(preferred_coding(&headers, false, false), Coding::Identity);
    let gzip = preferred_coding(&headers, true, false);
    let brotli = preferred_coding(&headers, false, true);
    let both = preferred_coding(&headers, true, true);
    assert_ne!(gzip, Coding::Brotli);
    assert_ne!(brotli, Coding::Gzip);
    if both == Coding::Gzip {
        assert_eq!(gzip, Coding::Gzip, "gzip wins only beside brotli");
    }
    if both == Coding::Brotli {
        assert_eq!(brotli, Coding::Brotli, "brotli wins only beside gzip");
    }
    [gzip, brotli, both]
        .iter()
        .any(|coding| *coding != Coding::Identity)
}

/// `sql_placeholders`: the rewriting of `?N` placeholders to PostgreSQL's `$N`
/// (`streetlevel_db::dollar_placeholders`), on any text: the statement or a refusal, never a
/// panic; the rewritten statement is the original with some `?` (each before a digit) turned
/// into `$` and nothing else changed; a refusal only where a `?` is.
pub fn sql_placeholders(sql: &str) -> bool {
    let Ok(rewritten) = streetlevel_db::dollar_placeholders(sql) else {
        assert!(sql.contains('?'), "{sql:?} refused without a `?`");
        return false;
    };
    let (before, after) = (sql.as_bytes(), rewritten.as_bytes());
    assert_eq!(before.len(), after.len(), "{sql:?} became {rewritten:?}");
    for (at, (&old, &new)) in before.iter().zip(after).enumerate() {
        if old != new {
            assert!(old == b'?' && new == b'$', "{sql:?} became {rewritten:?}");
            assert!(
                before.get(at + 1).is_some_and(u8::is_ascii_digit),
                "{sql:?}: a `?` without a number became `$`"
            );
        }
    }
    true
}

/// `form_data`: a `multipart/form-data` body of the blur API (`POST /blur/` and a blur
/// service's answer), read by `parse_form_data` around `multer`: the first line is the
/// `Content-Type`, the rest the body. Parts or a refusal, never a panic; at most eight parts,
/// holding no more bytes than the body.
pub fn form_data(bytes: &[u8]) -> bool {
    let split = bytes
        .iter()
        .position(|&byte| byte == b'\n')
        .unwrap_or(bytes.len());
    let content_type = String::from_utf8_lossy(&bytes[..split]);
    let body = bytes.get(split + 1..).unwrap_or_default();
    let Ok(parts) = streetlevel_blur_service::protocol::parse_form_data(
        &content_type,
        bytes::Bytes::copy_from_slice(body),
    ) else {
        return false;
    };
    assert!(parts.len() <= 8, "{} parts", parts.len());
    let held: usize = parts.iter().map(|part| part.body.len()).sum();
    assert!(
        held <= body.len(),
        "{held} bytes from a body of {}",
        body.len()
    );
    !parts.is_empty()
}

/// `privacy_form`: the body of the privacy-request form (`POST /report`), read as the report
/// page reads it (`form_urlencoded`, the kind, the box's four numbers checked against the
/// picture): a request or the page's refusal, never a panic. A box read lies inside the
/// picture, and turned into stored pixels for every Exif orientation and several picture
/// sizes, as a request's box is blurred, it is at least a pixel, inside the stored picture,
/// and covers the box drawn.
pub fn privacy_form(body: &[u8]) -> bool {
    let Ok((_kind, area)) = streetlevel_web::fuzzing::report_form(body) else {
        return false;
    };
    let Some(shares) = area else {
        return false;
    };
    assert_eq!(shares.checked(), Some(shares));
    let drawn = [shares.left, shares.top, shares.width, shares.height];
    for size in [(4000, 3000), (3000, 4000), (640, 480), (7, 13), (1, 1)] {
        for orientation in 1..=8 {
            let (x, y, width, height) =
                streetlevel_blur::upright_shares_to_stored(drawn, size, orientation);
            assert!(
                width >= 1 && height >= 1 && x + width <= size.0 && y + height <= size.1,
                "{drawn:?} on {size:?} at {orientation}: ({x}, {y}, {width}, {height})"
            );
            let back = streetlevel_blur::stored_to_upright_shares(
                (x, y, width, height),
                size,
                orientation,
            );
            let slack = 1e-6;
            assert!(
                back[0] <= drawn[0] + slack
                    && back[1] <= drawn[1] + slack
                    && back[0] + back[2] >= drawn[0] + drawn[2] - slack
                    && back[1] + back[3] >= drawn[1] + drawn[3] - slack,
                "{drawn:?} on {size:?} at {orientation}: the stored box covers only {back:?}"
            );
        }
    }
    true
}
