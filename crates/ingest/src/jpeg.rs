//! The JPEG container, read with `img-parts`: the segments up to the first scan, the frame
//! header (SOF) with the stored pixel size, and the first Exif and XMP segments.

use bytes::Bytes;
use img_parts::jpeg::{Jpeg, JpegSegment, markers};

use crate::IngestError;

/// What starts the payload of an Exif APP1 segment; the TIFF structure follows.
pub(crate) const EXIF_PREFIX: &[u8] = b"Exif\0\0";

/// What starts the payload of the standard XMP APP1 segment; the XML packet follows.
pub(crate) const XMP_PREFIX: &[u8] = b"http://ns.adobe.com/xap/1.0/\0";

/// The frame header: how the image data is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameHeader {
    /// The SOF marker (`0xC0` baseline, `0xC2` progressive, ...).
    pub marker: u8,
    /// Bits per sample.
    pub precision: u8,
    /// Stored width in pixels, never 0.
    pub width: u32,
    /// Stored height in pixels, never 0.
    pub height: u32,
    /// Number of colour components (1 grey, 3 YCbCr, 4 CMYK or YCCK).
    pub components: u8,
}

/// A parsed JPEG: its segments up to and including the first scan, whose entropy-coded data
/// holds the rest of the file untouched.
pub(crate) struct JpegFile {
    /// The segments, for rewriting.
    pub jpeg: Jpeg,
    /// The first frame header.
    pub frame: FrameHeader,
}

impl JpegFile {
    /// Parses the segments of `bytes`; a file that does not reach its first scan is
    /// [`IngestError::Truncated`].
    pub fn parse(bytes: &[u8]) -> Result<JpegFile, IngestError> {
        if !bytes.starts_with(&[markers::P, markers::SOI]) {
            return Err(IngestError::NotJpeg);
        }
        let jpeg =
            Jpeg::from_bytes(Bytes::copy_from_slice(bytes)).map_err(|error| match error {
                img_parts::Error::WrongSignature => IngestError::NotJpeg,
                _ => IngestError::Truncated,
            })?;
        let sof = jpeg
            .segments()
            .iter()
            .find(|segment| is_sof(segment.marker()))
            .ok_or_else(|| {
                IngestError::FrameHeader(String::from("no frame header before the image data"))
            })?;
        let frame = parse_frame_header(sof)?;
        Ok(JpegFile { jpeg, frame })
    }

    /// The TIFF structure of the first Exif APP1 segment, if any.
    pub fn exif(&self) -> Option<&[u8]> {
        self.first_app1_with_prefix(EXIF_PREFIX)
    }

    /// The XML packet of the first standard XMP APP1 segment, if any.
    pub fn xmp(&self) -> Option<&[u8]> {
        self.first_app1_with_prefix(XMP_PREFIX)
    }

    fn first_app1_with_prefix(&self, prefix: &[u8]) -> Option<&[u8]> {
        self.jpeg
            .segments()
            .iter()
            .filter(|segment| segment.marker() == markers::APP1)
            .find_map(|segment| segment.contents().strip_prefix(prefix))
    }
}

/// Whether `marker` starts a frame header (SOF0–SOF15 without DHT, JPG and DAC).
fn is_sof(marker: u8) -> bool {
    matches!(
        marker,
        markers::SOF0..=markers::SOF3
            | markers::SOF5..=markers::SOF7
            | markers::SOF9..=markers::SOF11
            | markers::SOF13..=markers::SOF15
    )
}

fn parse_frame_header(segment: &JpegSegment) -> Result<FrameHeader, IngestError> {
    let contents = segment.contents();
    let [
        precision,
        height_high,
        height_low,
        width_high,
        width_low,
        components,
        ..,
    ] = contents[..]
    else {
        return Err(IngestError::FrameHeader(format!(
            "frame header of {} bytes is shorter than 6",
            contents.len()
        )));
    };
    let height = u32::from(u16::from_be_bytes([height_high, height_low]));
    let width = u32::from(u16::from_be_bytes([width_high, width_low]));
    if width == 0 || height == 0 {
        // A height of 0 means "given by a DNL segment after the first scan", which no camera
        // writes and which would make the size unknown until the image is decoded.
        return Err(IngestError::FrameHeader(format!(
            "frame header gives a size of {width}x{height}"
        )));
    }
    if components == 0 {
        return Err(IngestError::FrameHeader(String::from(
            "frame header lists no colour component",
        )));
    }
    Ok(FrameHeader {
        marker: segment.marker(),
        precision,
        width,
        height,
        components,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(segments: &[(u8, &[u8])], tail: &[u8]) -> Vec<u8> {
        let mut bytes = vec![0xFF, 0xD8];
        for &(marker, contents) in segments {
            bytes.extend_from_slice(&[0xFF, marker]);
            bytes.extend_from_slice(&u16::try_from(contents.len() + 2).unwrap().to_be_bytes());
            bytes.extend_from_slice(contents);
        }
        bytes.extend_from_slice(tail);
        bytes
    }

    #[test]
    fn reads_the_frame_header_and_the_first_exif_and_xmp() {
        let bytes = file(
            &[
                (markers::APP1, b"http://ns.adobe.com/xap/1.0/\0<x/>"),
                (markers::APP1, b"Exif\0\0first"),
                (markers::APP1, b"Exif\0\0second"),
                (markers::SOF2, &[8, 0x01, 0x00, 0x02, 0x00, 3, 0, 0, 0]),
                (markers::SOS, &[0]),
            ],
            &[1, 2, 3, 0xFF, 0xD9],
        );
        let parsed = JpegFile::parse(&bytes).unwrap();
        assert_eq!(
            parsed.frame,
            FrameHeader {
                marker: markers::SOF2,
                precision: 8,
                width: 512,
                height: 256,
                components: 3
            }
        );
        assert_eq!(parsed.exif(), Some(&b"first"[..]));
        assert_eq!(parsed.xmp(), Some(&b"<x/>"[..]));
    }

    #[test]
    fn refuses_a_missing_or_empty_frame_header() {
        let no_sof = file(&[(markers::SOS, &[0])], &[1, 0xFF, 0xD9]);
        let zero_height = file(
            &[
                (markers::SOF0, &[8, 0, 0, 0, 8, 1, 0, 0, 0]),
                (markers::SOS, &[0]),
            ],
            &[1],
        );
        let short = file(&[(markers::SOF0, &[8, 0, 8]), (markers::SOS, &[0])], &[1]);
        for bytes in [no_sof, zero_height, short] {
            assert!(matches!(
                JpegFile::parse(&bytes),
                Err(IngestError::FrameHeader(_))
            ));
        }
    }
}
