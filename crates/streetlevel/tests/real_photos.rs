//! Real photos through the real binary: the original service's own mobile-app photos
//! (`../shared/data/opensfm-blur-pairs/before_*.jpg`, capture time and heading only in their
//! `ImageDescription` JSON, numbers as strings), checked against that JSON read here, and the
//! capture-time rule checked against the official uploader's `mapillary_tools process` (its
//! description file is an oracle nobody here wrote), on a real photo whose Exif is rewritten
//! with each combination of GPS time and camera clock.
//!
//! The data and the uploader (the client suites' venv, `target/venv`, or
//! `STREETLEVEL_TEST_MAPILLARY_TOOLS`, which `cargo xtask test` sets) must be there under CI;
//! elsewhere a test without them says so and passes.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use chrono::NaiveDateTime;
use serde_json::Value;
use streetlevel_ingest::{WriteTags, write_metadata};
use streetlevel_tests::{Server, create_app};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");

/// `None` (after saying why) when something a test needs is missing outside CI; a failure
/// under CI.
fn needed<T>(found: Option<T>, what: &str) -> Option<T> {
    if found.is_none() {
        assert!(
            !streetlevel_tests::in_ci(),
            "{what} is missing, and CI must run this test"
        );
        eprintln!("skipped: {what} is missing");
    }
    found
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The mobile-app photos, in name order.
fn app_photos() -> Option<Vec<PathBuf>> {
    let dir = repository().join("../shared/data/opensfm-blur-pairs");
    let mut photos: Vec<PathBuf> = std::fs::read_dir(&dir)
        .ok()?
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            let named_before = path
                .file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("before_"));
            named_before && path.extension().is_some_and(|extension| extension == "jpg")
        })
        .collect();
    photos.sort();
    needed(
        Some(photos).filter(|photos| !photos.is_empty()),
        &format!("{}/before_*.jpg", dir.display()),
    )
}

