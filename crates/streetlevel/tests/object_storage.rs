//! Media on an S3-compatible object store, through the real binary against a real S3 server
//! (Garage 2.5.0, single node, started by `streetlevel_tests::garage`): `streetlevel import
//! --media-store s3://…` writes every object to the bucket and nothing of the media to the data
//! directory, `streetlevel serve` with the store in its config file serves the originals (whole and by
//! range), thumbnails and pyramid tiles from it, and erasing the images leaves nothing of them
//! in the bucket (listed by a client of its own); with `--media-redirect-seconds` the server
//! answers with presigned URLs that Garage accepts (whole, by range, not once tampered with)
//! and refuses to redirect once the image is erased; with the store down, media answer 503
//! with `Retry-After`, and are served again once it is back; `streetlevel media migrate`
//! moves a data directory's media to the bucket and back, resuming after a failure; an image
//! deleted through the API has nothing left under its prefix when the DELETE answers. Real photos
//! (`../shared/data/opensfm-blur-pairs`).
//!
//! Garage is built by `cargo xtask test` (and `cargo xtask models`) into the tools cache;
//! without it the test says so and passes, except under CI, where it fails.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::path::{Path, PathBuf};

use streetlevel_media::MediaStore;
use streetlevel_tests::Server;
use streetlevel_tests::garage::{self, Garage};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");

/// The bucket and prefix the service's media go to.
const STORE: &str = "s3://streetlevel/service";

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "streetlevel-object-storage-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A client of the bucket of its own (the media crate's store on `object_store`), to see what
/// the service left there.
fn bucket(garage: &Garage) -> MediaStore {
    bucket_at(garage, STORE)
}

/// [`bucket`] at another `s3://` URL.
fn bucket_at(garage: &Garage, url: &str) -> MediaStore {
    let settings: Vec<(String, String)> = garage
        .env()
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect();
    MediaStore::connect(Path::new("/nonexistent"), Some(url), &settings).unwrap()
}

/// `env` as `run_with_env` and `Server::start_with_env` take it.
fn borrowed<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect()
}

/// The test's temporary directory `name` with the shared Lund photos `numbers`
/// (`after_lund_images_NN.jpg`) copied into its `photos/`: the directory, `photos/` and
/// `data/` (not created yet).
fn with_lund_photos(
    name: &str,
    numbers: std::ops::RangeInclusive<u32>,
) -> (PathBuf, PathBuf, PathBuf) {
    let root = temp_dir(name);
    let photos = root.join("photos");
    std::fs::create_dir_all(&photos).unwrap();
    let shared =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/opensfm-blur-pairs");
    for number in numbers {
        let name = format!("after_lund_images_{number:02}.jpg");
        std::fs::copy(shared.join(&name), photos.join(&name)).unwrap();
    }
    let data = root.join("data");
    (root, photos, data)
}

/// `streetlevel import` of `photos` into `data` as alice, onto [`STORE`] when `onto_store`.
fn import_args<'a>(data: &'a str, photos: &'a str, onto_store: bool) -> Vec<&'a str> {
    let mut args = vec!["import", "--data", data, "--user", "alice"];
    if onto_store {
        args.extend(["--media-store", STORE]);
    }
    args.push(photos);
    args
}

