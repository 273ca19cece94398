//! Every path ARCHITECTURE.md names exists. A name in backticks or a link is a path of the
//! repository when it starts with one of the repository's top-level folders
//! (`crates/web/src/takedown.rs`, `docs/API.md`) or is a file at its root (`Cargo.toml`); a
//! bare Rust file name (`cpu.rs`, `jobs/queue.rs`) is looked for in the crate whose section of
//! the code map names it, or anywhere when it is named outside one. Names with placeholders
//! (`uploads/<user>/<key>`) and the data directory's own folders (`media/cache`) are not the
//! repository's and are left alone; `{a,b}` alternatives are each checked.

use std::path::{Path, PathBuf};

/// The top-level folders whose paths are checked.
const TOP_LEVEL: [&str; 8] = [
    "crates/", "xtask/", "tests/", "docs/", "web/", "deploy/", "fuzz/", ".ci/",
];

/// Files at the repository's root that may be named bare.
const ROOT_FILES: [&str; 6] = [
    "README.md",
    "ARCHITECTURE.md",
    "Cargo.toml",
    "Cargo.lock",
    "deny.toml",
    "clippy.toml",
];

/// Where `ARCHITECTURE.md` names a path that is not in the repository at `root`.
pub(super) fn missing_path_problems(root: &Path, architecture: &str) -> Vec<String> {
    let sources = rust_files(root);
    let mut problems = Vec::new();
    let mut section_crate: Option<String> = None;
    for (number, line) in architecture.lines().enumerate() {
        if line.starts_with('#') {
            section_crate = heading_crate(line);
        }
        for name in named_paths(line) {
            for name in expand_alternatives(&name) {
                if exists(root, &sources, section_crate.as_deref(), &name) {
                    continue;
                }
                let bare = !is_repository_path(&name);
                problems.push(match section_crate.as_deref() {
                    Some(krate) if bare => format!(
                        "ARCHITECTURE.md:{} names `{name}`, which is no file of {krate}",
                        number + 1
                    ),
                    _ => format!(
                        "ARCHITECTURE.md:{} names `{name}`, which does not exist",
                        number + 1
                    ),
                });
            }
        }
    }
    problems
}

/// The crate folder a code map heading is about (the heading of `crates/import`'s section
/// gives `crates/import`); `None` for any other heading.
fn heading_crate(line: &str) -> Option<String> {
    let (_, rest) = line.split_once("`crates/")?;
    let (name, _) = rest.split_once('`')?;
    Some(format!("crates/{name}"))
}

/// The names in backticks and the link targets of one line that look like paths: with a `/`
/// or a file extension, no spaces, no placeholders and no URL scheme.
fn named_paths(line: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut parts = line.split('`');
    parts.next();
    while let Some(code) = parts.next() {
        names.push(code.to_owned());
        parts.next();
    }
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let target = &rest[at + 2..];
        let end = target.find(')').unwrap_or(target.len());
        names.push(target[..end].split('#').next().unwrap_or("").to_owned());
        rest = &target[end..];
    }
    names
        .into_iter()
        .map(|name| {
            name.trim()
                .trim_end_matches(['.', ',', ':', ';'])
                .to_owned()
        })
        .filter(|name| looks_like_a_path(name))
        .collect()
}

fn looks_like_a_path(name: &str) -> bool {
    !name.is_empty()
        && !name.contains([' ', '<', '>', '*', '…', '$', '=', '(', '"'])
        && !name.contains("://")
        && !name.contains("::")
        && (is_repository_path(name)
            || Path::new(name)
                .extension()
                .is_some_and(|extension| extension.eq_ignore_ascii_case("rs")))
}

/// `a/{b,c}.rs` as `a/b.rs` and `a/c.rs`.
fn expand_alternatives(name: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (name.find('{'), name.find('}')) else {
        return vec![name.to_owned()];
    };
    if close < open {
        return vec![name.to_owned()];
    }
    name[open + 1..close]
        .split(',')
        .flat_map(|choice| {
            expand_alternatives(&format!("{}{choice}{}", &name[..open], &name[close + 1..]))
        })
        .collect()
}

/// Whether `name` is a path from the repository's root (else a bare Rust file name).
fn is_repository_path(name: &str) -> bool {
    TOP_LEVEL.iter().any(|top| name.starts_with(top)) || ROOT_FILES.contains(&name)
}

fn exists(root: &Path, sources: &[String], section_crate: Option<&str>, name: &str) -> bool {
    if is_repository_path(name) {
        return root.join(name.trim_end_matches('/')).exists();
    }
    // A bare Rust file: under the section's crate, else anywhere.
    let suffix = format!("/{name}");
    sources.iter().any(|source| {
        source.ends_with(&suffix) && section_crate.is_none_or(|krate| source.starts_with(krate))
    })
}

/// Every Rust file of the repository, relative to `root`, with `/` separators.
fn rust_files(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for top in ["crates", "xtask", "tests", "fuzz"] {
        collect(&root.join(top), &mut files);
    }
    files
        .iter()
        .filter_map(|file| file.strip_prefix(root).ok())
        .map(|file| file.to_string_lossy().replace('\\', "/"))
        .collect()
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name == "node_modules" || name == ".git" {
            continue;
        }
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_found_in_backticks_and_links() {
        assert_eq!(
            named_paths(
                "See `crates/web/src/takedown.rs`, [the API](docs/API.md#errors), \
                 `Store::open`, `media/cache`, `uploads/<user>/<key>` and `cpu.rs`."
            ),
            ["crates/web/src/takedown.rs", "cpu.rs", "docs/API.md"]
        );
        assert_eq!(
            expand_alternatives("crates/x/tests/{a,b}.rs"),
            ["crates/x/tests/a.rs", "crates/x/tests/b.rs"]
        );
    }

    #[test]
    fn a_path_that_is_gone_is_a_problem() {
        let root = crate::project_root();
        let text = "## Code map\n### `crates/import` (`streetlevel-import`)\n\
                    `cpu.rs` and `jobs/queue.rs`, `crates/import/src/lib.rs`.\n\
                    `tiles.rs` is not import's. `crates/import/src/gone.rs` is gone.\n\
                    ## Elsewhere\n`tiles.rs` is somebody's.\n";
        assert_eq!(
            missing_path_problems(&root, text),
            [
                "ARCHITECTURE.md:4 names `tiles.rs`, which is no file of crates/import",
                "ARCHITECTURE.md:4 names `crates/import/src/gone.rs`, which does not exist",
            ]
        );
    }
}
