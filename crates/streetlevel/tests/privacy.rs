//! Blur edits and privacy requests through the real binary, on real photos
//! (`../shared/data/opensfm-blur-pairs`, a walk in Lund): a box drawn on the dashboard's image
//! page shows in the pixels of every served thumbnail, the original and the viewer's pyramid
//! tile (the owner's at once, another user's after an administrator applies it), on every
//! serving process; removing a blur needs the kept unblurred original; a passer-by's request
//! from the report form reaches the administrators' API and `streetlevel requests`, and is
//! applied from there; the form refuses floods, forged and huge submissions and keeps script
//! inert. Blurring with models is off here (`BLUR_OFF`): the box blur needs no model. Also: a
//! hidden image's ID is left out of map features' image lists. With
//! `STREETLEVEL_TEST_TOPOLOGY=replicas` every server here is two replicas on PostgreSQL (an
//! edit made through one is seen in the pixels the other serves), and the admin commands reach
//! their tables through `Server::admin_env`.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use streetlevel_tests::{Response, Server, auth, create_user, run_with_env};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");
const PASSWORD: &str = "correct horse battery";

fn photos_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/opensfm-blur-pairs");
    assert!(
        dir.is_dir(),
        "the test photos are missing: {} (see ../shared/data/README.md)",
        dir.display()
    );
    dir
}

fn temp_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("streetlevel-privacy-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn text(response: &Response) -> String {
    String::from_utf8_lossy(&response.body).into_owned()
}

/// Undoes the pages' escaping of `&` in attribute values.
fn unescape(value: &str) -> String {
    value.replace("&amp;", "&")
}

/// The value of the first `name="<name>" value="..."` input of a page.
fn input_value(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no input {name} in {html}"))
        + marker.len();
    unescape(&html[start..start + html[start..].find('"').unwrap()])
}

/// `name=value` of a `Set-Cookie` header named `name`.
fn cookie(response: &Response, name: &str) -> String {
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

/// The photos, alice's images, and a server whose administrators are carol and erin; dave
/// is another user. All three have passwords for the web pages.
struct World {
    data: PathBuf,
    server: Server,
    images: Vec<String>,
    token: String,
}

fn world(name: &str) -> World {
    world_with(name, &[])
}

/// [`world`] with more arguments for `streetlevel serve`.
fn world_with(name: &str, serve: &[&str]) -> World {
    let root = temp_dir(name);
    let data = root.join("data");
    let folder = root.join("photos");
    std::fs::create_dir_all(&folder).unwrap();
    for number in 1..=3 {
        let file = format!("after_lund_images_{number:02}.jpg");
        std::fs::copy(photos_dir().join(&file), folder.join(&file)).unwrap();
    }
    run_with_env(
        Path::new(BINARY),
        &[
            "import",
            "--data",
            &data.to_string_lossy(),
            "--user",
            "alice",
            &folder.to_string_lossy(),
        ],
        &[],
    );
    for user in ["alice", "carol", "dave"] {
        create_user(
            Path::new(BINARY),
            &data,
            user,
            &format!("{user}@example.com"),
            PASSWORD,
        );
    }
    let token = streetlevel_tests::create_app(Path::new(BINARY), &data, "read");
    let mut args = vec!["--administrators", "carol,erin"];
    args.extend_from_slice(serve);
    let server = Server::start(Path::new(BINARY), &data, &args);
    let found = server.request(
        "GET",
        "/images?bbox=-180,-85,180,85&fields=id",
        &[("Authorization", &format!("OAuth {token}"))],
        b"",
    );
    assert_eq!(found.status, 200, "{}", text(&found));
    let mut images: Vec<String> = found.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|image| image["id"].as_str().unwrap().to_owned())
        .collect();
    images.sort();
    assert_eq!(images.len(), 3);
    World {
        data,
        server,
        images,
        token,
    }
}

impl World {
    /// Signs `user` in on the web pages: their session cookie.
    fn sign_in(&self, user: &str) -> String {
        let form = self.server.get("/login?next=/dashboard");
        assert_eq!(form.status, 200);
        let login_cookie = cookie(&form, "streetlevel_login");
        let csrf = input_value(&text(&form), "csrf");
        let body = format!("username={user}&password={PASSWORD}&csrf={csrf}&next=%2Fdashboard")
            .replace(' ', "+");
        let signed_in = self.server.request(
            "POST",
            "/login",
            &[
                ("Content-Type", "application/x-www-form-urlencoded"),
                ("Cookie", &login_cookie),
            ],
            body.as_bytes(),
        );
        assert_eq!(signed_in.status, 303, "{}", text(&signed_in));
        cookie(&signed_in, "streetlevel_session")
    }

    fn page(&self, session: &str, target: &str) -> Response {
        self.server
            .request("GET", target, &[("Cookie", session)], b"")
    }

