//! Writes every kind of image the viewer must show, made at test time from real photos (the
//! browser suite's `web/tests/viewer-kinds.test.mjs` imports them with `streetlevel import`):
//! perspective with and without a direction (a track of three, and a lone image), portrait (a
//! crop), Exif-rotated (orientations 6, 8 and 3), a 360° equirectangular panorama and a partial
//! (cropped) panorama, each with plain Exif GPS and time (the photos' own description JSON is
//! dropped) and each kind a sequence of its own, about a kilometre from the next.
//!
//! Usage: `write_viewer_kinds <photos> <out>`: `<photos>` holds `before_lund_images_01.jpg` to
//! `_12.jpg` (`../shared/data/opensfm-blur-pairs`); writes the JPEGs into `<out>` and prints a
//! JSON manifest: per file, its kind, position, the direction written (if any), the upright
//! size and the source photos, for the test's oracle.

// The manifest goes to standard output, for the test that runs this; `main` is one table of
// the kinds, read top to bottom.
#![allow(clippy::print_stdout, clippy::too_many_lines)]

use std::path::{Path, PathBuf};

use bytes::Bytes;
use img_parts::jpeg::{Jpeg, JpegSegment, markers};
use serde_json::json;
use streetlevel_ingest::{WriteTags, read_metadata, write_metadata};
use streetlevel_model::Timestamp;

/// Where the first kind is (Lund, where the photos were taken); each further kind is a
/// hundredth of a degree of latitude (about 1.1 km) north.
const ORIGIN: (f64, f64) = (55.70, 13.19);
/// 2021-05-01T10:00:00Z.
const START_MILLIS: i64 = 1_619_863_200_000;

type Error = Box<dyn std::error::Error>;

/// Decoded RGB pixels.
#[derive(Clone)]
struct Pixels {
    width: usize,
    height: usize,
    rgb: Vec<u8>,
}

impl Pixels {
    fn decode(jpeg: &[u8]) -> Result<Pixels, Error> {
        let mut decoder = jpeg_decoder::Decoder::new(jpeg);
        let rgb = decoder.decode()?;
        let info = decoder.info().ok_or("no frame header")?;
        if info.pixel_format != jpeg_decoder::PixelFormat::RGB24 {
            return Err(format!("{:?} photos are not expected", info.pixel_format).into());
        }
        Ok(Pixels {
            width: usize::from(info.width),
            height: usize::from(info.height),
            rgb,
        })
    }

    fn encode(&self) -> Result<Vec<u8>, Error> {
        let mut jpeg = Vec::new();
        jpeg_encoder::Encoder::new(&mut jpeg, 90).encode(
            &self.rgb,
            u16::try_from(self.width)?,
            u16::try_from(self.height)?,
            jpeg_encoder::ColorType::Rgb,
        )?;
        Ok(jpeg)
    }

    fn at(&self, x: usize, y: usize) -> [u8; 3] {
        let index = (y * self.width + x) * 3;
        [self.rgb[index], self.rgb[index + 1], self.rgb[index + 2]]
    }

    /// A new image of `width` x `height` whose pixel (x, y) is `pick(x, y)`.
    fn map(width: usize, height: usize, pick: impl Fn(usize, usize) -> [u8; 3]) -> Pixels {
        let mut rgb = Vec::with_capacity(width * height * 3);
        for y in 0..height {
            for x in 0..width {
                rgb.extend_from_slice(&pick(x, y));
            }
        }
        Pixels { width, height, rgb }
    }

    /// The `width` x `height` part whose top left corner is at (`left`, `top`).
    fn crop(&self, left: usize, top: usize, width: usize, height: usize) -> Pixels {
        Pixels::map(width, height, |x, y| self.at(left + x, top + y))
    }

    /// Turned a quarter clockwise.
    fn clockwise(&self) -> Pixels {
        Pixels::map(self.height, self.width, |x, y| {
            self.at(y, self.height - 1 - x)
        })
    }

    /// Turned a quarter counter-clockwise.
    fn counter_clockwise(&self) -> Pixels {
        Pixels::map(self.height, self.width, |x, y| {
            self.at(self.width - 1 - y, x)
        })
    }

    /// Turned half a turn.
    fn half_turn(&self) -> Pixels {
        Pixels::map(self.width, self.height, |x, y| {
            self.at(self.width - 1 - x, self.height - 1 - y)
        })
    }

    /// Scaled to `width` x `height` by nearest neighbour.
    fn scaled(&self, width: usize, height: usize) -> Pixels {
        Pixels::map(width, height, |x, y| {
            self.at(x * self.width / width, y * self.height / height)
        })
    }

