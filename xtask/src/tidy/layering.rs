//! The layering block of ARCHITECTURE.md against the manifests, in both directions: every
//! internal edge a manifest declares is listed, and every listed edge is declared. A
//! `pub use` of a whole internal crate (`pub use streetlevel_blur;`, `pub use streetlevel_auth
//! as auth;`) counts as an edge of every crate that depends on the re-exporting one, since
//! through it they reach the re-exported crate as if they named it.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::{member_names, packages};

pub(super) const LAYERING_START: &str = "<!-- tidy:layering:start -->";
pub(super) const LAYERING_END: &str = "<!-- tidy:layering:end -->";

/// The internal crates each crate may depend on, by package name; a key `name (dev)` holds
/// the edges allowed for tests and benches only.
pub(super) type AllowList = BTreeMap<String, BTreeSet<String>>;

/// Which internal crates each package re-exports whole, by package name.
pub(super) type Reexports = BTreeMap<String, BTreeSet<String>>;

/// Reads the block between the layering markers: lines `crate -> dep, dep`. A line
/// `crate (dev) -> dep` allows an edge for tests and benches only (a dev-dependency).
pub(super) fn parse_allow_list(architecture: &str) -> Result<AllowList> {
    let start = architecture
        .find(LAYERING_START)
        .context("ARCHITECTURE.md has no layering block")?;
    let end = architecture[start..]
        .find(LAYERING_END)
        .context("ARCHITECTURE.md's layering block is not closed")?;
    let mut allow_list = AllowList::new();
    for line in architecture[start + LAYERING_START.len()..start + end].lines() {
        let line = line.trim();
        let Some((name, dependencies)) = line.split_once("->") else {
            continue;
        };
        let dependencies = dependencies
            .split(',')
            .map(str::trim)
            .filter(|dependency| !dependency.is_empty())
            .map(str::to_owned)
            .collect();
        allow_list.insert(name.trim().to_owned(), dependencies);
    }
    if allow_list.is_empty() {
        bail!("ARCHITECTURE.md's layering block lists no crate");
    }
    Ok(allow_list)
}

/// The internal crates `text` (a crate's sources) re-exports whole: `pub use <crate>;` or
/// `pub use <crate> as <name>;`, where `<crate>` is the Rust name of a member of `members`.
pub(super) fn whole_crate_reexports(text: &str, members: &BTreeSet<&str>) -> BTreeSet<String> {
    let by_rust_name: BTreeMap<String, &str> = members
        .iter()
        .map(|name| (name.replace('-', "_"), *name))
        .collect();
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let Some(path) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let path = path.trim_end().trim_end_matches(';');
        let path = path.split(" as ").next().unwrap_or(path).trim();
        let path = path.strip_prefix("::").unwrap_or(path);
        if let Some(name) = by_rust_name.get(path) {
            found.insert((*name).to_owned());
        }
    }
    found
}

/// One internal edge as the code has it.
#[derive(Debug, Default)]
struct Edges {
    /// Normal and build dependencies, each with the crate it is reached through when it is
    /// a re-export (`None`: the manifest names it).
    normal: BTreeMap<String, Option<String>>,
    /// Dev-dependencies, likewise.
    dev: BTreeMap<String, Option<String>>,
}