    fn post_form(&self, session: &str, target: &str, form: &[(&str, &str)]) -> Response {
        let body: Vec<String> = form
            .iter()
            .map(|(name, value)| format!("{name}={}", encode(value)))
            .collect();
        self.server.request(
            "POST",
            target,
            &[
                ("Cookie", session),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            body.join("&").as_bytes(),
        )
    }

    /// The image page's CSRF token for `session`.
    fn csrf(&self, session: &str, image: &str) -> String {
        let page = self.page(session, &format!("/dashboard/image?image_key={image}"));
        assert_eq!(page.status, 200, "{}", text(&page));
        input_value(&text(&page), "csrf")
    }

    /// Draws `shares` (left, top, width, height of the upright picture) on the image page.
    fn draw(&self, session: &str, image: &str, shares: [f64; 4]) -> Response {
        let csrf = self.csrf(session, image);
        let values: Vec<String> = shares.iter().map(f64::to_string).collect();
        self.post_form(
            session,
            &format!("/dashboard/image?image_key={image}"),
            &[
                ("csrf", &csrf),
                ("action", "add"),
                ("box_left", &values[0]),
                ("box_top", &values[1]),
                ("box_width", &values[2]),
                ("box_height", &values[3]),
            ],
        )
    }

    /// The image's 256 px thumbnail as served, decoded.
    fn thumbnail(&self, image: &str) -> image::RgbImage {
        self.served(image, "256")
    }

    /// The image's `size` thumbnail (`256`, `1024`, `2048` or `original`) as served through
    /// its signed URL, decoded; asked of every serving process, which must serve the same
    /// bytes (on replicas, an edit made through one is seen by the other at once: they share
    /// `media/`).
    fn served(&self, image: &str, size: &str) -> image::RgbImage {
        let entity = self.server.request(
            "GET",
            &format!("/{image}?fields=thumb_{size}_url"),
            &[("Authorization", &format!("OAuth {}", self.token))],
            b"",
        );
        assert_eq!(entity.status, 200, "{}", text(&entity));
        let url = entity.json()[format!("thumb_{size}_url")]
            .as_str()
            .unwrap()
            .to_owned();
        let target = url.strip_prefix(&self.server.base()).unwrap();
        self.same_on_every_process(target)
    }

    /// The viewer's image pyramid at level `z` as served on every process, its tiles put
    /// together into one picture: a Lund photo (1024 x 768) is one tile at level 10, its own
    /// top level, and four at level 11, the lowest level the viewer asks for (the picture
    /// enlarged twice, served as four blocks of 512 pixels at most).
    fn pyramid(&self, image: &str, z: u32) -> image::RgbImage {
        let listed = self.server.request(
            "GET",
            &format!("/{image}/tiles?z={z}&fields=url,x,y"),
            &[("Authorization", &format!("OAuth {}", self.token))],
            b"",
        );
        assert_eq!(listed.status, 200, "{}", text(&listed));
        let tiles: Vec<(u32, u32, image::RgbImage)> = listed.json()["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tile| {
                let url = tile["url"].as_str().unwrap();
                let block = |axis: &str| u32::try_from(tile[axis].as_u64().unwrap()).unwrap();
                (
                    block("x"),
                    block("y"),
                    self.same_on_every_process(url.strip_prefix(&self.server.base()).unwrap()),
                )
            })
            .collect();
        // Each tile is its block of the picture at the picture's resolution (the viewer
        // stretches it), so the blocks of an enlarged level are smaller than 1024 pixels: the
        // first tile's sides are the block's.
        let block = tiles
            .iter()
            .find(|(x, y, _)| (*x, *y) == (0, 0))
            .map(|(_, _, tile)| tile.width().max(tile.height()))
            .unwrap();
        let (width, height) = tiles.iter().fold((0, 0), |(width, height), (x, y, tile)| {
            (
                width.max(x * block + tile.width()),
                height.max(y * block + tile.height()),
            )
        });
        let mut whole = image::RgbImage::new(width, height);
        for (x, y, tile) in &tiles {
            image::imageops::replace(&mut whole, tile, i64::from(x * block), i64::from(y * block));
        }
        whole
    }

    /// `GET target` (a signed media path) on every serving process: each answers 200 with
    /// the same bytes; decoded.
    fn same_on_every_process(&self, target: &str) -> image::RgbImage {
        let responses: Vec<Response> = self
            .server
            .processes()
            .iter()
            .map(|addr| streetlevel_tests::request(*addr, "GET", target, &[], b""))
            .collect();
        for (process, response) in responses.iter().enumerate() {
            assert_eq!(response.status, 200, "{target} on process {process}");
            assert!(
                response.body == responses[0].body,
                "process {process} serves other bytes for {target}"
            );
        }
        image::load_from_memory(&responses[0].body)
            .unwrap()
            .to_rgb8()
    }

    /// An admin command on this world's data, where the server keeps its tables.
    fn cli(&self, args: &[&str]) -> String {
        let mut all = args.to_vec();
        let data = self.data.to_string_lossy().into_owned();
        all.extend(["--data", &data]);
        run_with_env(Path::new(BINARY), &all, &self.server.admin_env())
    }

    /// How many privacy requests are stored, as `streetlevel requests list` shows them.
    fn stored_requests(&self) -> usize {
        self.cli(&["requests", "list", "--limit", "100000"])
            .lines()
            .count()
    }
}

fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// The mean absolute difference per channel between `a` and `b` inside `shares` of the
/// picture (or outside it, with `inside` false), and `b`'s detail there: the mean absolute
/// difference of grey level between neighbouring pixels. A blur changes much and leaves
/// little detail; the spread of grey levels is no measure of that, since the blur keeps the
/// box's light and dark halves (its cells are an eighth of the box).
fn compare(a: &image::RgbImage, b: &image::RgbImage, shares: [f64; 4], inside: bool) -> (f64, f64) {
    assert_eq!(a.dimensions(), b.dimensions());
    let (width, height) = a.dimensions();
    let (left, top) = (shares[0] * f64::from(width), shares[1] * f64::from(height));
    let (right, bottom) = (
        left + shares[2] * f64::from(width),
        top + shares[3] * f64::from(height),
    );
    // A margin of 3 pixels off the edge on each side: the thumbnail's resampling mixes them.
    let contains = |x: u32, y: u32| {
        let (x, y) = (f64::from(x), f64::from(y));
        x >= left + 3.0 && x < right - 3.0 && y >= top + 3.0 && y < bottom - 3.0
    };
    let far = |x: u32, y: u32| {
        let (x, y) = (f64::from(x), f64::from(y));
        x < left - 6.0 || x >= right + 6.0 || y < top - 6.0 || y >= bottom + 6.0
    };
    let (mut difference, mut count) = (0.0, 0.0);
    for (x, y, pixel) in a.enumerate_pixels() {
        let chosen = if inside { contains(x, y) } else { far(x, y) };
        if !chosen {
            continue;
        }
        let other = b.get_pixel(x, y);
        for channel in 0..3 {
            difference += (f64::from(pixel[channel]) - f64::from(other[channel])).abs();
        }
        count += 3.0;
    }
    assert!(count > 0.0);
    let grey = |x: u32, y: u32| {
        b.get_pixel(x, y)
            .0
            .iter()
            .map(|&v| f64::from(v))
            .sum::<f64>()
            / 3.0
    };
    let (mut steps, mut pairs) = (0.0, 0.0);
    for y in 0..height.saturating_sub(1) {
        for x in 0..width.saturating_sub(1) {
            let chosen = |x, y| if inside { contains(x, y) } else { far(x, y) };
            if !chosen(x, y) {
                continue;
            }
            for (next_x, next_y) in [(x + 1, y), (x, y + 1)] {
                if chosen(next_x, next_y) {
                    steps += (grey(next_x, next_y) - grey(x, y)).abs();
                    pairs += 1.0;
                }
            }
        }
    }
    assert!(pairs > 0.0);
    (difference / count, steps / pairs)
}