    /// `parts` side by side (all of one height).
    fn side_by_side(parts: &[Pixels]) -> Pixels {
        let height = parts[0].height;
        let width = parts.iter().map(|part| part.width).sum();
        Pixels::map(width, height, |x, y| {
            let mut x = x;
            for part in parts {
                if x < part.width {
                    return part.at(x, y);
                }
                x -= part.width;
            }
            [0, 0, 0]
        })
    }
}

/// One file to write.
struct Kind {
    file: &'static str,
    what: &'static str,
    sources: Vec<usize>,
    /// Pixels to encode; `None` keeps the photo's own JPEG data.
    pixels: Option<Pixels>,
    direction: Option<f64>,
    orientation: Option<u16>,
    /// The `GPano` XMP: `None`, or the full panorama's size and the crop's place in it.
    pano: Option<PanoCrop>,
    /// Offset east of the kind's place, in degrees of longitude (the track's steps).
    east: f64,
    /// Seconds after the kind's start.
    seconds: i64,
}

#[derive(Clone, Copy)]
struct PanoCrop {
    full_width: usize,
    full_height: usize,
    left: usize,
    top: usize,
}

fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let (Some(photos), Some(out)) = (args.next(), args.next()) else {
        return Err("usage: write_viewer_kinds <photos> <out>".into());
    };
    let photos = PathBuf::from(photos);
    let out = PathBuf::from(out);
    std::fs::create_dir_all(&out)?;
    let photo = |number: usize| photo_path(&photos, number);
    let read = |number: usize| -> Result<Vec<u8>, Error> {
        std::fs::read(photo(number))
            .map_err(|error| format!("{}: {error}", photo(number).display()).into())
    };
    let decode = |number: usize| -> Result<Pixels, Error> { Pixels::decode(&read(number)?) };

    let plain = |file, what, number, direction: Option<f64>, east, seconds| Kind {
        file,
        what,
        sources: vec![number],
        pixels: None,
        direction,
        orientation: None,
        pano: None,
        east,
        seconds,
    };
    // A panorama from two photos side by side, stretched to 2:1, one whole photo in the middle
    // (where the viewer first looks) and the other split over the seam behind.
    let (ahead, behind) = (decode(9)?, decode(10)?);
    let panorama = Pixels::side_by_side(&[
        behind.crop(512, 0, 512, 768),
        ahead,
        behind.crop(0, 0, 512, 768),
    ])
    .scaled(2048, 1024);
    // A partial panorama: four photos at half size in a strip 2048 x 384, the middle band of a
    // 2048 x 1024 panorama, photo 9 in the middle and photo 12 split over the seam behind.
    let half: Vec<Pixels> = [9, 10, 11, 12]
        .into_iter()
        .map(|number| decode(number).map(|pixels| pixels.scaled(512, 384)))
        .collect::<Result<_, _>>()?;
    let partial = Pixels::side_by_side(&[
        half[3].crop(256, 0, 256, 384),
        half[1].clone(),
        half[0].clone(),
        half[2].clone(),
        half[3].crop(0, 0, 256, 384),
    ]);
    let kinds = vec![
        plain(
            "direction.jpg",
            "perspective with direction",
            1,
            Some(123.4),
            0.0,
            0,
        ),
        // East along a parallel, 0.0002 degrees (about 12.6 m) a step, 2 s apart.
        plain(
            "track-1.jpg",
            "perspective without direction, in a track",
            2,
            None,
            0.0,
            0,
        ),
        plain(
            "track-2.jpg",
            "perspective without direction, in a track",
            3,
            None,
            0.0002,
            2,
        ),
        plain(
            "track-3.jpg",
            "perspective without direction, in a track",
            4,
            None,
            0.0004,
            4,
        ),
        plain(
            "lone.jpg",
            "perspective without direction, alone",
            5,
            None,
            0.0,
            0,
        ),
        Kind {
            // The middle 576 x 768 of the photo: upright, three wide by four high.
            pixels: Some(decode(6)?.crop(224, 0, 576, 768)),
            ..plain("portrait.jpg", "portrait", 6, Some(200.0), 0.0, 0)
        },
        // Stored turned so that the orientation's turn makes the photo upright again.
        Kind {
            pixels: Some(decode(7)?.counter_clockwise()),
            orientation: Some(6),
            ..plain(
                "orientation-6.jpg",
                "exif orientation 6",
                7,
                Some(10.0),
                0.0,
                0,
            )
        },
        Kind {
            pixels: Some(decode(8)?.clockwise()),
            orientation: Some(8),
            ..plain(
                "orientation-8.jpg",
                "exif orientation 8",
                8,
                Some(20.0),
                0.0,
                0,
            )
        },
        Kind {
            pixels: Some(decode(1)?.half_turn()),
            orientation: Some(3),
            ..plain(
                "orientation-3.jpg",
                "exif orientation 3",
                1,
                Some(30.0),
                0.0,
                0,
            )
        },
        Kind {
            pixels: Some(panorama.clone()),
            pano: Some(PanoCrop {
                full_width: 2048,
                full_height: 1024,
                left: 0,
                top: 0,
            }),
            sources: vec![9, 10],
            ..plain("panorama.jpg", "360 equirectangular", 9, Some(40.0), 0.0, 0)
        },
        Kind {
            pixels: Some(partial),
            pano: Some(PanoCrop {
                full_width: 2048,
                full_height: 1024,
                left: 0,
                top: 320,
            }),
            sources: vec![9, 10, 11, 12],
            ..plain(
                "partial-panorama.jpg",
                "partial panorama",
                9,
                Some(50.0),
                0.0,
                0,
            )
        },
    ];

    let mut manifest = Vec::new();
    let mut place = 0_u32;
    let mut previous_kind = "";
    for kind in kinds {
        if kind.what != previous_kind && !previous_kind.is_empty() {
            place += 1;
        }
        previous_kind = kind.what;
        let latitude = ORIGIN.0 + 0.01 * f64::from(place);
        let longitude = ORIGIN.1 + kind.east;
        // Each kind an hour after the one before: a sequence of its own.
        let captured_at = START_MILLIS + 3_600_000 * i64::from(place) + 1000 * kind.seconds;
        let jpeg = match &kind.pixels {
            Some(pixels) => pixels.encode()?,
            None => read(kind.sources[0])?,
        };
        let mut tags = WriteTags {
            latitude: Some(latitude),
            longitude: Some(longitude),
            altitude: Some(20.0),
            direction: kind.direction,
            make: Some(String::from("streetlevel-test")),
            model: Some(
                kind.file
                    .trim_end_matches(".jpg")
                    .trim_end_matches(char::is_numeric)
                    .to_owned(),
            ),
            orientation: kind.orientation,
            ..WriteTags::default()
        };
        tags.set_capture_time_utc(Timestamp(captured_at));
        let mut jpeg = write_metadata(&jpeg, &tags)?;
        if let Some(crop) = kind.pano {
            jpeg = with_gpano(&jpeg, crop)?;
        }
        let metadata = read_metadata(&jpeg)?;
        let (width, height) = metadata.upright_size();
        std::fs::write(out.join(kind.file), &jpeg)?;
        manifest.push(json!({
            "file": kind.file,
            "kind": kind.what,
            "latitude": latitude,
            "longitude": longitude,
            "direction": kind.direction,
            "orientation": kind.orientation.unwrap_or(1),
            "width": width,
            "height": height,
            "is_pano": metadata.is_pano,
            "sources": kind.sources.iter().map(|&number| photo(number)).collect::<Vec<_>>(),
        }));
    }
    println!("{}", serde_json::to_string_pretty(&manifest)?);
    Ok(())
}

