//! `cargo xtask release`: an optimised `streetlevel` binary packed with the embed viewer's npm
//! files and the docs into `target/dist/streetlevel-<version>-<target>.tar.gz`, then checked
//! as another machine would use it: unpacked into an empty directory, a data set generated and
//! served by the unpacked binary, and the embed page must be the interactive viewer whose
//! scripts (mapillary-js and `MapLibre`) come from the unpacked files.
//!
//! The tarball holds `streetlevel`, `assets/` (the served files of `web/node_modules`, laid
//! out as there, with the packages' licences), `README.md`, `ARCHITECTURE.md` and `docs/`.
//! The binary looks for `assets/` next to itself when no `--assets-dir` is given
//! (`streetlevel_web::default_assets_dir`).
//!
//! `cargo xtask test --suite release` packs the debug binary the same way and runs the same
//! check, so the layout is tested without an optimised build.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};

use crate::browser::ensure_node_modules;
use crate::suite::{Outcome, build_test_binaries, skip_or_fail, target_dir};
use crate::{cargo, run_command};

/// The folder next to the binary that holds the npm files (`streetlevel_web::RELEASE_ASSETS_DIR`).
const ASSETS_DIR: &str = "assets";

/// The files of `web/node_modules` the embed page loads (see `crates/web/src/assets.rs`), and
/// the packages' licences and manifests. Source maps, typings and development builds stay out.
const ASSET_FILES: &[&str] = &[
    "mapillary-js/dist/mapillary.js",
    "mapillary-js/dist/mapillary.css",
    "mapillary-js/LICENSE",
    "mapillary-js/package.json",
    "maplibre-gl/dist/maplibre-gl.mjs",
    "maplibre-gl/dist/maplibre-gl-worker.mjs",
    "maplibre-gl/dist/maplibre-gl-shared.mjs",
    "maplibre-gl/dist/maplibre-gl.css",
    "maplibre-gl/LICENSE.txt",
    "maplibre-gl/package.json",
    "mapillary_sprite_source/sprites/sprites.json",
    "mapillary_sprite_source/sprites/sprites.png",
    "mapillary_sprite_source/sprites/sprites@2x.json",
    "mapillary_sprite_source/sprites/sprites@2x.png",
    "mapillary_sprite_source/LICENSE",
    "mapillary_sprite_source/package.json",
];

/// Files the pages load that their HTML does not name: `embed.mjs` imports `MapLibre`, which
/// starts its worker from a file next to it; the explorer's map loads the feature icons.
const IMPORTED_SCRIPTS: &[&str] = &[
    "/assets/maplibre-gl/dist/maplibre-gl.mjs",
    "/assets/maplibre-gl/dist/maplibre-gl-worker.mjs",
    // The explorer's map feature icons, which its map loads.
    "/assets/mapillary_sprite_source/sprites/sprites.json",
    "/assets/mapillary_sprite_source/sprites/sprites.png",
    "/assets/mapillary_sprite_source/sprites/sprites@2x.json",
    "/assets/mapillary_sprite_source/sprites/sprites@2x.png",
];

/// Appended to the unpacked mapillary-js: the served copy must end with it, which proves the
/// server reads the unpacked files and not the source tree it was built from.
const MARKER: &str = "\n/* unpacked by the streetlevel release check */\n";

/// The folder next to the binary that holds the blur runtime, the face model and their
/// licences: where `streetlevel` looks by default.
const MODELS: &str = "models";

/// A real photo with faces, imported by the unpacked binary with its defaults (blurring on).
const PHOTO_WITH_FACES: &str = "../shared/data/opensfm-blur-pairs/before_berlin_images_01.jpg";

/// Bounds every wait of the check.
const DEADLINE: Duration = Duration::from_secs(120);