/// What an image looks like as served: its three thumbnails, its original and its viewer's
/// pyramid at levels 10 and 11, in that order.
const SERVED: [&str; 6] = [
    "256",
    "1024",
    "2048",
    "original",
    "pyramid 10",
    "pyramid 11",
];

impl World {
    /// Every picture of `image` as served (`SERVED`), each the same on every process.
    fn every_picture(&self, image: &str) -> Vec<image::RgbImage> {
        SERVED
            .iter()
            .map(|&size| match size.strip_prefix("pyramid ") {
                Some(level) => self.pyramid(image, level.parse().unwrap()),
                None => self.served(image, size),
            })
            .collect()
    }
}

/// Checks each picture of `after` against `before` (`SERVED`): the box (`shares`) lost its
/// detail and nothing else changed but for the new original's JPEG encoding (quality 90), a
/// few grey levels at most and far less than inside. The 256 px thumbnail's change inside the
/// box and its detail there before.
fn assert_blurred_only_in(
    before: &[image::RgbImage],
    after: &[image::RgbImage],
    shares: [f64; 4],
) -> (f64, f64) {
    let mut changes = Vec::new();
    for ((name, before), after) in SERVED.iter().zip(before).zip(after) {
        let (inside_change, inside_detail) = compare(before, after, shares, true);
        let (_, before_detail) = compare(before, before, shares, true);
        let (outside_change, _) = compare(before, after, shares, false);
        assert!(
            inside_change > 8.0,
            "{name}: the box changed by {inside_change} grey levels on average"
        );
        assert!(
            inside_detail < before_detail * 0.3,
            "{name}: detail left in the box: {inside_detail} grey levels between neighbours (was {before_detail})"
        );
        assert!(
            outside_change < 6.0 && inside_change > 2.5 * outside_change,
            "{name}: the rest of the picture changed by {outside_change}, the box by {inside_change}"
        );
        changes.push((inside_change, before_detail));
    }
    changes[0]
}

/// The box of the image's blur edit, in the original's pixels, as recorded where the server
/// keeps its tables (read through `streetlevel-db`, on `SQLite` or PostgreSQL).
fn edit_region(world: &World, image: &str) -> [String; 4] {
    let database = streetlevel_db::Database::open(world.server.database()).unwrap();
    database
        .read(|connection| {
            connection.query_row(
                "SELECT x, y, width, height FROM import_blur_regions
                 WHERE image_id = ?1 AND source = 'edit'",
                streetlevel_db::params![image.parse::<i64>().unwrap()],
                |row| {
                    let mut area = [0_i64; 4];
                    for (index, value) in area.iter_mut().enumerate() {
                        *value = row.get(index)?;
                    }
                    Ok::<_, streetlevel_db::DbError>(area.map(|value| value.to_string()))
                },
            )
        })
        .unwrap()
        .expect("the edit's region")
}

#[test]
fn an_owners_box_is_blurred_in_every_served_picture_at_once_and_removal_needs_the_unblurred_original()
 {
    let world = world("owner");
    let image = world.images[0].clone();
    let alice = world.sign_in("alice");
    // Imported with blurring off: the served original is the photo as taken.
    let pristine =
        std::fs::read(world.data.join(format!("media/img/{image}/original.jpg"))).unwrap();
    // Every picture is cached on disk from here on: the edit must replace each.
    let before = world.every_picture(&image);
    for name in ["256", "1024", "2048"] {
        let cached = world.data.join(format!("media/img/{image}/{name}.jpg"));
        assert!(cached.is_file(), "{}", cached.display());
    }

    // No unblurred original is kept: the page says only adding is possible.
    let page = world.page(&alice, &format!("/dashboard/image?image_key={image}"));
    assert_eq!(page.status, 200);
    let html = text(&page);
    assert!(
        html.contains("blur can only be added, not removed"),
        "{html}"
    );
    assert!(html.contains("Your edits apply at once"), "{html}");
    assert!(
        html.contains(&format!("href=\"/report?image_key={image}\"")),
        "{html}"
    );

    let shares = [0.3, 0.25, 0.4, 0.5];
    let drawn = world.draw(&alice, &image, shares);
    assert_eq!(drawn.status, 200, "{}", text(&drawn));
    assert!(text(&drawn).contains("Applied edit"), "{}", text(&drawn));

    // In every picture served, on every process: the box lost its detail and nothing else
    // changed but for the new original's JPEG encoding (quality 90), a few grey levels at
    // most and far less than inside.
    let after = world.every_picture(&image);
    let (inside_change, before_detail) = assert_blurred_only_in(&before, &after, shares);

    // The region is recorded, and removing it is refused without the unblurred original.
    let [x, y, width, height] = edit_region(&world, &image);
    let csrf = world.csrf(&alice, &image);
    let removal = world.post_form(
        &alice,
        &format!("/dashboard/image?image_key={image}"),
        &[
            ("csrf", &csrf),
            ("action", "remove"),
            ("x", &x),
            ("y", &y),
            ("width", &width),
            ("height", &height),
        ],
    );
    assert_eq!(removal.status, 422, "{}", text(&removal));
    assert_eq!(world.thumbnail(&image), after[0]);

    // With the unblurred original kept (as `--keep-unblurred true` keeps it), the owner
    // removes the blur and the thumbnail shows the picture as it was.
    let unblurred = world.data.join("unblurred");
    std::fs::create_dir_all(&unblurred).unwrap();
    std::fs::write(unblurred.join(format!("{image}.jpg")), &pristine).unwrap();
    let page = text(&world.page(&alice, &format!("/dashboard/image?image_key={image}")));
    assert!(page.contains("blur can be added and removed"), "{page}");
    let csrf = input_value(&page, "csrf");
    let removal = world.post_form(
        &alice,
        &format!("/dashboard/image?image_key={image}"),
        &[
            ("csrf", &csrf),
            ("action", "remove"),
            ("x", &x),
            ("y", &y),
            ("width", &width),
            ("height", &height),
        ],
    );
    assert_eq!(removal.status, 200, "{}", text(&removal));
    // The detail is back: the thumbnail is made anew from the unblurred original (by the
    // server's resizer, where the import made the first one: they differ a little).
    let restored = world.thumbnail(&image);
    let (back, restored_detail) = compare(&before[0], &restored, shares, true);
    assert!(
        back < inside_change / 2.0 && restored_detail > before_detail * 0.85,
        "after the removal the box differs by {back} (blurred: {inside_change}), detail \
         {restored_detail} (before: {before_detail})"
    );
}

