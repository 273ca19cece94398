//! What one job, one file and one process may cost, checked before the work is done: a zip's
//! entry count and inflated size (read from its central directory, overlapping and duplicate
//! entries refused), an image's stored bytes (what follows the JPEG's end-of-image marker is
//! dropped), the memory of the pictures worked on at once (one pool per process, whatever the
//! number of cores, covering each picture's whole working set: `budgets/memory.rs`), and a
//! job's time.
//!
//! The pipeline sees these only through [`Budgeted`] (a [`Sources`] that trims and refuses)
//! and [`picture_permit`], so its own steps stay as they are.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::ImportError;
use crate::pipeline::Sources;

mod memory;
pub use memory::{PicturePermit, picture_permit, set_decode_memory_limit};

/// The default of [`set_decode_memory_limit`]: enough for the whole working set of the
/// largest image `ingest` accepts (a progressive JPEG of `MAX_PIXELS` blurred with the default
/// face and plate models: about 0.8 GB of picture and 0.85 + 0.7 GB of detection), so no valid
/// file is refused for its size alone. 2 GiB held it until the plate model came; two
/// twelve-megapixel photos blurred at once charge about 3.4 GB, so with this default they are
/// blurred one after the other.
pub const DEFAULT_DECODE_MEMORY_BYTES: u64 = 3 << 30;

/// Stored bytes an image may have beyond what its pixels need: room for its metadata
/// segments (Exif, XMP, ICC profiles).
const METADATA_ALLOWANCE_BYTES: u64 = 4 << 20;

/// Stored bytes per pixel an image may have: a JPEG of quality 100 without chroma subsampling
/// takes about 2 to 3.
const MAX_BYTES_PER_PIXEL: u64 = 4;

/// What the detectors' inputs of one picture hold at most, whatever its size: each pass's
/// picture (at most 2048 pixels on its longest side, or a panorama's band at 5760 wide), its
/// upright copy and tile, the resizer's intermediate rows and the model's float tensor.
const DETECTION_INPUT_BYTES: u64 = 160 << 20;

/// What is done with a picture, which decides what it holds in memory at its peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PictureWork {
    /// Its thumbnails made from the file (blurring off): one decode at the DCT scale that
    /// reaches 2048 pixels of width once upright (Exif `orientation`).
    Thumbnails {
        /// Exif orientation, 1 to 8.
        orientation: u8,
    },
    /// Blurred, as the pipeline and `reblur` do: decoded whole, searched at the detectors'
    /// sizes, blurred, encoded anew with its metadata, and its thumbnails made from its
    /// pixels.
    Blur {
        /// Exif orientation, 1 to 8.
        orientation: u8,
        /// What the blurrer's detection holds beside the picture
        /// ([`streetlevel_blur::Blurrer::working_memory_bytes`]).
        detection: u64,
    },
    /// Boxes blurred on it (a blur edit): decoded whole and encoded anew.
    BlurRegions,
    /// Scaled by the server to a pyramid level or a thumbnail of another width (`size`, upright,
    /// at most the picture's), from a decode at the DCT scale that reaches it, turned upright
    /// (Exif `orientation`), and a block of it cut and encoded.
    Serve {
        /// Exif orientation, 1 to 8.
        orientation: u8,
        /// The upright width and height it is scaled to.
        size: (u32, u32),
    },
}

/// The bytes `work` on `jpeg` holds at its peak, by what its markers say (the file's own
/// bytes included), or `None` when they cannot be read: what [`picture_permit`] charges.
pub fn picture_memory(jpeg: &[u8], work: PictureWork) -> Option<u64> {
    JpegLayout::read(jpeg).map(|layout| layout.working_set(jpeg.len() as u64, work))
}

/// The thumbnail decode's memory the markers of `jpeg` call for (upright, as most are), or
/// `None` when they cannot be read (the fuzz target's check).
pub(crate) fn decode_estimate(jpeg: &[u8]) -> Option<u64> {
    picture_memory(jpeg, PictureWork::Thumbnails { orientation: 1 })
}

