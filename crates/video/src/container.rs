//! The ISO-BMFF (MP4/MOV) container: the top-level boxes walked from a reader (the media data
//! is never read here), the `moov` box decoded with `mp4-atom`, and each wanted track's sample
//! table resolved into one entry per sample (file offset, size, decode time, composition
//! offset).
//!
//! Tolerant of what the official uploader writes and cameras record: a `camm` handler without
//! `nmhd`, 64-bit chunk offsets (`co64`), a `tref` pointing at a dropped track, edit lists, and
//! version 0 composition offsets that are negative when read as signed (as the uploader reads
//! them). Bounded: `moov` is read only up to [`MAX_MOOV_BYTES`], a track's table only up to
//! [`MAX_SAMPLES`] samples, so hostile sizes give a [`VideoError`], never a large allocation.

use std::io::{Read, Seek, SeekFrom};

use mp4_atom::{Codec, Decode, Moov, StszSamples, Trak};

use crate::VideoError;
use crate::time::{approximate, approximate_unsigned};

/// The largest `moov` box read: the tables of an hour of 60 fps video take a few MiB.
pub const MAX_MOOV_BYTES: u64 = 64 << 20;

/// The most samples one track may have: 4.6 hours at 60 frames per second.
pub const MAX_SAMPLES: u64 = 1_000_000;

/// The most top-level boxes walked before the file is refused.
const MAX_TOP_LEVEL_BOXES: usize = 10_000;

/// Seconds from 1904-01-01 (the MP4 epoch) to 1970-01-01.
const MP4_EPOCH_OFFSET: i64 = 2_082_844_800;

/// One sample of a track.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Where its bytes start in the file.
    pub offset: u64,
    /// How many bytes it has.
    pub size: u32,
    /// Its decode time, in the track's timescale.
    pub decode_time: u64,
    /// Its composition offset (`ctts`, signed), in the track's timescale.
    pub composition_offset: i64,
    /// Its duration (`stts` delta), in the track's timescale.
    pub duration: u32,
}

impl Sample {
    /// The composition (presentation) time in the track's timescale, as the uploader computes
    /// it: decode time plus composition offset, without the edit list.
    pub fn composition_time(&self) -> i64 {
        // Below 2^52: at most `MAX_SAMPLES` durations of 32 bits each.
        i64::try_from(self.decode_time)
            .unwrap_or(i64::MAX)
            .saturating_add(self.composition_offset)
    }
}

/// One track.
#[derive(Debug, Clone, PartialEq)]
pub struct Track {
    /// Its position among the file's tracks (ffmpeg's stream index).
    pub index: usize,
    /// The handler type (`vide`, `soun`, `meta`, `camm`, ...).
    pub handler: [u8; 4],
    /// The format of its first sample description (`avc1`, `hev1`, `camm`, `gpmd`, ...).
    pub format: [u8; 4],
    /// Units per second of its times.
    pub timescale: u32,
    /// The picture's width and height from the track header (0 for other tracks).
    pub width: u32,
    /// See `width`.
    pub height: u32,
    /// The last empty edit's duration in seconds (a presentation delay before the media).
    pub empty_edit_seconds: f64,
    /// Its samples in decode order; resolved only for video and metadata tracks.
    pub samples: Vec<Sample>,
}

impl Track {
    /// Whether this is a picture track.
    pub fn is_video(&self) -> bool {
        &self.handler == b"vide"
    }

    /// The time of a track time value in seconds.
    pub fn seconds(&self, time: i64) -> f64 {
        approximate(time) / f64::from(self.timescale.max(1))
    }
}

/// What the container says.
#[derive(Debug, Clone, PartialEq)]
pub struct Container {
    /// The file's length in bytes.
    pub file_len: u64,
    /// The movie header's timescale.
    pub movie_timescale: u32,
    /// The movie header's creation time in seconds since 1970 as written (cameras often write
    /// local time here); `None` when zero.
    pub creation_time: Option<i64>,
    /// The movie's duration in seconds.
    pub duration_seconds: f64,
    /// The tracks, in file order.
    pub tracks: Vec<Track>,
    /// `@mak` or `©mak` of the movie's `udta`.
    pub make: Option<String>,
    /// `@mod` or `©mod` of the movie's `udta`.
    pub model: Option<String>,
}