#[test]
fn another_users_box_waits_for_an_administrator_who_applies_it_from_the_queue() {
    let world = world("review");
    let image = world.images[1].clone();
    // Imported with blurring off: the served original is the photo as taken.
    let pristine =
        std::fs::read(world.data.join(format!("media/img/{image}/original.jpg"))).unwrap();
    let before = world.thumbnail(&image);
    let dave = world.sign_in("dave");
    let shares = [0.05, 0.1, 0.3, 0.3];
    let proposed = world.draw(&dave, &image, shares);
    assert_eq!(proposed.status, 202, "{}", text(&proposed));
    assert_eq!(world.thumbnail(&image), before, "applied without review");

    // dave has no queue; carol does, with the edit in it.
    let dashboard = text(&world.page(&dave, "/dashboard"));
    assert!(!dashboard.contains("Privacy queue"), "{dashboard}");
    let denied = world.post_form(
        &dave,
        "/dashboard",
        &[
            ("csrf", &input_value(&dashboard, "csrf")),
            ("action", "blur_edit"),
            ("edit", "1"),
            ("decision", "apply"),
        ],
    );
    assert_eq!(denied.status, 403);
    let carol = world.sign_in("carol");
    let queue = text(&world.page(&carol, "/dashboard"));
    assert!(queue.contains("Privacy queue"), "{queue}");
    assert!(
        queue.contains("data-edit=\"1\" data-state=\"pending\""),
        "{queue}"
    );
    let applied = world.post_form(
        &carol,
        "/dashboard",
        &[
            ("csrf", &input_value(&queue, "csrf")),
            ("action", "blur_edit"),
            ("edit", "1"),
            ("decision", "apply"),
        ],
    );
    assert_eq!(applied.status, 200, "{}", text(&applied));
    assert!(text(&applied).contains("Edit 1 is applied"));
    let blurred = world.thumbnail(&image);
    let (change, _) = compare(&before, &blurred, shares, true);
    assert!(change > 8.0, "the box changed by {change}");
    proposed_removal_waits_for_review(
        &world,
        &dave,
        &carol,
        &image,
        (&pristine, &before, &blurred),
        shares,
    );
}

/// dave proposes removing the blur carol applied (the unblurred original, `pristine`, is kept
/// now): it waits, the picture unchanged, until carol applies it from the queue and the
/// detail is back.
fn proposed_removal_waits_for_review(
    world: &World,
    dave: &str,
    carol: &str,
    image: &str,
    (pristine, before, blurred): (&[u8], &image::RgbImage, &image::RgbImage),
    shares: [f64; 4],
) {
    std::fs::create_dir_all(world.data.join("unblurred")).unwrap();
    std::fs::write(
        world.data.join("unblurred").join(format!("{image}.jpg")),
        pristine,
    )
    .unwrap();
    let [x, y, width, height] = edit_region(world, image);
    let proposed = world.post_form(
        dave,
        &format!("/dashboard/image?image_key={image}"),
        &[
            ("csrf", &world.csrf(dave, image)),
            ("action", "remove"),
            ("x", &x),
            ("y", &y),
            ("width", &width),
            ("height", &height),
        ],
    );
    assert_eq!(proposed.status, 202, "{}", text(&proposed));
    assert_eq!(&world.thumbnail(image), blurred, "removed without review");
    let queue = text(&world.page(carol, "/dashboard"));
    assert!(
        queue.contains("data-edit=\"2\" data-state=\"pending\""),
        "{queue}"
    );
    let applied = world.post_form(
        carol,
        "/dashboard",
        &[
            ("csrf", &input_value(&queue, "csrf")),
            ("action", "blur_edit"),
            ("edit", "2"),
            ("decision", "apply"),
        ],
    );
    assert_eq!(applied.status, 200, "{}", text(&applied));
    assert!(text(&applied).contains("Edit 2 is applied"));
    let (back, _) = compare(before, &world.thumbnail(image), shares, true);
    let (blurred_change, _) = compare(before, blurred, shares, true);
    assert!(
        back < blurred_change / 2.0,
        "after the removal the box differs by {back} (blurred: {blurred_change})"
    );
}

/// The report page's form token and cookie.
fn report_form(world: &World, image: &str) -> (String, String) {
    let page = world.server.get(&format!("/report?image_key={image}"));
    assert_eq!(page.status, 200, "{}", text(&page));
    let html = text(&page);
    assert!(html.contains("Report / request blurring"), "{html}");
    (
        input_value(&html, "csrf"),
        cookie(&page, "streetlevel_report"),
    )
}

