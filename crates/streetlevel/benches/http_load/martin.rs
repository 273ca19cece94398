//! `STREETLEVEL_HTTP_BENCH_MARTIN=/path/to/martin`: Martin serving the measured tiles from
//! `MBTiles`, measured in the same run as streetlevel's cached tile rows (issue 19's peer).
//!
//! The bench asks the cached streetlevel server for each measured tile (z14, z12, z8 around
//! the fixture centre) raw and gzipped and writes the bytes into two `MBTiles` files in a
//! temporary directory: `streetlevel_gzip` holds the gzipped tiles, as tile builders write
//! them (tippecanoe, planetiler), and `streetlevel_raw` the raw ones. One Martin serves both
//! on `127.0.0.1` with its defaults (its tile cache on). What Martin does with them (its
//! `srv/tiles/content.rs`, 1.14): it sends a stored gzip tile as it is to a client that
//! accepts gzip and gunzips it for one that does not; a raw tile it sends as it is without
//! `Accept-Encoding` and gzips afresh for each gzip request (its cache holds the stored
//! bytes, not the encoded response). Before measuring, the bench checks that Martin's answers
//! decode to streetlevel's bytes.

use std::io::Read as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{Endpoint, Load, Settings, get, wrk};

/// The two stored codings, as `MBTiles` file stems (Martin's source IDs).
pub(crate) const SOURCES: [(&str, bool); 2] =
    [("streetlevel_gzip", true), ("streetlevel_raw", false)];

/// A tile (`z`, `x`, `y` in XYZ) and its bytes.
type Tile = ((u8, u32, u32), Vec<u8>);

/// A running Martin, stopped (and its directory removed) when dropped.
pub(crate) struct Martin {
    child: Child,
    pub(crate) addr: SocketAddr,
    dir: PathBuf,
}

impl Martin {
    pub(crate) fn endpoint(&self) -> Endpoint {
        Endpoint {
            addr: self.addr,
            pid: self.child.id(),
        }
    }
}

impl Drop for Martin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn gunzip(body: &[u8]) -> Vec<u8> {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(body)
        .read_to_end(&mut raw)
        .unwrap();
    raw
}

/// One `MBTiles` file (the specification's plain schema) holding `tiles`, each stored with
/// its row flipped as `MBTiles` has it.
fn write_mbtiles(path: &Path, name: &str, tiles: &[Tile]) {
    let connection = rusqlite::Connection::open(path).unwrap();
    connection
        .execute_batch(
            "CREATE TABLE metadata (name TEXT, value TEXT);
             CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER,
                 tile_data BLOB);
             CREATE UNIQUE INDEX tile_index ON tiles (zoom_level, tile_column, tile_row);",
        )
        .unwrap();
    for (key, value) in [
        ("name", name),
        ("format", "pbf"),
        ("minzoom", "0"),
        ("maxzoom", "14"),
    ] {
        connection
            .execute(
                "INSERT INTO metadata (name, value) VALUES (?1, ?2)",
                (key, value),
            )
            .unwrap();
    }
    for ((z, x, y), data) in tiles {
        let row = (1u32 << z) - 1 - y;
        connection
            .execute(
                "INSERT INTO tiles (zoom_level, tile_column, tile_row, tile_data)
                 VALUES (?1, ?2, ?3, ?4)",
                (z, x, row, data),
            )
            .unwrap();
    }
}

/// A port nobody listens on at the moment (Martin takes an address, not a listener).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// [`start`] with the binary `STREETLEVEL_HTTP_BENCH_MARTIN` names, if it names one.
pub(crate) fn start_if_given(
    runtime: &tokio::runtime::Runtime,
    streetlevel: SocketAddr,
    tiles: &[(u8, String)],
    auth: &str,
) -> Option<Martin> {
    let binary = std::env::var_os("STREETLEVEL_HTTP_BENCH_MARTIN")?;
    Some(start(runtime, Path::new(&binary), streetlevel, tiles, auth))
}