/// Reads the container of an MP4/MOV file of `file_len` bytes.
pub fn read_container<R: Read + Seek>(
    reader: &mut R,
    file_len: u64,
) -> Result<Container, VideoError> {
    let mut moov = find_moov(reader, file_len)?;
    let (make, model) = udta_make_model(&moov);
    keep_only_what_is_read(&mut moov);
    let decoded = Moov::decode(&mut moov.as_slice())
        .map_err(|error| VideoError::Malformed(format!("the moov box: {error}")))?;
    let movie_timescale = decoded.mvhd.timescale;
    let creation_time = match decoded.mvhd.creation_time {
        0 => None,
        seconds => i64::try_from(seconds)
            .ok()
            .map(|seconds| seconds - MP4_EPOCH_OFFSET),
    };
    let mut tracks = Vec::with_capacity(decoded.trak.len());
    for (index, trak) in decoded.trak.iter().enumerate() {
        tracks.push(track(index, trak, movie_timescale)?);
    }
    Ok(Container {
        file_len,
        movie_timescale,
        creation_time,
        duration_seconds: approximate_unsigned(decoded.mvhd.duration)
            / f64::from(movie_timescale.max(1)),
        tracks,
        make,
        model,
    })
}

/// The boxes `mp4-atom` is given to decode inside each container box: the rest (sample
/// groups, subsample tables, audio sample entries, `udta`, `meta`, `tref`, ...) is renamed
/// `free`, which it skips unread. Nothing here needs them, and a decoder is an attack surface:
/// `mp4-atom` 0.17's `sgpd` decoder, given an unknown grouping type in version 0 and a large
/// entry count, pushes entries that consume no bytes until memory runs out (found by the
/// `read_video` fuzz target).
fn kept_children(parent: [u8; 4]) -> &'static [&'static [u8; 4]] {
    match &parent {
        b"moov" => &[b"mvhd", b"trak"],
        b"trak" => &[b"tkhd", b"edts", b"mdia"],
        b"edts" => &[b"elst"],
        b"mdia" => &[b"mdhd", b"hdlr", b"minf"],
        b"minf" => &[
            b"vmhd", b"smhd", b"nmhd", b"sthd", b"hmhd", b"dinf", b"stbl",
        ],
        b"dinf" => &[b"dref"],
        b"stbl" => &[
            b"stsd", b"stts", b"ctts", b"stsc", b"stsz", b"stco", b"co64", b"stss",
        ],
        // A picture sample entry's own children: its decoder configuration only.
        b"avc1" | b"avc3" => &[b"avcC"],
        b"hvc1" | b"hev1" => &[b"hvcC"],
        b"av01" => &[b"av1C"],
        b"vp08" | b"vp09" => &[b"vpcC"],
        _ => &[],
    }
}

/// Bytes before the first child box in a box body: a sample description's version, flags
/// and entry count; a picture sample entry's fixed fields; `dref`'s version, flags and count.
fn children_start(kind: [u8; 4]) -> Option<usize> {
    match &kind {
        b"moov" | b"trak" | b"edts" | b"mdia" | b"minf" | b"dinf" | b"stbl" => Some(0),
        b"stsd" | b"dref" => Some(8),
        b"avc1" | b"avc3" | b"hvc1" | b"hev1" | b"av01" | b"vp08" | b"vp09" | b"jpeg" => Some(78),
        _ => None,
    }
}

