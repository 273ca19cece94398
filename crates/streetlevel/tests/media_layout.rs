//! The media layout through the real binary: for every kind of image (a photo, a panorama and
//! a video frame, each imported with its unblurred original kept), the server makes every
//! object a client can ask for (each thumbnail and every tile of the viewer's pyramid, at
//! every level); each file it keeps is at a key the layout names under the image's prefix;
//! and erasing the images leaves no file of them anywhere in the data directory, also where
//! a data directory written before the layout kept them, nor the bytes of the upload sessions
//! that became them. Real photos
//! (`../shared/data/opensfm-blur-pairs`) and a real clip (`../shared/data/video`, with
//! Debian's `ffmpeg`).
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde_json::Value;
use streetlevel_blur::{BlurError, Blurred, Blurrer, Hints};
use streetlevel_import::{Blurring, ImportOptions, import_paths};
use streetlevel_media::layout::{self, ImageObject};
use streetlevel_model::ImageId;
use streetlevel_store::Store;
use streetlevel_tests::Server;

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");

fn shared_data(folder: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(folder);
    assert!(
        dir.is_dir(),
        "the test data are missing: {} (see ../shared/data/README.md)",
        dir.display()
    );
    dir
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "streetlevel-media-layout-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Publishes each picture as it is and says so: what matters here is that blurring is on,
/// so the unblurred original is kept.
struct AsItIs;

impl Blurrer for AsItIs {
    fn blur(&self, jpeg: &[u8], _hints: Hints) -> Result<Blurred, BlurError> {
        Ok(Blurred {
            jpeg: jpeg.to_vec(),
            regions: Vec::new(),
        })
    }

    fn fingerprint(&self) -> String {
        String::from("media layout test: as it is")
    }
}

/// A 4096 x 2048 equirectangular panorama made of a real photo, tagged as one (`GPano`).
fn panorama() -> Vec<u8> {
    let photo = image::open(shared_data("opensfm-blur-pairs").join("before_lund_images_05.jpg"))
        .unwrap()
        .to_rgb8();
    let wide = image::imageops::resize(&photo, 4096, 2048, image::imageops::FilterType::Triangle);
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 85)
        .encode_image(&wide)
        .unwrap();
    let mut tags = streetlevel_ingest::WriteTags {
        latitude: Some(55.7075),
        longitude: Some(13.1880),
        direction: Some(90.0),
        pano: true,
        ..streetlevel_ingest::WriteTags::default()
    };
    tags.set_capture_time_utc(streetlevel_model::Timestamp(1_714_557_600_000));
    streetlevel_ingest::write_metadata(&jpeg, &tags).unwrap()
}

/// Imports a real photo, a panorama and a real clip's frames into `data` with blurring on
/// and unblurred originals kept.
fn import(root: &Path, data: &Path) {
    let photos = root.join("photos");
    std::fs::create_dir_all(&photos).unwrap();
    std::fs::copy(
        shared_data("opensfm-blur-pairs").join("after_lund_images_01.jpg"),
        photos.join("photo.jpg"),
    )
    .unwrap();
    let panoramas = root.join("panoramas");
    std::fs::create_dir_all(&panoramas).unwrap();
    std::fs::write(panoramas.join("pano.jpg"), panorama()).unwrap();
    let videos = root.join("videos");
    std::fs::create_dir_all(&videos).unwrap();
    let samples = shared_data("video");
    std::fs::copy(samples.join("sample-5s.mp4"), videos.join("ride.mp4")).unwrap();
    std::fs::copy(samples.join("sf_30km_h.gpx"), videos.join("ride.gpx")).unwrap();
    let store = RwLock::new(Store::open(data).unwrap());
    let options = ImportOptions {
        username: String::from("alice"),
        blurring: Blurring::On {
            blurrer: Arc::new(AsItIs),
            keep_unblurred: true,
        },
        ..ImportOptions::default()
    };
    for folder in [photos, panoramas, videos] {
        let report = import_paths(
            &store,
            data,
            std::slice::from_ref(&folder),
            &options,
            &|_| {},
        )
        .unwrap();
        assert!(
            report.imported() > 0,
            "nothing imported from {}: {:?}",
            folder.display(),
            report.files
        );
    }
}