/// Writes the tiles of `streetlevel` (the cached server) into the two `MBTiles` files and
/// starts `binary` on them; returns once Martin answers with the same tiles.
fn start(
    runtime: &tokio::runtime::Runtime,
    binary: &Path,
    streetlevel: SocketAddr,
    tiles: &[(u8, String)],
    auth: &str,
) -> Martin {
    let dir = std::env::temp_dir().join(format!("streetlevel-bench-martin-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut raw_tiles = Vec::new();
    let mut gzip_tiles = Vec::new();
    for (z, target) in tiles {
        let mut parts = target.rsplit('/');
        let y: u32 = parts.next().unwrap().parse().unwrap();
        let x: u32 = parts.next().unwrap().parse().unwrap();
        let (status, raw) = runtime.block_on(get(streetlevel, target, &[("Authorization", auth)]));
        assert!(status.contains(" 200"), "{target}: {status}");
        let (status, gzip) = runtime.block_on(get(
            streetlevel,
            target,
            &[("Authorization", auth), ("Accept-Encoding", "gzip")],
        ));
        assert!(status.contains(" 200"), "{target}: {status}");
        assert_eq!(
            gunzip(&gzip),
            raw,
            "{target}: the gzip body is the raw tile"
        );
        raw_tiles.push(((*z, x, y), raw));
        gzip_tiles.push(((*z, x, y), gzip));
    }
    for (name, gzipped) in SOURCES {
        let tiles = if gzipped { &gzip_tiles } else { &raw_tiles };
        write_mbtiles(&dir.join(format!("{name}.mbtiles")), name, tiles);
    }

    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let log = std::fs::File::create(dir.join("martin.log")).unwrap();
    let child = Command::new(binary)
        .arg("--listen-addresses")
        .arg(addr.to_string())
        .args(SOURCES.map(|(name, _)| dir.join(format!("{name}.mbtiles"))))
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {}: {error}", binary.display()));
    let martin = Martin { child, addr, dir };
    let started = Instant::now();
    loop {
        let ready = runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(1), async {
                tokio::net::TcpStream::connect(addr).await.is_ok()
                    && get(addr, "/health", &[]).await.0.contains(" 200")
            })
            .await
            .unwrap_or(false)
        });
        if ready {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "martin did not answer /health within 60 s:\n{}",
            std::fs::read_to_string(martin.dir.join("martin.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for ((z, target), (raw, gzip)) in tiles.iter().zip(raw_tiles.iter().zip(&gzip_tiles)) {
        for (name, gzipped) in SOURCES {
            let path = peer_target(name, target);
            let (status, body) = runtime.block_on(get(addr, &path, &[]));
            assert!(status.contains(" 200"), "martin {path}: {status}");
            assert_eq!(&body, &raw.1, "martin z{z} from {name}, identity");
            let (status, body) = runtime.block_on(get(addr, &path, &[("Accept-Encoding", "gzip")]));
            assert!(status.contains(" 200"), "martin {path}: {status}");
            if gzipped {
                assert_eq!(
                    &body, &gzip.1,
                    "martin z{z} from {name}, gzip: the stored bytes"
                );
            } else {
                assert_eq!(gunzip(&body), raw.1, "martin z{z} from {name}, gzip");
            }
        }
    }
    println!(
        "martin: {} on {addr}, {} tiles in each of {} (loaded in {:.1} s)",
        binary.display(),
        tiles.len(),
        SOURCES.map(|(name, _)| name).join(", "),
        started.elapsed().as_secs_f64()
    );
    martin
}

/// Martin's path for the tile of streetlevel's `target` in source `name`.
fn peer_target(name: &str, target: &str) -> String {
    let mut parts = target.rsplitn(4, '/');
    let (y, x, z) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    format!("/{name}/{z}/{x}/{y}")
}

/// Martin's rows for the tile `target` (zoom `z`) in one coding (`accept`: the
/// `Accept-Encoding` sent, if any), from both stored codings.
pub(crate) fn rows(
    rows: &mut Vec<(String, Load)>,
    martin: &Martin,
    (z, target): (u8, &str),
    (coding, accept): (&str, Option<&str>),
    settings: &Settings,
) {
    for (name, gzipped) in SOURCES {
        let headers: Vec<(&str, &str)> = accept
            .map(|accept| ("Accept-Encoding", accept))
            .into_iter()
            .collect();
        let load = wrk(
            martin.endpoint(),
            &peer_target(name, target),
            &headers,
            settings,
        );
        let stored = if gzipped { "gzip" } else { "raw" };
        rows.push((
            format!("martin: z{z} tile, MBTiles {stored}, {coding}"),
            load,
        ));
    }
}

/// Prints streetlevel's cached tile rows against Martin's for the same tile and coding (the
/// issue's target: cached z14 and z8 with gzip at least as fast as Martin from `MBTiles`),
/// when the rows hold Martin's.
pub(crate) fn summary(rows: &[(String, Load)]) {
    let find = |name: &str| {
        rows.iter()
            .find(|(row, _)| row == name)
            .map(|(_, load)| *load)
    };
    let mut lines = Vec::new();
    for z in [14, 12, 8] {
        for coding in ["identity", "gzip"] {
            let Some(ours) = find(&format!("z{z} tile, cached, {coding}")) else {
                continue;
            };
            for (name, gzipped) in SOURCES {
                let stored = if gzipped { "gzip" } else { "raw" };
                let Some(theirs) = find(&format!("martin: z{z} tile, MBTiles {stored}, {coding}"))
                else {
                    continue;
                };
                lines.push(format!(
                    "| z{z} | {coding} | {name} | {:.2} | {:.2} |",
                    ours.per_second / theirs.per_second,
                    ours.per_cpu_second / theirs.per_cpu_second
                ));
            }
        }
    }
    if lines.is_empty() {
        return;
    }
    println!("\ncached streetlevel tile / martin, same tile and Accept-Encoding\n");
    println!("| Zoom | Coding | Martin's source | Requests/s | Requests per server CPU-second |");
    println!("|---|---|---|---|---|");
    for line in lines {
        println!("{line}");
    }
}