/// Renames every box of `moov` that nothing here reads to `free` (see [`kept_children`]), in
/// place; sample entries other than pictures', CAMM's and GoPro's become `free` too. A
/// malformed size stops the walk of its parent, leaving the rest for the decoder to refuse.
fn keep_only_what_is_read(moov: &mut [u8]) {
    fn walk(body: &mut [u8], parent: [u8; 4], depth: usize) {
        if depth > 12 {
            return;
        }
        let Some(start) = children_start(parent) else {
            return;
        };
        let mut at = start;
        while at + 8 <= body.len() {
            let small = u32::from_be_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
            let (size, header) = match small {
                0 => (body.len() - at, 8),
                1 if at + 16 <= body.len() => {
                    let mut large = [0_u8; 8];
                    large.copy_from_slice(&body[at + 8..at + 16]);
                    (
                        usize::try_from(u64::from_be_bytes(large)).unwrap_or(usize::MAX),
                        16,
                    )
                }
                1 => return,
                size => (size as usize, 8),
            };
            if size < header || size > body.len() - at {
                return;
            }
            let kind = [body[at + 4], body[at + 5], body[at + 6], body[at + 7]];
            let sample_entry = &parent == b"stsd";
            let kept = if sample_entry {
                children_start(kind).is_some() || matches!(&kind, b"camm" | b"gpmd")
            } else {
                kept_children(parent).contains(&&kind)
            };
            if kept {
                walk(&mut body[at + header..at + size], kind, depth + 1);
            } else {
                body[at + 4..at + 8].copy_from_slice(b"free");
            }
            at += size;
        }
    }
    let header = if moov.get(..4) == Some(&[0, 0, 0, 1]) {
        16
    } else {
        8
    };
    if moov.len() >= header {
        walk(&mut moov[header..], *b"moov", 0);
    }
}

/// The whole `moov` box (header included), found by walking the top-level boxes.
fn find_moov<R: Read + Seek>(reader: &mut R, file_len: u64) -> Result<Vec<u8>, VideoError> {
    let mut position = 0u64;
    let mut first = true;
    for _ in 0..MAX_TOP_LEVEL_BOXES {
        if position >= file_len {
            return Err(if first {
                VideoError::NotMp4
            } else {
                VideoError::Truncated(String::from(
                    "no moov box (the file may have been cut short)",
                ))
            });
        }
        reader.seek(SeekFrom::Start(position))?;
        let mut header = [0u8; 16];
        let available = (file_len - position).min(16) as usize;
        if available < 8 {
            return Err(VideoError::Truncated(String::from(
                "the file ends inside a box header",
            )));
        }
        reader.read_exact(&mut header[..available.min(16)])?;
        let kind: [u8; 4] = [header[4], header[5], header[6], header[7]];
        if first
            && !matches!(
                &kind,
                b"ftyp" | b"moov" | b"mdat" | b"free" | b"skip" | b"wide" | b"pnot"
            )
        {
            return Err(VideoError::NotMp4);
        }
        first = false;
        let small = u64::from(u32::from_be_bytes([
            header[0], header[1], header[2], header[3],
        ]));
        let (size, header_len) = match small {
            0 => (file_len - position, 8),
            1 => {
                if available < 16 {
                    return Err(VideoError::Truncated(String::from(
                        "the file ends inside a box header",
                    )));
                }
                let mut large = [0u8; 8];
                large.copy_from_slice(&header[8..16]);
                (u64::from_be_bytes(large), 16)
            }
            size => (size, 8),
        };
        if size < header_len {
            return Err(VideoError::Malformed(format!(
                "a {} box of {size} bytes is smaller than its header",
                String::from_utf8_lossy(&kind)
            )));
        }
        let end = position.checked_add(size).ok_or_else(|| {
            VideoError::Malformed(String::from("a box size past any file length"))
        })?;
        if &kind == b"moov" {
            if end > file_len {
                return Err(VideoError::Truncated(format!(
                    "the moov box needs {size} bytes, the file has {} after it starts",
                    file_len - position
                )));
            }
            let too_large = || {
                VideoError::TooLarge(format!(
                    "a moov box of {size} bytes (at most {MAX_MOOV_BYTES})"
                ))
            };
            if size > MAX_MOOV_BYTES {
                return Err(too_large());
            }
            let size = usize::try_from(size).map_err(|_| too_large())?;
            reader.seek(SeekFrom::Start(position))?;
            let mut moov = vec![0u8; size];
            reader.read_exact(&mut moov)?;
            return Ok(moov);
        }
        position = end;
    }
    Err(VideoError::Malformed(format!(
        "more than {MAX_TOP_LEVEL_BOXES} top-level boxes before the moov box"
    )))
}