/// Every file under `dir`, relative to it, as `/`-separated text.
fn files_under(dir: &Path) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                folders.push(entry.path());
            } else {
                let relative = entry.path().strip_prefix(dir).unwrap().to_owned();
                files.insert(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    files
}

/// Whether a file (relative to the data directory) is one of `image`'s: under its prefix,
/// or named after it as an older layout named its files.
fn is_of(file: &str, image: &str) -> bool {
    let name = file.rsplit('/').next().unwrap_or(file);
    file.split('/').any(|part| part == image)
        || name.starts_with(&format!("{image}_"))
        || name.starts_with(&format!("{image}."))
}

fn longitude(image: &Value) -> f64 {
    image["geometry"]["coordinates"][0].as_f64().unwrap()
}

fn local(server: &Server, url: &str) -> String {
    url.strip_prefix(&server.base()).unwrap().to_owned()
}

/// Asks the server for every object of `image` a client can ask for: the four sizes and
/// every tile of every level of its pyramid. Returns the objects made from the original.
fn fetch_everything(server: &Server, token: &str, image: &Value) -> BTreeSet<ImageObject> {
    let id = image["id"].as_str().unwrap();
    let auth = format!("OAuth {token}");
    let mut made = BTreeSet::new();
    for (field, width) in [
        ("thumb_256_url", Some(256)),
        ("thumb_1024_url", Some(1024)),
        ("thumb_2048_url", Some(2048)),
        ("thumb_original_url", None),
    ] {
        let response = server.get(&local(server, image[field].as_str().unwrap()));
        assert_eq!(response.status, 200, "{id} {field}");
        if let Some(width) = width {
            made.insert(ImageObject::Thumbnail(width));
        }
    }
    let (width, height) = (
        u32::try_from(image["width"].as_u64().unwrap()).unwrap(),
        u32::try_from(image["height"].as_u64().unwrap()).unwrap(),
    );
    let top = layout::pyramid_top_level(layout::pyramid_max_level(width, height));
    for z in 0..=top {
        let response = server.request(
            "GET",
            &format!("/{id}/tiles?z={z}&fields=url,z,x,y"),
            &[("Authorization", &auth)],
            b"",
        );
        assert_eq!(response.status, 200, "{id} tiles at {z}");
        let tiles = response.json()["data"].as_array().unwrap().clone();
        assert!(!tiles.is_empty(), "{id} has no tiles at {z}");
        for tile in tiles {
            let served = server.get(&local(server, tile["url"].as_str().unwrap()));
            assert_eq!(served.status, 200, "{id} tile {tile}");
            let coordinate = |name: &str| u32::try_from(tile[name].as_u64().unwrap()).unwrap();
            made.insert(ImageObject::Tile {
                z: coordinate("z"),
                x: coordinate("x"),
                y: coordinate("y"),
            });
        }
    }
    made
}

/// Checks that the files of `image` are exactly its original, its unblurred original and what
/// the requests `made`, each at its key of the layout; then adds where a data directory
/// written before the layout kept some of them, which erasure must take too.
fn check_files_then_plant_old_ones(data: &Path, image: &Value, made: &BTreeSet<ImageObject>) {
    let id = image["id"].as_str().unwrap();
    let image_id = ImageId(id.parse().unwrap());
    // Every file the image has is at a key the layout names under its prefix: its
    // original, its unblurred original, and exactly what the requests made.
    let mut expected: BTreeSet<String> = made
        .iter()
        .chain([&ImageObject::Original, &ImageObject::Unblurred])
        .map(|object| object.key(image_id).as_str().to_owned())
        .collect();
    let (width, height) = (
        u32::try_from(image["width"].as_u64().unwrap()).unwrap(),
        u32::try_from(image["height"].as_u64().unwrap()).unwrap(),
    );
    let known: BTreeSet<String> = layout::image_objects(width, height)
        .iter()
        .map(|object| object.key(image_id).as_str().to_owned())
        .collect();
    assert!(
        expected.is_subset(&known),
        "{id}: the layout lists them all"
    );
    let files: BTreeSet<String> = files_under(data)
        .into_iter()
        .filter(|file| is_of(file, id))
        .collect();
    assert_eq!(files, expected, "{id}'s files");
    // What a data directory written before the layout holds of it, which erasure takes
    // too.
    for object in [
        ImageObject::Original,
        ImageObject::Thumbnail(256),
        ImageObject::Tile { z: 0, x: 0, y: 0 },
        ImageObject::Unblurred,
    ] {
        for key in layout::legacy_keys(image_id, object) {
            let path = key.path(data);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, b"from before the layout").unwrap();
            expected.insert(key.as_str().to_owned());
        }
    }
    assert!(expected.len() > 20, "{id}: {expected:?}");
}

