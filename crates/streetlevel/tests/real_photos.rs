//! Real photos through the real binary: the original service's own mobile-app photos
//! (`../shared/data/opensfm-blur-pairs/before_*.jpg`, capture time and heading only in their
//! `ImageDescription` JSON, numbers as strings), checked against that JSON read here, and the
//! capture-time rule checked against the official uploader's `mapillary_tools process` (its
//! description file is an oracle nobody here wrote), on a real photo whose Exif is rewritten
//! with each combination of GPS time and camera clock, and on the whole folder of those photos
//! rewritten as a camera with a GPS receiver writes them (times, headings filled from the track,
//! duplicates and sequences).
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

/// An empty directory for one test, which removes it when it passes (a failure leaves it to
/// look at).
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
    let _ = std::fs::remove_dir_all(data.parent().unwrap());
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
    let _ = std::fs::remove_dir_all(&root);
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
    let _ = std::fs::remove_dir_all(&root);
}

/// `YYYY_MM_DD_HH_MM_SS_mmm` (UTC) as Exif's `GPSDateStamp` and `GPSTimeStamp` (seconds to
/// the millisecond) and, in local time `offset_hours` east of UTC, `DateTimeOriginal` and
/// `SubSecTimeOriginal`.
fn clocks_of(capture_time: &str, offset_hours: i64) -> (String, [f64; 3], String, String) {
    use chrono::Timelike as _;
    let utc = NaiveDateTime::parse_from_str(capture_time, "%Y_%m_%d_%H_%M_%S_%3f").unwrap();
    let millis = utc.nanosecond() / 1_000_000;
    let seconds = f64::from(utc.second()) + f64::from(millis) / 1000.0;
    let local = utc + chrono::TimeDelta::hours(offset_hours);
    (
        utc.format("%Y:%m:%d").to_string(),
        [f64::from(utc.hour()), f64::from(utc.minute()), seconds],
        local.format("%Y:%m:%d %H:%M:%S").to_string(),
        format!("{millis:03}"),
    )
}

/// `photos` written into `folder` as a camera with a GPS receiver writes them (see the test
/// below), by file name with the position written.
fn as_a_gps_camera_writes_them(
    photos: &[PathBuf],
    folder: &Path,
) -> BTreeMap<String, (PathBuf, (f64, f64))> {
    std::fs::create_dir_all(folder).unwrap();
    let mut written = BTreeMap::new();
    for path in photos {
        let json = app_json(path);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let (gps_date, gps_time, local, sub_seconds) =
            clocks_of(json["MAPCaptureTime"].as_str().unwrap(), 2);
        let position = (number(&json["MAPLatitude"]), number(&json["MAPLongitude"]));
        let tags = WriteTags {
            latitude: Some(position.0),
            longitude: Some(position.1),
            direction: name
                .contains("berlin")
                .then(|| number(&json["MAPCompassHeading"]["TrueHeading"])),
            gps_date_stamp: Some(gps_date),
            gps_time_stamp: Some(gps_time),
            date_time_original: Some(local),
            subsec_time_original: Some(sub_seconds),
            make: Some(String::from("Apple")),
            model: Some(String::from("iPhone 4S")),
            ..WriteTags::default()
        };
        let target = folder.join(&name);
        let original = std::fs::read(path).unwrap();
        std::fs::write(&target, write_metadata(&original, &tags).unwrap()).unwrap();
        written.insert(name, (target, position));
    }
    written
}