fn track(index: usize, trak: &Trak, movie_timescale: u32) -> Result<Track, VideoError> {
    let handler: [u8; 4] = trak.mdia.hdlr.handler.into();
    let format = trak
        .mdia
        .minf
        .stbl
        .stsd
        .codecs
        .first()
        .map_or(*b"    ", codec_format);
    let empty_edit_seconds = trak
        .edts
        .as_ref()
        .and_then(|edts| edts.elst.as_ref())
        .and_then(|elst| {
            elst.entries
                .iter()
                .rev()
                .find(|entry| entry.media_time.is_none())
        })
        .map_or(0.0, |entry| {
            approximate_unsigned(entry.segment_duration) / f64::from(movie_timescale.max(1))
        });
    let wanted = &handler == b"vide" || matches!(&format, b"camm" | b"gpmd");
    let samples = if wanted {
        sample_table(trak)?
    } else {
        Vec::new()
    };
    Ok(Track {
        index,
        handler,
        format,
        timescale: trak.mdia.mdhd.timescale,
        width: u32::from(trak.tkhd.width.integer()),
        height: u32::from(trak.tkhd.height.integer()),
        empty_edit_seconds,
        samples,
    })
}

fn codec_format(codec: &Codec) -> [u8; 4] {
    match codec {
        Codec::Avc1(_) => *b"avc1",
        Codec::Avc3(_) => *b"avc3",
        Codec::Hev1(_) => *b"hev1",
        Codec::Hvc1(_) => *b"hvc1",
        Codec::Av01(_) => *b"av01",
        Codec::Vp08(_) => *b"vp08",
        Codec::Vp09(_) => *b"vp09",
        Codec::Jpeg(_) => *b"jpeg",
        Codec::Camm(_) => *b"camm",
        Codec::Unknown(kind, _) => (*kind).into(),
        _ => *b"????",
    }
}

