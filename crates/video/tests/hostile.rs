//! Hostile bytes: any input gives a container, GPS points or an error, never a panic, and no
//! size written in a box is trusted for an allocation (a `moov` over `MAX_MOOV_BYTES`, a table
//! over `MAX_SAMPLES` is refused). Inputs are arbitrary bytes, and the real GoPro clip's `moov`
//! box (read from `../shared/data/video/` at test time) with bytes changed at random.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    clippy::expect_used,
    clippy::float_cmp
)]

use std::io::Cursor;
use std::path::Path;

use proptest::prelude::*;
use streetlevel_video::{MAX_SAMPLES, VideoError, camm, gpmf, gpx, read_container};

fn read(bytes: &[u8]) -> Result<streetlevel_video::Container, VideoError> {
    read_container(&mut Cursor::new(bytes), bytes.len() as u64)
}

/// `ftyp` and `moov` of the GoPro clip (no media data: its samples lie past the end).
fn gopro_boxes() -> Option<Vec<u8>> {
    static BOXES: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
    BOXES.get_or_init(read_gopro_boxes).clone()
}

fn read_gopro_boxes() -> Option<Vec<u8>> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/video/max-heromode.mp4");
    let Ok(bytes) = std::fs::read(&path) else {
        assert!(
            std::env::var_os("CI").is_none_or(|value| value.is_empty() || value == "false"),
            "{} is missing",
            path.display()
        );
        return None;
    };
    let moov = bytes
        .windows(4)
        .position(|window| window == b"moov")
        .unwrap()
        - 4;
    let mut boxes = bytes[..20].to_vec(); // ftyp
    boxes.extend_from_slice(&bytes[moov..]);
    Some(boxes)
}

#[test]
fn the_real_moov_reads_and_its_claims_are_bounded() {
    let Some(boxes) = gopro_boxes() else { return };
    let container = read(&boxes).unwrap();
    assert_eq!(container.tracks.len(), 5);
    assert_eq!(container.tracks[0].samples.len(), 315);
    assert_eq!(&container.tracks[3].format, b"gpmd");
    // The picture track's sample sizes replaced by a claim of u32::MAX samples of 1000 bytes:
    // refused, not allocated.
    let stsz = boxes
        .windows(4)
        .position(|window| window == b"stsz")
        .unwrap()
        - 4;
    let old_len = u32::from_be_bytes(boxes[stsz..stsz + 4].try_into().unwrap()) as usize;
    let mut claim = 20u32.to_be_bytes().to_vec();
    claim.extend_from_slice(b"stsz\0\0\0\0");
    claim.extend_from_slice(&1000u32.to_be_bytes());
    claim.extend_from_slice(&u32::MAX.to_be_bytes());
    let claimed = replace_box(&boxes, stsz, old_len, &claim);
    let refused = read(&claimed);
    assert!(
        matches!(&refused, Err(VideoError::TooLarge(reason)) if reason.contains(&MAX_SAMPLES.to_string())),
        "{refused:?}"
    );
    // A moov box longer than the file.
    let moov = boxes
        .windows(4)
        .position(|window| window == b"moov")
        .unwrap()
        - 4;
    let mut long = boxes.clone();
    long[moov..moov + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    assert!(matches!(read(&long), Err(VideoError::Truncated(_))));
}

/// `boxes` with the box at `at` (of `len` bytes) replaced by `new`, every box around it
/// (`moov`, `trak`, `mdia`, `minf`, `stbl`) resized to match.
fn replace_box(boxes: &[u8], at: usize, len: usize, new: &[u8]) -> Vec<u8> {
    let delta = i64::try_from(new.len()).unwrap() - i64::try_from(len).unwrap();
    let mut out = boxes.to_vec();
    let mut position = 0;
    let mut end = boxes.len();
    while position + 8 <= end {
        let size = u32::from_be_bytes(boxes[position..position + 4].try_into().unwrap()) as usize;
        let kind = &boxes[position + 4..position + 8];
        if position < at
            && at < position + size
            && matches!(kind, b"moov" | b"trak" | b"mdia" | b"minf" | b"stbl")
        {
            out[position..position + 4].copy_from_slice(
                &u32::try_from(i64::try_from(size).unwrap() + delta)
                    .unwrap()
                    .to_be_bytes(),
            );
            end = position + size;
            position += 8;
        } else {
            position += size.max(8);
        }
    }
    out.splice(at..at + len, new.iter().copied());
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = read(&bytes);
        let _ = camm::decode(&bytes);
        let _ = gpmf::parse(&bytes);
        let _ = gpx::parse(&bytes);
        let mut boxed = b"\0\0\0\x08ftyp".to_vec();
        boxed.extend_from_slice(&u32::try_from(bytes.len() + 8).unwrap().to_be_bytes());
        boxed.extend_from_slice(b"moov");
        boxed.extend_from_slice(&bytes);
        let _ = read(&boxed);
    }

    #[test]
    fn a_real_moov_with_bytes_changed_never_panics(
        changes in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..16)
    ) {
        if let Some(mut boxes) = gopro_boxes() {
            // Past the ftyp and the moov header, so that the moov is found and decoded.
            for (index, byte) in changes {
                let at = 28 + index.index(boxes.len() - 28);
                boxes[at] = byte;
            }
            if let Ok(container) = read(&boxes) {
                for track in &container.tracks {
                    prop_assert!(track.samples.len() as u64 <= MAX_SAMPLES);
                }
            }
        }
    }

    #[test]
    fn gpmf_payloads_with_bytes_changed_never_panic(
        changes in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..16)
    ) {
        let mut payload = b"DEVC\0\x01\0\x40STRM\0\x01\0\x38SCAL\x6c\x04\0\x05".to_vec();
        payload.extend_from_slice(&[0, 0x98, 0x96, 0x80, 0, 0x98, 0x96, 0x80, 0, 0, 3, 0xE8, 0, 0, 3, 0xE8, 0, 0, 0, 100]);
        payload.extend_from_slice(b"GPS5\x6c\x14\0\x01");
        payload.extend_from_slice(&[0x13, 0xBE, 0x5C, 0x07, 0xB9, 0x30, 0xE5, 0xF9, 0, 0, 0x30, 0xD4, 0, 0, 0, 0, 0, 0, 0, 0]);
        for (index, byte) in changes {
            let at = index.index(payload.len());
            payload[at] = byte;
        }
        let _ = gpmf::parse(&payload);
    }
}