/// `jpeg` without what follows its end-of-image marker (padding, appended previews or
/// videos), refused when even so it holds more bytes than its pixels need. A file whose
/// end is not found (truncated, or not a JPEG) is returned as it is: reading it refuses it
/// with the precise reason.
pub(crate) fn trim_to_image(mut jpeg: Vec<u8>) -> Result<Vec<u8>, String> {
    let Some(layout) = JpegLayout::read(&jpeg) else {
        return Ok(jpeg);
    };
    if let Some(end) = layout.end {
        jpeg.truncate(end);
    }
    let pixels = layout.width * layout.height;
    let bound = METADATA_ALLOWANCE_BYTES + MAX_BYTES_PER_PIXEL * pixels;
    if jpeg.len() as u64 > bound {
        return Err(format!(
            "{} bytes for {}x{} pixels: more than the {bound} bytes such an image needs",
            jpeg.len(),
            layout.width,
            layout.height
        ));
    }
    Ok(jpeg)
}

/// What a JPEG's markers say about its decoding, read without decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
struct JpegLayout {
    progressive: bool,
    width: u64,
    height: u64,
    /// Each component's horizontal and vertical sampling factors.
    sampling: Vec<(u64, u64)>,
    /// Just past the end-of-image marker that ends the first image.
    end: Option<usize>,
}

impl JpegLayout {
    /// Walks the marker segments and the entropy-coded data between them up to the first
    /// end-of-image marker; `None` without a frame header.
    fn read(bytes: &[u8]) -> Option<JpegLayout> {
        if !bytes.starts_with(&[0xFF, 0xD8]) {
            return None;
        }
        let mut layout: Option<JpegLayout> = None;
        let mut position = 2;
        loop {
            // Fill bytes may precede a marker.
            while bytes.get(position) == Some(&0xFF) && bytes.get(position + 1) == Some(&0xFF) {
                position += 1;
            }
            if bytes.get(position) != Some(&0xFF) {
                return layout;
            }
            let Some(&marker) = bytes.get(position + 1) else {
                return layout;
            };
            match marker {
                0xD9 => {
                    if let Some(layout) = &mut layout {
                        layout.end = Some(position + 2);
                    }
                    return layout;
                }
                0x01 | 0xD0..=0xD7 => position += 2,
                _ => {
                    let length = usize::from(u16::from_be_bytes([
                        *bytes.get(position + 2)?,
                        *bytes.get(position + 3)?,
                    ]));
                    let contents = bytes.get(position + 4..position + 2 + length.max(2))?;
                    if is_frame_header(marker) && layout.is_none() {
                        layout = Some(frame(marker, contents)?);
                    }
                    position += 2 + length;
                    if marker == 0xDA {
                        position = end_of_entropy_data(bytes, position);
                    }
                }
            }
        }
    }

    /// The 8 x 8 blocks of every component, with the padding of the last MCU row and column.
    fn blocks(&self) -> u64 {
        let h_max = self.sampling.iter().map(|s| s.0).max().unwrap_or(1).max(1);
        let v_max = self.sampling.iter().map(|s| s.1).max().unwrap_or(1).max(1);
        let mcus_x = self.width.div_ceil(8 * h_max);
        let mcus_y = self.height.div_ceil(8 * v_max);
        self.sampling
            .iter()
            .map(|(h, v)| mcus_x * h * mcus_y * v)
            .sum()
    }