/// One entry per sample: offsets from `stsc` and `stco`/`co64`, sizes from `stsz`, decode
/// times from `stts`, composition offsets from `ctts`.
#[allow(clippy::too_many_lines)] // one table after the other, in the order they depend
fn sample_table(trak: &Trak) -> Result<Vec<Sample>, VideoError> {
    let stbl = &trak.mdia.minf.stbl;
    let count = match &stbl.stsz.samples {
        StszSamples::Identical { count, .. } => u64::from(*count),
        StszSamples::Different { sizes } => sizes.len() as u64,
    };
    let too_many = || {
        VideoError::TooLarge(format!(
            "a track of {count} samples (at most {MAX_SAMPLES})"
        ))
    };
    if count > MAX_SAMPLES {
        return Err(too_many());
    }
    let count = usize::try_from(count).map_err(|_| too_many())?;
    let size_of = |sample: usize| match &stbl.stsz.samples {
        StszSamples::Identical { size, .. } => *size,
        StszSamples::Different { sizes } => sizes[sample],
    };
    // Decode times.
    let mut decode_times = Vec::with_capacity(count);
    let mut time = 0u64;
    'stts: for entry in &stbl.stts.entries {
        for _ in 0..entry.sample_count {
            if decode_times.len() == count {
                break 'stts;
            }
            decode_times.push((time, entry.sample_delta));
            time = time.saturating_add(u64::from(entry.sample_delta));
        }
    }
    if decode_times.len() < count {
        return Err(VideoError::Malformed(format!(
            "the time table covers {} of {count} samples",
            decode_times.len()
        )));
    }
    // Composition offsets (version 0 read as signed, as the uploader reads them).
    let mut offsets = vec![0i64; count];
    if let Some(ctts) = &stbl.ctts {
        let mut sample = 0usize;
        'ctts: for entry in &ctts.entries {
            let offset = if entry.sample_offset > i64::from(i32::MAX)
                && entry.sample_offset <= i64::from(u32::MAX)
            {
                entry.sample_offset - (1i64 << 32)
            } else {
                entry.sample_offset
            };
            for _ in 0..entry.sample_count {
                if sample == count {
                    break 'ctts;
                }
                offsets[sample] = offset;
                sample += 1;
            }
        }
    }
    // Chunk offsets, then samples chunk by chunk.
    let chunk_offsets: Vec<u64> = match (&stbl.co64, &stbl.stco) {
        (Some(co64), _) => co64.entries.clone(),
        (None, Some(stco)) => stco
            .entries
            .iter()
            .map(|&offset| u64::from(offset))
            .collect(),
        (None, None) => Vec::new(),
    };
    let stsc = &stbl.stsc.entries;
    let mut samples = Vec::with_capacity(count);
    let mut entry = 0usize;
    for (chunk, &chunk_offset) in chunk_offsets.iter().enumerate() {
        if samples.len() == count {
            break;
        }
        let chunk_number = chunk as u64 + 1;
        while entry + 1 < stsc.len() && u64::from(stsc[entry + 1].first_chunk) <= chunk_number {
            entry += 1;
        }
        let Some(run) = stsc.get(entry) else {
            return Err(VideoError::Malformed(String::from(
                "no sample-to-chunk table",
            )));
        };
        let mut offset = chunk_offset;
        for _ in 0..run.samples_per_chunk {
            let sample = samples.len();
            if sample == count {
                break;
            }
            let size = size_of(sample);
            samples.push(Sample {
                offset,
                size,
                decode_time: decode_times[sample].0,
                duration: decode_times[sample].1,
                composition_offset: offsets[sample],
            });
            offset = offset.saturating_add(u64::from(size));
        }
    }
    if samples.len() < count {
        return Err(VideoError::Malformed(format!(
            "the chunk tables place {} of {count} samples",
            samples.len()
        )));
    }
    Ok(samples)
}

/// Make and model from the movie's `udta`: `@mak`/`@mod` as the uploader writes them (raw
/// UTF-8) or the `QuickTime` copyright-sign forms (a 16-bit length and language before the text).
fn udta_make_model(moov: &[u8]) -> (Option<String>, Option<String>) {
    let Some(udta) = children(moov.get(8..).unwrap_or_default()).find(|(kind, _)| kind == b"udta")
    else {
        return (None, None);
    };
    let mut make = None;
    let mut model = None;
    for (kind, body) in children(udta.1) {
        let text = match kind {
            [b'@', ..] => text(body),
            [0xA9, ..] => body.get(4..).and_then(text),
            _ => None,
        };
        match &kind[1..] {
            b"mak" => make = make.or(text),
            b"mod" => model = model.or(text),
            _ => {}
        }
    }
    (make, model)
}

fn text(bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes)
        .ok()?
        .trim_matches(char::from(0))
        .trim();
    (!text.is_empty() && text.len() <= 256).then(|| text.to_owned())
}

/// The child boxes of a box body, as `(kind, body)`; stops at the first malformed one.
fn children(mut body: &[u8]) -> impl Iterator<Item = ([u8; 4], &[u8])> {
    std::iter::from_fn(move || {
        if body.len() < 8 {
            return None;
        }
        let size = u32::from_be_bytes([body[0], body[1], body[2], body[3]]) as usize;
        let kind = [body[4], body[5], body[6], body[7]];
        if size < 8 || size > body.len() {
            return None;
        }
        let child = &body[8..size];
        body = &body[size..];
        Some((kind, child))
    })
}
