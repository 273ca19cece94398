//! `cargo xtask tidy`: ARCHITECTURE.md held to the code (the layering block against the
//! manifests both ways, `layering.rs`; every path it names, `paths.rs`), a line budget per
//! source file (`budget.rs`), crate READMEs and module docs, database clients only in `db`,
//! and that the web pages build no HTML by hand. It also runs as a test, so `cargo test`
//! catches drift.

mod budget;
mod commands;
mod layering;
mod paths;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::cargo;

/// The database client crates: only `streetlevel-db` may depend on them (tests may, as
/// dev-dependencies, to look into a database from outside), so that every crate above it
/// reaches its tables through `Database` and a process holds one pool.
const DATABASE_CLIENTS: [&str; 9] = [
    "rusqlite",
    "libsqlite3-sys",
    "postgres",
    "tokio-postgres",
    "tokio-postgres-rustls",
    "deadpool",
    "deadpool-postgres",
    "sqlx",
    "diesel",
];

/// The one crate that may depend on [`DATABASE_CLIENTS`].
const DATABASE_CRATE: &str = "streetlevel-db";

pub(crate) fn run(root: &Path) -> Result<()> {
    let problems = check(root)?;
    if problems.is_empty() {
        eprintln!(
            "xtask tidy: layering, ARCHITECTURE.md's paths, line budgets, READMEs, module docs \
             and pages are in order"
        );
        return Ok(());
    }
    for problem in &problems {
        eprintln!("tidy: {problem}");
    }
    bail!("tidy found {} problem(s)", problems.len())
}

/// Every tidy problem of the workspace at `root`, as sentences.
fn check(root: &Path) -> Result<Vec<String>> {
    let architecture =
        fs::read_to_string(root.join("ARCHITECTURE.md")).context("reading ARCHITECTURE.md")?;
    let allow_list = layering::parse_allow_list(&architecture)?;
    let metadata = cargo_metadata(root)?;
    let reexports = reexports(&metadata)?;
    let mut problems = layering::layering_problems(&metadata, &allow_list, &reexports)?;
    problems.extend(paths::missing_path_problems(root, &architecture));
    problems.extend(commands::command_list_problems(root, &architecture)?);
    problems.extend(budget::budget_problems(&budgeted_sources(root, &metadata)?));
    problems.extend(unused_dependency_problems(&metadata)?);
    problems.extend(database_client_problems(&metadata)?);
    problems.extend(documentation_problems(root, &metadata)?);
    problems.extend(hand_built_html_problems(root)?);
    Ok(problems)
}

