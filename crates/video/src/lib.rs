#![doc = include_str!("../README.md")]

pub mod camm;
mod container;
mod error;
pub mod ffmpeg;
pub mod gpmf;
pub mod gps;
pub mod gpx;
pub mod time;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

pub use container::{Container, MAX_MOOV_BYTES, MAX_SAMPLES, Sample, Track, read_container};
pub use error::VideoError;
pub use ffmpeg::{DecodeLimits, extract_frames};
pub use gps::GpsPoint;
pub use time::{CaptureClock, TimeBasis};

/// The largest picture decoded (width × height), as for photos.
pub const MAX_FRAME_PIXELS: u64 = 100_000_000;

/// The largest CAMM or GPMF sample read.
const MAX_METADATA_SAMPLE: u32 = 1 << 20;

/// The uploader's default distance between kept frames, in metres (`VIDEO_SAMPLE_DISTANCE`).
pub const DEFAULT_SAMPLE_DISTANCE: f64 = 3.0;

/// Where a video's GPS track came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpsSource {
    /// A CAMM metadata track (what the official uploader sends, Insta360, RICOH).
    Camm,
    /// GoPro GPMF telemetry (GPS5 or GPS9).
    GoPro,
    /// A GPX file given beside the video.
    Gpx,
}

impl GpsSource {
    /// The name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            GpsSource::Camm => "camm",
            GpsSource::GoPro => "gopro",
            GpsSource::Gpx => "gpx",
        }
    }
}

/// How frames are chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// A frame when it is more than this many metres from the last one kept (the uploader's
    /// default, 3 m).
    Distance(f64),
    /// A frame every this many seconds.
    Interval(f64),
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling::Distance(DEFAULT_SAMPLE_DISTANCE)
    }
}

/// A frame chosen to become an image.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlannedFrame {
    /// Its index among the video track's frames in composition order (ffmpeg's `n`).
    pub frame: usize,
    /// Its composition time, seconds from the video's start.
    pub seconds: f64,
    /// Its capture time, milliseconds since 1970 (UTC).
    pub captured_at_ms: i64,
    /// Degrees north, interpolated.
    pub lat: f64,
    /// Degrees east, interpolated.
    pub lon: f64,
    /// Metres, interpolated, when the track has altitudes.
    pub alt: Option<f64>,
    /// The compass bearing to the next kept frame (the last frame keeps the bearing from the
    /// one before it); `None` for a single frame.
    pub direction: Option<f64>,
}

/// A video read for sampling: its container, chosen picture track, GPS track and clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Video {
    /// The container.
    pub container: Container,
    /// The picture track's position in `container.tracks` (also ffmpeg's stream index).
    pub video_track: usize,
    /// The GPS track, in video time, sorted, checked.
    pub gps: Vec<GpsPoint>,
    /// Where it came from.
    pub gps_source: GpsSource,
    /// The clock of the capture times.
    pub capture_clock: CaptureClock,
    /// The camera's make, when known.
    pub make: Option<String>,
    /// The camera's model, when known.
    pub model: Option<String>,
}

impl Video {
    /// Reads the video at `path`: its container, its picture track (the largest), and its GPS
    /// track from CAMM, else GoPro telemetry, else `gpx` (the bytes of a GPX file beside it).
    /// `arrival` (seconds since 1970) is the clock of last resort.
    pub fn read(path: &Path, gpx: Option<&[u8]>, arrival: f64) -> Result<Video, VideoError> {
        let mut file = File::open(path).map_err(|error| VideoError::Io(error.to_string()))?;
        let file_len = file
            .metadata()
            .map_err(|error| VideoError::Io(error.to_string()))?
            .len();
        Video::from_reader(&mut file, file_len, gpx, arrival)
    }