/// Sends the form to the first serving process: each counts its own submissions (on replicas
/// a client reaching both may send each its allowance; docs/PRIVACY.md says so), so a flood is
/// refused where it lands. The form's page and token come through the balancer: any process
/// takes a token another handed out.
fn submit_report(world: &World, image: &str, cookie: &str, body: &str) -> Response {
    streetlevel_tests::request(
        world.server.processes()[0],
        "POST",
        &format!("/report?image_key={image}"),
        &[
            ("Cookie", cookie),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        body.as_bytes(),
    )
}

#[test]
fn a_passers_by_request_reaches_the_api_and_the_command_line_and_is_applied_from_there() {
    let world = world("request");
    let image = world.images[2].clone();
    let before = world.thumbnail(&image);
    // The embed page links to the form.
    let embed = text(&world.server.get(&format!("/embed?image_key={image}")));
    assert!(
        embed.contains(&format!("/report?image_key={image}\""))
            && embed.contains("Report / request blurring"),
        "{embed}"
    );
    let (csrf, report_cookie) = report_form(&world, &image);
    let shares = [0.5, 0.4, 0.25, 0.3];
    let body = format!(
        "csrf={csrf}&kind=blur&reason={}&contact={}&box_left=0.5&box_top=0.4&box_width=0.25&box_height=0.3",
        encode("My face, by the door"),
        encode("me@example.com")
    );
    let sent = submit_report(&world, &image, &report_cookie, &body);
    assert_eq!(sent.status, 201, "{}", text(&sent));
    assert!(
        text(&sent).contains("data-request=\"1\""),
        "{}",
        text(&sent)
    );

    // Administrators' API: a user token with the write scope of erin (an administrator with
    // no password); frank's is refused.
    let app = create_app_with_secret(&world);
    let carol = user_token(&world, &app, "erin");
    let alice = user_token(&world, &app, "frank");
    let listed = world.server.request(
        "GET",
        "/privacy_requests?state=open",
        &[("Authorization", &format!("OAuth {carol}"))],
        b"",
    );
    assert_eq!(listed.status, 200, "{}", text(&listed));
    let request = listed.json()["data"][0].clone();
    assert_eq!(request["id"], "1");
    assert_eq!(request["image_id"], image.as_str());
    assert_eq!(request["kind"], "blur");
    assert_eq!(request["reason"], "My face, by the door");
    assert_eq!(request["contact"], "me@example.com");
    assert_eq!(request["state"], "open");
    assert_eq!(request["box"]["left"], json!(0.5));
    let refused = world.server.request(
        "GET",
        "/privacy_requests",
        &[("Authorization", &format!("OAuth {alice}"))],
        b"",
    );
    assert_eq!(refused.status, 403, "{}", text(&refused));
    assert_eq!(world.server.get("/privacy_requests").status, 401);

    // The command line lists it too.
    let listed = world.cli(&["requests", "list"]);
    let line = listed.lines().next().unwrap();
    let columns: Vec<&str> = line.split('\t').collect();
    assert_eq!(columns[0], "1", "{line}");
    assert_eq!(columns[2], "open", "{line}");
    assert_eq!(columns[3], image, "{line}");
    assert_eq!(columns[8], "My face, by the door", "{line}");

    // Resolved through the API with the blur applied: the box is blurred in the thumbnail.
    let resolved = world.server.request(
        "POST",
        "/privacy_requests/1?state=done&apply_blur=true",
        &[("Authorization", &format!("OAuth {carol}"))],
        b"",
    );
    assert_eq!(resolved.status, 200, "{}", text(&resolved));
    let answer = resolved.json();
    assert_eq!(answer["request"]["state"], "done");
    assert_eq!(answer["blur_edit"]["state"], "applied");
    assert_eq!(answer["surrogate_keys"], json!([format!("image/{image}")]));
    let (change, _) = compare(&before, &world.thumbnail(&image), shares, true);
    assert!(change > 8.0, "the box changed by {change}");
    // Once resolved, it cannot be resolved again.
    let again = world.server.request(
        "POST",
        "/privacy_requests/1?state=refused",
        &[("Authorization", &format!("OAuth {carol}"))],
        b"",
    );
    assert_eq!(again.status, 400, "{}", text(&again));
    handled_on_the_command_line(&world, &image);
}

/// The resolved request is listed as done; a second one is refused and a third applied
/// (its box blurred in the served thumbnail), on the command line.
fn handled_on_the_command_line(world: &World, image: &str) {
    let done = world.cli(&["requests", "list", "--state", "done"]);
    assert!(done.starts_with("1\t"), "{done}");
    // A second request is refused from the command line.
    let (csrf, report_cookie) = report_form(world, image);
    let sent = submit_report(
        world,
        image,
        &report_cookie,
        &format!("csrf={csrf}&kind=remove&reason=my+house"),
    );
    assert_eq!(sent.status, 201, "{}", text(&sent));
    let resolved = world.cli(&["requests", "resolve", "2", "--state", "refused"]);
    assert!(resolved.starts_with("2\t"), "{resolved}");
    assert!(resolved.contains("\trefused\t"), "{resolved}");
    // A third asks for a box blurred, which the command line applies.
    let before = world.thumbnail(image);
    let shares = [0.05, 0.05, 0.3, 0.3];
    let sent = submit_report(
        world,
        image,
        &report_cookie,
        &format!(
            "csrf={csrf}&kind=blur&reason=a+plate&box_left=0.05&box_top=0.05&box_width=0.3&box_height=0.3"
        ),
    );
    assert_eq!(sent.status, 201, "{}", text(&sent));
    let applied = world.cli(&[
        "requests",
        "resolve",
        "3",
        "--state",
        "done",
        "--apply-blur",
    ]);
    assert!(applied.starts_with("3\t"), "{applied}");
    assert!(
        applied.contains(&format!(
            "applied on image {image} (purge the CDN key image/{image})"
        )),
        "{applied}"
    );
    let (change, _) = compare(&before, &world.thumbnail(image), shares, true);
    assert!(change > 8.0, "the box changed by {change}");
}

fn create_app_with_secret(world: &World) -> (String, String) {
    create_app_with_secret_and_scopes(world, "read,write")
}

fn create_app_with_secret_and_scopes(world: &World, scopes: &str) -> (String, String) {
    let created = world.cli(&[
        "apps",
        "create",
        "--name",
        "privacy tooling",
        "--callback",
        "http://127.0.0.1/callback",
        "--scopes",
        scopes,
    ]);
    let field = |name: &str| {
        created
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{name}: ")))
            .unwrap()
            .trim()
            .to_owned()
    };
    (field("client_id"), field("client_secret"))
}

fn user_token(world: &World, (id, secret): &(String, String), username: &str) -> String {
    let code = auth::approved_code(world.server.database(), id, username);
    let response = world.server.request(
        "POST",
        "/token",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &format!("OAuth {secret}")),
        ],
        json!({
            "grant_type": "authorization_code",
            "code": code,
            "client_id": id.parse::<u64>().unwrap(),
        })
        .to_string()
        .as_bytes(),
    );
    assert_eq!(response.status, 200, "{}", text(&response));
    response.json()["access_token"].as_str().unwrap().to_owned()
}

