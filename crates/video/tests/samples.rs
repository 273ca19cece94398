//! The real sample videos of `../shared/data/video/` (GoPro MAX in HERO mode with GPS5, a GoPro
//! Karma clip without GPS, plain H.264 and HEVC clips with a GPX track beside them), and the
//! same files as the official uploader rewrites them (a CAMM track, `co64`, a dangling `tref`),
//! made at test time by the pinned `mapillary_tools` (the client suites' venv, `target/venv`,
//! or `STREETLEVEL_TEST_MAPILLARY_TOOLS`) with `upload --dry_run`. The uploader's own
//! `video_process` on the same file is the oracle for which frames are kept.
//!
//! Under CI the data, `ffmpeg` and the uploader must be there; elsewhere a test without them
//! says so and passes.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    clippy::expect_used,
    clippy::float_cmp
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use num_traits::ToPrimitive as _;
use streetlevel_video::{
    DecodeLimits, GpsSource, Sampling, TimeBasis, Video, VideoError, extract_frames,
};

/// 2026-11-27, a fixed arrival time.
const ARRIVAL: f64 = 1_795_000_000.0;

fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|value| !value.is_empty() && value != "false")
}

fn needed<T>(found: Option<T>, what: &str) -> Option<T> {
    if found.is_none() {
        assert!(!in_ci(), "{what} is missing, and CI must run this test");
        eprintln!("skipped: {what} is missing");
    }
    found
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sample(name: &str) -> Option<PathBuf> {
    let path = repository().join("../shared/data/video").join(name);
    needed(
        Some(path.clone()).filter(|path| path.is_file()),
        &path.display().to_string(),
    )
}

fn gpx() -> Option<Vec<u8>> {
    std::fs::read(sample("sf_30km_h.gpx")?).ok()
}

fn ffmpeg() -> Option<()> {
    let found = Command::new("ffmpeg")
        .arg("-version")
        .output()
        .is_ok_and(|output| output.status.success());
    needed(found.then_some(()), "ffmpeg (Debian's `ffmpeg` package)")
}

fn mapillary_tools() -> Option<PathBuf> {
    let path = std::env::var_os("STREETLEVEL_TEST_MAPILLARY_TOOLS").map_or_else(
        || repository().join("target/venv/bin/mapillary_tools"),
        PathBuf::from,
    );
    needed(
        Some(path.clone()).filter(|path| path.is_file()),
        &format!("the official uploader at {}", path.display()),
    )
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("streetlevel-video-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the uploader with an environment that reaches nothing.
fn run_uploader(tools: &Path, dir: &Path, args: &[&str]) -> std::process::Output {
    let output = Command::new(tools)
        .args(args)
        .current_dir(dir)
        .env("MAPILLARY_TOOLS_PROMPT_DISABLED", "YES")
        .env("MAPILLARY_TOOLS__AUTH_VERIFICATION_DISABLED", "YES")
        .env("MAPILLARY_DISABLE_API_LOGGING", "YES")
        .env("MAPILLARY_CONFIG_PATH", dir.join("config"))
        .env("MAPILLARY_UPLOAD_ENDPOINT", dir.join("uploaded"))
        .env("MAPILLARY_UPLOAD_HISTORY_PATH", dir.join("history"))
        .env("MAPILLARY_TOOLS_UPLOAD_CACHE_DIR", dir.join("cache"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "mapillary_tools {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The MP4 the uploader sends for `video` (with `gpx` beside it): its CAMM rewrite.
fn uploaders_mp4(tools: &Path, name: &str, video: &Path, gpx: Option<&[u8]>) -> PathBuf {
    let dir = temp_dir(name);
    let input = dir.join("in");
    std::fs::create_dir_all(&input).unwrap();
    let copy = input.join(video.file_name().unwrap());
    std::fs::copy(video, &copy).unwrap();
    if let Some(gpx) = gpx {
        std::fs::write(copy.with_extension("gpx"), gpx).unwrap();
    }
    std::fs::create_dir_all(dir.join("uploaded")).unwrap();
    run_uploader(
        tools,
        &dir,
        &["authenticate", "--user_name", "test", "--jwt", "test-token"],
    );
    let mut process = vec!["process", "in", "--video_geotag_source", "native"];
    if gpx.is_some() {
        process.extend(["--video_geotag_source", "gpx"]);
    }
    run_uploader(tools, &dir, &process);
    run_uploader(
        tools,
        &dir,
        &["upload", "in", "--dry_run", "--user_name", "test"],
    );
    let uploaded: Vec<PathBuf> = std::fs::read_dir(dir.join("uploaded"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "mp4"))
        .collect();
    assert_eq!(uploaded.len(), 1, "{uploaded:?}");
    uploaded[0].clone()
}

fn iso(seconds_ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(seconds_ms)
        .unwrap()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

#[test]
fn the_gopro_clip_gives_its_gps5_track_and_gps_clock() {
    let Some(path) = sample("max-heromode.mp4") else {
        return;
    };
    let video = Video::read(&path, None, ARRIVAL).unwrap();
    assert_eq!(video.gps_source, GpsSource::GoPro);
    assert_eq!(
        (video.make.as_deref(), video.model.as_deref()),
        (Some("GoPro"), Some("GoPro Max"))
    );
    // The research notes (mapillary_tools 0.14.7 on this file): 191 GPS points, ~10.5 s.
    assert_eq!(video.gps.len(), 191, "GPS5 points kept");
    assert_eq!(video.capture_clock.basis, TimeBasis::Gps);
    // GPSU of the first payload is 2019-11-18T23:45:14Z (the mvhd says 15:45:32, local time).
    let start = iso((video.capture_clock.start * 1000.0).to_i64().unwrap());
    assert!(start.starts_with("2019-11-18T23:45:1"), "{start}");
    let track = video.track();
    assert_eq!(
        (track.width, track.height, &track.format),
        (848, 480, b"avc1")
    );
    assert_eq!(video.frame_times().len(), 315);
}

#[test]
fn karma_without_gps_is_refused_with_the_reason() {
    let Some(path) = sample("karma.mp4") else {
        return;
    };
    let refused = Video::read(&path, None, ARRIVAL).unwrap_err();
    assert_eq!(refused, VideoError::NoGps);
    assert!(refused.to_string().contains("no GPS track"), "{refused}");
}

#[test]
fn plain_clips_take_the_gpx_beside_them_h264_and_hevc() {
    let (Some(h264), Some(hevc), Some(gpx)) =
        (sample("sample-5s.mp4"), sample("sample-5s_h265.mp4"), gpx())
    else {
        return;
    };
    for (path, format, frames) in [(&h264, *b"avc1", 171), (&hevc, *b"hev1", 146)] {
        assert_eq!(
            Video::read(path, None, ARRIVAL),
            Err(VideoError::NoGps),
            "{}",
            path.display()
        );
        let video = Video::read(path, Some(&gpx), ARRIVAL).unwrap();
        assert_eq!(video.gps_source, GpsSource::Gpx);
        assert_eq!(video.track().format, format);
        assert_eq!(video.frame_times().len(), frames);
        // The GPX track (93.6 s) is cut after its first point past the clip's end; its first
        // point is the start.
        let gps = &video.gps;
        let end = *video.frame_times().last().unwrap();
        assert_eq!(
            gps.iter().filter(|point| point.time > end + 0.05).count(),
            1,
            "{gps:?}"
        );
        assert_eq!(video.capture_clock.basis, TimeBasis::Gps);
        assert_eq!(
            iso((video.capture_clock.start * 1000.0).to_i64().unwrap()),
            "2025-03-14T07:00:00.000Z"
        );
        // 30 km/h is 8.3 m/s: a frame about every 3 m is every 0.36 s or so.
        let plan = video.plan(Sampling::default());
        assert!((10..=17).contains(&plan.len()), "{} frames", plan.len());
        for pair in plan.windows(2) {
            let metres = streetlevel_video::gps::distance(
                pair[0].lat,
                pair[0].lon,
                pair[1].lat,
                pair[1].lon,
            );
            assert!(metres > 3.0 && metres < 3.5, "{metres}");
            assert!(pair[0].captured_at_ms < pair[1].captured_at_ms);
        }
        let by_time = video.plan(Sampling::Interval(1.0));
        assert!(
            (5..=6).contains(&by_time.len()),
            "a frame a second of a 5 s clip: {by_time:?}"
        );
        for pair in by_time.windows(2) {
            assert!(
                (pair[1].seconds - pair[0].seconds - 1.0).abs() < 0.05,
                "{pair:?}"
            );
        }
    }
}

#[test]
fn a_truncated_and_a_hostile_file_are_refused() {
    let Some(path) = sample("max-heromode.mp4") else {
        return;
    };
    let bytes = std::fs::read(&path).unwrap();
    let dir = temp_dir("truncated");
    // The GoPro writes its moov last: cut, there is none.
    let cut = dir.join("cut.mp4");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    assert!(matches!(
        Video::read(&cut, None, ARRIVAL),
        Err(VideoError::Truncated(_))
    ));
    // The moov moved first (as the uploader writes it) and the media cut: frames past the end.
    let moov_at = bytes
        .windows(4)
        .position(|window| window == b"moov")
        .unwrap()
        - 4;
    let mut moved = bytes[moov_at..].to_vec();
    moved.extend_from_slice(&bytes[..bytes.len() / 2]);
    let moved_path = dir.join("moved.mp4");
    std::fs::write(&moved_path, &moved).unwrap();
    assert!(Video::read(&moved_path, None, ARRIVAL).is_err());
    // A JPEG is not a video.
    let hostile = dir.join("hostile.mp4");
    std::fs::write(&hostile, b"\xFF\xD8\xFF\xE0 not a video at all").unwrap();
    assert_eq!(
        Video::read(&hostile, None, ARRIVAL),
        Err(VideoError::NotMp4)
    );
    // A moov box claiming 4 GiB.
    std::fs::write(&hostile, b"\0\0\0\x10ftypisom\0\0\0\0\xFF\xFF\xFF\xF0moov").unwrap();
    assert!(matches!(
        Video::read(&hostile, None, ARRIVAL),
        Err(VideoError::Truncated(_))
    ));
}

#[test]
fn frames_kept_are_the_uploaders_video_process_frames() {
    let (Some(path), Some(tools), Some(())) =
        (sample("max-heromode.mp4"), mapillary_tools(), ffmpeg())
    else {
        return;
    };
    let dir = temp_dir("video-process");
    let input = dir.join("in");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::copy(&path, input.join("max-heromode.mp4")).unwrap();
    run_uploader(&tools, &dir, &["video_process", "in", "out"]);
    let description: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join("out/mapillary_image_description.json")).unwrap(),
    )
    .unwrap();
    let theirs: Vec<&serde_json::Value> = description.as_array().unwrap().iter().collect();
    let video = Video::read(&path, None, ARRIVAL).unwrap();
    let ours = video.plan(Sampling::default());
    assert_eq!(ours.len(), theirs.len(), "frames kept: ours {ours:?}");
    for (frame, their) in ours.iter().zip(&theirs) {
        let lat = their["MAPLatitude"].as_f64().unwrap();
        let lon = their["MAPLongitude"].as_f64().unwrap();
        assert!(
            (frame.lat - lat).abs() < 1e-6 && (frame.lon - lon).abs() < 1e-6,
            "{frame:?} vs {their}"
        );
        // Their time is the staircase's (each payload's GPSU; this clip's first one is 1.47 s
        // behind the others), ours the robust offset's: within 1.5 s.
        let their_time = chrono::NaiveDateTime::parse_from_str(
            their["MAPCaptureTime"].as_str().unwrap(),
            "%Y_%m_%d_%H_%M_%S_%3f",
        )
        .unwrap()
        .and_utc()
        .timestamp_millis();
        assert!(
            (frame.captured_at_ms - their_time).abs() <= 1500,
            "{} vs {}",
            iso(frame.captured_at_ms),
            iso(their_time)
        );
    }
}

#[test]
fn the_uploaders_camm_rewrite_reads_as_the_original() {
    let (Some(gopro), Some(plain), Some(gpx), Some(tools)) = (
        sample("max-heromode.mp4"),
        sample("sample-5s.mp4"),
        gpx(),
        mapillary_tools(),
    ) else {
        return;
    };
    let original = Video::read(&gopro, None, ARRIVAL).unwrap();
    let camm = uploaders_mp4(&tools, "camm-gopro", &gopro, None);
    let rewritten = Video::read(&camm, None, ARRIVAL).unwrap();
    assert_eq!(rewritten.gps_source, GpsSource::Camm);
    // Only the picture track and the CAMM track are left; co64 offsets, the tref kept.
    assert_eq!(rewritten.container.tracks.len(), 2);
    assert_eq!(rewritten.container.tracks[1].format, *b"camm");
    assert_eq!(
        (rewritten.make.as_deref(), rewritten.model.as_deref()),
        (Some("GoPro"), Some("GoPro Max"))
    );
    assert_eq!(rewritten.capture_clock.basis, TimeBasis::Gps);
    assert!((rewritten.capture_clock.start - original.capture_clock.start).abs() < 1.0);
    assert_eq!(rewritten.frame_times(), original.frame_times());
    let (a, b) = (
        original.plan(Sampling::default()),
        rewritten.plan(Sampling::default()),
    );
    assert_eq!(
        a.iter().map(|frame| frame.frame).collect::<Vec<_>>(),
        b.iter().map(|frame| frame.frame).collect::<Vec<_>>()
    );

    let camm = uploaders_mp4(&tools, "camm-gpx", &plain, Some(&gpx));
    let rewritten = Video::read(&camm, None, ARRIVAL).unwrap();
    assert_eq!(rewritten.gps_source, GpsSource::Camm);
    // The uploader's CAMM times are whole milliseconds of its timescale.
    assert!(
        (rewritten.capture_clock.start - 1_741_935_600.0).abs() < 0.005,
        "{}",
        rewritten.capture_clock.start
    );
    // The uploader does not cut the GPX track at the clip's end; the reader does.
    assert_eq!(
        rewritten
            .gps
            .iter()
            .filter(|point| point.time > 6.0)
            .count(),
        1
    );
}

#[test]
fn chosen_frames_decode_to_jpeg_with_ffmpeg_h264_and_hevc() {
    let (Some(h264), Some(hevc), Some(gpx), Some(())) = (
        sample("sample-5s.mp4"),
        sample("sample-5s_h265.mp4"),
        gpx(),
        ffmpeg(),
    ) else {
        return;
    };
    for (name, path, size) in [("h264", &h264, (1920, 1080)), ("hevc", &hevc, (1376, 1840))] {
        let video = Video::read(path, Some(&gpx), ARRIVAL).unwrap();
        let plan = video.plan(Sampling::Interval(2.0));
        let frames: Vec<usize> = plan.iter().map(|frame| frame.frame).collect();
        let out = temp_dir(&format!("decode-{name}"));
        let written = extract_frames(
            path,
            video.video_track,
            &frames,
            &out,
            &DecodeLimits::default(),
        )
        .unwrap();
        assert_eq!(written.len(), frames.len());
        for jpeg in &written {
            let bytes = std::fs::read(jpeg).unwrap();
            assert_eq!(&bytes[..2], b"\xFF\xD8", "{}", jpeg.display());
            let decoded = image::load_from_memory(&bytes).unwrap();
            assert_eq!((decoded.width(), decoded.height()), size);
        }
    }
}

#[test]
fn a_decoder_over_its_limits_is_stopped_with_the_reason() {
    let (Some(path), Some(gpx), Some(())) = (sample("sample-5s.mp4"), gpx(), ffmpeg()) else {
        return;
    };
    let video = Video::read(&path, Some(&gpx), ARRIVAL).unwrap();
    let frames: Vec<usize> = video
        .plan(Sampling::default())
        .iter()
        .map(|frame| frame.frame)
        .collect();
    // 1 MiB of address space: ffmpeg cannot even start.
    let out = temp_dir("limits-memory");
    let tight = DecodeLimits {
        memory_bytes: 1 << 20,
        ..DecodeLimits::default()
    };
    assert!(matches!(
        extract_frames(&path, video.video_track, &frames, &out, &tight),
        Err(VideoError::Decode(_))
    ));
    // 10 KiB of output: stopped when it writes more (or fails the frame count).
    let out = temp_dir("limits-output");
    let small = DecodeLimits {
        output_bytes: 10 << 10,
        ..DecodeLimits::default()
    };
    let refused = extract_frames(&path, video.video_track, &frames, &out, &small).unwrap_err();
    assert!(matches!(refused, VideoError::Decode(_)), "{refused}");
    // A missing program is named.
    let out = temp_dir("limits-program");
    let missing = DecodeLimits {
        program: PathBuf::from("/nonexistent/ffmpeg"),
        ..DecodeLimits::default()
    };
    assert!(extract_frames(&path, video.video_track, &frames, &out, &missing).is_err());
}