    /// [`Video::read`] from `file`, `file_len` bytes long (the fuzz target reads bytes in
    /// memory).
    pub fn from_reader<R: Read + Seek>(
        file: &mut R,
        file_len: u64,
        gpx: Option<&[u8]>,
        arrival: f64,
    ) -> Result<Video, VideoError> {
        let container = read_container(file, file_len)?;
        let video_track = choose_video_track(&container)?;
        let duration = video_duration(&container, video_track);
        let camm = container
            .tracks
            .iter()
            .find(|track| &track.format == b"camm");
        let gopro = container
            .tracks
            .iter()
            .find(|track| &track.format == b"gpmd");
        let mut make = container.make.clone();
        let mut model = container.model.clone();
        let (points, source) = if let Some(track) = camm {
            (camm_points(file, file_len, track)?, GpsSource::Camm)
        } else if let Some(track) = gopro.filter(|_| gpx.is_none()) {
            let (points, device) = gopro_points(file, file_len, track)?;
            if !points.is_empty() {
                make = make.or_else(|| Some(String::from("GoPro")));
                model = model.or(device);
            }
            (points, GpsSource::GoPro)
        } else if let Some(gpx) = gpx {
            (gpx_points(gpx)?, GpsSource::Gpx)
        } else {
            return Err(VideoError::NoGps);
        };
        if points.is_empty() {
            return Err(VideoError::NoGps);
        }
        let gps = gps::prepare(points, duration)?;
        let epochs: Vec<(f64, f64)> = gps
            .iter()
            .filter_map(|point| point.epoch.map(|epoch| (point.time, epoch)))
            .collect();
        let capture_clock = time::choose(
            time::gps_start(&epochs),
            source == GpsSource::Camm,
            container.creation_time,
            container.duration_seconds,
            arrival,
        );
        Ok(Video {
            container,
            video_track,
            gps,
            gps_source: source,
            capture_clock,
            make,
            model,
        })
    }

    /// The picture track.
    pub fn track(&self) -> &Track {
        &self.container.tracks[self.video_track]
    }

    /// The composition times (seconds) of the picture track's frames, in composition order.
    pub fn frame_times(&self) -> Vec<f64> {
        let track = self.track();
        let mut times: Vec<i64> = track.samples.iter().map(Sample::composition_time).collect();
        times.sort_unstable();
        times.into_iter().map(|time| track.seconds(time)).collect()
    }

    /// The frames to keep, as the uploader's `video_process` keeps them: frames in composition
    /// order within the GPS track's time (1 ms either side), the GPS interpolated at each, and
    /// with [`Sampling::Distance`] a frame kept when more than that far from the last one kept.
    pub fn plan(&self, sampling: Sampling) -> Vec<PlannedFrame> {
        let (Some(first), Some(last)) = (self.gps.first(), self.gps.last()) else {
            return Vec::new();
        };
        let (start, end) = (first.time - 0.001, last.time + 0.001);
        let mut kept: Vec<(usize, GpsPoint)> = Vec::new();
        let mut next_due = f64::NEG_INFINITY;
        for (frame, seconds) in self.frame_times().into_iter().enumerate() {
            if seconds < start || seconds > end {
                continue;
            }
            let point = gps::interpolate(&self.gps, seconds);
            let keep = match (sampling, kept.last()) {
                (_, None) => true,
                (Sampling::Distance(metres), Some((_, previous))) => {
                    metres < gps::distance(previous.lat, previous.lon, point.lat, point.lon)
                }
                (Sampling::Interval(_), Some(_)) => seconds >= next_due,
            };
            if keep {
                if let Sampling::Interval(interval) = sampling {
                    next_due = seconds + interval.max(0.001) - 1e-6;
                }
                kept.push((frame, point));
            }
        }
        let directions: Vec<Option<f64>> = (0..kept.len())
            .map(|index| {
                let (from, to) = if index + 1 < kept.len() {
                    (kept[index].1, kept[index + 1].1)
                } else if index > 0 {
                    (kept[index - 1].1, kept[index].1)
                } else {
                    return None;
                };
                Some(gps::bearing(from.lat, from.lon, to.lat, to.lon))
            })
            .collect();
        kept.into_iter()
            .zip(directions)
            .map(|((frame, point), direction)| PlannedFrame {
                frame,
                seconds: point.time,
                captured_at_ms: time::seconds_to_millis(self.capture_clock.start + point.time),
                lat: point.lat,
                lon: point.lon,
                alt: point.alt,
                direction,
            })
            .collect()
    }
}