/// `mp4-atom`'s `sgpd` decoder, given version 0, an unknown grouping type and 2^32 - 1
/// entries, pushes entries that consume no bytes until memory runs out (the `read_video` fuzz
/// target found it): boxes nothing here reads are skipped unread, so such a box in a sample
/// table, or in a picture sample entry, costs nothing and the video reads as without it.
#[test]
fn a_sample_group_claiming_four_billion_entries_is_not_decoded() {
    let seed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/read_video/camm6.mp4");
    let boxes = std::fs::read(seed).unwrap();
    let plain = read(&boxes).unwrap();
    let mut sgpd = 20u32.to_be_bytes().to_vec();
    sgpd.extend_from_slice(b"sgpd\0\0\0\0xxxx");
    sgpd.extend_from_slice(&u32::MAX.to_be_bytes());
    for parent in [b"stco", b"avcC"] {
        let at = boxes
            .windows(4)
            .position(|window| window == parent)
            .unwrap()
            - 4;
        let len = u32::from_be_bytes(boxes[at..at + 4].try_into().unwrap()) as usize;
        let mut new = boxes[at..at + len].to_vec();
        new.extend_from_slice(&sgpd);
        let grown = replace_box_in(&boxes, at, len, &new);
        let container = read(&grown).unwrap_or_else(|error| panic!("{parent:?}: {error:?}"));
        assert_eq!(container.tracks.len(), plain.tracks.len());
        assert_eq!(container.tracks[0].samples, plain.tracks[0].samples);
    }
}

/// [`replace_box`], also resizing a picture sample entry and the sample description around it.
fn replace_box_in(boxes: &[u8], at: usize, len: usize, new: &[u8]) -> Vec<u8> {
    let delta = i64::try_from(new.len()).unwrap() - i64::try_from(len).unwrap();
    let mut out = replace_box(boxes, at, len, new);
    for kind in [b"stsd", b"avc1"] {
        let position = boxes.windows(4).position(|window| window == kind).unwrap() - 4;
        let size = u32::from_be_bytes(boxes[position..position + 4].try_into().unwrap()) as usize;
        if position < at && at < position + size {
            let size = u32::from_be_bytes(out[position..position + 4].try_into().unwrap());
            out[position..position + 4].copy_from_slice(
                &u32::try_from(i64::from(size) + delta)
                    .unwrap()
                    .to_be_bytes(),
            );
        }
    }
    out
}
