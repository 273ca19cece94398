//! `streetlevel import` of videos, through the real binary and server, on the real sample
//! videos of `../shared/data/video/`: a GoPro clip (GPMF GPS5), plain H.264 and HEVC clips with
//! `VIDEO.gpx` beside them, a GoPro clip without GPS, a truncated and a hostile file. The
//! frames become images served like photos: positions along the track more than 3 m apart,
//! the GPS times, the direction to the next frame, the camera, one sequence per clip.
//!
//! Under CI the videos and Debian's `ffmpeg` must be there; elsewhere a test without them says
//! so and passes.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use streetlevel_tests::{Server, create_app};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");

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

/// The sample videos' folder, when they and ffmpeg are there.
fn samples() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/video");
    needed(
        Some(dir.clone()).filter(|dir| dir.join("max-heromode.mp4").is_file()),
        &format!(
            "{}/max-heromode.mp4 (see ../shared/data/README.md)",
            dir.display()
        ),
    )?;
    let ffmpeg = Command::new("ffmpeg")
        .arg("-version")
        .output()
        .is_ok_and(|output| output.status.success());
    needed(
        ffmpeg.then_some(()),
        "ffmpeg (Debian's `ffmpeg` package; .ci/run installs it)",
    )?;
    Some(dir)
}