/// The internal edges of every package: its manifest's, and the crates its internal
/// dependencies re-export whole.
fn edges(metadata: &Value, reexports: &Reexports) -> Result<BTreeMap<String, Edges>> {
    let members = member_names(metadata)?;
    let mut all = BTreeMap::new();
    for package in packages(metadata)? {
        let name = package["name"].as_str().unwrap_or_default();
        let mut edges = Edges::default();
        let dependencies = package["dependencies"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        for dependency in dependencies {
            let dependency_name = dependency["name"].as_str().unwrap_or_default();
            if !members.contains(dependency_name) {
                continue;
            }
            let set = if dependency["kind"].as_str() == Some("dev") {
                &mut edges.dev
            } else {
                &mut edges.normal
            };
            set.insert(dependency_name.to_owned(), None);
            for reexported in reexports.get(dependency_name).into_iter().flatten() {
                if reexported != name {
                    set.entry(reexported.clone())
                        .or_insert_with(|| Some(dependency_name.to_owned()));
                }
            }
        }
        all.insert(name.to_owned(), edges);
    }
    Ok(all)
}

/// Every difference between the layering block and the code, both ways.
pub(super) fn layering_problems(
    metadata: &Value,
    allow_list: &AllowList,
    reexports: &Reexports,
) -> Result<Vec<String>> {
    let members = member_names(metadata)?;
    let edges = edges(metadata, reexports)?;
    let none = BTreeSet::new();
    let mut problems = Vec::new();
    for (name, edges) in &edges {
        let Some(allowed) = allow_list.get(name) else {
            problems.push(format!("{name} is not in ARCHITECTURE.md's layering block"));
            continue;
        };
        let dev_allowed = allow_list.get(&format!("{name} (dev)")).unwrap_or(&none);
        for (kind, set, allowed_here) in [
            ("", &edges.normal, allowed),
            (" (dev)", &edges.dev, dev_allowed),
        ] {
            for (dependency, through) in set {
                if allowed.contains(dependency) || allowed_here.contains(dependency) {
                    continue;
                }
                problems.push(match through {
                    None => format!(
                        "{name}{kind} depends on {dependency}, which ARCHITECTURE.md does not allow"
                    ),
                    Some(through) => format!(
                        "{name}{kind} reaches {dependency} through {through}'s `pub use` of the \
                         whole crate, which ARCHITECTURE.md does not allow"
                    ),
                });
            }
        }
        for dependency in allowed {
            if !edges.normal.contains_key(dependency) {
                problems.push(format!(
                    "ARCHITECTURE.md lets {name} depend on {dependency}, but its manifest does not"
                ));
            }
        }
        for dependency in dev_allowed {
            if !edges.dev.contains_key(dependency) {
                problems.push(format!(
                    "ARCHITECTURE.md lets {name}'s tests depend on {dependency}, but its manifest \
                     has no such dev-dependency"
                ));
            }
        }
    }
    for listed in allow_list.keys() {
        let package = listed.strip_suffix(" (dev)").unwrap_or(listed);
        if !members.contains(package) {
            problems.push(format!(
                "ARCHITECTURE.md's layering block names {package}, which is not a workspace package"
            ));
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn allow_list() -> AllowList {
        parse_allow_list(&format!(
            "# Layers\n{LAYERING_START}\n```text\nstreetlevel-model ->\n\
             streetlevel-model (dev) -> streetlevel-tests\n\
             streetlevel-tests ->\n\
             streetlevel-server -> streetlevel-model\n```\n{LAYERING_END}\n"
        ))
        .unwrap()
    }

    fn metadata(model_dependencies: &[&str]) -> Value {
        let dependencies: Vec<Value> = model_dependencies
            .iter()
            .map(|name| json!({"name": name}))
            .collect();
        json!({"packages": [
            {"name": "streetlevel-model", "dependencies": dependencies},
            {"name": "streetlevel-tests", "dependencies": []},
            {"name": "streetlevel-server", "dependencies": [{"name": "streetlevel-model"}]},
        ]})
    }

    fn with_model_test_dependency(mut metadata: Value) -> Value {
        metadata["packages"][0]["dependencies"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "streetlevel-tests", "kind": "dev"}));
        metadata
    }

    fn problems(metadata: &Value, allow_list: &AllowList) -> Vec<String> {
        layering_problems(metadata, allow_list, &Reexports::new()).unwrap()
    }

    #[test]
    fn an_upward_dependency_is_a_problem() {
        let metadata = with_model_test_dependency(metadata(&["streetlevel-server"]));
        assert_eq!(
            problems(&metadata, &allow_list()),
            [
                "streetlevel-model depends on streetlevel-server, which ARCHITECTURE.md does not allow"
            ]
        );
    }

    #[test]
    fn a_listed_edge_the_manifest_lacks_is_a_problem() {
        // The block lets model's tests use the test crate, but nothing declares it.
        assert_eq!(
            problems(&metadata(&[]), &allow_list()),
            [
                "ARCHITECTURE.md lets streetlevel-model's tests depend on streetlevel-tests, but \
                 its manifest has no such dev-dependency"
            ]
        );
        let mut allow_list = allow_list();
        allow_list
            .get_mut("streetlevel-server")
            .unwrap()
            .insert("streetlevel-tests".to_owned());
        let metadata = with_model_test_dependency(metadata(&[]));
        assert_eq!(
            problems(&metadata, &allow_list),
            [
                "ARCHITECTURE.md lets streetlevel-server depend on streetlevel-tests, but its \
                 manifest does not"
            ]
        );
    }

    #[test]
    fn a_dev_only_edge_allows_only_a_dev_dependency() {
        let dev = with_model_test_dependency(metadata(&[]));
        assert!(problems(&dev, &allow_list()).is_empty());
        let mut normal = dev.clone();
        normal["packages"][0]["dependencies"][0]["kind"] = Value::Null;
        let found = problems(&normal, &allow_list());
        assert!(
            found.contains(
                &"streetlevel-model depends on streetlevel-tests, which ARCHITECTURE.md does not \
                  allow"
                    .to_owned()
            ),
            "{found:?}"
        );
    }

    #[test]
    fn external_and_allowed_dependencies_are_fine() {
        let metadata = with_model_test_dependency(metadata(&["serde"]));
        let found = problems(&metadata, &allow_list());
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn a_crate_missing_from_the_block_or_only_in_it_is_a_problem() {
        let mut metadata = with_model_test_dependency(metadata(&[]));
        metadata["packages"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "streetlevel-new", "dependencies": []}));
        let mut allow_list = allow_list();
        allow_list.insert("streetlevel-gone".to_owned(), BTreeSet::new());
        assert_eq!(
            problems(&metadata, &allow_list),
            [
                "streetlevel-new is not in ARCHITECTURE.md's layering block",
                "ARCHITECTURE.md's layering block names streetlevel-gone, which is not a \
                 workspace package"
            ]
        );
    }

    #[test]
    fn a_whole_crate_reexport_is_an_edge_of_every_dependent() {
        let members = BTreeSet::from(["streetlevel-model", "streetlevel-tests"]);
        let text = "//! Lib.\npub use streetlevel_model;\npub use streetlevel_tests as tests;\n\
                    pub use streetlevel_model::Point;\nuse streetlevel_tests;\n";
        assert_eq!(
            whole_crate_reexports(text, &members),
            BTreeSet::from([
                "streetlevel-model".to_owned(),
                "streetlevel-tests".to_owned()
            ])
        );
        // The server re-exports the test crate; a crate on top of the server reaches it.
        let metadata = json!({"packages": [
            {"name": "streetlevel-model", "dependencies": []},
            {"name": "streetlevel-tests", "dependencies": []},
            {"name": "streetlevel-server", "dependencies": [
                {"name": "streetlevel-model"}, {"name": "streetlevel-tests"}]},
            {"name": "streetlevel", "dependencies": [{"name": "streetlevel-server"}]},
        ]});
        let allow_list = parse_allow_list(&format!(
            "{LAYERING_START}\nstreetlevel-model ->\nstreetlevel-tests ->\n\
             streetlevel-server -> streetlevel-model, streetlevel-tests\n\
             streetlevel -> streetlevel-server\n{LAYERING_END}"
        ))
        .unwrap();
        let reexports = Reexports::from([(
            "streetlevel-server".to_owned(),
            BTreeSet::from(["streetlevel-tests".to_owned()]),
        )]);
        assert_eq!(
            layering_problems(&metadata, &allow_list, &reexports).unwrap(),
            [
                "streetlevel reaches streetlevel-tests through streetlevel-server's `pub use` of \
                 the whole crate, which ARCHITECTURE.md does not allow"
            ]
        );
        let mut listed = allow_list.clone();
        listed
            .get_mut("streetlevel")
            .unwrap()
            .insert("streetlevel-tests".to_owned());
        assert!(
            layering_problems(&metadata, &listed, &reexports)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_missing_block_is_an_error() {
        assert!(parse_allow_list("# No layering here").is_err());
    }
}
