//! The default models against the original service's production blur
//! (`../shared/data/opensfm-blur-pairs/`; `support/recall.rs` says how regions are found and
//! counted). `cargo xtask bench blur` prints the same figures in full.

#[path = "support/recall.rs"]
mod recall;

use recall::Kind;

#[test]
fn the_default_models_blur_the_faces_and_most_plates_and_little_else() {
    let Some(blurrer) = recall::default_blurrer() else {
        return;
    };
    let figures = recall::measure(&blurrer);
    let (found, total) = figures.recall(Kind::Face);
    assert!(total >= 20, "only {total} face regions in the ground truth");
    assert!(
        found * 100 >= total * 95,
        "{found} of {total} faces blurred: below 95 %"
    );
    // Plates: 8 of the 11 plate-shaped regions were found when the defaults were chosen
    // (docs/PRIVACY.md); fewer is a regression. The goal, 90 %, is not reached yet.
    let (found, total) = figures.recall(Kind::Plate);
    assert!(
        total >= 10,
        "only {total} plate regions in the ground truth"
    );
    assert!(
        found >= 8,
        "{found} of {total} plates blurred: fewer than 8"
    );
    // False positives: a small share of each picture, and most pictures untouched or nearly.
    let shares: Vec<f64> = figures.shares.iter().map(|(_, share)| *share).collect();
    let mean = shares.iter().sum::<f64>() / recall::count_f64(shares.len());
    assert!(
        mean < 0.01,
        "on average {:.2} % of a picture is blurred",
        mean * 100.0
    );
    for (name, share) in &figures.shares {
        assert!(*share < 0.03, "{name}: {:.2} % blurred", share * 100.0);
    }
}