#[test]
fn the_report_form_refuses_forgeries_floods_and_huge_bodies_and_keeps_script_inert() {
    let world = world("abuse");
    let image = world.images[0].clone();
    let count = || world.stored_requests();
    let (csrf, report_cookie) = report_form(&world, &image);
    // No cookie, or a token of another form: refused, nothing stored.
    let forged = submit_report(
        &world,
        &image,
        "",
        &format!("csrf={csrf}&kind=blur&reason=x"),
    );
    assert_eq!(forged.status, 403);
    let forged = submit_report(
        &world,
        &image,
        &report_cookie,
        "csrf=not-the-token&kind=blur&reason=x",
    );
    assert_eq!(forged.status, 403);
    // A body over the server's limit: refused before it is read in full.
    let huge = format!("csrf={csrf}&kind=blur&reason={}", "a".repeat(200_000));
    assert_eq!(
        submit_report(&world, &image, &report_cookie, &huge).status,
        413
    );
    // Text over the form's limits, a box out of the picture, an unknown image: refused.
    let long = format!("csrf={csrf}&kind=blur&reason={}", "a".repeat(2001));
    assert_eq!(
        submit_report(&world, &image, &report_cookie, &long).status,
        400
    );
    let outside = format!(
        "csrf={csrf}&kind=blur&reason=x&box_left=0.9&box_top=0&box_width=0.5&box_height=0.5"
    );
    assert_eq!(
        submit_report(&world, &image, &report_cookie, &outside).status,
        400
    );
    assert_eq!(world.server.get("/report?image_key=999999999").status, 404);
    assert_eq!(count(), 0);

    // Script in every field is stored as given and shown inert to the administrator.
    let hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>";
    let sent = submit_report(
        &world,
        &image,
        &report_cookie,
        &format!(
            "csrf={csrf}&kind=blur&reason={}&contact={}",
            encode(hostile),
            encode(hostile)
        ),
    );
    assert_eq!(sent.status, 201, "{}", text(&sent));
    let carol = world.sign_in("carol");
    let queue = text(&world.page(&carol, "/dashboard"));
    assert!(!queue.contains("<script>alert(1)"), "{queue}");
    assert!(!queue.contains("<img src=x"), "{queue}");
    assert!(
        queue.contains("&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;"),
        "{queue}"
    );

    // A flood from one address: five submissions pass the throttle (three did already: the
    // two refused as invalid, which are charged too, and the hostile one), then 429 with
    // Retry-After, and nothing more is stored.
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let response = submit_report(
            &world,
            &image,
            &report_cookie,
            &format!("csrf={csrf}&kind=blur&reason=again"),
        );
        if response.status == 429 {
            let wait: u64 = response.header("retry-after").unwrap().parse().unwrap();
            assert!((1..=61).contains(&wait), "{wait}");
        }
        statuses.push(response.status);
    }
    assert_eq!(statuses, [201, 201, 429, 429, 429, 429]);
    assert_eq!(count(), 3);
    // The server still answers everything else.
    assert_eq!(world.server.get("/health").status, 200);
}

