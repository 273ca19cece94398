//! Writing the blurred picture: encoded anew, with the original's Exif, XMP and colour
//! profile segments copied over, and the Exif thumbnail (an unblurred copy of the picture)
//! wiped.

use bytes::Bytes;
use img_parts::jpeg::{Jpeg, JpegSegment, markers};
use streetlevel_ingest::Rgb;

use crate::BlurError;

/// JPEG quality of a blurred original (1 to 100): close to what cameras write, so that the
/// published original stays worth downloading.
pub const BLURRED_QUALITY: u8 = 90;

const EXIF_PREFIX: &[u8] = b"Exif\0\0";
const XMP_PREFIXES: [&[u8]; 2] = [
    b"http://ns.adobe.com/xap/1.0/\0",
    b"http://ns.adobe.com/xmp/extension/\0",
];
const ICC_PREFIX: &[u8] = b"ICC_PROFILE\0";

/// `image` encoded at [`BLURRED_QUALITY`], its colour sampled as in `original` (a camera's
/// 4:2:0 stays 4:2:0: half the blocks to encode of 4:4:4, and no detail the original had is
/// lost), with the metadata segments of `original`: Exif (with its thumbnail wiped), XMP
/// (standard and extended) and the ICC profile. Other application segments are left out: a
/// Photoshop block or an MPF index can hold or point to further unblurred copies.
pub(crate) fn encode_with_metadata(image: &Rgb, original: &[u8]) -> Result<Vec<u8>, BlurError> {
    let encode_error = |error: &dyn std::fmt::Display| BlurError::Encode(error.to_string());
    let width = u16::try_from(image.width).map_err(|error| encode_error(&error))?;
    let height = u16::try_from(image.height).map_err(|error| encode_error(&error))?;
    let (kept, sampling) = metadata_segments(original)?;
    let mut encoded = Vec::new();
    let mut encoder = jpeg_encoder::Encoder::new(&mut encoded, BLURRED_QUALITY);
    encoder.set_sampling_factor(sampling);
    encoder
        .encode(&image.pixels, width, height, jpeg_encoder::ColorType::Rgb)
        .map_err(|error| encode_error(&error))?;
    if kept.is_empty() {
        return Ok(encoded);
    }
    let mut jpeg = Jpeg::from_bytes(Bytes::from(encoded)).map_err(|error| encode_error(&error))?;
    let has_exif = kept.iter().any(|segment| {
        segment.marker() == markers::APP1 && segment.contents().starts_with(EXIF_PREFIX)
    });
    let segments = jpeg.segments_mut();
    if has_exif {
        // An Exif file starts with its APP1; the encoder's JFIF header would come first.
        segments.retain(|segment| segment.marker() != markers::APP0);
    }
    let at = segments
        .iter()
        .position(|segment| segment.marker() != markers::APP0)
        .unwrap_or(segments.len());
    for (offset, segment) in kept.into_iter().enumerate() {
        segments.insert(at + offset, segment);
    }
    Ok(jpeg.encoder().bytes().to_vec())
}

/// The segments of `original` that are kept, in their order, and the chroma sampling of its
/// frame.
fn metadata_segments(
    original: &[u8],
) -> Result<(Vec<JpegSegment>, jpeg_encoder::SamplingFactor), BlurError> {
    let jpeg = Jpeg::from_bytes(Bytes::copy_from_slice(original))
        .map_err(|error| BlurError::Decode(error.to_string()))?;
    let mut kept = Vec::new();
    let mut sampling = jpeg_encoder::SamplingFactor::F_1_1;
    for segment in jpeg.segments() {
        let contents = segment.contents();
        match segment.marker() {
            // A frame header (baseline, extended or progressive Huffman).
            0xC0..=0xC2 => sampling = frame_sampling(contents),
            markers::APP1 if contents.starts_with(EXIF_PREFIX) => {
                let mut exif = contents.to_vec();
                wipe_exif_thumbnail(&mut exif[EXIF_PREFIX.len()..]);
                kept.push(JpegSegment::new_with_contents(
                    markers::APP1,
                    Bytes::from(exif),
                ));
            }
            markers::APP1
                if XMP_PREFIXES
                    .iter()
                    .any(|prefix| contents.starts_with(prefix)) =>
            {
                kept.push(segment.clone());
            }
            markers::APP2 if contents.starts_with(ICC_PREFIX) => kept.push(segment.clone()),
            _ => {}
        }
    }
    Ok((kept, sampling))
}

/// The chroma sampling of a frame header's contents: 4:2:0 or 4:2:2 when its luma is sampled
/// twice as densely as both chroma components, else 4:4:4 (also for grey and anything
/// unusual).
fn frame_sampling(frame: &[u8]) -> jpeg_encoder::SamplingFactor {
    use jpeg_encoder::SamplingFactor;
    // Precision, height, width, component count, then id, sampling and table per component.
    let sampling_of = |component: usize| frame.get(6 + 3 * component + 1).copied();
    if frame.get(5) != Some(&3) || sampling_of(1) != Some(0x11) || sampling_of(2) != Some(0x11) {
        return SamplingFactor::F_1_1;
    }
    match sampling_of(0) {
        Some(0x22) => SamplingFactor::F_2_2,
        Some(0x21) => SamplingFactor::F_2_1,
        _ => SamplingFactor::F_1_1,
    }
}

