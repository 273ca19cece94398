//! Writes small videos and GPS payloads carrying each kind of track the video readers read, as
//! seeds for the video fuzz targets. The videos hold no picture: their frames are a few zero
//! bytes each (the readers never decode them), so the seeds are the project's own bytes.
//!
//! Usage: `cargo run --example write_sample_videos -- <dir>` writes, under `<dir>`:
//! - `read_video/camm6.mp4`: an `avc1` track of 10 frames (with composition offsets) and a
//!   CAMM track of type 6 points (GPS time, fix), `@mak`/`@mod` in `udta`, as the official
//!   uploader rewrites every video;
//! - `read_video/camm5.mp4`: the same with type 5 points (no time), 64-bit chunk offsets and
//!   an empty edit before the CAMM track;
//! - `read_video/gopro.mp4`: an `avc1` track and a GoPro `gpmd` track of GPMF `GPS5` payloads;
//! - `camm_sample/type5.bin`, `camm_sample/type6.bin`: one CAMM sample of each type;
//! - `gpmf_payload/gps5.bin`, `gpmf_payload/gps9.bin`: one GPMF payload of each GPS stream;
//! - `gpx_track/track.gpx`: a GPX track of five timed points.
//!
//! Each file is read back with the crate's readers before it is written.

use std::fmt::Write as _;
use std::io::Cursor;
use std::path::{Path, PathBuf};

use num_traits::ToPrimitive as _;

use mp4_atom::{
    Avc1, Avcc, Camm, Co64, Codec, Ctts, CttsEntry, Dinf, Dref, DrefEntry, Edts, Elst, ElstEntry,
    Encode, FourCC, Ftyp, Hdlr, Mdhd, Mdia, MetaData, Minf, Moov, Mvhd, Nmhd, Stbl, Stco, Stsc,
    StscEntry, Stsd, Stsz, StszSamples, Stts, SttsEntry, Tkhd, Trak, Url, Visual, Vmhd,
};
use streetlevel_video::gpmf::write::{big_endian, klv, nested};
use streetlevel_video::{Video, camm, gpmf, gpx};

type Error = Box<dyn std::error::Error>;

/// Frames of the picture track, half a second apart.
const FRAMES: u32 = 10;
/// Bytes of each frame (zeros: no picture).
const FRAME_BYTES: u32 = 16;
/// The tracks' timescale: milliseconds.
const TIMESCALE: u32 = 1000;
/// 2021-05-01 10:00:00 UTC.
const START: f64 = 1_619_863_200.0;
/// Seconds since 1904 of 2021-05-01 10:00:05 UTC (the creation time, at the video's end).
const CREATED_1904: u64 = 1_619_863_205 + 2_082_844_800;
/// Why a GPMF payload could not be written (none here comes near the limit).
const TOO_LONG: &str = "a GPMF container over 65,535 bytes";

fn main() -> Result<(), Error> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: write_sample_videos <dir>")?,
    );
    let camm6: Vec<Vec<u8>> = (0..FRAMES).map(camm_type6).collect();
    let camm5: Vec<Vec<u8>> = (0..FRAMES).map(camm_type5).collect();
    let gpmd: Vec<Vec<u8>> = (0..FRAMES / 2)
        .map(gps5_payload)
        .collect::<Option<_>>()
        .ok_or(TOO_LONG)?;
    write_video(&dir, "camm6.mp4", &Metadata::Camm(&camm6), false)?;
    write_video(&dir, "camm5.mp4", &Metadata::Camm(&camm5), true)?;
    write_video(&dir, "gopro.mp4", &Metadata::Gopro(&gpmd), false)?;

    assert!(camm::decode(&camm5[0]).is_some() && camm::decode(&camm6[0]).is_some());
    write(&dir.join("camm_sample/type5.bin"), &camm5[0])?;
    write(&dir.join("camm_sample/type6.bin"), &camm6[0])?;
    let gps9 = gps9_payload().ok_or(TOO_LONG)?;
    assert_eq!(gpmf::parse(&gpmd[0]).points.len(), 2);
    assert_eq!(gpmf::parse(&gps9).points.len(), 2);
    write(&dir.join("gpmf_payload/gps5.bin"), &gpmd[0])?;
    write(&dir.join("gpmf_payload/gps9.bin"), &gps9)?;
    let track = gpx_track();
    assert_eq!(gpx::parse(track.as_bytes())?.len(), 5);
    write(&dir.join("gpx_track/track.gpx"), track.as_bytes())?;
    Ok(())
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, bytes)?;
    Ok(())
}

/// The point of frame `n`: about 5.6 m north-east of the one before (40 km/h at 2 frames a
/// second), in Munich.
fn position(n: u32) -> (f64, f64) {
    (
        48.137_1 + f64::from(n) * 0.000_04,
        11.575_4 + f64::from(n) * 0.000_04,
    )
}