fn photo_path(photos: &Path, number: usize) -> PathBuf {
    photos.join(format!("before_lund_images_{number:02}.jpg"))
}

/// `jpeg` with a `GPano` XMP segment after its Exif segment: the stored image is the part
/// `crop` describes of an equirectangular panorama.
fn with_gpano(jpeg: &[u8], crop: PanoCrop) -> Result<Vec<u8>, Error> {
    let mut file = Jpeg::from_bytes(Bytes::copy_from_slice(jpeg))?;
    let (width, height) = {
        let metadata = read_metadata(jpeg)?;
        (metadata.width, metadata.height)
    };
    let xmp = format!(
        r#"<?xpacket begin="{bom}" id="W5M0MpCehiHzreSzNTczkc9d"?>
<x:xmpmeta xmlns:x="adobe:ns:meta/">
 <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
  <rdf:Description rdf:about="" xmlns:GPano="http://ns.google.com/photos/1.0/panorama/"
    GPano:ProjectionType="equirectangular" GPano:UsePanoramaViewer="True"
    GPano:FullPanoWidthPixels="{full_width}" GPano:FullPanoHeightPixels="{full_height}"
    GPano:CroppedAreaImageWidthPixels="{width}" GPano:CroppedAreaImageHeightPixels="{height}"
    GPano:CroppedAreaLeftPixels="{left}" GPano:CroppedAreaTopPixels="{top}"/>
 </rdf:RDF>
</x:xmpmeta>
<?xpacket end="w"?>"#,
        bom = '\u{feff}',
        full_width = crop.full_width,
        full_height = crop.full_height,
        left = crop.left,
        top = crop.top,
    );
    let contents = [b"http://ns.adobe.com/xap/1.0/\0".as_slice(), xmp.as_bytes()].concat();
    let segments = file.segments_mut();
    let position = segments
        .iter()
        .position(|segment| segment.contents().starts_with(b"Exif\0\0"))
        .map_or(0, |exif| exif + 1);
    segments.insert(
        position,
        JpegSegment::new_with_contents(markers::APP1, Bytes::from(contents)),
    );
    Ok(file.encoder().bytes().to_vec())
}