    /// What `work` holds at its peak, with the file's `file_bytes` (which the caller holds
    /// throughout).
    fn working_set(&self, file_bytes: u64, work: PictureWork) -> u64 {
        let blocks = self.blocks();
        let pixels = self.width * self.height;
        let rgb = 3 * pixels;
        // A progressive JPEG keeps every coefficient until its last scan, 2 bytes each,
        // whatever the scale it is decoded at; a baseline one decodes row by row.
        let coefficients = if self.progressive { blocks * 128 } else { 0 };
        // Decoded whole: the coefficients, each component's samples and the RGB (or grey
        // turned RGB, in a buffer that may grow to twice that) at once.
        let grey = self.sampling.len() == 1;
        let whole_decode = coefficients + blocks * 64 + if grey { 3 * rgb } else { rgb };
        // A picture encoded anew: the encoder's output growing by doubling, and the copy
        // the metadata is spliced into. Its size is bounded by the original's and by what
        // quality 90 takes of noise (about 2.5 bytes a pixel at 4:4:4).
        let encoded = file_bytes.max(pixels) + pixels / 2;
        let encode = file_bytes + rgb + 3 * encoded;
        file_bytes
            + match work {
                PictureWork::Thumbnails { orientation } => self.thumbnail_decode(orientation >= 5),
                PictureWork::Blur { detection, .. } => {
                    // Then the detectors' inputs beside the pixels, the encoding, and the
                    // thumbnails scaled from the pixels (the 2048 one at most 2048 x 10000,
                    // its resizer's intermediate rows as large) beside the encoded picture.
                    let thumbnails = encoded + rgb + 2 * 3 * 2048 * self.width.max(self.height);
                    detection
                        + whole_decode
                            .max(rgb + DETECTION_INPUT_BYTES)
                            .max(encode)
                            .max(thumbnails)
                }
                PictureWork::BlurRegions => whole_decode.max(encode),
                PictureWork::Serve { orientation, size } => self.serve(orientation, size),
            }
    }

    /// What scaling to the upright `size` holds at its peak: the decode at the DCT scale that
    /// reaches its width (coefficients freed when it ends), then the decoded and the scaled
    /// picture with the resizer's intermediate rows, then the scaled one and its upright copy;
    /// and a 1024-pixel block cut from it.
    fn serve(&self, orientation: u8, (width, height): (u32, u32)) -> u64 {
        let quarter_turn = orientation >= 5;
        let (axis, other) = if quarter_turn {
            (self.height, self.width)
        } else {
            (self.width, self.height)
        };
        let wanted = u64::from(width).clamp(1, axis.max(1));
        let divisor = [8, 4, 2, 1]
            .into_iter()
            .find(|divisor| axis.div_ceil(*divisor) >= wanted)
            .unwrap_or(1);
        let (decoded_axis, decoded_other) = (axis.div_ceil(divisor), other.div_ceil(divisor));
        let decoded = 3 * decoded_axis * decoded_other;
        let target = 3 * u64::from(width) * u64::from(height);
        let coefficients = if self.progressive {
            self.blocks() * 128
        } else {
            0
        };
        let decode = coefficients + self.blocks() * 64 / (divisor * divisor) + decoded;
        let scaled = if (wanted, u64::from(height)) == (decoded_axis, decoded_other) {
            0
        } else {
            2 * target.max(3 * wanted * decoded_other)
        };
        let upright = if (2..=8).contains(&orientation) {
            target
        } else {
            0
        };
        let block = 3 * 1024 * 1024 * 2;
        decode.max(decoded + scaled).max(target + upright) + block
    }

    /// The bytes a thumbnail decode holds at its peak: a progressive JPEG's coefficients
    /// (2 bytes a sample, all components at full size, whatever the scale), then the
    /// components and the RGB images at the DCT scale `ingest` picks.
    fn thumbnail_decode(&self, quarter_turn: bool) -> u64 {
        let blocks = self.blocks();
        // `ingest::thumbnails` decodes at the smallest scale whose upright width reaches 2048.
        let axis = if quarter_turn {
            self.height
        } else {
            self.width
        };
        let wanted = axis.min(2048);
        let divisor = [8, 4, 2, 1]
            .into_iter()
            .find(|divisor| axis.div_ceil(*divisor) >= wanted)
            .unwrap_or(1);
        let coefficients = if self.progressive { blocks * 128 } else { 0 };
        let components = blocks * 64 / (divisor * divisor);
        // The decoder's RGB output, its copy made upright and the resizer's two images, none
        // larger than the decoded size.
        let rgb = 4 * 3 * self.width.div_ceil(divisor) * self.height.div_ceil(divisor);
        coefficients + components + rgb
    }
}