fn camm_type5(n: u32) -> Vec<u8> {
    let (lat, lon) = position(n);
    let mut bytes = vec![0, 0, 5, 0];
    for value in [lat, lon, 519.5 + f64::from(n)] {
        bytes.extend_from_slice(&value.to_le_bytes());
    }
    bytes
}

fn camm_type6(n: u32) -> Vec<u8> {
    let (lat, lon) = position(n);
    let mut bytes = vec![0, 0, 6, 0];
    bytes.extend_from_slice(&(START + f64::from(n) * 0.5).to_le_bytes());
    bytes.extend_from_slice(&3_i32.to_le_bytes());
    bytes.extend_from_slice(&lat.to_le_bytes());
    bytes.extend_from_slice(&lon.to_le_bytes());
    // Altitude, accuracies, velocities east, north, up, speed accuracy.
    for value in [519.5_f32, 3.0, 5.0, 7.9, 7.9, 0.0, 0.5] {
        bytes.extend_from_slice(&value.to_le_bytes());
    }
    bytes
}

/// Scaled integer degrees and millimetres.
fn scaled(n: u32) -> [i32; 3] {
    let (lat, lon) = position(n);
    // Seconds of a short walk: every value is far inside `i32`.
    let n = i32::try_from(n).unwrap_or(i32::MAX);
    [
        (lat * 1e7).round().to_i32().unwrap_or(i32::MAX),
        (lon * 1e7).round().to_i32().unwrap_or(i32::MAX),
        519_500 + n * 1000,
    ]
}

/// The GPMF payload of second `second`: a device name, a `GPS5` stream with its time, fix,
/// precision and scales, and the two points of that second.
fn gps5_payload(second: u32) -> Option<Vec<u8>> {
    let mut stream = klv(*b"GPSF", b'L', 4, 1, &3_u32.to_be_bytes());
    let time = format!("210501100{second}.000");
    stream.extend(klv(*b"GPSU", b'U', 16, 1, time.as_bytes()));
    stream.extend(klv(*b"GPSP", b'S', 2, 1, &150_u16.to_be_bytes()));
    stream.extend(klv(
        *b"SCAL",
        b'l',
        4,
        5,
        &big_endian(&[10_000_000, 10_000_000, 1000, 1000, 100]),
    ));
    let mut points = Vec::new();
    for n in [second * 2, second * 2 + 1] {
        let [lat, lon, alt] = scaled(n);
        points.extend(big_endian(&[lat, lon, alt, 11_100, 0]));
    }
    stream.extend(klv(*b"GPS5", b'l', 20, 2, &points));
    let mut device = klv(*b"DVNM", b'c', 10, 1, b"HERO8 Test");
    device.extend(nested(*b"STRM", &stream)?);
    nested(*b"DEVC", &device)
}

/// A GPMF payload of `GPS9` (HERO11 on): two points with their own day, time, DOP and fix.
fn gps9_payload() -> Option<Vec<u8>> {
    let mut stream = klv(
        *b"SCAL",
        b'l',
        4,
        9,
        &big_endian(&[10_000_000, 10_000_000, 1000, 1000, 100, 1, 1000, 100, 1]),
    );
    stream.extend(klv(*b"TYPE", b'c', 9, 1, b"lllllllSS"));
    let mut rows = Vec::new();
    for n in 0..2 {
        let [lat, lon, alt] = scaled(n);
        // Day 7791 after 2000-01-01 is 2021-05-01; 10:00:00 and a half second later.
        rows.extend(big_endian(&[
            lat,
            lon,
            alt,
            11_100,
            0,
            7791,
            36_000_000 + i32::try_from(n).unwrap_or(i32::MAX) * 500,
        ]));
        rows.extend_from_slice(&150_u16.to_be_bytes());
        rows.extend_from_slice(&3_u16.to_be_bytes());
    }
    stream.extend(klv(*b"GPS9", b'?', 32, 2, &rows));
    nested(*b"DEVC", &nested(*b"STRM", &stream)?)
}

fn gpx_track() -> String {
    let mut gpx = String::from(
        "<?xml version=\"1.0\"?>\n<gpx version=\"1.1\" creator=\"streetlevel\" \
         xmlns=\"http://www.topografix.com/GPX/1/1\">\n<trk><trkseg>\n",
    );
    for n in 0..5 {
        let (lat, lon) = position(n * 2);
        let _ = writeln!(
            gpx,
            "<trkpt lat=\"{lat:.7}\" lon=\"{lon:.7}\"><ele>{:.1}</ele>\
             <time>2021-05-01T10:00:0{n}Z</time></trkpt>",
            519.5 + f64::from(n)
        );
    }
    gpx.push_str("</trkseg></trk>\n</gpx>\n");
    gpx
}

