//! The fuzz targets' inputs replayed as ordinary tests, without cargo-fuzz: the committed
//! seeds (`fuzz/seeds/<target>/`), the fuzzer's own corpus when one is on disk
//! (`fuzz/corpus/<target>/`, not committed), and every seed's truncations and single-byte
//! changes, all through the checks the fuzz targets make (`fuzz/checks.rs`): never a panic,
//! and round trips of geometry wherever an input decodes.
// A failed check is a panic, as in the fuzz targets.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::path::{Path, PathBuf};

use arbitrary::{Arbitrary, Unstructured};

#[path = "../../../fuzz/checks.rs"]
mod checks;

/// The files of `fuzz/<kind>/<target>/`, sorted; none when the directory does not exist.
fn files(kind: &str, target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(kind)
        .join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect()
}

/// Every prefix of `seed`, and `seed` with each byte replaced by its complement and by its
/// successor: inputs next to valid encodings, where decoders meet cut and corrupt fields.
fn neighbours(seed: &[u8]) -> impl Iterator<Item = Vec<u8>> + '_ {
    let prefixes = (0..seed.len()).map(|length| seed[..length].to_vec());
    let changed = (0..seed.len()).flat_map(move |index| {
        [!seed[index], seed[index].wrapping_add(1)].map(|byte| {
            let mut bytes = seed.to_vec();
            bytes[index] = byte;
            bytes
        })
    });
    prefixes.chain(changed)
}

/// Replays `target` with `check`: seeds must decode (they are real encodings), corpus files
/// and neighbours of seeds must not break a check; some neighbours must decode too, so the
/// round trips ran on inputs the encoder did not write.
fn replay(target: &str, check: impl Fn(&[u8]) -> bool) {
    let seeds = files("seeds", target);
    assert!(!seeds.is_empty(), "fuzz/seeds/{target} holds no seeds");
    let mut n_decoded_neighbours = 0;
    for (path, seed) in &seeds {
        assert!(check(seed), "the seed {} does not decode", path.display());
        for bytes in neighbours(seed) {
            n_decoded_neighbours += usize::from(check(&bytes));
        }
    }
    assert!(
        n_decoded_neighbours > 0,
        "no changed seed of {target} decodes"
    );
    for (_, bytes) in files("corpus", target) {
        check(&bytes);
    }
}

#[test]
fn decode_tile_corpus() {
    replay("decode_tile", checks::decode_tile);
}

#[test]
fn decode_detection_corpus() {
    // The fuzz target's input is `(u16, u16, &str)` built by `arbitrary` from the bytes, as
    // libfuzzer-sys builds it.
    replay("decode_detection", |bytes| {
        let Ok((width, height, geometry)) =
            <(u16, u16, &str)>::arbitrary_take_rest(Unstructured::new(bytes))
        else {
            return false;
        };
        checks::decode_detection(width, height, geometry)
    });
}

#[test]
fn read_metadata_corpus() {
    replay("read_metadata", checks::read_metadata);
}

#[test]
fn upload_zip_corpus() {
    replay("upload_zip", checks::upload_zip);
}

#[test]
fn upload_image_corpus() {
    replay("upload_image", checks::upload_image);
}

#[test]
fn upload_manifest_corpus() {
    replay("upload_manifest", checks::upload_manifest);
}

#[test]
fn query_string_corpus() {
    replay("query_string", |bytes| {
        std::str::from_utf8(bytes).is_ok_and(checks::query_string)
    });
}

#[test]
fn read_video_corpus() {
    replay("read_video", checks::read_video);
}

#[test]
fn camm_sample_corpus() {
    replay("camm_sample", checks::camm_sample);
}

#[test]
fn gpmf_payload_corpus() {
    replay("gpmf_payload", checks::gpmf_payload);
}

#[test]
fn gpx_track_corpus() {
    replay("gpx_track", checks::gpx_track);
}

#[test]
fn accept_encoding_corpus() {
    replay("accept_encoding", checks::accept_encoding);
}

#[test]
fn sql_placeholders_corpus() {
    replay("sql_placeholders", |bytes| {
        std::str::from_utf8(bytes).is_ok_and(checks::sql_placeholders)
    });
}

#[test]
fn form_data_corpus() {
    replay("form_data", checks::form_data);
}

#[test]
fn privacy_form_corpus() {
    replay("privacy_form", checks::privacy_form);
}