/// SOF0–SOF15 without DHT (C4), JPG (C8) and DAC (CC).
fn is_frame_header(marker: u8) -> bool {
    matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC)
}

fn frame(marker: u8, contents: &[u8]) -> Option<JpegLayout> {
    let [
        _,
        height_high,
        height_low,
        width_high,
        width_low,
        count,
        ref rest @ ..,
    ] = *contents
    else {
        return None;
    };
    let sampling = rest
        .chunks_exact(3)
        .take(usize::from(count))
        .map(|component| {
            (
                u64::from(component[1] >> 4).max(1),
                u64::from(component[1] & 0x0F).max(1),
            )
        })
        .collect();
    Some(JpegLayout {
        // SOF2, SOF6, SOF10, SOF14.
        progressive: matches!(marker, 0xC2 | 0xC6 | 0xCA | 0xCE),
        width: u64::from(u16::from_be_bytes([width_high, width_low])),
        height: u64::from(u16::from_be_bytes([height_high, height_low])),
        sampling,
        end: None,
    })
}

/// The position of the first marker after entropy-coded data starting at `position`
/// (`FF 00` is a stuffed byte and `FF D0`–`FF D7` restart markers belong to the data).
fn end_of_entropy_data(bytes: &[u8], mut position: usize) -> usize {
    while position + 1 < bytes.len() {
        if bytes[position] == 0xFF && !matches!(bytes[position + 1], 0x00 | 0xD0..=0xD7 | 0xFF) {
            return position;
        }
        position += 1;
    }
    bytes.len()
}

/// Why a job stops before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interruption {
    /// It ran longer than the job time limit.
    TimeLimit,
    /// The server is shutting down: the job is taken again after the restart.
    Shutdown,
    /// The worker's lease on the job ran out unrenewed: another worker may have taken it.
    LeaseLost,
}

/// When a job must stop: its deadline, the server's stop flag and the loss of its lease.
pub(crate) struct Interrupt<'a> {
    pub(crate) deadline: Option<Instant>,
    pub(crate) stop: Option<&'a AtomicBool>,
    pub(crate) lost: Option<&'a AtomicBool>,
}

impl Interrupt<'_> {
    /// Never interrupted (`streetlevel import`, whose user can press Ctrl-C).
    pub(crate) const NEVER: Interrupt<'static> = Interrupt {
        deadline: None,
        stop: None,
        lost: None,
    };

    pub(crate) fn why(&self) -> Option<Interruption> {
        if self.lost.is_some_and(|lost| lost.load(Ordering::Relaxed)) {
            Some(Interruption::LeaseLost)
        } else if self.stop.is_some_and(|stop| stop.load(Ordering::Relaxed)) {
            Some(Interruption::Shutdown)
        } else if self
            .deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
        {
            Some(Interruption::TimeLimit)
        } else {
            None
        }
    }
}

/// The files of `inner`, each cut at its end-of-image marker and refused when larger than
/// its pixels need; once the job is interrupted no file is read any more.
pub(crate) struct Budgeted<'a> {
    pub(crate) inner: &'a dyn Sources,
    pub(crate) interrupt: &'a Interrupt<'a>,
}