/// The layering block is an upper bound; this is the lower one: an internal (non-dev)
/// dependency that nothing under the crate's `src/` names is a problem, so the picture in
/// ARCHITECTURE.md does not drift from what the code uses.
fn unused_dependency_problems(metadata: &Value) -> Result<Vec<String>> {
    let members = member_names(metadata)?;
    let mut problems = Vec::new();
    for package in packages(metadata)? {
        let name = package["name"].as_str().unwrap_or_default();
        let manifest = PathBuf::from(package["manifest_path"].as_str().unwrap_or_default());
        let Some(package_dir) = manifest.parent() else {
            continue;
        };
        let text: String = sources_of(package_dir)?
            .into_iter()
            .map(|(_, text)| text)
            .collect();
        let dependencies = package["dependencies"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        for dependency in dependencies {
            let dependency_name = dependency["name"].as_str().unwrap_or_default();
            let is_normal = dependency["kind"].is_null();
            let rust_name = dependency_name.replace('-', "_");
            if is_normal && members.contains(dependency_name) && !text.contains(&rust_name) {
                problems.push(format!(
                    "{name} depends on {dependency_name}, but nothing in its src/ uses it"
                ));
            }
        }
    }
    Ok(problems)
}

/// A crate other than [`DATABASE_CRATE`] with a normal or build dependency on one of
/// [`DATABASE_CLIENTS`] is a problem.
fn database_client_problems(metadata: &Value) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for package in packages(metadata)? {
        let name = package["name"].as_str().unwrap_or_default();
        if name == DATABASE_CRATE {
            continue;
        }
        let dependencies = package["dependencies"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        for dependency in dependencies {
            let dependency_name = dependency["name"].as_str().unwrap_or_default();
            let is_dev = dependency["kind"].as_str() == Some("dev");
            if !is_dev && DATABASE_CLIENTS.contains(&dependency_name) {
                problems.push(format!(
                    "{name} depends on {dependency_name}: only {DATABASE_CRATE} may use a \
                     database client (a test may, as a dev-dependency)"
                ));
            }
        }
    }
    Ok(problems)
}

fn cargo_metadata(root: &Path) -> Result<Value> {
    let output = Command::new(cargo())
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    serde_json::from_slice(&output.stdout).context("parsing cargo metadata")
}

fn packages(metadata: &Value) -> Result<&Vec<Value>> {
    metadata["packages"]
        .as_array()
        .context("cargo metadata has no packages")
}

/// The names of the workspace's packages.
fn member_names(metadata: &Value) -> Result<BTreeSet<&str>> {
    Ok(packages(metadata)?
        .iter()
        .filter_map(|package| package["name"].as_str())
        .collect())
}

/// The internal crates each package re-exports whole (`pub use streetlevel_blur;`).
fn reexports(metadata: &Value) -> Result<layering::Reexports> {
    let members = member_names(metadata)?;
    let mut reexports = layering::Reexports::new();
    for package in packages(metadata)? {
        let name = package["name"].as_str().unwrap_or_default();
        let manifest = PathBuf::from(package["manifest_path"].as_str().unwrap_or_default());
        let Some(package_dir) = manifest.parent() else {
            continue;
        };
        let mut found = BTreeSet::new();
        for (_, text) in sources_of(package_dir)? {
            found.extend(layering::whole_crate_reexports(&text, &members));
        }
        if !found.is_empty() {
            reexports.insert(name.to_owned(), found);
        }
    }
    Ok(reexports)
}

/// The source files held to the line budget, relative to `root`, with their texts.
fn budgeted_sources(root: &Path, metadata: &Value) -> Result<Vec<(String, String)>> {
    let mut files = Vec::new();
    for package in packages(metadata)? {
        let manifest = PathBuf::from(package["manifest_path"].as_str().unwrap_or_default());
        let Some(package_dir) = manifest.parent() else {
            continue;
        };
        for (source, text) in sources_of(package_dir)? {
            let relative = source.strip_prefix(root).unwrap_or(&source);
            if budget::is_budgeted(relative) {
                files.push((relative.to_string_lossy().replace('\\', "/"), text));
            }
        }
    }
    Ok(files)
}

fn documentation_problems(root: &Path, metadata: &Value) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for package in packages(metadata)? {
        let manifest = PathBuf::from(package["manifest_path"].as_str().unwrap_or_default());
        let Some(package_dir) = manifest.parent() else {
            continue;
        };
        let name = package["name"].as_str().unwrap_or_default();
        if package_dir.starts_with(root.join("crates")) && !package_dir.join("README.md").is_file()
        {
            problems.push(format!("{name} has no README.md"));
        }
        for (source, text) in sources_of(package_dir)? {
            if !has_module_doc(&text) {
                let relative = source.strip_prefix(root).unwrap_or(&source);
                problems.push(format!("{} has no `//!` module doc", relative.display()));
            }
        }
    }
    Ok(problems)
}

/// Every Rust file under a package's `src/`, with its text.
fn sources_of(package_dir: &Path) -> Result<Vec<(PathBuf, String)>> {
    let mut files = Vec::new();
    collect_rust_files(&package_dir.join("src"), &mut files)?;
    files
        .into_iter()
        .map(|file| {
            let text =
                fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            Ok((file, text))
        })
        .collect()
}

fn collect_rust_files(dir: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    for entry in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            collect_rust_files(&path, files)?;
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
    files.sort();
    Ok(())
}

/// Where the pages are; they are maud templates (ARCHITECTURE.md, `crates/web`).
const PAGES_DIR: &str = "crates/web/src";

/// Calls that build a string from a format or a literal.
const STRING_BUILDERS: &[&str] = &[
    "format!(",
    "format_args!(",
    "write!(",
    "writeln!(",
    "push_str(",
    "String::from(",
];

/// The pages escape every value through their templates: a string-building call in
/// [`PAGES_DIR`] whose text starts with a tag (`format!("<p>{}</p>", ...)`) is HTML built by
/// hand, where one forgotten escape is an injection.
fn hand_built_html_problems(root: &Path) -> Result<Vec<String>> {
    let mut files = Vec::new();
    collect_rust_files(&root.join(PAGES_DIR), &mut files)?;
    let mut problems = Vec::new();
    for file in files {
        let text =
            fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        let relative = file.strip_prefix(root).unwrap_or(&file);
        for line in hand_built_html_lines(&text) {
            problems.push(format!(
                "{}:{line} builds HTML with a string; write it in a maud template",
                relative.display()
            ));
        }
    }
    Ok(problems)
}

/// The 1-based lines of `text` where a string-building call's first literal starts with a
/// tag. Calls on comment lines are not code.
fn hand_built_html_lines(text: &str) -> Vec<usize> {
    let mut lines = Vec::new();
    for builder in STRING_BUILDERS {
        for (at, _) in text.match_indices(builder) {
            let line_start = text[..at].rfind('\n').map_or(0, |newline| newline + 1);
            if text[line_start..at].trim_start().starts_with("//") {
                continue;
            }
            if starts_with_tag(&text[at + builder.len()..]) {
                lines.push(text[..at].matches('\n').count() + 1);
            }
        }
    }
    lines.sort_unstable();
    lines.dedup();
    lines
}