/// Random changes of the seeds: each case takes one seed of the target, cuts it at a random
/// length, overwrites random bytes and splices in random runs, as a mutating fuzzer does,
/// and puts the result through the target's check. `cargo test` runs proptest's default
/// number of cases per target (256, a few seconds in all), CI 500,000 ([`cases`]);
/// `PROPTEST_CASES=200000 cargo test --workspace --test fuzz_corpora random` runs longer (fuzz/README.md), and a
/// failure is shrunk and kept in `fuzz_corpora.proptest-regressions`, to be copied into
/// `fuzz/seeds/<target>/` as a regression seed.
mod random {
    use proptest::prelude::*;

    use super::{checks, files};

    /// A change of a seed: where to cut it, bytes to overwrite and a run to splice in.
    #[derive(Debug, Clone)]
    struct Change {
        seed: usize,
        cut: usize,
        writes: Vec<(usize, u8)>,
        splice: (usize, Vec<u8>),
    }

    fn change() -> impl Strategy<Value = Change> {
        (
            any::<usize>(),
            any::<usize>(),
            proptest::collection::vec((any::<usize>(), any::<u8>()), 0..16),
            (
                any::<usize>(),
                proptest::collection::vec(any::<u8>(), 0..64),
            ),
        )
            .prop_map(|(seed, cut, writes, splice)| Change {
                seed,
                cut,
                writes,
                splice,
            })
    }

    /// The bytes `change` makes of one of `seeds`.
    fn changed(seeds: &[(std::path::PathBuf, Vec<u8>)], change: &Change) -> Vec<u8> {
        let mut bytes = seeds[change.seed % seeds.len()].1.clone();
        if !bytes.is_empty() {
            for (at, byte) in &change.writes {
                let at = at % bytes.len();
                bytes[at] = *byte;
            }
        }
        let (at, run) = &change.splice;
        let at = at % (bytes.len() + 1);
        bytes.splice(at..at, run.iter().copied());
        let cut = bytes.len() - change.cut % (bytes.len() / 4 + 1);
        bytes.truncate(cut);
        bytes
    }

    /// Cases per target: `PROPTEST_CASES` when set; else 500,000 under CI (the short fuzzing
    /// budget of every CI run: 6.5 million inputs, about 40 s on two cores) and proptest's
    /// 256 elsewhere.
    fn cases() -> u32 {
        if let Some(cases) = std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|cases| cases.parse().ok())
        {
            return cases;
        }
        if streetlevel_tests::in_ci() {
            500_000
        } else {
            256
        }
    }

    fn run(target: &str, check: impl Fn(&[u8]) -> bool) {
        let seeds = files("seeds", target);
        assert!(!seeds.is_empty(), "fuzz/seeds/{target} holds no seeds");
        proptest!(ProptestConfig::with_cases(cases()), |(change in change())| {
            check(&changed(&seeds, &change));
        });
    }

    #[test]
    fn random_upload_zips() {
        run("upload_zip", checks::upload_zip);
    }

    #[test]
    fn random_upload_images() {
        run("upload_image", checks::upload_image);
    }

    #[test]
    fn random_upload_manifests() {
        run("upload_manifest", checks::upload_manifest);
    }

    #[test]
    fn random_query_strings() {
        run("query_string", |bytes| {
            checks::query_string(&String::from_utf8_lossy(bytes))
        });
    }

    #[test]
    fn random_videos() {
        run("read_video", checks::read_video);
    }

    #[test]
    fn random_camm_samples() {
        run("camm_sample", checks::camm_sample);
    }

    #[test]
    fn random_gpmf_payloads() {
        run("gpmf_payload", checks::gpmf_payload);
    }

    #[test]
    fn random_gpx_tracks() {
        run("gpx_track", checks::gpx_track);
    }

    #[test]
    fn random_accept_encodings() {
        run("accept_encoding", checks::accept_encoding);
    }

    #[test]
    fn random_sql_placeholders() {
        run("sql_placeholders", |bytes| {
            checks::sql_placeholders(&String::from_utf8_lossy(bytes))
        });
    }

    #[test]
    fn random_form_data() {
        run("form_data", checks::form_data);
    }

    #[test]
    fn random_privacy_forms() {
        run("privacy_form", checks::privacy_form);
    }

    #[test]
    fn random_jpeg_metadata() {
        run("read_metadata", checks::read_metadata);
    }
}