/// `cargo xtask release`.
pub(crate) fn run(root: &Path) -> Result<()> {
    run_command(
        root,
        &cargo(),
        &["build", "--release", "--locked", "--package", "streetlevel"],
    )?;
    ensure_node_modules(&root.join("web"))
        .context("a release ships the embed viewer's npm packages")?;
    let binary = target_dir(root)
        .join("release")
        .join(format!("streetlevel{}", std::env::consts::EXE_SUFFIX));
    let archive = pack(root, &binary, &target_dir(root).join("dist"))?;
    check(root, &archive)?;
    eprintln!("xtask release: {}", archive.display());
    Ok(())
}

/// `cargo xtask test --suite release`: the debug binary packed and checked like a release.
pub(crate) fn test(root: &Path) -> Result<Outcome> {
    if let Err(error) = ensure_node_modules(&root.join("web")) {
        return skip_or_fail(
            "the release check",
            &format!("`npm ci` in web/ failed ({error:#}); it needs npm and its registry"),
        );
    }
    let binary =
        build_test_binaries(root)?.join(format!("streetlevel{}", std::env::consts::EXE_SUFFIX));
    let dist = scratch("dist")?;
    let archive = pack(root, &binary, &dist)?;
    check(root, &archive)?;
    fs::remove_dir_all(&dist).ok();
    Ok(Outcome::Passed)
}

/// Packs `binary`, the npm files and the docs into `<dist>/streetlevel-<version>-<target>.tar.gz`.
pub(crate) fn pack(root: &Path, binary: &Path, dist: &Path) -> Result<PathBuf> {
    let version = env!("CARGO_PKG_VERSION");
    let target = format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS);
    let name = format!("streetlevel-{version}-{target}");
    let staging = dist.join(&name);
    if staging.exists() {
        fs::remove_dir_all(&staging).context("clearing the previous staging folder")?;
    }
    fs::create_dir_all(&staging)?;
    fs::copy(binary, staging.join(binary.file_name().unwrap_or_default()))
        .with_context(|| format!("copying the binary {}", binary.display()))?;
    let node_modules = root.join("web").join("node_modules");
    for file in ASSET_FILES {
        let target = staging.join(ASSETS_DIR).join(file);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::copy(node_modules.join(file), &target)
            .with_context(|| format!("copying web/node_modules/{file} (run npm ci in web/)"))?;
    }
    for document in ["README.md", "ARCHITECTURE.md"] {
        fs::copy(root.join(document), staging.join(document))?;
    }
    let docs = root.join("docs");
    if docs.is_dir() {
        fs::create_dir_all(staging.join("docs"))?;
        for entry in fs::read_dir(&docs)? {
            let path = entry?.path();
            if path.extension().is_some_and(|extension| extension == "md")
                && let Some(file_name) = path.file_name()
            {
                fs::copy(&path, staging.join("docs").join(file_name))?;
            }
        }
    }
    let models =
        crate::models::ensure(root).context("a release ships the blur runtime and model")?;
    fs::create_dir_all(staging.join(MODELS))?;
    for file in crate::models::shipped_files() {
        fs::copy(models.join(file), staging.join(MODELS).join(file))
            .with_context(|| format!("copying {file} from {}", models.display()))?;
    }
    // The structure-from-motion engine is not shipped (a 230 MB virtual environment): how to
    // install the same pinned wheels next to the binary, where `serve` looks for it.
    fs::create_dir_all(staging.join("sfm"))?;
    fs::write(
        staging.join("sfm").join("requirements.txt"),
        crate::models::engine_requirements(),
    )?;
    let archive = format!("{name}.tar.gz");
    run_command(dist, "tar", &["czf", &archive, &name])?;
    fs::remove_dir_all(&staging).ok();
    Ok(dist.join(archive))
}

