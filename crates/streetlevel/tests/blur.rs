//! Blurring through the real binary: `streetlevel import` of a real street photo with the
//! defaults publishes it blurred (original and thumbnails) with its regions recorded, and
//! with blurring on but no usable model publishes nothing and says why.

#![allow(clippy::unwrap_used, clippy::panic, clippy::too_many_lines)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use streetlevel_ingest::{WriteTags, write_metadata};
use streetlevel_model::Timestamp;

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("streetlevel-blur-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A Berlin street photo with pedestrians (`../shared/data/opensfm-blur-pairs`), with its
/// capture time written as Exif (the file has it only in the old app's description JSON).
fn street_photo(dir: &Path) -> (PathBuf, Vec<u8>) {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/opensfm-blur-pairs/before_berlin_images_01.jpg");
    let bytes = std::fs::read(&source).unwrap_or_else(|error| {
        panic!("{}: {error} (the shared data is missing)", source.display())
    });
    let mut tags = WriteTags {
        latitude: Some(52.519),
        longitude: Some(13.401),
        direction: Some(54.7),
        make: Some(String::from("Apple")),
        model: Some(String::from("iPhone 4S")),
        ..WriteTags::default()
    };
    tags.set_capture_time_utc(Timestamp(1_404_000_000_000));
    let photo = write_metadata(&bytes, &tags).unwrap();
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("berlin.jpg");
    std::fs::write(&path, &photo).unwrap();
    (path, photo)
}

fn import(data: &Path, photos: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(BINARY)
        .arg("import")
        .arg("--data")
        .arg(data)
        .args(extra)
        .arg(photos)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn an_import_with_the_defaults_publishes_the_photo_blurred_and_records_what_was_found() {
    let Some(models) = streetlevel_tests::test_models_dir() else {
        return;
    };
    let dir = temp_dir("import");
    let (photos, photo) = street_photo(&dir.join("photos"));
    let data = dir.join("data");
    // No --blur flag: blurring is on by default.
    let output = import(
        &data,
        &photos,
        &[
            "--blur-models-dir",
            &models.to_string_lossy(),
            "--keep-unblurred",
            "true",
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("imported 1 images"), "{stdout}");

    let database = rusqlite::Connection::open(data.join("streetlevel.sqlite")).unwrap();
    let image: i64 = database
        .query_row("SELECT image_id FROM import_blurred_images", [], |row| {
            row.get(0)
        })
        .unwrap();
    let regions: Vec<(String, i64, i64, i64, i64, String, String)> = database
        .prepare(
            "SELECT class, x, y, width, height, model, model_sha256 FROM import_blur_regions
             WHERE image_id = ?1 AND source = 'detector'",
        )
        .unwrap()
        .query_map([image], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
                row.get(5)?,
                row.get(6)?,
            ))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let faces: Vec<_> = regions.iter().filter(|region| region.0 == "face").collect();
    assert!(faces.len() >= 5, "{regions:?}");
    assert!(faces.iter().all(|region| region.5 == "centerface.onnx"
        && region.6 == "09189deaaf8646c5c51a68447e3c744ea1e211798155d4728c20507b9f5aefbc"));
    // Whatever else was blurred is a plate found by the pinned text detector.
    assert!(regions.iter().all(|region| region.0 == "face"
        || (region.0 == "plate"
            && region.5 == "PP-OCRv5_det.onnx"
            && region.6 == "d7fe3ea74652890722c0f4d02458b7261d9f5ae6c92904d05707c9eb155c7924")));

    // The published original is not the uploaded file: inside every region the pixels
    // changed, and the unblurred original is kept beside it, at a key nothing serves.
    let media = data.join("media");
    let published = std::fs::read(media.join(format!("img/{image}/original.jpg"))).unwrap();
    assert_ne!(published, photo);
    // (The stored original is the file up to its end-of-image marker.)
    let kept = std::fs::read(media.join(format!("img/{image}/unblurred.jpg"))).unwrap();
    assert!(kept.len() * 2 > photo.len() && photo.starts_with(&kept));
    let before = image::load_from_memory(&photo).unwrap().to_luma8();
    let after = image::load_from_memory(&published).unwrap().to_luma8();
    // Inside the regions the detail (differences between neighbouring pixels) is mostly gone.
    let detail = |picture: &image::GrayImage| {
        let mut total = 0u64;
        for (_, x, y, width, height, _, _) in &regions {
            for row in *y..y + height {
                for column in x + 1..x + width {
                    let (column, row) =
                        (u32::try_from(column).unwrap(), u32::try_from(row).unwrap());
                    total += u64::from(
                        picture.get_pixel(column, row)[0]
                            .abs_diff(picture.get_pixel(column - 1, row)[0]),
                    );
                }
            }
        }
        total
    };
    let (was, is) = (detail(&before), detail(&after));
    assert!(is * 2 < was, "detail inside the regions {was} became {is}");
    // Every thumbnail is made from the blurred picture: the largest one, scaled back,
    // matches the published original inside the first region better than the uploaded one.
    let thumbnail = image::load_from_memory(
        &std::fs::read(media.join(format!("img/{image}/2048.jpg"))).unwrap(),
    )
    .unwrap()
    .to_luma8();
    let (small_width, large_width) = (u64::from(thumbnail.width()), u64::from(before.width()));
    let (mut to_published, mut to_uploaded) = (0u64, 0u64);
    for (_, x, y, width, height, _, _) in &regions {
        for row in (*y..y + height).step_by(2) {
            for column in (*x..x + width).step_by(2) {
                let (column, row) = (u32::try_from(column).unwrap(), u32::try_from(row).unwrap());
                let scaled =
                    |at: u32| u32::try_from(u64::from(at) * small_width / large_width).unwrap();
                let small = thumbnail.get_pixel(
                    scaled(column).min(thumbnail.width() - 1),
                    scaled(row).min(thumbnail.height() - 1),
                )[0];
                to_published += u64::from(small.abs_diff(after.get_pixel(column, row)[0]));
                to_uploaded += u64::from(small.abs_diff(before.get_pixel(column, row)[0]));
            }
        }
    }
    assert!(
        to_published < to_uploaded,
        "{to_published} vs {to_uploaded}"
    );

    // Erasure takes what blurring kept too: the regions, the record and the unblurred original.
    drop(database);
    let erased = Command::new(BINARY)
        .args(["images", "delete", "--data"])
        .arg(&data)
        .arg(image.to_string())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        erased.status.success(),
        "{}",
        String::from_utf8_lossy(&erased.stderr)
    );
    let database = rusqlite::Connection::open(data.join("streetlevel.sqlite")).unwrap();
    for table in ["import_blur_regions", "import_blurred_images"] {
        let left: i64 = database
            .query_row(
                &format!("SELECT count(*) FROM {table} WHERE image_id = ?1"),
                [image],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(left, 0, "{table}");
    }
    assert!(!media.join(format!("img/{image}")).exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn blurring_on_without_a_usable_model_imports_nothing_and_says_why() {
    let dir = temp_dir("no-model");
    let (photos, _) = street_photo(&dir.join("photos"));
    let data = dir.join("data");
    let missing = dir.join("no-models-here");
    let output = import(
        &data,
        &photos,
        &["--blur-models-dir", &missing.to_string_lossy()],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("nothing was imported"), "{stderr}");
    assert!(stderr.contains("libonnxruntime.so.1.32.0"), "{stderr}");
    assert!(!data.join("media").join("img").exists());
    // A wrong file where the pinned model should be is refused too.
    if let Some(models) = streetlevel_tests::test_models_dir() {
        let fake = dir.join("fake-models");
        std::fs::create_dir_all(&fake).unwrap();
        std::fs::copy(
            models.join("libonnxruntime.so.1.32.0"),
            fake.join("libonnxruntime.so.1.32.0"),
        )
        .unwrap();
        std::fs::write(fake.join("centerface.onnx"), b"not the pinned model").unwrap();
        let output = import(
            &data,
            &photos,
            &["--blur-models-dir", &fake.to_string_lossy()],
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success());
        assert!(stderr.contains("not the pinned"), "{stderr}");
        assert!(!data.join("media").join("img").exists());
    }
    // Turned off, the same photo is published as received.
    let output = import(&data, &photos, &["--blur", "false"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_import_through_a_blur_service_that_is_down_publishes_nothing_and_says_to_run_it_again() {
    let dir = temp_dir("service-down");
    let (photos, _) = street_photo(&dir.join("photos"));
    let data = dir.join("data");
    // A port on which nothing listens.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let output = import(
        &data,
        &photos,
        &["--blur-url", &format!("http://127.0.0.1:{port}")],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("held until the blur service answers")
            && stderr.contains("unavailable")
            && stderr.contains("run the same import again"),
        "{stderr}"
    );
    let database = rusqlite::Connection::open(data.join("streetlevel.sqlite")).unwrap();
    let images: i64 = database
        .query_row("SELECT count(*) FROM store_images", [], |row| row.get(0))
        .unwrap();
    assert_eq!(images, 0, "nothing published");
    assert!(!data.join("media").join("img").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The detail of `picture` inside `bounds` (left, top, right, bottom in the pixels of a
/// picture `full` wide, scaled to `picture`'s width): the sum of the differences between
/// neighbouring pixels along each row.
fn detail(picture: &image::GrayImage, bounds: [u32; 4], full: u32) -> u64 {
    let scaled = |at: u32, limit: u32| {
        u32::try_from(u64::from(at) * u64::from(picture.width()) / u64::from(full))
            .unwrap()
            .min(limit - 1)
    };
    let (left, right) = (
        scaled(bounds[0], picture.width()),
        scaled(bounds[2], picture.width()),
    );
    let (top, bottom) = (
        scaled(bounds[1], picture.height()),
        scaled(bounds[3], picture.height()),
    );
    let mut total = 0;
    for y in top..=bottom {
        for x in left + 1..=right {
            total += u64::from(picture.get_pixel(x, y)[0].abs_diff(picture.get_pixel(x - 1, y)[0]));
        }
    }
    total
}

/// A parked car's licence plate in a Lund street photo (`before_lund_images_26.jpg` of the
/// shared pairs, 1024 x 768; the plate about 67 x 19 pixels), imported with the defaults and
/// served: in the original and every thumbnail the server serves, the plate's detail is
/// gone, and the import recorded a plate there. Where the plate is comes from the pair, not
/// from our detector: the pixels the original service's own blur changed around the car.
#[test]
fn a_plate_imported_with_the_defaults_is_blurred_in_every_served_size() {
    let Some(models) = streetlevel_tests::test_models_dir() else {
        return;
    };
    let models = models.to_string_lossy().into_owned();
    let dir = temp_dir("plate");
    let pairs =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/opensfm-blur-pairs");
    let original = std::fs::read(pairs.join("before_lund_images_26.jpg")).unwrap_or_else(|error| {
        panic!("{}: {error} (the shared data is missing)", pairs.display())
    });
    let before = image::load_from_memory(&original).unwrap().to_luma8();
    let after = image::open(pairs.join("after_lund_images_26.jpg"))
        .unwrap()
        .to_luma8();
    // The plate: what the production blur changed in the corner where the car stands.
    let changed: Vec<(u32, u32)> = (560..620)
        .flat_map(|y| (0..160).map(move |x| (x, y)))
        .filter(|&(x, y)| before.get_pixel(x, y)[0].abs_diff(after.get_pixel(x, y)[0]) > 30)
        .collect();
    assert!(changed.len() > 300, "{} pixels changed", changed.len());
    let plate = [
        changed.iter().map(|at| at.0).min().unwrap(),
        changed.iter().map(|at| at.1).min().unwrap(),
        changed.iter().map(|at| at.0).max().unwrap(),
        changed.iter().map(|at| at.1).max().unwrap(),
    ];

    let mut tags = WriteTags {
        latitude: Some(55.7047),
        longitude: Some(13.1910),
        direction: Some(120.0),
        ..WriteTags::default()
    };
    tags.set_capture_time_utc(Timestamp(1_404_000_000_000));
    let photos = dir.join("photos");
    std::fs::create_dir_all(&photos).unwrap();
    std::fs::write(
        photos.join("lund.jpg"),
        write_metadata(&original, &tags).unwrap(),
    )
    .unwrap();
    let data = dir.join("data");
    // No --blur flag and no model named: the defaults.
    let output = import(&data, &photos, &["--blur-models-dir", &models]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let database = rusqlite::Connection::open(data.join("streetlevel.sqlite")).unwrap();
    let (image, plates): (i64, i64) = database
        .query_row(
            "SELECT image_id, count(*) FROM import_blur_regions
             WHERE class = 'plate' AND x < ?1 AND x + width > ?2 AND y < ?3 AND y + height > ?4
             GROUP BY image_id",
            [plate[2], plate[0], plate[3], plate[1]],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap_or_else(|error| panic!("no plate region recorded over the plate: {error}"));
    assert!(plates >= 1);
    drop(database);

    let token = streetlevel_tests::create_app(Path::new(BINARY), &data, "read");
    let server =
        streetlevel_tests::Server::start(Path::new(BINARY), &data, &["--blur-models-dir", &models]);
    let authorization = format!("OAuth {token}");
    let fields = "thumb_256_url,thumb_1024_url,thumb_2048_url,thumb_original_url";
    let entity = server
        .request(
            "GET",
            &format!("/{image}?fields={fields}"),
            &[("Authorization", &authorization)],
            b"",
        )
        .json();
    for field in fields.split(',') {
        let url = entity[field]
            .as_str()
            .unwrap_or_else(|| panic!("no {field}: {entity}"));
        let target = url.strip_prefix(&server.base()).unwrap_or(url);
        let served = server.get(target);
        assert_eq!(served.status, 200, "{field}");
        let served = image::load_from_memory(&served.body).unwrap().to_luma8();
        // The unblurred photo at the served size, against which the detail is compared.
        let unblurred = image::imageops::resize(
            &before,
            served.width(),
            served.height(),
            image::imageops::FilterType::Triangle,
        );
        let (was, is) = (
            detail(&unblurred, plate, before.width()),
            detail(&served, plate, before.width()),
        );
        assert!(
            is * 2 < was,
            "{field} ({}x{}): the plate's detail {was} unblurred is {is} served",
            served.width(),
            served.height()
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