#[test]
fn a_hidden_image_is_left_out_of_map_features_image_lists() {
    let fixture = streetlevel_tests::Fixture::generate(Path::new(BINARY), "privacy-features", 300);
    let token = streetlevel_tests::create_app(Path::new(BINARY), &fixture.dir, "read");
    let server = Server::start(Path::new(BINARY), &fixture.dir, &[]);
    let header = format!("OAuth {token}");
    let features = server.request(
        "GET",
        "/map_features?bbox=-180,-85,180,85&fields=id,images&limit=50",
        &[("Authorization", &header)],
        b"",
    );
    assert_eq!(features.status, 200, "{}", text(&features));
    let feature = features.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|feature| !feature["images"]["data"].as_array().unwrap().is_empty())
        .cloned()
        .expect("a map feature seen in an image");
    let feature_id = feature["id"].as_str().unwrap().to_owned();
    let image = feature["images"]["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Hidden by the command line while the server runs: every serving process follows.
    run_with_env(
        Path::new(BINARY),
        &[
            "images",
            "hide",
            "--data",
            &fixture.dir.to_string_lossy(),
            &image,
        ],
        &server.admin_env(),
    );
    let lists = |response: &Response| -> Vec<Value> {
        response.json()["images"]["data"]
            .as_array()
            .unwrap()
            .clone()
    };
    let without = |response: &Response| {
        response.status == 200
            && lists(response)
                .iter()
                .all(|listed| listed["id"] != image.as_str())
    };
    // The command line's write reaches a server when it next follows the database (within a
    // second on SQLite): asked until then, for at most 30 s; the checks below say whether.
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(30) {
        let answers: Vec<Response> = server
            .processes()
            .iter()
            .map(|addr| {
                streetlevel_tests::request(
                    *addr,
                    "GET",
                    &format!("/{feature_id}?fields=images"),
                    &[("Authorization", &header)],
                    b"",
                )
            })
            .collect();
        if answers.iter().all(without) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for after in server.get_on_every_process(
        &format!("/{feature_id}?fields=images"),
        &[("Authorization", &header)],
        without,
    ) {
        assert_eq!(after.status, 200, "{}", text(&after));
        let listed = lists(&after);
        assert!(
            listed.iter().all(|listed| listed["id"] != image.as_str()),
            "{listed:?}"
        );
        assert_eq!(
            listed.len() + 1,
            feature["images"]["data"].as_array().unwrap().len()
        );
    }
}

/// A flood that gets past the throttles (many addresses, over days) stops at the cap of open
/// requests: with 10 000 waiting, the form answers 503 and stores nothing; once an
/// administrator has handled one, it takes requests again.
#[test]
fn a_full_queue_refuses_more_requests_until_administrators_handle_some() {
    let world = world("full");
    let image = world.images[0].clone();
    let database = streetlevel_db::Database::open(world.server.database()).unwrap();
    database
        .autocommit(|connection| {
            connection.execute(
                "INSERT INTO import_privacy_requests (image_id, kind, reason, created_at, state)
                 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)
                 SELECT ?1, 'blur', 'flood', 0, 'open' FROM n",
                streetlevel_db::params![image.parse::<i64>().unwrap()],
            )
        })
        .unwrap();
    drop(database);
    assert_eq!(world.stored_requests(), 10_000);
    let (csrf, report_cookie) = report_form(&world, &image);
    let body = format!("csrf={csrf}&kind=blur&reason=my+face");
    let refused = submit_report(&world, &image, &report_cookie, &body);
    assert_eq!(refused.status, 503, "{}", text(&refused));
    assert_eq!(world.stored_requests(), 10_000);
    // The administrators' queue still opens, and handling one makes room.
    let carol = world.sign_in("carol");
    let queue = world.page(&carol, "/dashboard");
    assert_eq!(queue.status, 200);
    assert!(text(&queue).contains("data-request=\"1\""));
    let resolved = world.cli(&["requests", "resolve", "1", "--state", "refused"]);
    assert!(resolved.contains("\trefused\t"), "{resolved}");
    let sent = submit_report(&world, &image, &report_cookie, &body);
    assert_eq!(sent.status, 201, "{}", text(&sent));
    assert_eq!(world.stored_requests(), 10_001);
}

/// The real street photos of `../shared/data/opensfm-blur-pairs`, every one of them (8 MP
/// Berlin, 1024 x 768 Lund, before and after blurring: all different bytes).
fn every_photo() -> Vec<(String, Vec<u8>)> {
    let dir = photos_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| {
            Path::new(name)
                .extension()
                .is_some_and(|extension| extension.eq_ignore_ascii_case("jpg"))
        })
        .collect();
    names.sort();
    assert!(
        names.len() >= 60,
        "{} photos in {}",
        names.len(),
        dir.display()
    );
    names
        .into_iter()
        .map(|name| {
            let bytes = std::fs::read(dir.join(&name)).unwrap();
            (name, bytes)
        })
        .collect()
}

