//! `streetlevel reblur` through the real binary, on real street photos
//! (`../shared/data/opensfm-blur-pairs`): nothing to do while the blurrer is the one that
//! blurred; `--all` interrupted (killed after its first image) and run again takes up where it
//! stopped and redoes original, thumbnails, cached tiles and the recorded regions; an image
//! without a kept unblurred original gets blur added to its published picture, and says so;
//! on PostgreSQL as on `SQLite`; and a change of the model set (YuNet and PP-OCRv4, then
//! CenterFace and PP-OCRv5) seen
//! as stale on the dashboard and by `reblur --status`, none stale after `reblur`, the served
//! pictures changed and a box blurred by hand still blurred.

#![allow(clippy::unwrap_used, clippy::panic, clippy::too_many_lines)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use streetlevel_ingest::{WriteTags, write_metadata};
use streetlevel_model::Timestamp;

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");

fn temp_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("streetlevel-reblur-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `count` street photos with pedestrians, geotagged 30 m and 10 s apart along one street.
fn street_photos(dir: &Path, count: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let shared =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/opensfm-blur-pairs");
    let names = [
        "before_berlin_images_01.jpg",
        "before_berlin_images_02.jpg",
        "before_berlin_images_03.jpg",
        "before_lund_images_01.jpg",
    ];
    for (name, index) in names.iter().take(count).zip(0_u32..) {
        let bytes = std::fs::read(shared.join(name))
            .unwrap_or_else(|error| panic!("{name}: {error} (the shared data is missing)"));
        let mut tags = WriteTags {
            latitude: Some(52.519 + f64::from(index) * 30.0 / 111_320.0),
            longitude: Some(13.401),
            direction: Some(0.0),
            ..WriteTags::default()
        };
        tags.set_capture_time_utc(Timestamp(1_404_000_000_000 + i64::from(index) * 10_000));
        std::fs::write(
            dir.join(format!("{index}.jpg")),
            write_metadata(&bytes, &tags).unwrap(),
        )
        .unwrap();
    }
}

fn streetlevel(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(BINARY)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn succeeded(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// `(image, blurred_by, blurred_at, unblurred_kept)` of every blurred image.
fn blur_states(data: &Path) -> Vec<(i64, String, i64, i64)> {
    let database = rusqlite::Connection::open(data.join("streetlevel.sqlite")).unwrap();
    database
        .prepare(
            "SELECT image_id, blurred_by, blurred_at, unblurred_kept FROM import_blurred_images
             ORDER BY image_id",
        )
        .unwrap()
        .query_map([], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn reblur_all_interrupted_and_run_again_redoes_every_image_once() {
    let Some(models) = streetlevel_tests::test_models_dir() else {
        return;
    };
    let models = models.to_string_lossy().into_owned();
    let dir = temp_dir("all");
    let photos = dir.join("photos");
    street_photos(&photos, 4);
    let data = dir.join("data");
    let data_arg = data.to_string_lossy().into_owned();
    let blur = ["--blur", "true", "--blur-models-dir", models.as_str()];
    let imported = succeeded(&streetlevel(
        &[
            &["import", "--data", &data_arg][..],
            &blur,
            &["--keep-unblurred", "true", &photos.to_string_lossy()],
        ]
        .concat(),
        &[],
    ));
    assert!(imported.contains("imported 4 images"), "{imported}");
    let before = blur_states(&data);
    assert_eq!(before.len(), 4, "{before:?}");
    let ids: Vec<i64> = before.iter().map(|state| state.0).collect();
    let media = data.join("media");

    // The blurrer that blurred them is the one configured: nothing to do.
    let reblur = [&["reblur", "--data", &data_arg][..], &blur].concat();
    let nothing = succeeded(&streetlevel(&reblur, &[]));
    assert!(nothing.contains("0 images to blur again"), "{nothing}");
    assert_eq!(blur_states(&data), before);

    // A cached tile of the viewer's pyramid, and a thumbnail made from the old picture.
    let tile = media.join(format!("img/{}/tile_0_0_0.jpg", ids[0]));
    std::fs::write(&tile, b"a tile cut from the old picture").unwrap();
    let thumbnail = media.join(format!("img/{}/256.jpg", ids[0]));
    std::fs::write(&thumbnail, b"an old thumbnail").unwrap();

    // `--all`, killed once it has blurred its first image.
    let all = [&reblur[..], &["--all"]].concat();
    let mut child = Command::new(BINARY)
        .args(&all)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines
        .by_ref()
        .map(Result::unwrap)
        .find(|line| line.starts_with("1/4 image"))
        .expect("a line for the first image");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(first.contains("from its unblurred original"), "{first}");
    let runs = |data: &Path| -> Vec<(i64, Option<i64>)> {
        let database = rusqlite::Connection::open(data.join("streetlevel.sqlite")).unwrap();
        database
            .prepare("SELECT started_at, finished_at FROM import_reblur_runs")
            .unwrap()
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let interrupted = runs(&data);
    assert_eq!(interrupted.len(), 1);
    assert_eq!(interrupted[0].1, None, "the run did not finish");
    let started = interrupted[0].0;
    let done_before: usize = blur_states(&data)
        .iter()
        .filter(|state| state.2 >= started)
        .count();
    assert!((1..4).contains(&done_before), "{done_before}");

    // Run again: the rest, and only the rest.
    let again = succeeded(&streetlevel(&all, &[]));
    assert!(
        again.contains(&format!(
            "{} images to blur again (taking up the interrupted --all run)",
            4 - done_before
        )),
        "{again}"
    );
    assert!(
        again.contains(&format!(
            "blurred again {} images: {} from their unblurred original",
            4 - done_before,
            4 - done_before
        )),
        "{again}"
    );
    let finished = runs(&data);
    assert_eq!(finished.len(), 1);
    assert!(finished[0].1.is_some(), "the run finished: {finished:?}");
    let after = blur_states(&data);
    assert_eq!(after.len(), 4);
    for ((id, by, at, kept), old) in after.iter().zip(&before) {
        assert!(*at >= started, "image {id} blurred again");
        assert_eq!((by, kept), (&old.1, &1), "image {id}");
        // The published picture is blurred from the kept original, which is untouched.
        let published = std::fs::read(media.join(format!("img/{id}/original.jpg"))).unwrap();
        let unblurred = std::fs::read(media.join(format!("img/{id}/unblurred.jpg"))).unwrap();
        assert_ne!(published, unblurred, "image {id}");
        assert!(published.starts_with(&[0xFF, 0xD8]));
    }
    // The old thumbnail was made again from the new picture, the cached tile removed.
    assert!(!tile.exists());
    let remade = std::fs::read(&thumbnail).unwrap();
    assert!(remade.starts_with(&[0xFF, 0xD8]), "a JPEG thumbnail again");
    // Each image's regions are there once (replaced, not added).
    let database = rusqlite::Connection::open(data.join("streetlevel.sqlite")).unwrap();
    let regions = |database: &rusqlite::Connection, id: i64| -> i64 {
        database
            .query_row(
                "SELECT count(*) FROM import_blur_regions WHERE image_id = ?1",
                [id],
                |row| row.get(0),
            )
            .unwrap()
    };
    let berlin_faces = regions(&database, ids[0]);
    assert!(berlin_faces >= 5, "{berlin_faces}");

    // An image whose unblurred original is gone and that an older model blurred: its blur
    // is added to its published picture, and the command says it can do no more.
    std::fs::remove_file(media.join(format!("img/{}/unblurred.jpg", ids[1]))).unwrap();
    database
        .execute(
            "UPDATE import_blurred_images SET blurred_by = 'an older model' WHERE image_id = ?1",
            [ids[1]],
        )
        .unwrap();
    let published_before =
        std::fs::read(media.join(format!("img/{}/original.jpg", ids[1]))).unwrap();
    let added = succeeded(&streetlevel(&reblur, &[]));
    assert!(added.contains("1 images to blur again"), "{added}");
    assert!(
        added.contains("can only be added to the already blurred picture")
            && added.contains(&format!(
                "1/1 image {}: blur added to the already blurred picture",
                ids[1]
            )),
        "{added}"
    );
    let state = blur_states(&data)
        .into_iter()
        .find(|state| state.0 == ids[1])
        .unwrap();
    assert_eq!((state.1.as_str(), state.3), (before[1].1.as_str(), 0));
    let published_after =
        std::fs::read(media.join(format!("img/{}/original.jpg", ids[1]))).unwrap();
    assert!(published_after.starts_with(&[0xFF, 0xD8]));
    assert!(regions(&database, ids[1]) > 0);
    assert_ne!(published_after, published_before, "blurred once more");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reblur_works_on_postgresql_as_the_other_admin_commands() {
    let Some(models) = streetlevel_tests::test_models_dir() else {
        return;
    };
    let models = models.to_string_lossy().into_owned();
    let postgres = streetlevel_tests::postgres::Postgres::start("reblur");
    let url = postgres.url();
    let env = [("STREETLEVEL_DATABASE_URL", url.as_str())];
    let dir = temp_dir("postgres");
    let photos = dir.join("photos");
    street_photos(&photos, 1);
    let data = dir.join("data");
    let data_arg = data.to_string_lossy().into_owned();
    // Imported with blurring off: never blurred.
    let imported = succeeded(&streetlevel(
        &[
            "import",
            "--data",
            &data_arg,
            "--blur",
            "false",
            &photos.to_string_lossy(),
        ],
        &env,
    ));
    assert!(imported.contains("imported 1 images"), "{imported}");
    let reblur = [
        "reblur",
        "--data",
        &data_arg,
        "--blur",
        "true",
        "--blur-models-dir",
        &models,
    ];
    let first = succeeded(&streetlevel(&reblur, &env));
    assert!(
        first.contains("1 images to blur again")
            && first.contains("never blurred before: from its published picture"),
        "{first}"
    );
    // Recorded in PostgreSQL: a second run has nothing to do.
    let second = succeeded(&streetlevel(&reblur, &env));
    assert!(second.contains("0 images to blur again"), "{second}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The shared YuNet model, which serves here as the "older" face model.
fn yunet() -> PathBuf {
    let model =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/models/yunet_n_dynamic.onnx");
    assert!(
        model.is_file(),
        "the shared YuNet model is missing: {}",
        model.display()
    );
    model
}

fn page_text(response: &streetlevel_tests::Response) -> String {
    String::from_utf8_lossy(&response.body).into_owned()
}

/// The value of the first `name="<name>" value="..."` input of a page.
fn input_value(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no input {name} in {html}"))
        + marker.len();
    html[start..start + html[start..].find('"').unwrap()].replace("&amp;", "&")
}

/// `name=value` of the `Set-Cookie` header named `name`.
fn set_cookie(response: &streetlevel_tests::Response, name: &str) -> String {
    response
        .headers
        .iter()
        .filter(|(key, _)| key == "set-cookie")
        .find_map(|(_, value)| {
            let pair = value.split(';').next()?;
            pair.starts_with(&format!("{name}="))
                .then(|| pair.to_owned())
        })
        .unwrap_or_else(|| panic!("no {name} cookie in {:?}", response.headers))
}

/// Signs `user` in on the web pages: the session cookie.
fn sign_in(server: &streetlevel_tests::Server, user: &str, password: &str) -> String {
    let form = server.get("/login?next=/dashboard");
    assert_eq!(form.status, 200);
    let login_cookie = set_cookie(&form, "streetlevel_login");
    let csrf = input_value(&page_text(&form), "csrf");
    let body = format!("username={user}&password={password}&csrf={csrf}&next=%2Fdashboard");
    let signed_in = server.request(
        "POST",
        "/login",
        &[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Cookie", &login_cookie),
        ],
        body.as_bytes(),
    );
    assert_eq!(signed_in.status, 303, "{}", page_text(&signed_in));
    set_cookie(&signed_in, "streetlevel_session")
}

/// The `data-stale` and `data-never-blurred` counts of the dashboard's "Blur models".
fn dashboard_counts(server: &streetlevel_tests::Server, session: &str) -> (usize, usize) {
    let page = server.request("GET", "/dashboard", &[("Cookie", session)], b"");
    assert_eq!(page.status, 200);
    let html = page_text(&page);
    let count = |name: &str| -> usize {
        let marker = format!("{name}=\"");
        let start = html
            .find(&marker)
            .unwrap_or_else(|| panic!("no {name} on the dashboard: {html}"))
            + marker.len();
        html[start..start + html[start..].find('"').unwrap()]
            .parse()
            .unwrap()
    };
    (count("data-stale"), count("data-never-blurred"))
}

/// Mean absolute difference of two pictures' pixels inside the box `(x, y, width, height)`.
fn difference_inside(a: &image::RgbImage, b: &image::RgbImage, area: (u32, u32, u32, u32)) -> f64 {
    let (x0, y0, width, height) = area;
    let mut total = 0.0;
    for y in y0..y0 + height {
        for x in x0..x0 + width {
            let (p, q) = (a.get_pixel(x, y), b.get_pixel(x, y));
            total +=
                p.0.iter()
                    .zip(q.0)
                    .map(|(p, q)| f64::from(p.abs_diff(q)))
                    .sum::<f64>();
        }
    }
    total / f64::from(width * height * 3)
}

#[test]
fn a_model_change_leaves_no_image_stale_after_reblur() {
    let Some(models) = streetlevel_tests::test_models_dir() else {
        return;
    };
    let models = models.to_string_lossy().into_owned();
    let dir = temp_dir("model-change");
    let photos = dir.join("photos");
    street_photos(&photos, 3);
    let data = dir.join("data");
    let data_arg = data.to_string_lossy().into_owned();
    // Blurred with YuNet and PP-OCRv4's text detector (the plate model before PP-OCRv5), the
    // unblurred originals kept.
    let yunet = yunet().to_string_lossy().into_owned();
    let plates_v4 = Path::new(&models)
        .join("ch_PP-OCRv4_det_infer.onnx")
        .to_string_lossy()
        .into_owned();
    let imported = succeeded(&streetlevel(
        &[
            "import",
            "--data",
            &data_arg,
            "--user",
            "alice",
            "--blur",
            "true",
            "--blur-models-dir",
            &models,
            "--blur-face-model",
            &yunet,
            "--blur-plate-model",
            &plates_v4,
            "--keep-unblurred",
            "true",
            &photos.to_string_lossy(),
        ],
        &[],
    ));
    assert!(imported.contains("imported 3 images"), "{imported}");
    let by_yunet = blur_states(&data);
    assert!(
        by_yunet
            .iter()
            .all(|state| state.1.contains("yunet_n_dynamic.onnx")
                && state.1.contains("plate ch_PP-OCRv4_det_infer.onnx sha256:")),
        "{by_yunet:?}"
    );
    let binary = Path::new(BINARY);
    streetlevel_tests::create_user(binary, &data, "carol", "carol@example.com", "correct horse");
    let token = streetlevel_tests::create_app(binary, &data, "read");
    // The default set changes: the server now blurs with CenterFace and PP-OCRv5.
    let server = streetlevel_tests::Server::start(
        binary,
        &data,
        &[
            "--blur",
            "true",
            "--blur-models-dir",
            &models,
            "--administrators",
            "carol",
        ],
    );
    let session = sign_in(&server, "carol", "correct horse");
    assert_eq!(dashboard_counts(&server, &session), (3, 0));
    let env = server.admin_env();
    let default_blur = ["--blur", "true", "--blur-models-dir", models.as_str()];
    let status = [
        &["reblur", "--data", &data_arg, "--status"][..],
        &default_blur,
    ]
    .concat();
    let stale = succeeded(&streetlevel(&status, &env));
    assert!(
        stale.contains("3 images: 0 blurred by the blurrer configured now, 3 by an older one")
            && stale.contains("3 to blur again")
            && stale.contains("3 blurred by face yunet_n_dynamic.onnx sha256:"),
        "{stale}"
    );

    // Each image as served before, and a box blurred by hand on the first.
    let found = server.request(
        "GET",
        "/images?bbox=-180,-85,180,85&fields=id",
        &[("Authorization", &format!("OAuth {token}"))],
        b"",
    );
    let mut ids: Vec<String> = found.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|image| image["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    assert_eq!(ids.len(), 3);
    let served = |id: &str, size: &str| -> Vec<u8> {
        let entity = server.request(
            "GET",
            &format!("/{id}?fields=thumb_{size}_url"),
            &[("Authorization", &format!("OAuth {token}"))],
            b"",
        );
        let url = entity.json()[format!("thumb_{size}_url")]
            .as_str()
            .unwrap()
            .to_owned();
        let response = server.get(url.strip_prefix(&server.base()).unwrap());
        assert_eq!(response.status, 200, "{url}");
        response.body
    };
    let image_page = format!("/dashboard/image?image_key={}", ids[0]);
    let page = server.request("GET", &image_page, &[("Cookie", &session)], b"");
    let csrf = input_value(&page_text(&page), "csrf");
    // The top-left tenth of the picture: sky and facades, which no face model blurs.
    let drawn = server.request(
        "POST",
        &image_page,
        &[
            ("Cookie", &session),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        format!("csrf={csrf}&action=add&box_left=0.02&box_top=0.02&box_width=0.1&box_height=0.1")
            .as_bytes(),
    );
    assert!(drawn.status < 400, "{}", page_text(&drawn));
    let before: Vec<(Vec<u8>, Vec<u8>)> = ids
        .iter()
        .map(|id| (served(id, "original"), served(id, "2048")))
        .collect();

    // Blurred again with the set configured now: nothing is stale afterwards.
    let reblur = [&["reblur", "--data", &data_arg][..], &default_blur].concat();
    let done = succeeded(&streetlevel(&reblur, &env));
    assert!(
        done.contains("3 images to blur again")
            && done.contains("blurred again 3 images: 3 from their unblurred original"),
        "{done}"
    );
    assert_eq!(dashboard_counts(&server, &session), (0, 0));
    let page = page_text(&server.request("GET", "/dashboard", &[("Cookie", &session)], b""));
    assert!(
        page.contains("All 3 images are blurred by the blurrer configured now."),
        "{page}"
    );
    let none = succeeded(&streetlevel(&status, &env));
    assert!(none.contains("0 to blur again"), "{none}");
    assert!(
        blur_states(&data)
            .iter()
            .all(|state| state.1.contains("centerface.onnx")
                && state.1.contains("plate PP-OCRv5_det.onnx sha256:")
                && state.3 == 1),
        "{:?}",
        blur_states(&data)
    );
    // The served pictures changed: another model's faces blurred, in the original and the
    // thumbnails alike.
    for ((id, (original, thumbnail)), now) in ids.iter().zip(&before).zip(
        ids.iter()
            .map(|id| (served(id, "original"), served(id, "2048"))),
    ) {
        assert_ne!(original, &now.0, "image {id}'s original");
        assert_ne!(thumbnail, &now.1, "image {id}'s 2048 thumbnail");
    }
    // The box blurred by hand is still blurred: blurring again from the unblurred original
    // laid it on again.
    let unblurred = image::open(data.join(format!("media/img/{}/unblurred.jpg", ids[0])))
        .unwrap()
        .to_rgb8();
    let published = image::load_from_memory(&served(&ids[0], "original"))
        .unwrap()
        .to_rgb8();
    let (width, height) = unblurred.dimensions();
    let inside = (
        width / 50 + 2,
        height / 50 + 2,
        width / 10 - 4,
        height / 10 - 4,
    );
    let outside = (width / 2, 2, width / 10, height / 10);
    let (edited, untouched) = (
        difference_inside(&unblurred, &published, inside),
        difference_inside(&unblurred, &published, outside),
    );
    assert!(
        edited > 4.0 * untouched.max(0.5),
        "the edited box differs by {edited}, the rest by {untouched}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