/// The metadata track of a sample video.
enum Metadata<'a> {
    /// CAMM samples, one per frame.
    Camm(&'a [Vec<u8>]),
    /// GoPro GPMF payloads, one per second.
    Gopro(&'a [Vec<u8>]),
}

/// Writes `ftyp`, `moov` and `mdat`: the frames, then the metadata samples, each track's
/// samples in one chunk.
fn write_video(dir: &Path, name: &str, metadata: &Metadata<'_>, co64: bool) -> Result<(), Error> {
    let mut ftyp = Vec::new();
    Ftyp {
        major_brand: FourCC::new(b"isom"),
        minor_version: 512,
        compatible_brands: vec![FourCC::new(b"isom"), FourCC::new(b"mp41")],
    }
    .encode(&mut ftyp)?;
    let (samples, sample_ms) = match metadata {
        Metadata::Camm(samples) => (*samples, 500),
        Metadata::Gopro(samples) => (*samples, 1000),
    };
    // Laid out twice: the first time to learn the moov's size, which the offsets depend on.
    let mut moov_len = 0;
    let moov = loop {
        let frames_at = (ftyp.len() + moov_len + 8) as u64;
        let metadata_at = frames_at + u64::from(FRAMES * FRAME_BYTES);
        let picture = picture_trak(frames_at, co64);
        let data = data_trak(metadata, samples, sample_ms, metadata_at, co64);
        let mut moov = Vec::new();
        Moov {
            mvhd: Mvhd {
                creation_time: CREATED_1904,
                modification_time: CREATED_1904,
                timescale: TIMESCALE,
                duration: u64::from(FRAMES * 500),
                next_track_id: 3,
                ..Mvhd::default()
            },
            trak: vec![picture, data],
            ..Moov::default()
        }
        .encode(&mut moov)?;
        append_udta(&mut moov);
        if moov.len() == moov_len {
            break moov;
        }
        moov_len = moov.len();
    };
    let mut file = ftyp;
    file.extend_from_slice(&moov);
    let media: Vec<u8> = std::iter::repeat_n(0_u8, (FRAMES * FRAME_BYTES) as usize)
        .chain(samples.iter().flatten().copied())
        .collect();
    file.extend_from_slice(&u32::try_from(media.len() + 8)?.to_be_bytes());
    file.extend_from_slice(b"mdat");
    file.extend_from_slice(&media);
    if matches!(metadata, Metadata::Gopro(_)) {
        // mp4-atom writes no sample entry it does not know: the CAMM entry (the same eight
        // bytes of a metadata sample entry) is renamed to GoPro's.
        let at = file
            .windows(4)
            .rposition(|window| window == b"camm")
            .ok_or("no camm entry")?;
        file[at..at + 4].copy_from_slice(b"gpmd");
    }
    let video = Video::from_reader(&mut Cursor::new(&file), file.len() as u64, None, START)?;
    assert!(video.plan(streetlevel_video::Sampling::default()).len() >= 2);
    write(&dir.join("read_video").join(name), &file)
}

/// `@mak` and `@mod` in the movie's `udta`, as the uploader writes them (raw UTF-8); the moov's
/// size grows to hold them.
fn append_udta(moov: &mut Vec<u8>) {
    let mut udta = Vec::new();
    for (kind, text) in [(b"@mak", "streetlevel"), (b"@mod", "seed writer")] {
        udta.extend_from_slice(&box_size(text.len()).to_be_bytes());
        udta.extend_from_slice(kind);
        udta.extend_from_slice(text.as_bytes());
    }
    moov.extend_from_slice(&box_size(udta.len()).to_be_bytes());
    moov.extend_from_slice(b"udta");
    moov.extend_from_slice(&udta);
    let size = u32::try_from(moov.len()).unwrap_or(u32::MAX);
    moov[..4].copy_from_slice(&size.to_be_bytes());
}

/// The size of a box holding `body_len` bytes after its 8-byte header (the small boxes
/// written here are far below 4 GiB).
fn box_size(body_len: usize) -> u32 {
    u32::try_from(8 + body_len).unwrap_or(u32::MAX)
}

fn chunk_offsets(offset: u64, co64: bool) -> (Option<Stco>, Option<Co64>) {
    if co64 {
        (
            None,
            Some(Co64 {
                entries: vec![offset],
            }),
        )
    } else {
        (
            Some(Stco {
                entries: vec![u32::try_from(offset).unwrap_or(u32::MAX)],
            }),
            None,
        )
    }
}

fn one_chunk(samples: u32) -> Stsc {
    Stsc {
        entries: vec![StscEntry {
            first_chunk: 1,
            samples_per_chunk: samples,
            sample_description_index: 1,
        }],
    }
}

fn dinf() -> Dinf {
    Dinf {
        dref: Dref {
            entries: vec![DrefEntry::Url(Url::default())],
        },
    }
}

/// Ten frames of 32 x 32, half a second apart, with composition offsets as B-frames have.
fn picture_trak(frames_at: u64, co64: bool) -> Trak {
    let (stco, co64) = chunk_offsets(frames_at, co64);
    Trak {
        tkhd: Tkhd {
            track_id: 1,
            duration: u64::from(FRAMES * 500),
            enabled: true,
            in_movie: true,
            width: 32.into(),
            height: 32.into(),
            ..Tkhd::default()
        },
        mdia: Mdia {
            mdhd: Mdhd {
                timescale: TIMESCALE,
                duration: u64::from(FRAMES * 500),
                language: String::from("und"),
                ..Mdhd::default()
            },
            hdlr: Hdlr {
                handler: FourCC::new(b"vide"),
                name: String::from("VideoHandler"),
            },
            minf: Minf {
                vmhd: Some(Vmhd::default()),
                dinf: dinf(),
                stbl: Stbl {
                    stsd: Stsd {
                        codecs: vec![Codec::Avc1(Avc1 {
                            visual: Visual {
                                data_reference_index: 1,
                                width: 32,
                                height: 32,
                                ..Visual::default()
                            },
                            avcc: Avcc {
                                configuration_version: 1,
                                avc_profile_indication: 66,
                                profile_compatibility: 0,
                                avc_level_indication: 10,
                                length_size: 4,
                                sequence_parameter_sets: vec![vec![0x67, 66, 0, 10, 0xF8]],
                                picture_parameter_sets: vec![vec![0x68, 0xCE, 0x38, 0x80]],
                                ext: None,
                            },
                            ..Avc1::default()
                        })],
                    },
                    stts: Stts {
                        entries: vec![SttsEntry {
                            sample_count: FRAMES,
                            sample_delta: 500,
                        }],
                    },
                    ctts: Some(Ctts {
                        entries: vec![
                            CttsEntry {
                                sample_count: 1,
                                sample_offset: 1000,
                            },
                            CttsEntry {
                                sample_count: FRAMES - 1,
                                sample_offset: 0,
                            },
                        ],
                    }),
                    stsc: one_chunk(FRAMES),
                    stsz: Stsz {
                        samples: StszSamples::Identical {
                            count: FRAMES,
                            size: FRAME_BYTES,
                        },
                    },
                    stco,
                    co64,
                    ..Stbl::default()
                },
                ..Minf::default()
            },
        },
        ..Trak::default()
    }
}

/// The metadata track: `samples` of `sample_ms` each; with 64-bit offsets (the second CAMM
/// video), also an empty edit of 0.1 s before it.
fn data_trak(
    metadata: &Metadata<'_>,
    samples: &[Vec<u8>],
    sample_ms: u32,
    metadata_at: u64,
    co64: bool,
) -> Trak {
    let count = u32::try_from(samples.len()).unwrap_or(u32::MAX);
    let duration = u64::from(count * sample_ms);
    let (stco, co64_box) = chunk_offsets(metadata_at, co64);
    let handler = match metadata {
        Metadata::Camm(_) => b"camm",
        Metadata::Gopro(_) => b"meta",
    };
    let edts = co64.then(|| Edts {
        elst: Some(Elst {
            entries: vec![
                ElstEntry {
                    segment_duration: 100,
                    media_time: None,
                    ..ElstEntry::default()
                },
                ElstEntry {
                    segment_duration: duration,
                    media_time: Some(0),
                    ..ElstEntry::default()
                },
            ],
        }),
    });
    Trak {
        tkhd: Tkhd {
            track_id: 2,
            duration,
            enabled: true,
            in_movie: true,
            ..Tkhd::default()
        },
        edts,
        mdia: Mdia {
            mdhd: Mdhd {
                timescale: TIMESCALE,
                duration,
                language: String::from("und"),
                ..Mdhd::default()
            },
            hdlr: Hdlr {
                handler: FourCC::new(handler),
                name: String::from("MetadataHandler"),
            },
            minf: Minf {
                nmhd: Some(Nmhd {}),
                dinf: dinf(),
                stbl: Stbl {
                    stsd: Stsd {
                        codecs: vec![Codec::Camm(Camm {
                            metadata: MetaData {
                                data_reference_index: 1,
                            },
                        })],
                    },
                    stts: Stts {
                        entries: vec![SttsEntry {
                            sample_count: count,
                            sample_delta: sample_ms,
                        }],
                    },
                    stsc: one_chunk(count),
                    stsz: Stsz {
                        samples: StszSamples::Different {
                            sizes: samples
                                .iter()
                                .map(|sample| u32::try_from(sample.len()).unwrap_or(u32::MAX))
                                .collect(),
                        },
                    },
                    stco,
                    co64: co64_box,
                    ..Stbl::default()
                },
                ..Minf::default()
            },
        },
        ..Trak::default()
    }
}