#[test]
fn a_folder_of_real_photos_gets_the_official_uploaders_times_headings_and_sequences() {
    let (Some(photos), Some(tool)) = (app_photos(), mapillary_tools()) else {
        return;
    };
    // The 32 real photos as a camera with a GPS receiver writes them: the position and the
    // UTC time (to the millisecond) of the app's JSON in the GPS tags, the camera's clock in
    // local summer time (UTC+2) without an offset, as action cameras write it, and no JSON.
    // The Berlin walk keeps the app's compass heading as `GPSImgDirection`; the Lund walk has
    // none, as from a camera without a compass, so that both tools fill its headings from
    // the track (and its last three photos, taken at one spot, are duplicates for both).
    let root = temp_dir("uploader-folder");
    let folder = root.join("photos");
    let written = as_a_gps_camera_writes_them(&photos, &folder);
    let paths: Vec<PathBuf> = written.values().map(|(path, _)| path.clone()).collect();

    let described = uploader_process(&tool, &root, std::slice::from_ref(&folder));
    assert_eq!(described.len(), photos.len(), "{described:?}");
    let accepted: BTreeMap<&String, &Value> = described
        .iter()
        .filter(|(_, item)| item.get("error").is_none())
        .collect();
    let duplicates: BTreeSet<&String> = described
        .iter()
        .filter(|(_, item)| {
            item.get("error")
                .is_some_and(|error| error["type"] == "MapillaryDuplicationError")
        })
        .map(|(name, _)| name)
        .collect();
    assert_eq!(
        accepted.len() + duplicates.len(),
        photos.len(),
        "the uploader refuses these only as duplicates: {described:?}"
    );
    assert!(!duplicates.is_empty(), "{described:?}");

    let data = root.join("data");
    let out = import(&data, &paths);
    let uploader_sequences: BTreeSet<&str> = accepted
        .values()
        .map(|item| item["MAPSequenceUUID"].as_str().unwrap())
        .collect();
    assert!(
        out.contains(&format!(
            "imported {} images in {} sequences, skipped 0 imported before, refused {}",
            accepted.len(),
            uploader_sequences.len(),
            duplicates.len()
        )),
        "{out}\nthe uploader's: {described:?}"
    );
    assert!(
        out.contains(&format!("capture times from: {} gps\n", accepted.len())),
        "{out}"
    );
    assert!(!out.contains("warning"), "{out}");
    for name in &duplicates {
        assert!(
            out.lines().any(|line| line.starts_with("refused")
                && line.contains(name.as_str())
                && line.contains("duplicate")),
            "{name} is the uploader's duplicate: {out}"
        );
    }

    // Each accepted photo: the same time, heading and position, and the two tools' sequences
    // are the same sets of files.
    let images = served_images(&data, "13.0,52.0,14.0,56.0");
    assert_eq!(images.len(), accepted.len());
    let mut sequence_pairs = BTreeSet::new();
    for (name, oracle) in &accepted {
        let (_, (latitude, longitude)) = &written[name.as_str()];
        let image = images
            .iter()
            .find(|image| {
                let (lat, lon) = coordinates(image);
                (lat - latitude).abs() < 1e-7 && (lon - longitude).abs() < 1e-7
            })
            .unwrap_or_else(|| panic!("no image at the place of {name}"));
        assert_eq!(
            image["captured_at"].as_i64().unwrap(),
            capture_millis(oracle["MAPCaptureTime"].as_str().unwrap()),
            "{name}: ours {image}, the uploader's {oracle}"
        );
        // The uploader writes a heading it computed to three decimals.
        let heading = oracle["MAPCompassHeading"]["TrueHeading"].as_f64().unwrap();
        assert!(
            (image["compass_angle"].as_f64().unwrap() - heading).abs() <= 0.0005 + 1e-9,
            "{name}: ours {image}, the uploader's {oracle}"
        );
        assert!(
            (coordinates(image).0 - oracle["MAPLatitude"].as_f64().unwrap()).abs() < 1e-6
                && (coordinates(image).1 - oracle["MAPLongitude"].as_f64().unwrap()).abs() < 1e-6,
            "{name}: ours {image}, the uploader's {oracle}"
        );
        sequence_pairs.insert((
            image["sequence"].as_str().unwrap().to_owned(),
            oracle["MAPSequenceUUID"].as_str().unwrap().to_owned(),
        ));
    }
    // One to one: each of our sequences is one of the uploader's and the other way round.
    assert_eq!(
        sequence_pairs.len(),
        uploader_sequences.len(),
        "{sequence_pairs:?}"
    );
    let ours: BTreeSet<&String> = sequence_pairs.iter().map(|(ours, _)| ours).collect();
    assert_eq!(ours.len(), uploader_sequences.len(), "{sequence_pairs:?}");
    let _ = std::fs::remove_dir_all(&root);
}

/// Writes `photo` to `target` with Exif `tags` and, as its `ImageDescription`, the photo's
/// own JSON after `change`.
fn with_spoilt_json(photo: &Path, target: &Path, change: &dyn Fn(&mut Value), tags: WriteTags) {
    let mut json = app_json(photo);
    change(&mut json);
    let tags = WriteTags {
        description: Some(json.to_string()),
        ..tags
    };
    let original = std::fs::read(photo).unwrap();
    std::fs::write(target, write_metadata(&original, &tags).unwrap()).unwrap();
}