/// Whether the first string literal of a call's arguments (`arguments` follows its `(`)
/// starts with `<` and a letter, `/` or `!`. A writer argument may come before it
/// (`write!(out, "<li>")`); a nested call before the literal is checked on its own.
fn starts_with_tag(arguments: &str) -> bool {
    let Some(quote) = arguments.find('"') else {
        return false;
    };
    if arguments[..quote].contains(['(', ')', ';', '{', '}']) {
        return false;
    }
    let mut literal = arguments[quote + 1..].chars();
    literal.next() == Some('<')
        && literal
            .next()
            .is_some_and(|next| next.is_ascii_alphabetic() || next == '/' || next == '!')
}

/// A module is documented when its first non-blank line is an inner doc comment or attribute.
fn has_module_doc(text: &str) -> bool {
    text.lines()
        .map(str::trim_start)
        .find(|line| !line.is_empty())
        .is_some_and(|line| line.starts_with("//!") || line.starts_with("#![doc"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_declared_but_unused_internal_dependency_is_a_problem() {
        let dir = std::env::temp_dir().join(format!("xtask-tidy-unused-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("src")).unwrap();
        fs::write(
            dir.join("src/lib.rs"),
            "//! A crate.\nuse streetlevel_model::Point;\n",
        )
        .unwrap();
        let manifest = dir.join("Cargo.toml").to_string_lossy().into_owned();
        let metadata = json!({"packages": [
            {"name": "streetlevel-model", "dependencies": [], "manifest_path": "/nowhere/Cargo.toml"},
            {"name": "streetlevel-mvt", "dependencies": [], "manifest_path": "/nowhere/Cargo.toml"},
            {"name": "streetlevel-tests", "dependencies": [], "manifest_path": "/nowhere/Cargo.toml"},
            {"name": "streetlevel-server", "manifest_path": manifest, "dependencies": [
                {"name": "streetlevel-model", "kind": null},
                {"name": "streetlevel-mvt", "kind": null},
                {"name": "streetlevel-tests", "kind": "dev"},
                {"name": "serde", "kind": null},
            ]},
        ]});
        assert_eq!(
            unused_dependency_problems(&metadata).unwrap(),
            ["streetlevel-server depends on streetlevel-mvt, but nothing in its src/ uses it"]
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_db_may_use_a_database_client_and_tests_may_look_in() {
        let metadata = json!({"packages": [
            {"name": "streetlevel-db", "dependencies": [
                {"name": "rusqlite", "kind": null},
                {"name": "deadpool-postgres", "kind": null},
            ]},
            {"name": "streetlevel-store", "dependencies": [
                {"name": "streetlevel-db", "kind": null},
                {"name": "rusqlite", "kind": null},
                {"name": "serde", "kind": null},
            ]},
            {"name": "streetlevel-auth", "dependencies": [
                {"name": "tokio-postgres", "kind": "build"},
                {"name": "rusqlite", "kind": "dev"},
            ]},
        ]});
        assert_eq!(
            database_client_problems(&metadata).unwrap(),
            [
                "streetlevel-store depends on rusqlite: only streetlevel-db may use a database \
                 client (a test may, as a dev-dependency)",
                "streetlevel-auth depends on tokio-postgres: only streetlevel-db may use a \
                 database client (a test may, as a dev-dependency)",
            ]
        );
    }

    #[test]
    fn the_workspace_is_tidy() {
        let problems = check(&crate::project_root()).unwrap();
        assert_eq!(problems, Vec::<String>::new());
    }

    #[test]
    fn module_docs_are_recognised() {
        assert!(has_module_doc("\n//! Tiles.\nfn f() {}"));
        assert!(has_module_doc("#![doc = include_str!(\"../README.md\")]"));
        assert!(!has_module_doc("/// Not a module doc.\nfn f() {}"));
        assert!(!has_module_doc("use std::fs;\n//! late"));
    }

    #[test]
    fn html_built_with_format_is_found() {
        let text = "//! Pages.\n\
            let a = format!(\"<p>{}</p>\", x);\n\
            let b = format!(\n    r#\"<section class=\"x\">{y}\"#\n);\n\
            let _ = write!(out, \"</li>\");\n\
            html.push_str(\"<!doctype html>\");\n\
            let g = String::from(r#\"<section>\"#);\n\
            // format!(\"<p>\") in a comment\n\
            let c = format!(\"{a} < {b}\");\n\
            let d = format!(\"/login?next={}\", encode(\"<\"));\n\
            let e = format!(\"a <b> c\");\n\
            let f = html! { p { (format!(\"x {y}\")) } };\n";
        assert_eq!(hand_built_html_lines(text), [2, 3, 6, 7, 8]);
    }
}
