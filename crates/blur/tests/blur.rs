//! A real street photo through the default blurrer: what a viewer of the published picture
//! gets, read back with independent decoders (`image`'s zune-jpeg, `kamadak-exif`).

#[path = "support/recall.rs"]
mod recall;

use streetlevel_blur::{BlurError, Blurrer as _, Hints, ModelFile, RegionClass};

/// The sum of absolute differences between horizontal neighbours inside a box: the detail.
fn detail(image: &image::GrayImage, x: u32, y: u32, width: u32, height: u32) -> u64 {
    let mut total = 0;
    for row in y..y + height {
        for column in x + 1..x + width {
            total += u64::from(
                image.get_pixel(column, row)[0].abs_diff(image.get_pixel(column - 1, row)[0]),
            );
        }
    }
    total
}

/// The sampling byte of each component in a JPEG's baseline frame header.
fn frame_sampling(jpeg: &[u8]) -> Vec<u8> {
    let at = jpeg
        .windows(2)
        .position(|marker| marker == [0xFF, 0xC0])
        .expect("a baseline frame header");
    let count = usize::from(jpeg[at + 9]);
    (0..count)
        .map(|component| jpeg[at + 11 + 3 * component])
        .collect()
}

#[test]
fn a_blurred_photo_keeps_its_metadata_and_loses_the_detail_of_its_faces() {
    let Some(blurrer) = recall::default_blurrer() else {
        return;
    };
    let original = std::fs::read(recall::pairs_dir().join("before_berlin_images_01.jpg")).unwrap();
    let blurred = blurrer.blur(&original, Hints::default()).unwrap();
    let faces = blurred
        .regions
        .iter()
        .filter(|region| region.class == RegionClass::Face);
    assert!(faces.clone().count() >= 5, "{:?}", blurred.regions);
    assert!(faces.clone().all(|region| region.model == "centerface.onnx"
        && region.model_sha256 == streetlevel_blur::CENTERFACE_SHA256));
    // Anything else is a plate, found by the pinned text detector.
    assert!(
        blurred
            .regions
            .iter()
            .all(|region| region.class == RegionClass::Face
                || (region.class == RegionClass::Plate
                    && region.model == streetlevel_blur::PLATE_TEXT_FILE
                    && region.model_sha256 == streetlevel_blur::PLATE_TEXT_SHA256))
    );

    // The Exif is the original's (GPS included), without the embedded thumbnail.
    let read_exif = |bytes: &[u8]| {
        exif::Reader::new()
            .read_from_container(&mut std::io::Cursor::new(bytes))
            .unwrap()
    };
    let (before, after) = (read_exif(&original), read_exif(&blurred.jpeg));
    for tag in [
        exif::Tag::GPSLatitude,
        exif::Tag::GPSLongitude,
        exif::Tag::ImageDescription,
        exif::Tag::Orientation,
    ] {
        let value = |exif: &exif::Exif| {
            exif.get_field(tag, exif::In::PRIMARY)
                .map(|field| field.display_value().to_string())
        };
        assert!(value(&before).is_some(), "{tag} in the original");
        assert_eq!(value(&before), value(&after), "{tag}");
    }
    assert!(
        after
            .fields()
            .all(|field| field.ifd_num != exif::In::THUMBNAIL)
    );
    // The camera's chroma sampling (4:2:0) is kept: luma sampled 2 x 2, both chroma 1 x 1.
    assert_eq!(frame_sampling(&original), [0x22, 0x11, 0x11]);
    assert_eq!(frame_sampling(&blurred.jpeg), [0x22, 0x11, 0x11]);

    // Inside every region the detail is gone (`pixels.rs` shows a checkerboard turned
    // uniform); outside, the picture is the original's up to re-encoding.
    let before = image::load_from_memory(&original).unwrap().to_luma8();
    let after = image::load_from_memory(&blurred.jpeg).unwrap().to_luma8();
    assert_eq!(before.dimensions(), after.dimensions());
    // Regions that overlap another have its edge inside them: each is checked alone.
    let alone = |region: &streetlevel_blur::Region| {
        blurred.regions.iter().all(|other| {
            std::ptr::eq(other, region)
                || other.x >= region.x + region.width
                || region.x >= other.x + other.width
                || other.y >= region.y + region.height
                || region.y >= other.y + other.height
        })
    };
    let checked: Vec<_> = blurred
        .regions
        .iter()
        .filter(|region| alone(region))
        .collect();
    assert!(checked.len() >= 3, "{checked:?}");
    for region in checked {
        let (x, y, width, height) = (region.x, region.y, region.width, region.height);
        let pixels = f64::from(width * height);
        let (was, is) = (
            f64::from(u32::try_from(detail(&before, x, y, width, height)).unwrap()) / pixels,
            f64::from(u32::try_from(detail(&after, x, y, width, height)).unwrap()) / pixels,
        );
        // What is left is at most 40 % of the original's, or the re-encoding's noise.
        assert!(
            is <= (was / 2.5).max(6.0),
            "{region:?}: detail {was:.1} became {is:.1} a pixel"
        );
    }
    let (width, height) = before.dimensions();
    let mut difference = 0u64;
    let mut counted = 0u64;
    for y in (0..height).step_by(3) {
        for x in (0..width).step_by(3) {
            let inside = blurred.regions.iter().any(|region| {
                (region.x.saturating_sub(16)..region.x + region.width + 16).contains(&x)
                    && (region.y.saturating_sub(16)..region.y + region.height + 16).contains(&y)
            });
            if !inside {
                difference +=
                    u64::from(before.get_pixel(x, y)[0].abs_diff(after.get_pixel(x, y)[0]));
                counted += 1;
            }
        }
    }
    assert!(
        difference < counted * 3,
        "mean difference outside {}",
        f64::from(u32::try_from(difference).unwrap()) / f64::from(u32::try_from(counted).unwrap())
    );
}

