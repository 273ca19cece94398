//! Thumbnails: sizes, orientation (checked with coloured corners, decoded by an independent
//! decoder), panoramas, no upscaling, and the pixel limit.

#![allow(clippy::unwrap_used, clippy::panic, clippy::float_cmp)] // Helpers of tests fail loudly; values are exact.

mod support;

use image::RgbImage;
use num_traits::ToPrimitive as _;
use streetlevel_ingest::{
    IngestError, MAX_PIXELS, Thumbnail, WriteTags, read_metadata, thumbnails, write_metadata,
};
use streetlevel_model::ThumbnailSize;
use support::{encode, gradient, insert_segment, located, segments};

const RED: [u8; 3] = [220, 20, 20];
const GREEN: [u8; 3] = [20, 220, 20];
const GREY: [u8; 3] = [128, 128, 128];

fn decode(thumbnail: &Thumbnail) -> RgbImage {
    let image = image::load_from_memory_with_format(&thumbnail.jpeg, image::ImageFormat::Jpeg)
        .unwrap()
        .to_rgb8();
    assert_eq!(
        image.dimensions(),
        (thumbnail.width, thumbnail.height),
        "the JPEG has the size the thumbnail claims"
    );
    image
}

fn sizes(thumbnails: &streetlevel_ingest::Thumbnails) -> [(u32, u32); 3] {
    [&thumbnails.px256, &thumbnails.px1024, &thumbnails.px2048]
        .map(|thumbnail| (thumbnail.width, thumbnail.height))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Corner {
    TopLeft,
    TopRight,
    BottomLeft,
    BottomRight,
}

/// The colour near `corner`, an eighth of the size in from each edge.
fn colour_at(image: &RgbImage, corner: Corner) -> [u8; 3] {
    let (width, height) = image.dimensions();
    let (left, right, top, bottom) = (
        width / 8,
        width - 1 - width / 8,
        height / 8,
        height - 1 - height / 8,
    );
    let (x, y) = match corner {
        Corner::TopLeft => (left, top),
        Corner::TopRight => (right, top),
        Corner::BottomLeft => (left, bottom),
        Corner::BottomRight => (right, bottom),
    };
    image.get_pixel(x, y).0
}

fn is(colour: [u8; 3], expected: [u8; 3]) -> bool {
    colour
        .iter()
        .zip(expected)
        .all(|(&a, b)| a.abs_diff(b) < 40)
}

#[test]
fn every_orientation_ends_upright_with_the_corners_where_exif_says() {
    // Stored 480x288: red in the stored top-left quarter-corner, green in the top-right.
    let stored = encode(480, 288, |x, y| match (x < 120, x >= 360, y < 72) {
        (true, _, true) => RED,
        (_, true, true) => GREEN,
        _ => GREY,
    });
    // Where the stored top-left (red) and top-right (green) corners are shown, from the Exif
    // definitions of which edges row 0 and column 0 are.
    let expected = [
        (1, Corner::TopLeft, Corner::TopRight),
        (2, Corner::TopRight, Corner::TopLeft),
        (3, Corner::BottomRight, Corner::BottomLeft),
        (4, Corner::BottomLeft, Corner::BottomRight),
        (5, Corner::TopLeft, Corner::BottomLeft),
        (6, Corner::TopRight, Corner::BottomRight),
        (7, Corner::BottomRight, Corner::TopRight),
        (8, Corner::BottomLeft, Corner::TopLeft),
    ];
    for (orientation, red, green) in expected {
        let jpeg = write_metadata(
            &stored,
            &WriteTags {
                orientation: Some(orientation),
                ..located()
            },
        )
        .unwrap();
        let metadata = read_metadata(&jpeg).unwrap();
        let made = thumbnails(&jpeg, metadata.orientation).unwrap();
        let upright = metadata.upright_size();
        assert_eq!(
            upright,
            if orientation >= 5 {
                (288, 480)
            } else {
                (480, 288)
            }
        );
        let small_height = (f64::from(upright.1) * 256.0 / f64::from(upright.0))
            .round()
            .to_u32()
            .unwrap();
        assert_eq!(
            sizes(&made),
            [(256, small_height), upright, upright],
            "orientation {orientation}"
        );
        for thumbnail in [&made.px256, &made.px2048] {
            let image = decode(thumbnail);
            for corner in [
                Corner::TopLeft,
                Corner::TopRight,
                Corner::BottomLeft,
                Corner::BottomRight,
            ] {
                let colour = colour_at(&image, corner);
                let wanted = if corner == red {
                    RED
                } else if corner == green {
                    GREEN
                } else {
                    GREY
                };
                assert!(
                    is(colour, wanted),
                    "orientation {orientation}, {}x{}: {corner:?} is {colour:?}, not {wanted:?}",
                    thumbnail.width,
                    thumbnail.height
                );
            }
            assert!(
                !segments(&thumbnail.jpeg)
                    .iter()
                    .any(|(marker, contents)| *marker == 0xE1 && contents.starts_with(b"Exif")),
                "thumbnails carry no Exif"
            );
        }
    }
}

#[test]
fn a_panorama_gives_2048_1024_and_256_wide_thumbnails() {
    let pano = write_metadata(
        &gradient(4096, 2048),
        &WriteTags {
            pano: true,
            ..located()
        },
    )
    .unwrap();
    let metadata = read_metadata(&pano).unwrap();
    assert!(metadata.is_pano);
    assert_eq!((metadata.width, metadata.height), (4096, 2048));
    let made = thumbnails(&pano, metadata.orientation).unwrap();
    assert_eq!(sizes(&made), [(256, 128), (1024, 512), (2048, 1024)]);
    for size in [
        ThumbnailSize::Px256,
        ThumbnailSize::Px1024,
        ThumbnailSize::Px2048,
    ] {
        let thumbnail = made.get(size).unwrap();
        assert_eq!(Some(thumbnail.width), size.width());
        // The gradient survives: red grows from left to right.
        let image = decode(thumbnail);
        let (left, right) = (
            colour_at(&image, Corner::TopLeft),
            colour_at(&image, Corner::TopRight),
        );
        assert!(
            left[0] < 60 && right[0] > 190,
            "{size:?}: {left:?} {right:?}"
        );
    }
    assert_eq!(made.get(ThumbnailSize::Original), None);
}

#[test]
fn a_narrow_original_is_never_upscaled() {
    let made = thumbnails(&gradient(200, 150), 1).unwrap();
    assert_eq!(sizes(&made), [(200, 150), (200, 150), (200, 150)]);
    let made = thumbnails(&gradient(600, 90), 6).unwrap();
    assert_eq!(sizes(&made), [(90, 600), (90, 600), (90, 600)]);
    let made = thumbnails(&gradient(1500, 1000), 1).unwrap();
    assert_eq!(sizes(&made), [(256, 171), (1024, 683), (1500, 1000)]);
    // A grey-scale JPEG gives RGB thumbnails too.
    let mut grey = Vec::new();
    jpeg_encoder::Encoder::new(&mut grey, 90)
        .encode(&[100; 64 * 32], 64, 32, jpeg_encoder::ColorType::Luma)
        .unwrap();
    let made = thumbnails(&grey, 1).unwrap();
    assert!(is(
        colour_at(&decode(&made.px256), Corner::TopLeft),
        [100, 100, 100]
    ));
}

#[test]
fn refuses_before_decoding_what_is_over_the_pixel_limit_or_undecodable() {
    // A frame header announcing 20000x20000 pixels, with no image data behind it.
    let frame = [
        8, 0x4E, 0x20, 0x4E, 0x20, 3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1,
    ];
    let jpeg = insert_segment(
        &[0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x03, 0x00, 0x01, 0xFF, 0xD9],
        0xC0,
        &frame,
    );
    assert_eq!(
        thumbnails(&jpeg, 1),
        Err(IngestError::TooManyPixels {
            width: 20_000,
            height: 20_000,
            limit: MAX_PIXELS
        })
    );
    // CMYK (4 components) and 12-bit samples are refused with a reason.
    let cmyk = [
        8, 0, 8, 0, 8, 4, 1, 0x11, 0, 2, 0x11, 0, 3, 0x11, 0, 4, 0x11, 0,
    ];
    let jpeg = insert_segment(
        &[0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x03, 0x00, 0x01, 0xFF, 0xD9],
        0xC0,
        &cmyk,
    );
    assert!(matches!(thumbnails(&jpeg, 1), Err(IngestError::Decode(_))));
    let twelve_bit = [12, 0, 8, 0, 8, 1, 1, 0x11, 0];
    let jpeg = insert_segment(
        &[0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x03, 0x00, 0x01, 0xFF, 0xD9],
        0xC1,
        &twelve_bit,
    );
    assert!(matches!(thumbnails(&jpeg, 1), Err(IngestError::Decode(_))));
    // An orientation that is not Exif's.
    for orientation in [0, 9] {
        assert!(matches!(
            thumbnails(&gradient(8, 8), orientation),
            Err(IngestError::InvalidMetadata(_))
        ));
    }
}