#[test]
fn erasure_removes_every_object_serving_made_of_every_kind_of_image() {
    let root = temp_dir("erase");
    let data = root.join("data");
    import(&root, &data);
    let token = streetlevel_tests::create_app(Path::new(BINARY), &data, "read");
    let server = Server::start(Path::new(BINARY), &data, &[]);
    let auth = format!("OAuth {token}");
    let response = server.request(
        "GET",
        "/images?bbox=-180,-85,180,85&limit=100&fields=id,width,height,is_pano,geometry,\
         thumb_256_url,thumb_1024_url,thumb_2048_url,thumb_original_url",
        &[("Authorization", &auth)],
        b"",
    );
    assert_eq!(response.status, 200);
    let images = response.json()["data"].as_array().unwrap().clone();
    let panorama = images
        .iter()
        .find(|image| image["is_pano"] == true)
        .expect("the panorama")
        .clone();
    let photo = images
        .iter()
        .find(|image| image["is_pano"] == false && longitude(image) > 0.0)
        .expect("the photo (in Lund)")
        .clone();
    let frame = images
        .iter()
        .find(|image| longitude(image) < 0.0)
        .expect("a video frame (in San Francisco)")
        .clone();
    let chosen = [&photo, &panorama, &frame];
    for image in chosen {
        let made = fetch_everything(&server, &token, image);
        check_files_then_plant_old_ones(&data, image, &made);
    }

    let ids: Vec<&str> = chosen
        .iter()
        .map(|image| image["id"].as_str().unwrap())
        .collect();
    // The upload sessions that became the images, their bytes left behind (a job that could
    // not remove them): erasure takes them too, from the layout's keys.
    let database = streetlevel_db::Database::open(server.database()).unwrap();
    for id in &ids {
        let key = format!("{id}.jpg");
        database
            .write(|connection| {
                connection.execute(
                    "INSERT INTO import_sessions (user_id, key, handle, created_at, image)
                     VALUES (?1, ?2, ?3, 0, ?4)",
                    streetlevel_db::params![
                        1_i64,
                        &key,
                        &format!("h1.{id}"),
                        id.parse::<i64>().unwrap()
                    ],
                )
            })
            .unwrap();
        let path = layout::upload_key(1, &key).path(&data);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"the uploaded bytes").unwrap();
    }
    let mut delete = vec!["images", "delete", "--data"];
    let data_arg = data.to_string_lossy().into_owned();
    delete.push(&data_arg);
    delete.extend(&ids);
    streetlevel_tests::run_with_env(Path::new(BINARY), &delete, &server.admin_env());

    // Nothing of them is served any more, and no file of them is left anywhere.
    for image in chosen {
        let response = server.get(&local(&server, image["thumb_256_url"].as_str().unwrap()));
        assert_eq!(response.status, 404, "{}", image["id"]);
    }
    let left: Vec<String> = files_under(&data)
        .into_iter()
        .filter(|file| ids.iter().any(|id| is_of(file, id)))
        .collect();
    assert!(left.is_empty(), "left after erasure: {left:?}");
    for id in &ids {
        let prefix = layout::image_prefix(ImageId(id.parse().unwrap()));
        assert!(!prefix.path(&data).exists(), "{prefix}");
    }
    // The other frames of the clip are still served.
    let others = images
        .iter()
        .filter(|image| !ids.contains(&image["id"].as_str().unwrap()))
        .count();
    assert!(others > 0);
    drop(server);
    std::fs::remove_dir_all(&root).unwrap();
}