/// An empty directory of its own under the system temp directory.
fn scratch(name: &str) -> Result<PathBuf> {
    let dir =
        std::env::temp_dir().join(format!("streetlevel-release-{name}-{}", std::process::id()));
    if dir.exists() {
        fs::remove_dir_all(&dir)?;
    }
    fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Unpacks `archive` into an empty directory, generates a small data set with the unpacked
/// binary, serves it from there without `--assets-dir`, and checks over HTTP that the embed
/// page is the interactive viewer and that every script and stylesheet it loads is served,
/// mapillary-js from the unpacked files.
pub(crate) fn check(root: &Path, archive: &Path) -> Result<()> {
    eprintln!("xtask release: checking {}", archive.display());
    let dir = scratch("check")?;
    let archive = archive
        .canonicalize()
        .with_context(|| format!("{} is missing", archive.display()))?;
    let archive_arg = archive.to_string_lossy();
    run_command(&dir, "tar", &["xzf", &archive_arg])?;
    let unpacked = fs::read_dir(&dir)?
        .next()
        .context("the tarball is empty")??
        .path();
    let binary = unpacked.join(format!("streetlevel{}", std::env::consts::EXE_SUFFIX));
    ensure!(binary.is_file(), "no streetlevel binary in the tarball");
    let mapillary = unpacked
        .join(ASSETS_DIR)
        .join("mapillary-js/dist/mapillary.js");
    fs::OpenOptions::new()
        .append(true)
        .open(&mapillary)
        .and_then(|mut file| file.write_all(MARKER.as_bytes()))
        .with_context(|| format!("{} is not in the tarball", mapillary.display()))?;
    let data = dir.join("data");
    let generated = Command::new(&binary)
        .args(["fixtures", "--images", "20", "--media", "lazy", "--out"])
        .arg(&data)
        .current_dir(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("could not run the unpacked streetlevel")?;
    ensure!(
        generated.success(),
        "streetlevel fixtures failed: {generated}"
    );
    let server = Served::start(&binary, &data, &dir)?;
    let result = check_embed(&server, &data).and_then(|()| check_blurring(root, &binary, &dir));
    drop(server);
    if result.is_ok() {
        fs::remove_dir_all(&dir).ok();
    }
    result
}

/// The unpacked binary imports a real photo with its defaults: blurring on, with the runtime
/// and model from the `models/` next to it (not the source tree's).
fn check_blurring(root: &Path, binary: &Path, dir: &Path) -> Result<()> {
    let photo = root.join(PHOTO_WITH_FACES);
    if !photo.is_file() {
        ensure!(
            !crate::in_ci(),
            "{} is missing: the release check imports it",
            photo.display()
        );
        eprintln!(
            "xtask release: {} is missing, the unpacked binary's blurring is not checked",
            photo.display()
        );
        return Ok(());
    }
    let output = Command::new(binary)
        .arg("import")
        .arg("--data")
        .arg(dir.join("blurred"))
        .arg(&photo)
        .current_dir(dir)
        .env_remove("STREETLEVEL_BLUR")
        .env_remove("STREETLEVEL_BLUR_MODELS_DIR")
        .env_remove("STREETLEVEL_BLUR_URL")
        .output()
        .context("could not run the unpacked streetlevel import")?;
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    ensure!(
        output.status.success(),
        "the unpacked streetlevel import failed ({}): {report}",
        output.status
    );
    let models = binary.with_file_name(MODELS);
    ensure!(
        report.contains(&format!("(runtime from {})", models.display()))
            && report.contains("imported 1 images"),
        "the unpacked streetlevel did not blur with its own {}: {report}",
        models.display()
    );
    Ok(())
}

fn check_embed(server: &Served, data: &Path) -> Result<()> {
    let credentials: serde_json::Value =
        serde_json::from_slice(&fs::read(data.join("credentials.json"))?)?;
    let token = credentials
        .get("client_token")
        .and_then(serde_json::Value::as_str)
        .context("no client token in credentials.json")?;
    let (status, body) = server.get(
        "/images?bbox=-180,-90,180,90&limit=1&fields=id",
        Some(&format!("OAuth {token}")),
    )?;
    ensure!(status == 200, "GET /images answered {status}");
    let images: serde_json::Value = serde_json::from_slice(&body)?;
    let id = images
        .pointer("/data/0/id")
        .and_then(serde_json::Value::as_str)
        .context("no image in the data set")?;
    let (status, page) = server.get(&format!("/embed?image_key={id}&style=split"), None)?;
    let page = String::from_utf8_lossy(&page).into_owned();
    ensure!(status == 200, "the embed page answered {status}: {page}");
    ensure!(
        !page.contains("The interactive viewer is not available"),
        "the unpacked binary shows the still-image fallback: it does not find assets/"
    );
    let mut assets = referenced_assets(&page);
    ensure!(
        assets
            .iter()
            .any(|path| path == "/assets/mapillary-js/dist/mapillary.js"),
        "the embed page does not load mapillary-js: {page}"
    );
    assets.extend(IMPORTED_SCRIPTS.iter().map(|path| (*path).to_owned()));
    for path in &assets {
        let (status, body) = server.get(path, None)?;
        ensure!(
            status == 200 && !body.is_empty(),
            "{path} answered {status}"
        );
        if path.ends_with("/mapillary.js") {
            ensure!(
                body.ends_with(MARKER.as_bytes()),
                "{path} is not the unpacked file"
            );
        }
    }
    eprintln!(
        "xtask release: the unpacked binary serves the embed viewer ({} assets)",
        assets.len()
    );
    Ok(())
}

/// The `/assets/...` paths of the page's `src` and `href` attributes.
fn referenced_assets(page: &str) -> Vec<String> {
    let mut found = Vec::new();
    for attribute in ["src=\"", "href=\""] {
        for (at, _) in page.match_indices(attribute) {
            let rest = &page[at + attribute.len()..];
            if let Some(end) = rest.find('"')
                && rest[..end].starts_with("/assets/")
            {
                found.push(rest[..end].to_owned());
            }
        }
    }
    found
}

/// `streetlevel serve` on 127.0.0.1:0; stopped when dropped.
struct Served {
    child: Child,
    addr: SocketAddr,
}

impl Served {
    fn start(binary: &Path, data: &Path, dir: &Path) -> Result<Served> {
        let mut child = Command::new(binary)
            .arg("serve")
            .arg("--data")
            .arg(data)
            .args(["--addr", "127.0.0.1:0", "--exit-on-stdin-eof"])
            .current_dir(dir)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("could not start the unpacked streetlevel serve")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let addr = loop {
            let Some(line) = lines.next() else {
                let status = child.wait()?;
                bail!("the unpacked streetlevel serve exited ({status}) before listening");
            };
            if let Some(url) = line?.strip_prefix("listening on http://") {
                break url.trim().parse().context("the printed address")?;
            }
        };
        std::thread::spawn(move || lines.for_each(drop));
        Ok(Served { child, addr })
    }

    /// `GET path` over HTTP/1.1 with `Connection: close`: the status and the body.
    fn get(&self, path: &str, authorization: Option<&str>) -> Result<(u16, Vec<u8>)> {
        let mut stream = TcpStream::connect_timeout(&self.addr, DEADLINE)?;
        stream.set_read_timeout(Some(DEADLINE))?;
        let authorization =
            authorization.map_or_else(String::new, |value| format!("Authorization: {value}\r\n"));
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {}\r\n{authorization}Connection: close\r\n\r\n",
            self.addr
        )?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response)?;
        let split = response
            .windows(4)
            .position(|window| window == b"\r\n\r\n")
            .context("no end of headers in the answer")?;
        let head = String::from_utf8_lossy(&response[..split]).to_ascii_lowercase();
        ensure!(
            !head.contains("transfer-encoding: chunked"),
            "{path}: a chunked answer (this check reads whole bodies only)"
        );
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .context("no status code")?;
        Ok((status, response[split + 4..].to_vec()))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}
