//! A line budget per source file: every Rust file under a package's `src/` has at most
//! [`MAX_LINES`] lines, unless [`EXCEPTIONS`] names it with a budget of its own and the
//! reason. An exception whose file is gone or back within the budget is a problem too, so
//! that the list says only what is true. Test folders (`tests/`, `benches/`, `examples/`) are
//! not held to it: a suite is read one test at a time.

use std::path::Path;

/// The lines a source file may have.
pub(super) const MAX_LINES: usize = 800;

/// A file allowed more than [`MAX_LINES`]: its path from the repository's root, its own
/// budget, and why it is not split.
pub(super) struct Exception {
    pub(super) path: &'static str,
    pub(super) max_lines: usize,
    pub(super) reason: &'static str,
}

/// The one list of files over [`MAX_LINES`].
pub(super) const EXCEPTIONS: &[Exception] = &[
    Exception {
        path: "crates/auth/src/token.rs",
        max_lines: 900,
        reason: "the token table's one writer: issue, refresh, exchange and revoke share its \
                 statements and the cache invalidation that must follow each",
    },
    Exception {
        path: "crates/server/src/media.rs",
        max_lines: 900,
        reason: "signed media URLs, and making thumbnails and pyramid tiles from an original \
                 (the layout and the stores are in crates/media): cutting tiles can go to a \
                 module of its own",
    },
    Exception {
        path: "crates/import/src/sessions.rs",
        max_lines: 900,
        reason: "upload sessions and their writer lease; being rewritten for object storage \
                 (branch s3)",
    },
    Exception {
        path: "crates/import/src/pipeline.rs",
        max_lines: 900,
        reason: "the import pipeline's one loop, read top to bottom; its unit tests are a \
                 tenth of it",
    },
    Exception {
        path: "crates/mvt/src/decoder.rs",
        max_lines: 900,
        reason: "the validating decoder and its hostile-input tests, which must sit beside \
                 the checks they exercise",
    },
    Exception {
        path: "crates/model/src/projection/tests.rs",
        max_lines: 950,
        reason: "the projection's table of field-by-field expectations, one test per field",
    },
    Exception {
        path: "crates/server/src/server.rs",
        max_lines: 950,
        reason: "the listener: connection limits, timeouts and body limits of one accept \
                 loop",
    },
    Exception {
        path: "tests/src/lib.rs",
        max_lines: 1000,
        reason: "the test harness's server handle, HTTP client and fixtures, used by every \
                 black-box suite",
    },
    Exception {
        path: "crates/store/src/records.rs",
        max_lines: 1000,
        reason: "the entity tables and their key lookups, whose invariants only this file \
                 may break",
    },
    Exception {
        path: "crates/server/src/app.rs",
        max_lines: 1000,
        reason: "the request path from routing to reply, one function per stage",
    },
    Exception {
        path: "crates/web/src/privacy.rs",
        max_lines: 1050,
        reason: "the report form, the image page and the privacy queue with its blur models' \
                 counts (issue 37; to be split: the counts' section can go to a module of its own)",
    },
];

/// The budget problems of the source files `files` (paths relative to the repository's
/// root, with their texts).
pub(super) fn budget_problems(files: &[(String, String)]) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, text) in files {
        let lines = text.lines().count();
        let exception = EXCEPTIONS.iter().find(|exception| exception.path == path);
        let budget = exception.map_or(MAX_LINES, |exception| exception.max_lines);
        if lines > budget {
            problems.push(format!(
                "{path} has {lines} lines, over its budget of {budget}: split it by concern \
                 (or, with a reason, give it a budget in xtask/src/tidy/budget.rs)"
            ));
        }
    }
    for exception in EXCEPTIONS {
        match files.iter().find(|(path, _)| path == exception.path) {
            None => problems.push(format!(
                "xtask/src/tidy/budget.rs excepts {}, which is not a source file",
                exception.path
            )),
            Some((_, text)) if text.lines().count() <= MAX_LINES => problems.push(format!(
                "{} is within {MAX_LINES} lines now: remove its exception from \
                 xtask/src/tidy/budget.rs",
                exception.path
            )),
            Some(_) => {}
        }
        debug_assert!(!exception.reason.is_empty());
    }
    problems
}

/// Whether `path` is held to the budget: Rust files under a package's `src/`.
pub(super) fn is_budgeted(relative: &Path) -> bool {
    relative.components().any(|part| part.as_os_str() == "src")
        && relative
            .extension()
            .is_some_and(|extension| extension == "rs")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, lines: usize) -> (String, String) {
        (path.to_owned(), "//! x\n".repeat(lines))
    }

    #[test]
    fn a_file_over_its_budget_is_a_problem_and_an_exception_has_its_own() {
        let mut files: Vec<(String, String)> = EXCEPTIONS
            .iter()
            .map(|exception| file(exception.path, exception.max_lines))
            .collect();
        files.push(file("crates/x/src/small.rs", MAX_LINES));
        assert!(budget_problems(&files).is_empty());
        files.push(file("crates/x/src/large.rs", MAX_LINES + 1));
        files[0].1.push_str("//! one more\n");
        assert_eq!(
            budget_problems(&files),
            [
                format!(
                    "{} has {} lines, over its budget of {}: split it by concern (or, with a \
                     reason, give it a budget in xtask/src/tidy/budget.rs)",
                    EXCEPTIONS[0].path,
                    EXCEPTIONS[0].max_lines + 1,
                    EXCEPTIONS[0].max_lines
                ),
                String::from(
                    "crates/x/src/large.rs has 801 lines, over its budget of 800: split it by \
                     concern (or, with a reason, give it a budget in xtask/src/tidy/budget.rs)"
                ),
            ]
        );
    }

    #[test]
    fn an_exception_no_longer_needed_is_a_problem() {
        let mut files: Vec<(String, String)> = EXCEPTIONS
            .iter()
            .skip(1)
            .map(|exception| file(exception.path, exception.max_lines))
            .collect();
        assert_eq!(
            budget_problems(&files),
            [format!(
                "xtask/src/tidy/budget.rs excepts {}, which is not a source file",
                EXCEPTIONS[0].path
            )]
        );
        files.push(file(EXCEPTIONS[0].path, 10));
        assert_eq!(
            budget_problems(&files),
            [format!(
                "{} is within 800 lines now: remove its exception from xtask/src/tidy/budget.rs",
                EXCEPTIONS[0].path
            )]
        );
    }

    #[test]
    fn only_package_sources_are_budgeted() {
        assert!(is_budgeted(Path::new("crates/web/src/privacy.rs")));
        assert!(is_budgeted(Path::new("xtask/src/tidy/budget.rs")));
        assert!(!is_budgeted(Path::new("crates/web/tests/pages.rs")));
        assert!(!is_budgeted(Path::new("crates/web/src/static/draw.mjs")));
    }
}