#[test]
fn a_photo_without_faces_is_published_byte_for_byte() {
    let Some(blurrer) = recall::default_blurrer() else {
        return;
    };
    // A plain grey picture: nothing to find.
    let mut jpeg = Vec::new();
    jpeg_encoder::Encoder::new(&mut jpeg, 80)
        .encode(
            &vec![128; 640 * 480 * 3],
            640,
            480,
            jpeg_encoder::ColorType::Rgb,
        )
        .unwrap();
    let blurred = blurrer.blur(&jpeg, Hints::default()).unwrap();
    assert!(blurred.regions.is_empty());
    assert_eq!(blurred.jpeg, jpeg);
}

#[test]
fn hostile_pictures_and_wrong_models_are_refused_with_a_reason() {
    let Some(blurrer) = recall::default_blurrer() else {
        return;
    };
    for bytes in [&b"GIF89a"[..], &[0xFF, 0xD8, 0xFF][..], &[][..]] {
        assert!(matches!(
            blurrer.blur(bytes, Hints::default()),
            Err(BlurError::Decode(_))
        ));
    }
    let model = recall::models_dir().join(streetlevel_blur::CENTERFACE_FILE);
    let wrong = "0".repeat(64);
    assert!(matches!(
        ModelFile::read(&model, Some(&wrong)),
        Err(BlurError::ModelHash { .. })
    ));
    assert!(matches!(
        ModelFile::read(&model.with_extension("missing"), None),
        Err(BlurError::ModelFile { .. })
    ));
    // A file that is not an ONNX graph.
    let not_a_model = std::env::temp_dir().join(format!("not-a-model-{}.onnx", std::process::id()));
    std::fs::write(&not_a_model, b"not a model").unwrap();
    let read = ModelFile::read(&not_a_model, None).unwrap();
    assert!(matches!(
        streetlevel_blur::Detector::load(read, RegionClass::Face),
        Err(BlurError::Model { .. })
    ));
    std::fs::remove_file(&not_a_model).unwrap();
}