/// Uploads `photos` as the uploader does (a session each, a manifest) with `auth` and
/// finishes the manifest: the job's ID.
fn upload_as_one_job(world: &World, auth: &str, photos: &[(String, Vec<u8>)]) -> i64 {
    let mut handles = Vec::new();
    for (index, (name, bytes)) in photos.iter().enumerate() {
        let key = format!("mly_tools_{index:04}_{}", name.replace('_', "-"));
        let response = world.server.request(
            "POST",
            &format!("/upload/{key}"),
            &[("Authorization", auth), ("Offset", "0")],
            bytes,
        );
        assert_eq!(response.status, 200, "{}", text(&response));
        handles.push(response.json()["h"].as_str().unwrap().to_owned());
    }
    let manifest = json!({"image_handles": handles}).to_string();
    let stored = world.server.request(
        "POST",
        "/upload/uuid_lane.json",
        &[("Authorization", auth), ("Offset", "0")],
        manifest.as_bytes(),
    );
    assert_eq!(stored.status, 200, "{}", text(&stored));
    let finished = world.server.request(
        "POST",
        "/finish_upload",
        &[
            ("Authorization", auth),
            ("Content-Type", "application/json"),
        ],
        json!({"file_handle": stored.json()["h"], "file_type": "mly_bundle_manifest"})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(finished.status, 200, "{}", text(&finished));
    finished.json()["cluster_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// The state, lease and image count of an upload job, where the server keeps its tables.
fn job_state(database: &streetlevel_db::Database, job: i64) -> (String, Option<i64>, i64) {
    database
        .read(|connection| {
            connection.query_row(
                "SELECT state, lease_until, images FROM import_jobs WHERE id = ?1",
                streetlevel_db::params![job],
                |row| Ok::<_, streetlevel_db::DbError>((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
        })
        .unwrap()
        .expect("the job's row")
}

/// What issue 40 bounds while a blur edit is applied during a large upload: how long a token
/// is issued in, how long the upload job goes without its lease renewed, and how long the
/// edit itself takes. Each is milliseconds at the job's pace (its lease is renewed every
/// quarter of [`LANE_TEST_LEASE_SECONDS`]); before the render left the write transaction and
/// the edit got its lane, the edit waited for the upload's pictures and every writer waited
/// for its render.
const LANE_TEST_BOUND: Duration = Duration::from_secs(2);
/// The upload job's lease in the lane test, seconds (renewed every quarter).
const LANE_TEST_LEASE_SECONDS: u64 = 4;

/// Refreshes `first` (a token of the app `(id, secret)`) at `addr` as a chain until `stop`:
/// how many were issued and the slowest answer. Each refresh is a write.
fn issue_tokens_until(
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    addr: std::net::SocketAddr,
    (id, secret): (String, String),
    first: String,
) -> std::thread::JoinHandle<(usize, Duration)> {
    std::thread::spawn(move || {
        let mut current = first;
        let mut slowest = Duration::ZERO;
        let mut issued = 0;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let started = Instant::now();
            let response = streetlevel_tests::request(
                addr,
                "POST",
                "/token",
                &[
                    ("Content-Type", "application/json"),
                    ("Authorization", &format!("OAuth {secret}")),
                ],
                json!({
                    "grant_type": "refresh_token",
                    "refresh_token": current,
                    "client_id": id.parse::<u64>().unwrap(),
                })
                .to_string()
                .as_bytes(),
            );
            slowest = slowest.max(started.elapsed());
            assert_eq!(response.status, 200, "{}", text(&response));
            response.json()["access_token"]
                .as_str()
                .unwrap()
                .clone_into(&mut current);
            issued += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
        (issued, slowest)
    })
}

/// Watches upload job `job` until it is no longer processing (before `deadline`): its final
/// state, its images, and the longest time its lease went without a renewal.
fn watch_lease(
    database: std::sync::Arc<streetlevel_db::Database>,
    job: i64,
    deadline: Instant,
) -> std::thread::JoinHandle<(String, i64, Duration)> {
    std::thread::spawn(move || {
        let (mut last, mut changed_at) = (job_state(&database, job).1, Instant::now());
        let mut longest = Duration::ZERO;
        loop {
            let (state, lease_until, images) = job_state(&database, job);
            if state != "processing" {
                return (state, images, longest.max(changed_at.elapsed()));
            }
            if lease_until != last {
                longest = longest.max(changed_at.elapsed());
                (last, changed_at) = (lease_until, Instant::now());
            }
            assert!(Instant::now() < deadline, "the job did not end");
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

/// Issue 40: a blur edit applied while a large upload of real photos is processed (on one CPU
/// thread, so the upload's pictures queue behind each other; blurred with the real models when
/// they are installed) renders on the interactive lane
/// and takes the database's write lock only to publish. Meanwhile tokens are issued (a
/// refresh chain, each a write) within [`LANE_TEST_BOUND`], the job's lease is renewed at
/// least that often and never lost, the edit is answered within that bound while the job is
/// still processing, its box is blurred, and the job publishes every photo.
#[test]
fn a_blur_edit_during_a_large_upload_holds_up_neither_tokens_nor_the_uploads_lease() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let lease = LANE_TEST_LEASE_SECONDS.to_string();
    let mut serve = vec!["--cpu-threads", "1", "--upload-job-lease-seconds", &lease];
    // With the real models (as `cargo xtask test` runs it) each picture of the upload takes
    // seconds of CPU, as a large upload's do; without them only its thumbnails are made.
    let models = streetlevel_tests::test_models_dir().map(|dir| dir.to_string_lossy().into_owned());
    if let Some(models) = &models {
        serve.extend(["--blur", "true", "--blur-models-dir", models.as_str()]);
    }
    let world = world_with("lane", &serve);
    let database = Arc::new(streetlevel_db::Database::open(world.server.database()).unwrap());
    let app = create_app_with_secret_and_scopes(&world, "read,upload");
    // Two new users: one uploads, one's tokens are refreshed.
    let uploader = format!("OAuth {}", user_token(&world, &app, "uploader"));
    let first_token = user_token(&world, &app, "token-user");
    let alice = world.sign_in("alice");
    let image = world.images[2].clone();
    let before = world.thumbnail(&image);
    // Blurred, the six 8 MP Berlin photos are seconds of CPU each; else every photo but the
    // three the world imported (they would be duplicates), whose thumbnails take longer.
    let mut photos = every_photo();
    if models.is_some() {
        photos.retain(|(name, _)| name.contains("berlin"));
    } else {
        photos
            .retain(|(name, _)| !(1..=3).any(|n| *name == format!("after_lund_images_{n:02}.jpg")));
    }
    let job = upload_as_one_job(&world, &uploader, &photos);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut state = job_state(&database, job);
    while state.0 != "processing" {
        assert_eq!(state.0, "received", "{state:?}");
        assert!(
            Instant::now() < deadline,
            "the job was not claimed: {state:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
        state = job_state(&database, job);
    }
    // The edit comes once the first new picture is stored: the upload's pictures are then
    // under way on the pool, one after another.
    let stored = |data: &Path| std::fs::read_dir(data.join("media/img")).unwrap().count();
    let imported = 3;
    while stored(&world.data) <= imported {
        assert!(
            Instant::now() < deadline,
            "no picture of the upload was stored"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let tokens = issue_tokens_until(
        Arc::clone(&stop),
        world.server.processes()[0],
        app.clone(),
        first_token,
    );
    let leases = watch_lease(Arc::clone(&database), job, deadline);

    let shares = [0.1, 0.2, 0.3, 0.3];
    let started = Instant::now();
    let drawn = world.draw(&alice, &image, shares);
    let edit_took = started.elapsed();
    assert_eq!(drawn.status, 200, "{}", text(&drawn));
    assert!(text(&drawn).contains("Applied edit"), "{}", text(&drawn));
    let during = job_state(&database, job).0;
    let (state, images, longest_without_renewal) = leases.join().unwrap();
    stop.store(true, Ordering::SeqCst);
    let (issued, slowest_token) = tokens.join().unwrap();
    eprintln!(
        "edit {edit_took:?}, slowest of {issued} tokens {slowest_token:?}, longest without \
         lease renewal {longest_without_renewal:?}"
    );
    assert!(
        edit_took <= LANE_TEST_BOUND,
        "the edit took {edit_took:?} while the upload was processed"
    );
    assert_eq!(
        during, "processing",
        "the job ended before the edit was answered: the test needs a longer upload"
    );

    assert_eq!(state, "published", "the job lost its lease or failed");
    assert_eq!(images, i64::try_from(photos.len()).unwrap());
    let (change, _) = compare(&before, &world.thumbnail(&image), shares, true);
    assert!(change > 8.0, "the box changed by {change}");
    assert!(issued > 0);
    assert!(
        slowest_token <= LANE_TEST_BOUND,
        "a token took {slowest_token:?} while the edit was applied ({issued} issued)"
    );
    assert!(
        longest_without_renewal <= LANE_TEST_BOUND,
        "the upload's lease went {longest_without_renewal:?} without renewal"
    );
}