impl Sources for Budgeted<'_> {
    fn len(&self) -> usize {
        self.inner.len()
    }

    fn name(&self, index: usize) -> String {
        self.inner.name(index)
    }

    fn read(&self, index: usize) -> Result<Vec<u8>, String> {
        if let Some(why) = self.interrupt.why() {
            return Err(match why {
                Interruption::TimeLimit => String::from("the job ran out of time"),
                Interruption::Shutdown => String::from("the server is shutting down"),
                Interruption::LeaseLost => String::from("another worker took the job over"),
            });
        }
        trim_to_image(self.inner.read(index)?)
    }

    fn time_source(&self, index: usize) -> Option<streetlevel_ingest::TimeSource> {
        self.inner.time_source(index)
    }
}

/// Limits on a zip archive, checked from its central directory before anything is inflated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ZipBudget {
    pub(crate) max_entries: u64,
    pub(crate) max_inflated_bytes: u64,
}

/// Opens the zip archive at `path` if its central directory keeps within `budget`: at most
/// `max_entries` entries (counted from the end record, before the directory is parsed),
/// their declared sizes summing to at most `max_inflated_bytes`, no two entries with one
/// name, and no two entries whose bytes overlap (a zip bomb's way to inflate one stream many
/// times). Each entry is later read only up to its declared size.
pub(crate) fn open_zip(
    path: &Path,
    budget: ZipBudget,
) -> Result<zip::ZipArchive<std::fs::File>, ImportError> {
    let file = std::fs::File::open(path)
        .map_err(|_| ImportError::InvalidUpload(String::from("the archive's bytes are gone")))?;
    open_zip_reader(file, budget)
}

/// [`open_zip`] on any seekable bytes (the fuzz targets give it memory).
pub(crate) fn open_zip_reader<R: Read + Seek>(
    mut file: R,
    budget: ZipBudget,
) -> Result<zip::ZipArchive<R>, ImportError> {
    let invalid = |reason: String| ImportError::InvalidUpload(reason);
    let declared = declared_entries(&mut file)?.ok_or_else(|| {
        invalid(String::from(
            "not a zip archive: no end of central directory",
        ))
    })?;
    if declared > budget.max_entries {
        return Err(ImportError::OverBudget(format!(
            "the archive has {declared} entries, more than the {} allowed",
            budget.max_entries
        )));
    }
    file.seek(SeekFrom::Start(0))?;
    let mut archive = zip::ZipArchive::new(file)
        .map_err(|error| invalid(format!("not a zip archive: {error}")))?;
    if archive.len() as u64 != declared {
        return Err(invalid(String::from(
            "the archive lists one name for several entries",
        )));
    }
    let mut inflated: u64 = 0;
    let mut extents = Vec::with_capacity(archive.len());
    for index in 0..archive.len() {
        let entry = archive
            .by_index_raw(index)
            .map_err(|error| invalid(format!("unreadable archive entry: {error}")))?;
        inflated = inflated.saturating_add(entry.size());
        extents.push((
            entry.header_start(),
            entry.data_start().saturating_add(entry.compressed_size()),
        ));
    }
    if inflated > budget.max_inflated_bytes {
        return Err(ImportError::OverBudget(format!(
            "the archive inflates to {inflated} bytes, more than the {} allowed",
            budget.max_inflated_bytes
        )));
    }
    extents.sort_unstable();
    if extents.windows(2).any(|pair| pair[1].0 < pair[0].1) {
        return Err(invalid(String::from(
            "the archive has entries whose bytes overlap",
        )));
    }
    Ok(archive)
}