/// The official uploader's executable.
fn mapillary_tools() -> Option<PathBuf> {
    let path = std::env::var_os("STREETLEVEL_TEST_MAPILLARY_TOOLS").map_or_else(
        || repository().join("target/venv/bin/mapillary_tools"),
        PathBuf::from,
    );
    needed(
        Some(path.clone()).filter(|path| path.is_file()),
        &format!(
            "the official uploader at {} (`cargo xtask test --suite sdk` installs it)",
            path.display()
        ),
    )
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "streetlevel-real-photos-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What the mobile app wrote: the JSON of `ImageDescription`, found in the file's bytes (an
/// Exif ASCII value ends with a NUL) without the code under test.
fn app_json(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap();
    let start = bytes
        .windows(5)
        .position(|window| window == b"{\"MAP")
        .unwrap_or_else(|| panic!("no MAP json in {}", path.display()));
    let end = start + bytes[start..].iter().position(|&byte| byte == 0).unwrap();
    serde_json::from_slice(&bytes[start..end]).unwrap()
}

/// A number the app wrote as a string (`"55.698167"`) or as a number.
fn number(value: &Value) -> f64 {
    match value {
        Value::String(text) => text.parse().unwrap(),
        other => other.as_f64().unwrap(),
    }
}

/// `YYYY_MM_DD_HH_MM_SS_mmm` in UTC as milliseconds since the epoch.
fn capture_millis(text: &str) -> i64 {
    NaiveDateTime::parse_from_str(text, "%Y_%m_%d_%H_%M_%S_%3f")
        .unwrap_or_else(|error| panic!("{text}: {error}"))
        .and_utc()
        .timestamp_millis()
}

/// Runs `streetlevel import` of `paths` into `data`; its standard output (it must succeed).
fn import(data: &Path, paths: &[PathBuf]) -> String {
    let output = Command::new(BINARY)
        .arg("import")
        .arg("--data")
        .arg(data)
        .args(["--user", "walker"])
        .args(paths)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

/// Every image of `data` inside `bbox`, served by the real server.
fn served_images(data: &Path, bbox: &str) -> Vec<Value> {
    let token = create_app(Path::new(BINARY), data, "read");
    let server = Server::start(Path::new(BINARY), data, &[]);
    let response = server.request(
        "GET",
        &format!(
            "/images?bbox={bbox}&limit=2000&fields=id,sequence,captured_at,compass_angle,geometry,altitude,make,model"
        ),
        &[("Authorization", &format!("OAuth {token}"))],
        b"",
    );
    assert_eq!(response.status, 200);
    let mut images = response.json()["data"].as_array().unwrap().clone();
    for image in &mut images {
        let sequence = image["sequence"].as_str().unwrap().to_owned();
        let ids = server.request(
            "GET",
            &format!("/image_ids?sequence_id={sequence}"),
            &[("Authorization", &format!("OAuth {token}"))],
            b"",
        );
        assert_eq!(ids.status, 200);
        let position = ids.json()["data"]
            .as_array()
            .unwrap()
            .iter()
            .position(|item| item["id"] == image["id"])
            .unwrap();
        image["position_in_sequence"] = Value::from(position);
    }
    images
}

fn coordinates(image: &Value) -> (f64, f64) {
    let coordinates = &image["geometry"]["coordinates"];
    (
        coordinates[1].as_f64().unwrap(),
        coordinates[0].as_f64().unwrap(),
    )
}

/// What the app's JSON says about one photo.
struct AppPhoto {
    name: String,
    sequence: String,
    captured_at: i64,
    heading: f64,
    position: (f64, f64),
}

#[test]
fn the_mobile_apps_photos_import_with_the_times_headings_and_sequences_of_their_json() {
    let Some(photos) = app_photos() else { return };
    assert_eq!(photos.len(), 32, "{photos:?}");
    let mut expected: Vec<AppPhoto> = photos
        .iter()
        .map(|path| {
            let json = app_json(path);
            AppPhoto {
                name: path.file_name().unwrap().to_string_lossy().into_owned(),
                sequence: json["MAPSequenceUUID"].as_str().unwrap().to_owned(),
                captured_at: capture_millis(json["MAPCaptureTime"].as_str().unwrap()),
                heading: number(&json["MAPCompassHeading"]["TrueHeading"]),
                position: (number(&json["MAPLatitude"]), number(&json["MAPLongitude"])),
            }
        })
        .collect();
    expected.sort_by_key(|photo| (photo.sequence.clone(), photo.captured_at));
    // The uploader's duplicate rule on the JSON's values: a photo at the place of the previous
    // kept one of its sequence, facing within 5 degrees of it, is left out.
    let mut duplicates = BTreeSet::new();
    let mut kept: Option<&AppPhoto> = None;
    for photo in &expected {
        if let Some(previous) = kept.filter(|previous| previous.sequence == photo.sequence)
            && previous.position == photo.position
            && (previous.heading - photo.heading).abs() <= 5.0
        {
            duplicates.insert(photo.name.clone());
            continue;
        }
        kept = Some(photo);
    }
    assert_eq!(
        duplicates.iter().collect::<Vec<_>>(),
        ["before_lund_images_29.jpg"]
    );

    let data = temp_dir("app").join("data");
    let out = import(&data, &photos);
    assert!(
        out.contains(&format!(
            "imported {} images in 2 sequences, skipped 0 imported before, refused 1",
            32 - duplicates.len()
        )),
        "{out}"
    );
    let refused: Vec<&str> = out
        .lines()
        .filter(|line| line.starts_with("refused"))
        .collect();
    assert_eq!(refused.len(), 1, "{out}");
    assert!(
        refused[0].contains("before_lund_images_29.jpg") && refused[0].contains("duplicate"),
        "{out}"
    );
    // Every time came from the JSON, and nothing of it was ignored.
    assert!(
        out.contains("capture times from: 31 description\n"),
        "{out}"
    );
    assert!(!out.contains("warning"), "{out}");

    let images = served_images(&data, "13.0,52.0,14.0,56.0");
    assert_eq!(images.len(), expected.len() - duplicates.len());
    let by_time: BTreeMap<i64, &Value> = images
        .iter()
        .map(|image| (image["captured_at"].as_i64().unwrap(), image))
        .collect();
    let mut sequences: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for photo in expected
        .iter()
        .filter(|photo| !duplicates.contains(&photo.name))
    {
        let image = by_time
            .get(&photo.captured_at)
            .unwrap_or_else(|| panic!("no image captured at the time of {}", photo.name));
        let compass = image["compass_angle"].as_f64().unwrap();
        assert!(
            (compass - photo.heading).abs() < 1e-9,
            "{}: {image}",
            photo.name
        );
        let (lat, lon) = coordinates(image);
        assert!(
            (lat - photo.position.0).abs() < 1e-9 && (lon - photo.position.1).abs() < 1e-9,
            "{}: {image}",
            photo.name
        );
        assert_eq!(image["make"], "Apple", "{image}");
        sequences
            .entry(image["sequence"].as_str().unwrap())
            .or_default()
            .insert(&photo.sequence);
    }
    // One sequence per app sequence, each in capture order.
    assert_eq!(sequences.len(), 2, "{sequences:?}");
    assert!(sequences.values().all(|uuids| uuids.len() == 1));
    for image in &images {
        let earlier = images
            .iter()
            .filter(|other| {
                other["sequence"] == image["sequence"]
                    && other["captured_at"].as_i64() < image["captured_at"].as_i64()
            })
            .count();
        assert_eq!(image["position_in_sequence"], earlier, "{image}");
    }
}

/// The official uploader's `process` step on `paths` (its own Exif reader; `TZ=UTC`, so a
/// camera time without offset is UTC for it too): each file's description or error, by file
/// name.
fn uploader_process(tool: &Path, root: &Path, paths: &[PathBuf]) -> BTreeMap<String, Value> {
    let home = root.join("uploader-home");
    std::fs::create_dir_all(&home).unwrap();
    let described = root.join("description.json");
    let output = Command::new(tool)
        .arg("process")
        .args(paths)
        .arg("--desc_path")
        .arg(&described)
        .args(["--geotag_source", "native", "--skip_process_errors"])
        .env("TZ", "UTC")
        .env("HOME", &home)
        .env("TMPDIR", &home)
        .env("MAPILLARY_CONFIG_PATH", home.join("config"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let described: Vec<Value> =
        serde_json::from_slice(&std::fs::read(&described).unwrap()).unwrap();
    described
        .into_iter()
        .map(|item| {
            let name = Path::new(item["filename"].as_str().unwrap())
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (name, item)
        })
        .collect()
}

#[test]
fn the_official_uploader_refuses_the_mobile_apps_photos_for_want_of_a_time() {
    let (Some(photos), Some(tool)) = (app_photos(), mapillary_tools()) else {
        return;
    };
    let root = temp_dir("uploader-app");
    let described = uploader_process(&tool, &root, &photos);
    assert_eq!(described.len(), photos.len());
    // The uploader reads Exif only: these photos have no time there, so it accepts none of
    // them and there is nothing to compare; streetlevel takes the time from the JSON (above).
    for (name, item) in &described {
        assert_eq!(
            item["error"]["message"], "Unable to extract timestamp from the image",
            "{name}: {item}"
        );
    }
}

/// One way a camera writes its clocks, written onto a real photo.
struct Clocks {
    name: &'static str,
    /// `GPSDateStamp` and `GPSTimeStamp`.
    gps: Option<(&'static str, [f64; 3])>,
    /// `DateTimeOriginal`, `SubSecTimeOriginal`, `OffsetTimeOriginal`.
    camera: Option<(&'static str, Option<&'static str>, Option<&'static str>)>,
    /// The milliseconds the camera's sub-seconds add to the uploader's GPS time (it keeps GPS
    /// whole seconds; streetlevel completes them from a camera clock showing the same second).
    sub_second_millis: i64,
}

const CLOCKS: [Clocks; 7] = [
    // An action camera: local time (UTC+2) without offset, UTC from the GPS receiver.
    Clocks {
        name: "gps_and_local_clock.jpg",
        gps: Some(("2024:05:01", [10.0, 0.0, 0.0])),
        camera: Some(("2024:05:01 12:00:00", None, None)),
        sub_second_millis: 0,
    },
    // The same with sub-seconds: the camera's clock agrees to the second, in its time zone.
    Clocks {
        name: "gps_and_local_clock_with_sub_seconds.jpg",
        gps: Some(("2024:05:01", [11.0, 0.0, 5.0])),
        camera: Some(("2024:05:01 13:00:05", Some("370"), None)),
        sub_second_millis: 370,
    },
    // A camera clock that is off by a minute: GPS wins, without the camera's sub-seconds.
    Clocks {
        name: "gps_and_wrong_clock.jpg",
        gps: Some(("2024:05:01", [12.0, 0.0, 0.0])),
        camera: Some(("2024:05:01 14:01:00", Some("500"), Some("+02:00"))),
        sub_second_millis: 0,
    },
    // A receiver giving a fraction of its own.
    Clocks {
        name: "gps_with_fraction.jpg",
        gps: Some(("2024-05-01", [13.0, 30.0, 7.25])),
        camera: None,
        sub_second_millis: 0,
    },
    // No fix: the GPS date is 1970-01-01 and the camera's clock with its offset counts.
    Clocks {
        name: "gps_without_fix.jpg",
        gps: Some(("1970:01:01", [0.0, 0.0, 0.0])),
        camera: Some(("2024:05:01 16:00:00", Some("125"), Some("+02:00"))),
        sub_second_millis: 0,
    },
    // A phone: the camera's clock with its offset, no GPS time.
    Clocks {
        name: "clock_with_offset.jpg",
        gps: None,
        camera: Some(("2024:05:01 10:30:00", Some("040"), Some("-05:30"))),
        sub_second_millis: 0,
    },
    // The last resort: a camera clock without offset, no GPS time, taken as UTC.
    Clocks {
        name: "clock_without_offset.jpg",
        gps: None,
        camera: Some(("2024:05:01 19:00:00", Some("900"), None)),
        sub_second_millis: 0,
    },
];

#[test]
fn capture_times_are_the_official_uploaders_gps_first_then_the_camera_clock() {
    let (Some(photos), Some(tool)) = (app_photos(), mapillary_tools()) else {
        return;
    };
    // A real photo with its Exif replaced by each combination of clocks, at places 50 m
    // apart and hours apart, so that neither tool takes one for another's duplicate.
    let original = std::fs::read(&photos[0]).unwrap();
    let root = temp_dir("uploader-clocks");
    let folder = root.join("photos");
    std::fs::create_dir_all(&folder).unwrap();
    let mut paths = Vec::new();
    for (clocks, index) in CLOCKS.iter().zip(0_u32..) {
        let tags = WriteTags {
            latitude: Some(55.60 + f64::from(index) * 0.0005),
            longitude: Some(13.00),
            direction: Some(10.0 * f64::from(index)),
            gps_date_stamp: clocks.gps.map(|(date, _)| date.to_owned()),
            gps_time_stamp: clocks.gps.map(|(_, time)| time),
            date_time_original: clocks.camera.map(|(time, _, _)| time.to_owned()),
            subsec_time_original: clocks.camera.and_then(|(_, sub, _)| sub.map(String::from)),
            offset_time_original: clocks
                .camera
                .and_then(|(_, _, offset)| offset.map(String::from)),
            make: Some(String::from("Apple")),
            model: Some(String::from("iPhone 4S")),
            ..WriteTags::default()
        };
        let path = folder.join(clocks.name);
        std::fs::write(&path, write_metadata(&original, &tags).unwrap()).unwrap();
        paths.push(path);
    }

    let described = uploader_process(&tool, &root, &paths);
    let data = root.join("data");
    let out = import(&data, &paths);
    assert!(
        out.contains("imported 7 images in 7 sequences, skipped 0 imported before, refused 0"),
        "{out}"
    );
    assert!(
        out.contains("capture times from: 4 gps, 2 camera_with_offset, 1 camera_as_utc\n"),
        "{out}"
    );
    let warnings: Vec<&str> = out
        .lines()
        .filter(|line| line.starts_with("warning"))
        .collect();
    assert_eq!(warnings.len(), 1, "{out}");
    assert!(
        warnings[0].contains("clock_without_offset.jpg") && warnings[0].contains("taken as UTC"),
        "{out}"
    );

    let images = served_images(&data, "12.9,55.5,13.1,55.7");
    assert_eq!(images.len(), CLOCKS.len());
    for (clocks, index) in CLOCKS.iter().zip(0_u32..) {
        let oracle = &described[clocks.name];
        assert!(oracle.get("error").is_none(), "{}: {oracle}", clocks.name);
        let latitude = 55.60 + f64::from(index) * 0.0005;
        let image = images
            .iter()
            .find(|image| (coordinates(image).0 - latitude).abs() < 1e-7)
            .unwrap_or_else(|| panic!("no image for {}", clocks.name));
        let uploader_time = capture_millis(oracle["MAPCaptureTime"].as_str().unwrap());
        assert_eq!(
            image["captured_at"].as_i64().unwrap(),
            uploader_time + clocks.sub_second_millis,
            "{}: ours {image}, the uploader's {oracle}",
            clocks.name
        );
        let (lat, lon) = coordinates(image);
        assert!(
            (lat - oracle["MAPLatitude"].as_f64().unwrap()).abs() < 1e-6
                && (lon - oracle["MAPLongitude"].as_f64().unwrap()).abs() < 1e-6,
            "{}: ours {image}, the uploader's {oracle}",
            clocks.name
        );
        let heading = oracle["MAPCompassHeading"]["TrueHeading"].as_f64().unwrap();
        assert!(
            (image["compass_angle"].as_f64().unwrap() - heading).abs() < 1e-6,
            "{}: ours {image}, the uploader's {oracle}",
            clocks.name
        );
    }
}