/// Wipes the thumbnail of a TIFF structure (Exif's IFD1: a small JPEG of the unblurred
/// picture) and unlinks IFD1, in place. A structure that cannot be followed is left as it is
/// where it cannot be read; every offset is checked against the buffer.
pub(crate) fn wipe_exif_thumbnail(tiff: &mut [u8]) {
    let little = match tiff.get(0..2) {
        Some(b"II") => true,
        Some(b"MM") => false,
        _ => return,
    };
    let read16 = |bytes: &[u8], at: usize| -> Option<usize> {
        let pair: [u8; 2] = bytes.get(at..at + 2)?.try_into().ok()?;
        Some(usize::from(if little {
            u16::from_le_bytes(pair)
        } else {
            u16::from_be_bytes(pair)
        }))
    };
    let read32 = |bytes: &[u8], at: usize| -> Option<usize> {
        let quad: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
        Some(if little {
            u32::from_le_bytes(quad)
        } else {
            u32::from_be_bytes(quad)
        } as usize)
    };
    let Some(ifd0) = read32(tiff, 4) else { return };
    let Some(entries0) = read16(tiff, ifd0) else {
        return;
    };
    let link = ifd0 + 2 + 12 * entries0;
    let Some(ifd1) = read32(tiff, link) else {
        return;
    };
    if ifd1 == 0 {
        return;
    }
    if let Some(entries1) = read16(tiff, ifd1) {
        let mut offset = None;
        let mut length = None;
        for entry in 0..entries1 {
            let at = ifd1 + 2 + 12 * entry;
            match read16(tiff, at) {
                // JPEGInterchangeFormat and its length.
                Some(0x0201) => offset = read32(tiff, at + 8),
                Some(0x0202) => length = read32(tiff, at + 8),
                // StripOffsets of an uncompressed thumbnail.
                Some(0x0111) => offset = offset.or(read32(tiff, at + 8)),
                Some(0x0117) => length = length.or(read32(tiff, at + 8)),
                _ => {}
            }
        }
        if let (Some(offset), Some(length)) = (offset, length) {
            let end = offset.saturating_add(length).min(tiff.len());
            if offset < end {
                tiff[offset..end].fill(0);
            }
        }
    }
    if let Some(slot) = tiff.get_mut(link..link + 4) {
        slot.fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A little-endian TIFF structure: IFD0 with one entry, linked to IFD1 whose thumbnail
    /// is the bytes `0xAB` x 16.
    fn tiff_with_thumbnail() -> Vec<u8> {
        let mut tiff = Vec::new();
        tiff.extend_from_slice(b"II*\0");
        tiff.extend_from_slice(&8u32.to_le_bytes());
        // IFD0 at 8: one entry (Orientation = 1), then the link to IFD1 at 26.
        tiff.extend_from_slice(&1u16.to_le_bytes());
        tiff.extend_from_slice(&[0x12, 0x01, 3, 0, 1, 0, 0, 0, 1, 0, 0, 0]);
        tiff.extend_from_slice(&26u32.to_le_bytes());
        // IFD1 at 26: offset and length of the thumbnail at 56, no further IFD.
        tiff.extend_from_slice(&2u16.to_le_bytes());
        tiff.extend_from_slice(&[0x01, 0x02, 4, 0, 1, 0, 0, 0]);
        tiff.extend_from_slice(&56u32.to_le_bytes());
        tiff.extend_from_slice(&[0x02, 0x02, 4, 0, 1, 0, 0, 0]);
        tiff.extend_from_slice(&16u32.to_le_bytes());
        tiff.extend_from_slice(&0u32.to_le_bytes());
        assert_eq!(tiff.len(), 56);
        tiff.extend_from_slice(&[0xAB; 16]);
        tiff
    }

    #[test]
    fn the_original_chroma_sampling_is_kept() {
        use jpeg_encoder::SamplingFactor;
        let frame = |sampling: [u8; 3]| {
            let mut frame = vec![8, 0, 16, 0, 16, 3];
            for (id, sampling) in (1u8..).zip(sampling) {
                frame.extend_from_slice(&[id, sampling, u8::from(id > 1)]);
            }
            frame
        };
        assert_eq!(
            frame_sampling(&frame([0x22, 0x11, 0x11])),
            SamplingFactor::F_2_2
        );
        assert_eq!(
            frame_sampling(&frame([0x21, 0x11, 0x11])),
            SamplingFactor::F_2_1
        );
        assert_eq!(
            frame_sampling(&frame([0x11, 0x11, 0x11])),
            SamplingFactor::F_1_1
        );
        // Unusual layouts, grey and truncated headers are encoded at full chroma.
        assert_eq!(
            frame_sampling(&frame([0x22, 0x21, 0x11])),
            SamplingFactor::F_1_1
        );
        assert_eq!(
            frame_sampling(&[8, 0, 16, 0, 16, 1, 1, 0x11, 0]),
            SamplingFactor::F_1_1
        );
        assert_eq!(frame_sampling(&[8, 0, 16]), SamplingFactor::F_1_1);
    }

    #[test]
    fn the_exif_thumbnail_is_wiped_and_unlinked() {
        let mut tiff = tiff_with_thumbnail();
        wipe_exif_thumbnail(&mut tiff);
        assert!(tiff[56..].iter().all(|&byte| byte == 0));
        assert_eq!(&tiff[22..26], &[0, 0, 0, 0]);
        // IFD0 itself is kept.
        assert_eq!(&tiff[8..12], &[1, 0, 0x12, 0x01]);
    }

    #[test]
    fn a_damaged_structure_is_left_alone_without_a_panic() {
        for length in 0..56 {
            let mut tiff = tiff_with_thumbnail();
            tiff.truncate(length);
            let before = tiff.clone();
            wipe_exif_thumbnail(&mut tiff);
            // Nothing is written outside the buffer; what is wiped is only ever zeroed.
            assert_eq!(tiff.len(), before.len());
        }
        let mut hostile = b"MM\0*\xff\xff\xff\xff".to_vec();
        wipe_exif_thumbnail(&mut hostile);
    }
}