/// The largest picture track; a GoPro MAX `.360` (two equal HEVC tracks) is refused, since its
/// two halves would need stitching.
fn choose_video_track(container: &Container) -> Result<usize, VideoError> {
    let videos: Vec<&Track> = container
        .tracks
        .iter()
        .filter(|track| track.is_video() && !track.samples.is_empty())
        .collect();
    let chosen = videos
        .iter()
        .max_by_key(|track| u64::from(track.width) * u64::from(track.height))
        .ok_or(VideoError::NoVideoTrack)?;
    if videos.len() >= 2
        && videos.iter().all(|track| {
            (track.width, track.height) == (chosen.width, chosen.height)
                && matches!(&track.format, b"hvc1" | b"hev1")
        })
    {
        return Err(VideoError::Malformed(String::from(
            "two equal HEVC picture tracks (a GoPro MAX .360 file): stitching them into a \
             panorama is not supported; export an equirectangular MP4 from GoPro Player instead",
        )));
    }
    if u64::from(chosen.width) * u64::from(chosen.height) > MAX_FRAME_PIXELS {
        return Err(VideoError::TooLarge(format!(
            "frames of {} x {} pixels (at most {MAX_FRAME_PIXELS} pixels)",
            chosen.width, chosen.height
        )));
    }
    if let Some(sample) = chosen
        .samples
        .iter()
        .find(|sample| sample.offset.saturating_add(u64::from(sample.size)) > container.file_len)
    {
        return Err(VideoError::Truncated(format!(
            "frames end at byte {} of a file of {} bytes",
            sample.offset.saturating_add(u64::from(sample.size)),
            container.file_len
        )));
    }
    Ok(chosen.index)
}

/// The picture track's length in seconds (its last composition time plus one frame).
fn video_duration(container: &Container, track: usize) -> f64 {
    let track = &container.tracks[track];
    track
        .samples
        .iter()
        .map(|sample| sample.composition_time() + i64::from(sample.duration))
        .max()
        .map_or(container.duration_seconds, |end| track.seconds(end))
}

/// The bytes of one metadata sample; `None` when it is larger than [`MAX_METADATA_SAMPLE`] or
/// lies past the end of the file (nothing is allocated for it then).
fn read_sample<R: Read + Seek>(
    file: &mut R,
    file_len: u64,
    sample: &Sample,
) -> Result<Option<Vec<u8>>, VideoError> {
    if sample.size > MAX_METADATA_SAMPLE
        || sample.offset.saturating_add(u64::from(sample.size)) > file_len
    {
        return Ok(None);
    }
    let mut bytes = vec![0u8; sample.size as usize];
    file.seek(SeekFrom::Start(sample.offset))?;
    match file.read_exact(&mut bytes) {
        Ok(()) => Ok(Some(bytes)),
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(error) => Err(VideoError::Io(error.to_string())),
    }
}

/// CAMM GPS points at the sample times, shifted by the track's empty edit.
fn camm_points<R: Read + Seek>(
    file: &mut R,
    file_len: u64,
    track: &Track,
) -> Result<Vec<GpsPoint>, VideoError> {
    let mut points = Vec::new();
    for sample in &track.samples {
        let Some(bytes) = read_sample(file, file_len, sample)? else {
            continue;
        };
        let Some(gps) = camm::decode(&bytes) else {
            continue;
        };
        if gps.fix == Some(0) {
            continue;
        }
        points.push(GpsPoint {
            time: track.empty_edit_seconds + track.seconds(sample.composition_time()),
            lat: gps.lat,
            lon: gps.lon,
            alt: gps.alt,
            epoch: gps.time,
        });
    }
    Ok(points)
}

/// GoPro GPS points: each payload's points spread evenly over the payload's duration, as the
/// uploader places them.
fn gopro_points<R: Read + Seek>(
    file: &mut R,
    file_len: u64,
    track: &Track,
) -> Result<(Vec<GpsPoint>, Option<String>), VideoError> {
    let mut points = Vec::new();
    let mut device = None;
    for sample in &track.samples {
        let Some(bytes) = read_sample(file, file_len, sample)? else {
            continue;
        };
        let payload = gpmf::parse(&bytes);
        device = device.or(payload.device_name);
        let start = track.seconds(sample.composition_time());
        let count = u32::try_from(payload.points.len().max(1)).unwrap_or(u32::MAX);
        let step = track.seconds(i64::from(sample.duration)) / f64::from(count);
        for (point, k) in payload.points.iter().zip(0_u32..) {
            points.push(GpsPoint {
                time: start + step * f64::from(k),
                lat: point.lat,
                lon: point.lon,
                alt: Some(point.alt),
                epoch: point.epoch,
            });
        }
    }
    Ok((points, device))
}

/// GPX points rebased so that the first one is the video's start, their times kept.
fn gpx_points(gpx: &[u8]) -> Result<Vec<GpsPoint>, VideoError> {
    let points = gpx::parse(gpx)?;
    let Some(first) = points.iter().find_map(|point| point.time) else {
        return Err(VideoError::Gpx(String::from("no track point has a time")));
    };
    Ok(points
        .iter()
        .filter_map(|point| {
            let time = point.time?;
            Some(GpsPoint {
                time: time - first,
                lat: point.lat,
                lon: point.lon,
                alt: point.ele,
                epoch: Some(time),
            })
        })
        .collect())
}
