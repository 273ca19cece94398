//! Black-box tests of `streetlevel backup` and `streetlevel restore`: a backup taken while a
//! server runs and apps keep being created holds every write acknowledged before it began and
//! passes `PRAGMA integrity_check`; a restore refuses a directory a server holds, a directory
//! that has a database (without `--force`), and a damaged backup, changing nothing.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use streetlevel_tests::{Fixture, Server, run};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");

fn streetlevel(args: &[&str]) -> Output {
    Command::new(BINARY)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("streetlevel-backups-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// `PRAGMA integrity_check`, run by the test itself rather than the binary under test.
fn integrity(path: &Path) -> String {
    rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap()
}

/// The client IDs of every app in `data`'s database, read with `SQLite` directly.
fn client_ids(database: &Path) -> Vec<String> {
    let connection =
        rusqlite::Connection::open_with_flags(database, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let mut statement = connection
        .prepare("SELECT client_id FROM auth_apps")
        .unwrap();
    statement
        .query_map([], |row| row.get::<_, i64>(0))
        .unwrap()
        .map(|id| id.unwrap().to_string())
        .collect()
}

fn create_app(data: &Path, name: &str) -> String {
    let created = run(
        Path::new(BINARY),
        &[
            "apps",
            "create",
            "--data",
            text(data),
            "--name",
            name,
            "--callback",
            "http://127.0.0.1/callback",
        ],
    );
    created
        .lines()
        .find_map(|line| line.strip_prefix("client_id: "))
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn a_backup_during_writes_restores_every_acknowledged_write() {
    let fixture = Fixture::generate(Path::new(BINARY), "backup", 300);
    let data = fixture.dir.clone();
    let server = Server::start(Path::new(BINARY), &data, &[]);
    let backups = scratch("files");
    std::fs::create_dir_all(&backups).unwrap();
    let backup = backups.join("nightly.sqlite");

    // One writer creates apps without pause while the server runs; each client ID is sent
    // once `apps create` has answered, that is once its transaction is committed.
    let stop = AtomicBool::new(false);
    let (acknowledged, received) = mpsc::channel();
    let (before, after) = std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut number = 0;
            while !stop.load(Ordering::SeqCst) {
                number += 1;
                let client_id = create_app(&data, &format!("app {number}"));
                if acknowledged.send(client_id).is_err() {
                    break;
                }
            }
        });
        let mut before: Vec<String> = received.iter().take(5).collect();
        before.extend(received.try_iter());
        let output = streetlevel(&["backup", "--data", text(&data), "--out", text(&backup)]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        // Writes go on after the backup, and none of them may break it.
        let after: Vec<String> = received.iter().take(3).collect();
        stop.store(true, Ordering::SeqCst);
        drop(received);
        (before, after)
    });
    assert_eq!(integrity(&backup), "ok");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&backup).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "the backup holds secrets: {mode:o}");
    assert!(!backups.join("nightly.sqlite-wal").exists());
    assert!(!backups.join("nightly.sqlite.partial").exists());

    // Restored into a new data directory, it holds every app acknowledged before the backup
    // began (and the fixture's own), but none created after it ended.
    let restored = scratch("restored");
    let output = streetlevel(&[
        "restore",
        "--from",
        text(&backup),
        "--data",
        text(&restored),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let database = restored.join("streetlevel.sqlite");
    assert_eq!(integrity(&database), "ok");
    let apps = client_ids(&database);
    for client_id in before.iter().chain([&fixture.client_id]) {
        assert!(apps.contains(client_id), "{client_id} is missing: {apps:?}");
    }
    let last_after = after.last().unwrap();
    assert!(!apps.contains(last_after), "{last_after} was created after");

    // The restored directory serves the data and the apps.
    let restored_server = Server::start(Path::new(BINARY), &restored, &[]);
    let auth = format!("OAuth {}", fixture.client_token);
    let images = restored_server.request(
        "GET",
        "/images?bbox=13,55,14,56&limit=5&fields=id",
        &[("Authorization", &auth)],
        b"",
    );
    assert_eq!(
        images.status,
        200,
        "{}",
        String::from_utf8_lossy(&images.body)
    );
    assert!(!images.json()["data"].as_array().unwrap().is_empty());
    drop(restored_server);

    // A server holds the original directory: a restore into it is refused, even with --force.
    let refused = streetlevel(&[
        "restore",
        "--from",
        text(&backup),
        "--data",
        text(&data),
        "--force",
    ]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("stop it before restoring"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    drop(server);
    std::fs::remove_dir_all(&data).unwrap();
    std::fs::remove_dir_all(&restored).unwrap();
    std::fs::remove_dir_all(&backups).unwrap();
}

#[test]
fn a_restore_replaces_a_database_only_when_forced_and_never_a_damaged_backup() {
    let fixture = Fixture::generate(Path::new(BINARY), "backup-refusals", 50);
    let data = fixture.dir.clone();
    let backups = scratch("refusals");
    std::fs::create_dir_all(&backups).unwrap();
    let backup = backups.join("good.sqlite");
    run(
        Path::new(BINARY),
        &["backup", "--data", text(&data), "--out", text(&backup)],
    );
    // An existing backup file is not overwritten without --force.
    let again = streetlevel(&["backup", "--data", text(&data), "--out", text(&backup)]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));

    // Written after the backup: restoring with --force takes the directory back to before it.
    let later = create_app(&data, "later");
    let database = data.join("streetlevel.sqlite");
    let refused = streetlevel(&["restore", "--from", text(&backup), "--data", text(&data)]);
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains("already holds a database"), "{message}");
    assert!(client_ids(&database).contains(&later));

    // A damaged backup (its middle overwritten) and a file that is no database are refused
    // before the data directory is touched, also with --force.
    let damaged = backups.join("damaged.sqlite");
    let mut bytes = std::fs::read(&backup).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle..middle + 16 * 1024].fill(0xa5);
    std::fs::write(&damaged, &bytes).unwrap();
    let not_a_database = backups.join("notes.txt");
    std::fs::write(&not_a_database, "remember to take backups\n".repeat(100)).unwrap();
    let other_database = backups.join("other.sqlite");
    rusqlite::Connection::open(&other_database)
        .unwrap()
        .execute_batch("CREATE TABLE things (id INTEGER)")
        .unwrap();
    // A copy of a live database without its log, which holds the latest writes.
    let torn = backups.join("torn.sqlite");
    std::fs::copy(&backup, &torn).unwrap();
    std::fs::write(backups.join("torn.sqlite-wal"), b"some log").unwrap();
    for (bad, expected) in [
        (&torn, "write-ahead log beside it"),
        (&damaged, "integrity_check"),
        (&not_a_database, "not a readable SQLite database"),
        (&other_database, "not a streetlevel one"),
    ] {
        let refused = streetlevel(&[
            "restore",
            "--from",
            text(bad),
            "--data",
            text(&data),
            "--force",
        ]);
        assert!(!refused.status.success());
        let message = String::from_utf8_lossy(&refused.stderr);
        assert!(message.contains(expected), "{expected}: {message}");
        assert_eq!(integrity(&database), "ok");
        assert!(client_ids(&database).contains(&later));
    }

    let forced = run(
        Path::new(BINARY),
        &[
            "restore",
            "--from",
            text(&backup),
            "--data",
            text(&data),
            "--force",
        ],
    );
    assert_eq!(integrity(&database), "ok");
    let apps = client_ids(&database);
    assert!(apps.contains(&fixture.client_id));
    assert!(!apps.contains(&later), "{apps:?}");
    // The replaced database is kept, with the app written after the backup.
    let kept = forced
        .lines()
        .find_map(|line| line.strip_prefix("the replaced database is kept as "))
        .unwrap();
    assert!(client_ids(Path::new(kept.trim())).contains(&later));
    std::fs::remove_dir_all(&data).unwrap();
    std::fs::remove_dir_all(&backups).unwrap();
}
