//! Videos among the files `streetlevel import` is given: each is read and sampled by
//! `streetlevel-video` (GPS from CAMM, GoPro telemetry or `VIDEO.gpx` beside `VIDEO.mp4`;
//! a frame more than 3 m from the last kept one), its frames decoded by `ffmpeg` into a
//! scratch folder of the data directory, and each frame becomes one more file of the import,
//! its Exif written as the uploader's `video_process` writes it (capture time, GPS position,
//! altitude, direction to the next frame, make and model). From there a frame is a photo like
//! any other: the same pipeline reads, cuts into sequences, blurs and stores it.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Timelike};
use streetlevel_ingest::{TimeSource, WriteTags, write_metadata};
use streetlevel_model::Timestamp;
use streetlevel_video::{DecodeLimits, PlannedFrame, Sampling, TimeBasis, Video, extract_frames};

/// The largest GPX file read beside a video.
const MAX_GPX_BYTES: u64 = 64 << 20;

/// How videos are sampled and decoded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VideoOptions {
    /// Which frames become images (default: more than 3 m apart, as the uploader samples).
    pub sampling: Sampling,
    /// What decoding one video may cost.
    pub limits: DecodeLimits,
}

/// Whether a file name ends in `.mp4`, `.mov` or `.360` (GoPro MAX), in any case.
pub(crate) fn is_video_name(path: &Path) -> bool {
    path.extension()
        .and_then(|extension| extension.to_str())
        .is_some_and(|extension| {
            ["mp4", "mov", "360"]
                .iter()
                .any(|video| extension.eq_ignore_ascii_case(video))
        })
}

/// One decoded frame, waiting in the scratch folder for its Exif.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    /// How the import report names it: the video and the frame's time in it.
    pub(crate) name: String,
    /// The JPEG ffmpeg wrote.
    pub(crate) jpeg: PathBuf,
    /// The Exif it gets.
    pub(crate) tags: WriteTags,
    /// Where its capture time came from.
    pub(crate) time_source: TimeSource,
}

impl Frame {
    /// The frame's JPEG with its Exif: the same bytes every time (so its content hash is
    /// stable and importing the video again finds it stored).
    pub(crate) fn read(&self) -> Result<Vec<u8>, String> {
        let jpeg = std::fs::read(&self.jpeg)
            .map_err(|error| format!("cannot read the decoded frame: {error}"))?;
        write_metadata(&jpeg, &self.tags).map_err(|error| format!("cannot tag the frame: {error}"))
    }
}

/// The frames of one uploaded video, as the files of its job.
pub(crate) struct Frames(pub(crate) Vec<Frame>);

impl crate::pipeline::Sources for Frames {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn name(&self, index: usize) -> String {
        self.0[index].name.clone()
    }

    fn read(&self, index: usize) -> Result<Vec<u8>, String> {
        self.0[index].read()
    }

    fn time_source(&self, index: usize) -> Option<TimeSource> {
        Some(self.0[index].time_source)
    }
}

/// The GPX file beside `video` (`VIDEO.gpx` or `VIDEO.GPX`), if there is one.
fn gpx_beside(video: &Path) -> Result<Option<Vec<u8>>, String> {
    for extension in ["gpx", "GPX"] {
        let path = video.with_extension(extension);
        if let Ok(metadata) = std::fs::metadata(&path) {
            if metadata.len() > MAX_GPX_BYTES {
                return Err(format!(
                    "the GPX file {} is over {MAX_GPX_BYTES} bytes",
                    path.display()
                ));
            }
            return std::fs::read(&path)
                .map(Some)
                .map_err(|error| format!("cannot read {}: {error}", path.display()));
        }
    }
    Ok(None)
}

/// Reads `path`, chooses its frames and decodes them into `scratch` (an empty folder); the
/// frames in time order, or why the video is refused. `arrival` (milliseconds since 1970) is
/// the clock of last resort.
pub(crate) fn frames(
    path: &Path,
    scratch: &Path,
    options: &VideoOptions,
    arrival: Timestamp,
) -> Result<Vec<Frame>, String> {
    frames_named(path, &path.display().to_string(), scratch, options, arrival)
}

/// [`frames`], the frames named after `name` rather than the path.
pub(crate) fn frames_named(
    path: &Path,
    name: &str,
    scratch: &Path,
    options: &VideoOptions,
    arrival: Timestamp,
) -> Result<Vec<Frame>, String> {
    let gpx = gpx_beside(path)?;
    let video =
        Video::read(path, gpx.as_deref(), arrival.seconds()).map_err(|error| error.to_string())?;
    let plan = video.plan(options.sampling);
    if plan.is_empty() {
        return Err(String::from("no frame lies within the video's GPS track"));
    }
    std::fs::create_dir_all(scratch)
        .map_err(|error| format!("cannot make a scratch folder for its frames: {error}"))?;
    let indices: Vec<usize> = plan.iter().map(|frame| frame.frame).collect();
    // ffmpeg decodes on the CPU pool's account: its thread waits for it, and the child
    // inherits that thread's lower priority (`cpu.rs`).
    let written = crate::cpu::run(|| {
        extract_frames(path, video.video_track, &indices, scratch, &options.limits)
    })
    .map_err(|error| error.to_string())?;
    let time_source = match video.capture_clock.basis {
        TimeBasis::Gps => TimeSource::Gps,
        TimeBasis::CreationTime => TimeSource::VideoCreationTime,
        TimeBasis::Arrival => TimeSource::UploadTime,
    };
    Ok(plan
        .iter()
        .zip(written)
        .map(|(planned, jpeg)| Frame {
            name: format!(
                "{name} at {:.3} s (frame {})",
                planned.seconds, planned.frame
            ),
            jpeg,
            tags: tags(planned, &video, video.capture_clock.basis == TimeBasis::Gps),
            time_source,
        })
        .collect())
}

/// The Exif of one frame: GPS time only when the clock is the GPS's.
fn tags(frame: &PlannedFrame, video: &Video, gps_clock: bool) -> WriteTags {
    let mut tags = WriteTags {
        latitude: Some(frame.lat),
        longitude: Some(frame.lon),
        altitude: frame.alt,
        direction: frame.direction,
        make: video.make.clone(),
        model: video.model.clone(),
        ..WriteTags::default()
    };
    let captured_at = Timestamp(frame.captured_at_ms);
    tags.set_capture_time_utc(captured_at);
    if gps_clock {
        let time = DateTime::from_timestamp_millis(frame.captured_at_ms).unwrap_or_default();
        tags.gps_date_stamp = Some(time.format("%Y:%m:%d").to_string());
        tags.gps_time_stamp = Some([
            f64::from(time.hour()),
            f64::from(time.minute()),
            f64::from(time.second()) + f64::from(time.timestamp_subsec_millis()) / 1000.0,
        ]);
    }
    tags
}