fn temp_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("streetlevel-videos-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `name` in `folder`, a link to the shared sample `sample` (media are never copied).
fn link(folder: &Path, samples: &Path, sample: &str, name: &str) -> PathBuf {
    let path = folder.join(name);
    std::os::unix::fs::symlink(samples.join(sample), &path).unwrap();
    path
}

/// Runs `streetlevel import`; its exit status and standard output.
fn import(data: &Path, paths: &[&Path]) -> (bool, String) {
    let output = Command::new(BINARY)
        .arg("import")
        .arg("--data")
        .arg(data)
        .args(["--user", "filmer", "--blur", "false"])
        .args(paths)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    eprintln!("{out}{}", String::from_utf8_lossy(&output.stderr));
    (output.status.success(), out)
}

/// Every image of `data` inside `bbox` as the server serves it, in capture order.
fn served(data: &Path, bbox: &str) -> Vec<Value> {
    let token = create_app(Path::new(BINARY), data, "read");
    let server = Server::start(Path::new(BINARY), data, &[]);
    let response = server.request(
        "GET",
        &format!("/images?bbox={bbox}&limit=2000&fields=id,sequence,captured_at,compass_angle,computed_compass_angle,geometry,altitude,make,model,width,height,thumb_1024_url"),
        &[("Authorization", &format!("OAuth {token}"))],
        b"",
    );
    assert_eq!(response.status, 200);
    let mut images = response.json()["data"].as_array().unwrap().clone();
    images.sort_by_key(|image| image["captured_at"].as_i64().unwrap());
    for image in &images {
        let thumbnail = image["thumb_1024_url"].as_str().unwrap();
        let path = thumbnail
            .split_once("127.0.0.1")
            .map_or(thumbnail, |(_, rest)| {
                rest.split_once('/').map_or(rest, |(_, path)| path)
            });
        let fetched = server.request("GET", &format!("/{path}"), &[], b"");
        assert_eq!(fetched.status, 200, "{thumbnail}");
        assert_eq!(&fetched.body[..2], b"\xFF\xD8");
    }
    images
}

fn position(image: &Value) -> (f64, f64) {
    let coordinates = &image["geometry"]["coordinates"];
    (
        coordinates[1].as_f64().unwrap(),
        coordinates[0].as_f64().unwrap(),
    )
}

/// Metres between two positions (haversine).
fn metres(a: (f64, f64), b: (f64, f64)) -> f64 {
    let (lat1, lat2) = (a.0.to_radians(), b.0.to_radians());
    let (d_lat, d_lon) = ((b.0 - a.0).to_radians(), (b.1 - a.1).to_radians());
    let h = (d_lat / 2.0).sin().powi(2) + lat1.cos() * lat2.cos() * (d_lon / 2.0).sin().powi(2);
    2.0 * 6_371_008.8 * h.sqrt().asin()
}

#[test]
fn a_folder_of_gopro_clips_becomes_sequences_along_the_route() {
    let Some(samples) = samples() else { return };
    let folder = temp_dir("gopro-folder");
    let data = temp_dir("gopro-data");
    link(&folder, &samples, "max-heromode.mp4", "GH010001.MP4");
    link(&folder, &samples, "karma.mp4", "GH010002.MP4");
    let (ok, out) = import(&data, &[&folder]);
    assert!(ok, "{out}");
    // karma.mp4 has GPMF telemetry without GPS: refused with the reason.
    assert!(
        out.contains(&format!(
            "refused {}: the video has no GPS track",
            folder.join("GH010002.MP4").display()
        )),
        "{out}"
    );
    // The uploader's video_process keeps 5 frames of this clip (crates/video checks the
    // positions against it).
    assert!(
        out.contains("imported 5 images in 1 sequences, skipped 0 imported before, refused 1\n"),
        "{out}"
    );
    assert!(out.contains("capture times from: 5 gps\n"), "{out}");
    let images = served(&data, "-117.33,33.12,-117.32,33.13");
    assert_eq!(images.len(), 5);
    let sequence = &images[0]["sequence"];
    for pair in images.windows(2) {
        assert_eq!(&pair[1]["sequence"], sequence);
        let apart = metres(position(&pair[0]), position(&pair[1]));
        assert!(apart > 3.0 && apart < 4.5, "{apart} m apart");
    }
    for image in &images {
        assert_eq!(
            (image["make"].as_str(), image["model"].as_str()),
            (Some("GoPro"), Some("GoPro Max"))
        );
        assert_eq!(
            (image["width"].as_u64(), image["height"].as_u64()),
            (Some(848), Some(480))
        );
        // The GPS time (GPSU), not the camera's local creation time (15:45 on the 18th).
        let captured =
            chrono::DateTime::from_timestamp_millis(image["captured_at"].as_i64().unwrap())
                .unwrap();
        assert_eq!(
            captured.format("%Y-%m-%dT%H:%M").to_string(),
            "2019-11-18T23:45",
            "{captured}"
        );
        // Walking south-south-east along the track.
        let compass = image["compass_angle"].as_f64().unwrap();
        assert!((140.0..165.0).contains(&compass), "{compass}");
        assert!(image["altitude"].as_f64().unwrap() < 0.0);
    }
    // The same clip again: every frame found stored, nothing new.
    let (ok, again) = import(&data, &[&folder]);
    assert!(ok, "{again}");
    assert!(
        again.contains("imported 0 images in 0 sequences, skipped 5 imported before, refused 1\n"),
        "{again}"
    );
}

#[test]
fn plain_h264_and_hevc_clips_take_the_gpx_beside_them() {
    let Some(samples) = samples() else { return };
    let gpx = std::fs::read(samples.join("sf_30km_h.gpx")).unwrap();
    for (sample, format) in [("sample-5s.mp4", "h264"), ("sample-5s_h265.mp4", "hevc")] {
        let folder = temp_dir(&format!("gpx-{format}"));
        let data = temp_dir(&format!("gpx-{format}-data"));
        let video = link(&folder, &samples, sample, "ride.mp4");
        // Without the track: refused with the reason, nothing imported (a failing exit).
        let (ok, out) = import(&data, &[&video]);
        assert!(!ok && out.contains("the video has no GPS track"), "{out}");
        std::fs::write(folder.join("ride.gpx"), &gpx).unwrap();
        let (ok, out) = import(&data, &[&video]);
        assert!(ok, "{out}");
        let images = served(&data, "-122.47,37.79,-122.45,37.80");
        assert!(
            (10..=17).contains(&images.len()),
            "{format}: {} images",
            images.len()
        );
        // The GPX's first point (2025-03-14T07:00:00Z) is the clip's start.
        let first = images[0]["captured_at"].as_i64().unwrap();
        assert!(
            (1_741_935_600_000..1_741_935_600_200).contains(&first),
            "{first}"
        );
        for pair in images.windows(2) {
            let apart = metres(position(&pair[0]), position(&pair[1]));
            assert!(apart > 3.0 && apart < 3.6, "{format}: {apart} m apart");
            assert!(pair[0]["captured_at"].as_i64() < pair[1]["captured_at"].as_i64());
        }
        assert!(
            out.contains(&format!("capture times from: {} gps\n", images.len())),
            "{out}"
        );
    }
}

#[test]
fn broken_and_hostile_videos_are_refused_and_the_rest_imported() {
    let Some(samples) = samples() else { return };
    let folder = temp_dir("broken");
    let data = temp_dir("broken-data");
    let bytes = std::fs::read(samples.join("max-heromode.mp4")).unwrap();
    // Cut in half: the GoPro writes its moov at the end, so there is none.
    std::fs::write(folder.join("a-cut.mp4"), &bytes[..bytes.len() / 2]).unwrap();
    // Not a video at all.
    std::fs::write(
        folder.join("b-hostile.mov"),
        b"\xFF\xD8\xFF\xE0 this is no video",
    )
    .unwrap();
    link(&folder, &samples, "max-heromode.mp4", "c-good.mp4");
    let (ok, out) = import(&data, &[&folder]);
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!(
            "refused {}: the video is truncated",
            folder.join("a-cut.mp4").display()
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "refused {}: not an MP4/MOV video",
            folder.join("b-hostile.mov").display()
        )),
        "{out}"
    );
    assert!(
        out.contains("imported 5 images in 1 sequences, skipped 0 imported before, refused 2\n"),
        "{out}"
    );
    // Nothing of the decoding is left behind in the data directory.
    let scratch = data.join("video-frames");
    assert!(!scratch.exists() || std::fs::read_dir(&scratch).unwrap().next().is_none());
}