#[test]
// One scenario on one Garage, read top to bottom: import, serve, erase.
#[allow(clippy::too_many_lines)]
fn import_serve_and_erase_on_garage_leave_nothing_behind() {
    let Some(garage) = garage::start_or_skip() else {
        return;
    };
    let env_owned = garage.env();
    let env = borrowed(&env_owned);
    let (root, photos, data) = with_lund_photos("garage", 1..=3);
    let data_arg = data.to_string_lossy().into_owned();
    let photos_arg = photos.to_string_lossy().into_owned();
    streetlevel_tests::run_with_env(
        Path::new(BINARY),
        &import_args(&data_arg, &photos_arg, true),
        &env,
    );
    // Nothing of the media is in the data directory; every object is in the bucket.
    assert!(!data.join("media/img").exists());
    let bucket = bucket(&garage);
    let stored = bucket
        .list(&streetlevel_media::layout::images_prefix())
        .unwrap();
    assert_eq!(
        stored.len(),
        3 * 4,
        "originals and three thumbnails each: {stored:?}"
    );

    let token = streetlevel_tests::create_app(Path::new(BINARY), &data, "read");
    // The server finds the store from its config file alone: the same `AWS_*` names as the
    // import's environment, under `media_store_options`.
    let options: serde_json::Map<String, serde_json::Value> = env_owned
        .iter()
        .map(|(name, value)| ((*name).to_owned(), serde_json::Value::from(value.as_str())))
        .collect();
    let config = root.join("config.json");
    std::fs::write(
        &config,
        serde_json::json!({"media_store": STORE, "media_store_options": options}).to_string(),
    )
    .unwrap();
    let config_arg = config.to_string_lossy().into_owned();
    let server = Server::start_with_env(
        Path::new(BINARY),
        &data,
        "127.0.0.1:0",
        &["--config", &config_arg],
        &[],
    );
    let auth = format!("OAuth {token}");
    let listed = server.request(
        "GET",
        "/images?bbox=-180,-85,180,85&limit=10&fields=id,thumb_256_url,thumb_2048_url,thumb_original_url",
        &[("Authorization", &auth)],
        b"",
    );
    assert_eq!(listed.status, 200);
    let images = listed.json()["data"].as_array().unwrap().clone();
    assert_eq!(images.len(), 3);
    let local = |url: &serde_json::Value| {
        url.as_str()
            .unwrap()
            .strip_prefix(&server.base())
            .unwrap()
            .to_owned()
    };
    for image in &images {
        let id: u64 = image["id"].as_str().unwrap().parse().unwrap();
        let original = server.get(&local(&image["thumb_original_url"]));
        assert_eq!(original.status, 200);
        let in_bucket = bucket
            .read(&streetlevel_media::ImageObject::Original.key(streetlevel_model::ImageId(id)))
            .unwrap()
            .unwrap();
        assert_eq!(original.body, in_bucket);
        let part = server.request(
            "GET",
            &local(&image["thumb_original_url"]),
            &[("Range", "bytes=100-199")],
            b"",
        );
        assert_eq!(part.status, 206);
        assert_eq!(part.body, in_bucket[100..200]);
        for field in ["thumb_256_url", "thumb_2048_url"] {
            assert_eq!(server.get(&local(&image[field])).status, 200, "{field}");
        }
        let tiles = server.request(
            "GET",
            &format!("/{id}/tiles?z=11&fields=url"),
            &[("Authorization", &auth)],
            b"",
        );
        assert_eq!(tiles.status, 200);
        for tile in tiles.json()["data"].as_array().unwrap() {
            assert_eq!(server.get(&local(&tile["url"])).status, 200);
        }
    }
    // The tiles the requests made were kept in the bucket, not in the data directory.
    assert!(
        bucket
            .list(&streetlevel_media::layout::images_prefix())
            .unwrap()
            .len()
            > 3 * 4
    );
    assert!(!data.join("media/img").exists());

    // Erased: nothing of any of them is left in the bucket, and none is served.
    let ids: Vec<&str> = images
        .iter()
        .map(|image| image["id"].as_str().unwrap())
        .collect();
    let mut delete = vec![
        "images",
        "delete",
        "--data",
        &data_arg,
        "--media-store",
        STORE,
    ];
    delete.extend(&ids);
    let mut admin_env = env.clone();
    admin_env.extend(server.admin_env());
    streetlevel_tests::run_with_env(Path::new(BINARY), &delete, &admin_env);
    let left = bucket
        .list(&streetlevel_media::layout::images_prefix())
        .unwrap();
    assert!(left.is_empty(), "left in the bucket: {left:?}");
    for image in &images {
        assert_eq!(server.get(&local(&image["thumb_256_url"])).status, 404);
    }
    drop(server);
    drop(garage);
    std::fs::remove_dir_all(&root).unwrap();
}

