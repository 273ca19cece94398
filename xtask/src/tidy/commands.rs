//! The command lists under "Entry points" are the binaries' own: after a marker
//! `<!-- tidy:commands:<name> -->`, the next list item names in parentheses, in backticks,
//! exactly the subcommands of that binary's command enum, read from its `main.rs`.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, Result};

/// The binaries whose commands ARCHITECTURE.md lists: marker name, `main.rs`, enum.
const BINARIES: [(&str, &str, &str); 2] = [
    ("streetlevel", "crates/streetlevel/src/main.rs", "Command"),
    ("xtask", "xtask/src/main.rs", "Task"),
];

/// Where a command list differs from its binary's commands.
pub(super) fn command_list_problems(root: &Path, architecture: &str) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for (name, main, enumeration) in BINARIES {
        let source =
            std::fs::read_to_string(root.join(main)).with_context(|| format!("reading {main}"))?;
        let actual = subcommands(&source, enumeration);
        let Some(listed) = listed_commands(architecture, name) else {
            problems.push(format!(
                "ARCHITECTURE.md has no `<!-- tidy:commands:{name} -->` list"
            ));
            continue;
        };
        for missing in actual.difference(&listed) {
            problems.push(format!(
                "ARCHITECTURE.md's list of {name} commands lacks `{missing}` ({main} has it)"
            ));
        }
        for extra in listed.difference(&actual) {
            problems.push(format!(
                "ARCHITECTURE.md lists the {name} command `{extra}`, which {main} does not have"
            ));
        }
    }
    Ok(problems)
}

/// The kebab-case names of the variants of `enum <enumeration>` in `source`.
fn subcommands(source: &str, enumeration: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let Some(start) = source.find(&format!("enum {enumeration} {{")) else {
        return names;
    };
    for line in source[start..].lines().skip(1) {
        if line.starts_with('}') {
            break;
        }
        let Some(rest) = line.strip_prefix("    ") else {
            continue;
        };
        if !rest.starts_with(|first: char| first.is_ascii_uppercase()) {
            continue;
        }
        let variant: String = rest
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        names.insert(kebab_case(&variant));
    }
    names
}

fn kebab_case(camel: &str) -> String {
    let mut kebab = String::new();
    for (index, letter) in camel.chars().enumerate() {
        if letter.is_ascii_uppercase() && index > 0 {
            kebab.push('-');
        }
        kebab.push(letter.to_ascii_lowercase());
    }
    kebab
}

/// The backticked names inside the parentheses of the list item after the marker.
fn listed_commands(architecture: &str, name: &str) -> Option<BTreeSet<String>> {
    let marker = format!("<!-- tidy:commands:{name} -->");
    let after = &architecture[architecture.find(&marker)? + marker.len()..];
    let item: Vec<&str> = after
        .trim_start_matches('\n')
        .lines()
        .enumerate()
        .take_while(|(index, line)| {
            *index == 0 || (line.starts_with("  ") && !line.trim().is_empty())
        })
        .map(|(_, line)| line)
        .collect();
    let item = item.join(" ");
    let (_, inside) = item.split_once('(')?;
    let inside = inside.rsplit_once(')').map_or(inside, |(inside, _)| inside);
    Some(
        inside
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_command_list_is_found() {
        let source = "enum Command {\n    /// Serve.\n    Serve(Args),\n    #[command(subcommand)]\n    \
                      TakeDowns(T),\n    Models,\n}\nenum Other {\n    Nope,\n}\n";
        assert_eq!(
            subcommands(source, "Command"),
            BTreeSet::from(["serve".into(), "take-downs".into(), "models".into()])
        );
        let text = "<!-- tidy:commands:x -->\n- `a/main.rs`: the `x` binary (`serve`,\n  \
                    `models`, `gone`).\n- next\n";
        assert_eq!(
            listed_commands(text, "x"),
            Some(BTreeSet::from([
                "serve".into(),
                "models".into(),
                "gone".into()
            ]))
        );
    }

    #[test]
    fn the_lists_of_this_document_are_checked() {
        let root = crate::project_root();
        let stale = "<!-- tidy:commands:streetlevel -->\n- (`serve`, `nothing`)\n\
                     <!-- tidy:commands:xtask -->\n- (`test`)\n";
        let problems = command_list_problems(&root, stale).unwrap();
        assert!(
            problems.contains(
                &"ARCHITECTURE.md lists the streetlevel command `nothing`, which \
                  crates/streetlevel/src/main.rs does not have"
                    .to_owned()
            ),
            "{problems:?}"
        );
        assert!(
            problems.contains(
                &"ARCHITECTURE.md's list of xtask commands lacks `tidy` (xtask/src/main.rs has it)"
                    .to_owned()
            ),
            "{problems:?}"
        );
    }
}