/// The entry count of a zip's end of central directory record (the zip64 one when the
/// classic record says so); `None` when there is none.
fn declared_entries<R: Read + Seek>(file: &mut R) -> Result<Option<u64>, ImportError> {
    const END: &[u8] = b"PK\x05\x06";
    const END_64: &[u8] = b"PK\x06\x06";
    let length = file.seek(SeekFrom::End(0))?;
    // The record is 22 bytes and a comment of at most 65,535; the zip64 locator precedes it.
    let tail_length = length.min(22 + 65_535 + 20);
    file.seek(SeekFrom::Start(length - tail_length))?;
    let mut tail = Vec::new();
    file.by_ref().take(tail_length).read_to_end(&mut tail)?;
    let Some(at) = tail.windows(4).rposition(|window| window == END) else {
        return Ok(None);
    };
    let Some(record) = tail.get(at..at + 22) else {
        return Ok(None);
    };
    let classic = u16::from_le_bytes([record[10], record[11]]);
    if classic != u16::MAX {
        return Ok(Some(u64::from(classic)));
    }
    // A zip64 locator just before: the offset of the zip64 record, whose count is 8 bytes.
    let Some(locator) = at
        .checked_sub(20)
        .and_then(|start| tail.get(start..start + 20))
    else {
        return Ok(Some(u64::from(classic)));
    };
    let mut offset = [0; 8];
    offset.copy_from_slice(&locator[8..16]);
    file.seek(SeekFrom::Start(u64::from_le_bytes(offset)))?;
    let mut record_64 = [0; 40];
    if file.read_exact(&mut record_64).is_err() || &record_64[..4] != END_64 {
        return Ok(None);
    }
    let mut count = [0; 8];
    count.copy_from_slice(&record_64[32..40]);
    Ok(Some(u64::from_le_bytes(count)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jpeg(width: u16, height: u16) -> Vec<u8> {
        let mut jpeg = Vec::new();
        jpeg_encoder::Encoder::new(&mut jpeg, 50)
            .encode(
                &vec![90; usize::from(width) * usize::from(height) * 3],
                width,
                height,
                jpeg_encoder::ColorType::Rgb,
            )
            .unwrap();
        jpeg
    }

    #[test]
    fn the_end_of_image_is_found_and_what_follows_is_dropped() {
        let image = jpeg(64, 48);
        let layout = JpegLayout::read(&image).unwrap();
        assert_eq!(layout.end, Some(image.len()));
        assert_eq!((layout.width, layout.height), (64, 48));
        let mut padded = image.clone();
        padded.extend(std::iter::repeat_n(0, 10_000));
        assert_eq!(trim_to_image(padded).unwrap(), image);
        // Not a JPEG, or truncated: left for the reader to refuse with its reason.
        assert_eq!(trim_to_image(b"text".to_vec()).unwrap(), b"text");
        let truncated = image[..image.len() / 2].to_vec();
        assert_eq!(trim_to_image(truncated.clone()).unwrap(), truncated);
    }

    #[test]
    fn an_image_larger_than_its_pixels_need_is_refused() {
        let mut image = jpeg(16, 16);
        // Padding inside the image data, before the end marker, cannot be cut off.
        let end = image.len() - 2;
        image.splice(end..end, std::iter::repeat_n(0, 5 << 20));
        let refused = trim_to_image(image).unwrap_err();
        assert!(refused.contains("16x16"), "{refused}");
    }

    /// A progressive JPEG declaring 10000 x 10000 pixels in a few hundred bytes.
    fn progressive_bomb() -> Vec<u8> {
        let mut jpeg = Vec::new();
        let mut encoder = jpeg_encoder::Encoder::new(&mut jpeg, 50);
        encoder.set_progressive(true);
        encoder
            .encode(&[9; 16 * 16 * 3], 16, 16, jpeg_encoder::ColorType::Rgb)
            .unwrap();
        let sof = jpeg
            .windows(2)
            .position(|pair| pair == [0xFF, 0xC2])
            .unwrap();
        jpeg[sof + 5..sof + 9].copy_from_slice(&[0x27, 0x10, 0x27, 0x10]);
        jpeg
    }

    /// The one test that changes the process's picture memory (tests run in parallel).
    #[test]
    fn pictures_wait_for_their_share_of_the_process_memory() {
        let bomb = progressive_bomb();
        let work = PictureWork::Thumbnails { orientation: 1 };
        let one = picture_memory(&bomb, work).unwrap();
        // 4:2:0: 1.5 samples a pixel of 2-byte coefficients, 300 MB, and the planes.
        assert!(one > 300_000_000, "{one}");
        // Room for one such picture: a second waits until the first ends.
        set_decode_memory_limit(one + one / 2);
        let first = picture_permit(&bomb, work).unwrap();
        assert_eq!(first.bytes(), one);
        let (sender, receiver) = std::sync::mpsc::channel();
        let waiting = {
            let bomb = bomb.clone();
            std::thread::spawn(move || {
                let permit = picture_permit(&bomb, work).unwrap();
                sender.send(()).unwrap();
                drop(permit);
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(receiver.try_recv().is_err(), "two pictures held at once");
        drop(first);
        receiver.recv().unwrap();
        waiting.join().unwrap();
        // A file that alone needs more than all of it is refused, not waited for; blurring
        // it needs more than making its thumbnails.
        set_decode_memory_limit(one - 1);
        let refused = picture_permit(&bomb, work).unwrap_err();
        assert!(refused.contains("picture memory"), "{refused}");
        set_decode_memory_limit(DEFAULT_DECODE_MEMORY_BYTES);
        let blur = |detection| {
            picture_memory(
                &bomb,
                PictureWork::Blur {
                    orientation: 1,
                    detection,
                },
            )
            .unwrap()
        };
        assert!(blur(0) > one + 300_000_000, "{} against {one}", blur(0));
        assert_eq!(blur(850 << 20) - blur(0), 850 << 20);
        // The default models' sessions, CenterFace's and the text detector's, with the
        // largest picture: within the default.
        assert!(
            blur((850 + 600) << 20) < DEFAULT_DECODE_MEMORY_BYTES,
            "{}",
            blur((850 + 600) << 20)
        );
    }

    #[test]
    fn progressive_decodes_are_counted_by_their_coefficients() {
        let baseline = JpegLayout {
            progressive: false,
            width: 10_000,
            height: 10_000,
            sampling: vec![(1, 1); 3],
            end: None,
        };
        let progressive = JpegLayout {
            progressive: true,
            ..baseline.clone()
        };
        // 3 components of 1250x1250 blocks at 128 bytes: 600 MB of coefficients, on top of
        // the thumbnails' scaled decode.
        let thumbnails = PictureWork::Thumbnails { orientation: 1 };
        assert_eq!(
            progressive.working_set(0, thumbnails) - baseline.working_set(0, thumbnails),
            600_000_000
        );
        assert!(baseline.working_set(0, thumbnails) < 100_000_000);
        // A whole decode holds every sample and the RGB: 300 + 300 MB; a progressive one the
        // coefficients beside them, its peak (above the encoding's 750 MB, the baseline's).
        assert!(baseline.working_set(0, PictureWork::BlurRegions) >= 600_000_000);
        assert_eq!(
            progressive.working_set(0, PictureWork::BlurRegions),
            1_200_000_000
        );
    }

    #[test]
    fn the_server_scales_from_the_dct_scale_that_reaches_the_size() {
        let layout = JpegLayout {
            progressive: false,
            width: 8000,
            height: 6000,
            sampling: vec![(2, 2), (1, 1), (1, 1)],
            end: None,
        };
        let serve =
            |orientation, size| layout.working_set(0, PictureWork::Serve { orientation, size });
        // Level 12 of an 8000 x 6000 picture is 4000 x 3000: a half-scale decode, far below a
        // whole one; the whole picture (its top level) costs the most.
        let half = serve(1, (4000, 3000));
        let whole = serve(1, (8000, 6000));
        assert!(half < whole / 2, "{half} against {whole}");
        assert!(whole >= 8000 * 6000 * 3, "{whole}");
        // A small level is cut from an eighth-scale decode.
        assert!(serve(1, (500, 375)) < 20_000_000);
        // Upright it is 6000 x 8000 when turned a quarter: the same work.
        let turned = serve(6, (3000, 4000));
        assert!(turned >= half && turned < whole, "{turned}");
    }
}