/// `GET` of a URL on the store (`http://host:port/path?query`), as a browser following a
/// redirect would.
fn get_from_store(url: &str, headers: &[(&str, &str)]) -> streetlevel_tests::Response {
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, target) = rest.split_at(rest.find('/').unwrap());
    streetlevel_tests::request(authority.parse().unwrap(), "GET", target, headers, b"")
}

#[test]
// One scenario on one Garage: redirects given, followed, repeated, refused after erasure.
#[allow(clippy::too_many_lines)]
fn media_redirect_to_presigned_urls_that_the_store_accepts() {
    let Some(mut garage) = garage::start_or_skip() else {
        return;
    };
    let env_owned = garage.env();
    let env = borrowed(&env_owned);
    let (root, photos, data) = with_lund_photos("redirect", 4..=4);
    let data_arg = data.to_string_lossy().into_owned();
    let photos_arg = photos.to_string_lossy().into_owned();
    streetlevel_tests::run_with_env(
        Path::new(BINARY),
        &import_args(&data_arg, &photos_arg, true),
        &env,
    );
    let token = streetlevel_tests::create_app(Path::new(BINARY), &data, "read");
    let server = Server::start_with_env(
        Path::new(BINARY),
        &data,
        "127.0.0.1:0",
        &["--media-store", STORE, "--media-redirect-seconds", "600"],
        &env,
    );
    let auth = format!("OAuth {token}");
    let listed = server.request(
        "GET",
        "/images?bbox=-180,-85,180,85&limit=10&fields=id,thumb_1024_url,thumb_original_url",
        &[("Authorization", &auth)],
        b"",
    );
    assert_eq!(listed.status, 200);
    let image = listed.json()["data"][0].clone();
    let id: u64 = image["id"].as_str().unwrap().parse().unwrap();
    let local = |field: &str| {
        image[field]
            .as_str()
            .unwrap()
            .strip_prefix(&server.base())
            .unwrap()
            .to_owned()
    };
    let bucket = bucket(&garage);
    let original_key = streetlevel_media::ImageObject::Original.key(streetlevel_model::ImageId(id));
    let original = bucket.read(&original_key).unwrap().unwrap();

    // The original: a redirect to the object on Garage, which Garage serves, whole and by
    // range, and the same redirect again within the bucket.
    let first = server.get(&local("thumb_original_url"));
    assert_eq!(first.status, 302, "{:?}", first.headers);
    let location = first.header("location").unwrap().to_owned();
    assert!(
        location.starts_with(&format!(
            "{}/streetlevel/service/{}?",
            garage.endpoint(),
            original_key.as_str()
        )),
        "{location}"
    );
    let max_age: u64 = first
        .header("cache-control")
        .unwrap()
        .strip_prefix("public, max-age=")
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=600).contains(&max_age), "{max_age}");
    assert_eq!(
        first.header("surrogate-key"),
        Some(format!("image/{id}").as_str())
    );
    let fetched = get_from_store(&location, &[]);
    assert_eq!(
        fetched.status,
        200,
        "{}",
        String::from_utf8_lossy(&fetched.body)
    );
    assert_eq!(fetched.body, original);
    let part = get_from_store(&location, &[("Range", "bytes=10-19")]);
    assert_eq!(part.status, 206);
    assert_eq!(part.body, original[10..20]);
    assert_eq!(
        server.get(&local("thumb_original_url")).header("location"),
        Some(location.as_str())
    );
    // The store checks the signature: one changed digit and it refuses.
    let tampered = with_last_digit_changed(&location);
    assert_eq!(get_from_store(&tampered, &[]).status, 403);

    // The thumbnails the import made are redirects too.
    let thumbnail = server.get(&local("thumb_1024_url"));
    assert_eq!(thumbnail.status, 302);
    let fetched = get_from_store(thumbnail.header("location").unwrap(), &[]);
    assert_eq!(fetched.status, 200);
    assert_eq!(&fetched.body[..2], b"\xff\xd8", "a JPEG");
    // A viewer tile not made yet is made and streamed; once kept, it is a redirect.
    let tiles = server.request(
        "GET",
        &format!("/{id}/tiles?z=11&fields=url"),
        &[("Authorization", &auth)],
        b"",
    );
    assert_eq!(tiles.status, 200);
    let tile = tiles.json()["data"][0]["url"]
        .as_str()
        .unwrap()
        .strip_prefix(&server.base())
        .unwrap()
        .to_owned();
    let made = server.get(&tile);
    assert_eq!(made.status, 200);
    let kept = server.get(&tile);
    assert_eq!(kept.status, 302);
    let fetched = get_from_store(kept.header("location").unwrap(), &[]);
    assert_eq!(fetched.status, 200);
    assert_eq!(fetched.body, made.body);

    // The store down: 503 with Retry-After within seconds, no redirect; back up, served.
    garage.stop();
    let asked = std::time::Instant::now();
    let down = server.get(&local("thumb_original_url"));
    assert_eq!(down.status, 503, "{}", String::from_utf8_lossy(&down.body));
    assert_eq!(down.header("retry-after"), Some("5"));
    assert_eq!(down.header("location"), None);
    assert!(
        asked.elapsed() < std::time::Duration::from_secs(30),
        "answered after {:?}",
        asked.elapsed()
    );
    garage.start_again();
    assert_eq!(server.get(&local("thumb_original_url")).status, 302);

    // Erased: the media answer 404 with no redirect.
    let mut admin_env = env.clone();
    admin_env.extend(server.admin_env());
    let id_text = id.to_string();
    streetlevel_tests::run_with_env(
        Path::new(BINARY),
        &[
            "images",
            "delete",
            "--data",
            &data_arg,
            "--media-store",
            STORE,
            &id_text,
        ],
        &admin_env,
    );
    for target in [local("thumb_original_url"), local("thumb_1024_url"), tile] {
        let gone = server.get(&target);
        assert_eq!(gone.status, 404, "{target}");
        assert_eq!(gone.header("location"), None, "{target}");
    }
    assert_eq!(get_from_store(&location, &[]).status, 404);
    drop(server);
    drop(garage);
    let _ = std::fs::remove_dir_all(&root);
}