/// Three of the app's photos written into `folder`, each with its own JSON spoilt in one way
/// and Exif written beside it (GPS time an hour after the JSON's, another altitude, another
/// place), so that where each value came from shows in what is served; with the JSON as the
/// app wrote it.
fn spoilt_photos(photos: &[PathBuf], folder: &Path) -> [(PathBuf, Value); 3] {
    let spoilt = |index: usize, name: &str, change: &dyn Fn(&mut Value), tags: WriteTags| {
        let path = folder.join(name);
        with_spoilt_json(&photos[index], &path, change, tags);
        (path, app_json(&photos[index]))
    };
    let an_hour_later =
        capture_millis(app_json(&photos[3])["MAPCaptureTime"].as_str().unwrap()) + 3_600_000;
    let an_hour_later = chrono::DateTime::from_timestamp_millis(an_hour_later).unwrap();
    let (gps_date, gps_time, _, _) = clocks_of(
        &an_hour_later.format("%Y_%m_%d_%H_%M_%S_%3f").to_string(),
        0,
    );
    // The time and the altitude cannot be read: the GPS time and Exif's altitude count.
    let (time_spoilt, time_json) = spoilt(
        3,
        "time_spoilt.jpg",
        &|json| {
            json["MAPCaptureTime"] = Value::from("yesterday");
            json["MAPAltitude"] = Value::from("high");
        },
        WriteTags {
            latitude: Some(1.0),
            longitude: Some(1.0),
            altitude: Some(12.5),
            gps_date_stamp: Some(gps_date),
            gps_time_stamp: Some(gps_time),
            ..WriteTags::default()
        },
    );
    // The latitude cannot be read: the position is Exif's, both coordinates.
    let (place_spoilt, place_json) = spoilt(
        10,
        "place_spoilt.jpg",
        &|json| json["MAPLatitude"] = Value::from("north"),
        WriteTags {
            latitude: Some(55.71),
            longitude: Some(13.21),
            ..WriteTags::default()
        },
    );
    // No readable position anywhere: refused, saying so.
    let nowhere = spoilt(
        20,
        "nowhere.jpg",
        &|json| json["MAPLongitude"] = Value::from("east"),
        WriteTags::default(),
    );
    [
        (time_spoilt, time_json),
        (place_spoilt, place_json),
        nowhere,
    ]
}

#[test]
fn members_of_the_apps_json_that_cannot_be_read_give_way_to_exif_and_are_named_in_the_report() {
    let Some(photos) = app_photos() else { return };
    let root = temp_dir("unreadable-members");
    let folder = root.join("photos");
    std::fs::create_dir_all(&folder).unwrap();
    let [
        (time_spoilt, time_json),
        (place_spoilt, place_json),
        (nowhere, _),
    ] = spoilt_photos(&photos, &folder);
    let data = root.join("data");
    let out = import(&data, &[time_spoilt, place_spoilt, nowhere]);
    assert!(
        out.contains("imported 2 images in 2 sequences, skipped 0 imported before, refused 1"),
        "{out}"
    );
    assert!(
        out.contains("capture times from: 1 description, 1 gps\n"),
        "{out}"
    );
    let lines: Vec<&str> = out
        .lines()
        .filter(|line| line.starts_with("warning") || line.starts_with("refused"))
        .collect();
    for (file, words) in [
        (
            "time_spoilt.jpg",
            ["warning", "ignored MAPCaptureTime \"yesterday\""],
        ),
        (
            "time_spoilt.jpg",
            ["warning", "ignored MAPAltitude \"high\" is not a number"],
        ),
        (
            "place_spoilt.jpg",
            ["warning", "ignored MAPLatitude \"north\""],
        ),
        ("nowhere.jpg", ["refused", "no gps position"]),
    ] {
        assert!(
            lines
                .iter()
                .any(|line| line.contains(file) && words.iter().all(|word| line.contains(word))),
            "{file} {words:?}: {out}"
        );
    }
    assert_eq!(lines.len(), 4, "{out}");

    let images = served_images(&data, "0.5,0.5,14.0,56.0");
    assert_eq!(images.len(), 2, "{images:?}");
    let at = |latitude: f64| {
        images
            .iter()
            .find(|image| (coordinates(image).0 - latitude).abs() < 1e-6)
            .unwrap_or_else(|| panic!("no image at latitude {latitude}: {images:?}"))
    };
    // The JSON's position and heading where they could be read; Exif's time and altitude.
    let time_image = at(number(&time_json["MAPLatitude"]));
    assert_eq!(
        time_image["captured_at"].as_i64().unwrap(),
        capture_millis(time_json["MAPCaptureTime"].as_str().unwrap()) + 3_600_000,
        "{time_image}"
    );
    assert!(
        (time_image["altitude"].as_f64().unwrap() - 12.5).abs() < 1e-9,
        "{time_image}"
    );
    assert!(
        (time_image["compass_angle"].as_f64().unwrap()
            - number(&time_json["MAPCompassHeading"]["TrueHeading"]))
        .abs()
            < 1e-9,
        "{time_image}"
    );
    // Exif's position (both coordinates), the JSON's time.
    let place_image = at(55.71);
    assert!(
        (coordinates(place_image).1 - 13.21).abs() < 1e-6,
        "{place_image}"
    );
    assert_eq!(
        place_image["captured_at"].as_i64().unwrap(),
        capture_millis(place_json["MAPCaptureTime"].as_str().unwrap()),
        "{place_image}"
    );
    let _ = std::fs::remove_dir_all(&root);
}