/// `url` with the last digit of its signature changed.
fn with_last_digit_changed(url: &str) -> String {
    let mut changed = url.to_owned();
    let last = changed.pop().unwrap();
    changed.push(if last == '0' { '1' } else { '0' });
    changed
}

/// Every file under `dir/media`, by its path below `dir`, with its bytes.
fn media_files(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let mut folders = vec![dir.join("media")];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else {
                let name = path
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                files.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

/// `streetlevel` with `args` and `env`, expected to fail: its standard error.
fn run_failing(args: &[&str], env: &[(&str, &str)]) -> String {
    let output = std::process::Command::new(BINARY)
        .args(args)
        .envs(env.iter().copied())
        .env("STREETLEVEL_BLUR", "false")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success(), "streetlevel {args:?} succeeded");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
// One scenario on one Garage: to the store, served from it, back to files after a failure.
#[allow(clippy::too_many_lines)]
fn media_migrate_moves_a_data_directory_to_garage_and_back_resuming_after_a_failure() {
    let Some(garage) = garage::start_or_skip() else {
        return;
    };
    let env_owned = garage.env();
    let env = borrowed(&env_owned);
    let moved_to = "s3://streetlevel/moved";
    let (root, photos, data) = with_lund_photos("migrate", 5..=6);
    let data_arg = data.to_string_lossy().into_owned();
    let photos_arg = photos.to_string_lossy().into_owned();
    streetlevel_tests::run(
        Path::new(BINARY),
        &import_args(&data_arg, &photos_arg, false),
    );
    let before = media_files(&data);
    assert_eq!(before.len(), 2 * 4, "originals and thumbnails: {before:?}");

    // To Garage: every object there with the same bytes, none left in the directory, and
    // the directory records where its media are.
    let migrate_to = |to: &str| {
        streetlevel_tests::run_with_env(
            Path::new(BINARY),
            &["media", "migrate", "--data", &data_arg, "--to", to],
            &env,
        );
    };
    migrate_to(moved_to);
    assert!(media_files(&data).is_empty());
    assert!(!data.join("media-migrate.journal").exists());
    assert_eq!(
        std::fs::read_to_string(data.join("media-store"))
            .unwrap()
            .trim(),
        moved_to
    );
    let bucket = bucket_at(&garage, moved_to);
    for (key, bytes) in &before {
        let key = bucket
            .list_all(&streetlevel_media::layout::media_prefix())
            .unwrap()
            .into_iter()
            .find(|listed| listed.as_str() == key)
            .unwrap_or_else(|| panic!("{key} is not on the store"));
        assert_eq!(&bucket.read(&key).unwrap().unwrap(), bytes, "{key}");
    }
    // Served from the store with no flag; another store named is refused.
    let token = streetlevel_tests::create_app(Path::new(BINARY), &data, "read");
    let server = Server::start_with_env(Path::new(BINARY), &data, "127.0.0.1:0", &[], &env);
    let listed = server.request(
        "GET",
        "/images?bbox=-180,-85,180,85&limit=10&fields=id,thumb_original_url",
        &[("Authorization", &format!("OAuth {token}"))],
        b"",
    );
    assert_eq!(listed.status, 200);
    for image in listed.json()["data"].as_array().unwrap() {
        let url = image["thumb_original_url"].as_str().unwrap();
        let served = server.get(url.strip_prefix(&server.base()).unwrap());
        assert_eq!(served.status, 200);
        let id = image["id"].as_str().unwrap();
        assert_eq!(served.body, before[&format!("media/img/{id}/original.jpg")]);
    }
    drop(server);
    let refused = run_failing(
        &[
            "import",
            "--data",
            &data_arg,
            "--user",
            "alice",
            "--media-store",
            "s3://streetlevel/elsewhere",
            &photos_arg,
        ],
        &env,
    );
    assert!(
        refused.contains("are on s3://streetlevel/moved"),
        "{refused}"
    );

    // Back to files, interrupted: a file where the second image's folder must go stops the
    // copy after the first image's objects; nothing is switched, and the run after the
    // obstacle is gone resumes from the journal.
    let second = before.keys().last().unwrap();
    let second_folder = data.join(Path::new(second).parent().unwrap());
    std::fs::create_dir_all(second_folder.parent().unwrap()).unwrap();
    std::fs::write(&second_folder, b"in the way").unwrap();
    let failed = run_failing(
        &["media", "migrate", "--data", &data_arg, "--to", "local"],
        &env,
    );
    assert!(failed.contains("cannot write"), "{failed}");
    assert_eq!(
        std::fs::read_to_string(data.join("media-store"))
            .unwrap()
            .trim(),
        moved_to,
        "not switched"
    );
    let journal = std::fs::read_to_string(data.join("media-migrate.journal")).unwrap();
    assert_eq!(
        journal.lines().count(),
        1 + 4,
        "header and the first image's four: {journal}"
    );
    std::fs::remove_file(&second_folder).unwrap();
    let resumed = std::process::Command::new(BINARY)
        .args(["media", "migrate", "--data", &data_arg, "--to", "local"])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(resumed.status.success());
    let said = String::from_utf8_lossy(&resumed.stderr);
    assert!(
        said.contains("resuming, 4 of 8 objects already verified"),
        "{said}"
    );
    assert_eq!(media_files(&data), before);
    assert!(!data.join("media-store").exists());
    assert!(
        bucket
            .list_all(&streetlevel_media::layout::media_prefix())
            .unwrap()
            .is_empty(),
        "the copies on the store are removed"
    );
    drop(garage);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn an_import_while_the_store_is_down_publishes_nothing_and_the_same_import_finishes_it() {
    let Some(mut garage) = garage::start_or_skip() else {
        return;
    };
    let env_owned = garage.env();
    let env = borrowed(&env_owned);
    let (root, photos, data) = with_lund_photos("store-down", 7..=9);
    let data_arg = data.to_string_lossy().into_owned();
    let photos_arg = photos.to_string_lossy().into_owned();
    let import = import_args(&data_arg, &photos_arg, true);
    garage.stop();
    let held = run_failing(&import, &env);
    assert!(
        held.contains("held until the media store answers"),
        "{held}"
    );
    garage.start_again();
    let bucket = bucket(&garage);
    let token = streetlevel_tests::create_app(Path::new(BINARY), &data, "read");
    let count = |server: &Server| {
        let listed = server.request(
            "GET",
            "/images?bbox=-180,-85,180,85&limit=10&fields=id",
            &[("Authorization", &format!("OAuth {token}"))],
            b"",
        );
        assert_eq!(listed.status, 200);
        listed.json()["data"].as_array().unwrap().len()
    };
    let server = Server::start_with_env(
        Path::new(BINARY),
        &data,
        "127.0.0.1:0",
        &["--media-store", STORE],
        &env,
    );
    assert_eq!(
        count(&server),
        0,
        "nothing published while the store was down"
    );
    drop(server);
    streetlevel_tests::run_with_env(Path::new(BINARY), &import, &env);
    // Run twice: the second finds everything imported and adds nothing.
    streetlevel_tests::run_with_env(Path::new(BINARY), &import, &env);
    let server = Server::start_with_env(
        Path::new(BINARY),
        &data,
        "127.0.0.1:0",
        &["--media-store", STORE],
        &env,
    );
    assert_eq!(count(&server), 3, "each photo published exactly once");
    let stored = bucket
        .list(&streetlevel_media::layout::images_prefix())
        .unwrap();
    assert_eq!(stored.len(), 3 * 4, "every object of each: {stored:?}");
    drop(server);
    drop(garage);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
// One scenario read top to bottom: import, sign in as the owner, delete, list.
#[allow(clippy::too_many_lines)]
fn an_erasure_through_the_api_has_emptied_the_images_prefix_when_the_delete_answers() {
    let Some(garage) = garage::start_or_skip() else {
        return;
    };
    let env_owned = garage.env();
    let env = borrowed(&env_owned);
    let (root, photos, data) = with_lund_photos("api-erasure", 10..=10);
    let data_arg = data.to_string_lossy().into_owned();
    let photos_arg = photos.to_string_lossy().into_owned();
    streetlevel_tests::run_with_env(
        Path::new(BINARY),
        &import_args(&data_arg, &photos_arg, true),
        &env,
    );
    let app = streetlevel_tests::auth::create_app(Path::new(BINARY), &data, "read,write");
    let server = Server::start_with_env(
        Path::new(BINARY),
        &data,
        "127.0.0.1:0",
        &["--media-store", STORE],
        &env,
    );
    let alice = streetlevel_tests::auth::user_token(&server, &app, "alice");
    let listed = server.request(
        "GET",
        "/images?bbox=-180,-85,180,85&limit=10&fields=id",
        &[("Authorization", &format!("OAuth {}", app.token))],
        b"",
    );
    let id: u64 = listed.json()["data"][0]["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let bucket = bucket(&garage);
    let prefix = streetlevel_media::layout::image_prefix(streetlevel_model::ImageId(id));
    assert_eq!(bucket.list(&prefix).unwrap().len(), 4);
    let deleted = server.request(
        "DELETE",
        &format!("/{id}"),
        &[("Authorization", &format!("OAuth {alice}"))],
        b"",
    );
    assert_eq!(
        deleted.status,
        200,
        "{}",
        String::from_utf8_lossy(&deleted.body)
    );
    // Listed at once after the answer: nothing of the image is left on the store.
    let left = bucket.list(&prefix).unwrap();
    assert!(left.is_empty(), "left after the DELETE answered: {left:?}");
    drop(server);
    drop(garage);
    let _ = std::fs::remove_dir_all(&root);
}
