//! Blur edits racing other writers of the same picture, on a real photo of
//! `../shared/data/opensfm-blur-pairs` and `streetlevel-blur`'s box blur: an edit applied while
//! `reblur` blurs the image is not overwritten by the reblur (it blurs again from the edited
//! picture), and two edits applied at once each end up in the picture (the one that publishes
//! second finds the regions changed and renders again).
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use streetlevel_blur::{BlurError, Blurred, Blurrer, Hints};
use streetlevel_import::{
    Blurring, EditKind, EditState, ImportOptions, Outcome, Privacy, Selection, Source, StoredBox,
    import_paths, reblur,
};
use streetlevel_model::ImageId;
use streetlevel_store::Store;

fn photo() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/opensfm-blur-pairs/after_lund_images_01.jpg");
    assert!(
        path.is_file(),
        "the test photo is missing: {} (see ../shared/data/README.md)",
        path.display()
    );
    path
}

/// A blurrer that finds nothing, and that the first time it is called has an administrator
/// apply a blur edit to the image it blurs (as one would while `reblur` runs), keeping the
/// picture that edit published.
struct EditingBlurrer {
    privacy: Arc<Privacy>,
    image: ImageId,
    calls: AtomicUsize,
    edited: Mutex<Option<Vec<u8>>>,
    original: PathBuf,
}

const EDITED_BOX: StoredBox = StoredBox {
    x: 100,
    y: 100,
    width: 300,
    height: 200,
};

impl Blurrer for EditingBlurrer {
    fn blur(&self, jpeg: &[u8], _hints: Hints) -> Result<Blurred, BlurError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            let edit = self
                .privacy
                .propose(
                    self.image,
                    EditKind::Add,
                    EDITED_BOX,
                    "administrator carol",
                    true,
                )
                .unwrap();
            assert_eq!(edit.state, EditState::Applied);
            *self.edited.lock().unwrap() = Some(std::fs::read(&self.original).unwrap());
        }
        Ok(Blurred {
            jpeg: jpeg.to_vec(),
            regions: Vec::new(),
        })
    }

    fn fingerprint(&self) -> String {
        String::from("editing test blurrer")
    }
}

#[test]
fn a_blur_edit_applied_while_reblur_blurs_the_image_is_not_overwritten() {
    let data = common::scratch("reblur-edits");
    let store = Arc::new(RwLock::new(Store::open(&data).unwrap()));
    let options = ImportOptions {
        blurring: Blurring::Off,
        ..ImportOptions::default()
    };
    let report = import_paths(&store, &data, &[photo()], &options, &|_| {}).unwrap();
    let image = match report.files[..] {
        [ref file] => match file.outcome {
            Outcome::Imported(image) => image,
            ref other => panic!("{other:?}"),
        },
        ref files => panic!("{files:?}"),
    };
    let original = data.join(format!("media/img/{}/original.jpg", image.0));
    let pristine = std::fs::read(&original).unwrap();
    let privacy = Arc::new(Privacy::open(Arc::clone(&store), &data).unwrap());
    let blurrer = EditingBlurrer {
        privacy: Arc::clone(&privacy),
        image,
        calls: AtomicUsize::new(0),
        edited: Mutex::new(None),
        original: original.clone(),
    };

    let outcomes = Mutex::new(Vec::new());
    let report = reblur(
        &store,
        &data,
        &blurrer,
        Selection::All,
        &|step| {
            if let streetlevel_import::ReblurProgress::Image { outcome, .. } = step {
                outcomes.lock().unwrap().push(outcome);
            }
        },
        &AtomicBool::new(false),
    )
    .unwrap();

    assert_eq!(*outcomes.lock().unwrap(), vec![Ok(Source::NeverBlurred)]);
    assert!(report.refused.is_empty(), "{report:?}");
    // Blurred once from the picture before the edit, found changed, blurred again from the
    // edited one, which is what is served now.
    assert_eq!(blurrer.calls.load(Ordering::SeqCst), 2);
    let edited = blurrer.edited.lock().unwrap().clone().unwrap();
    assert_ne!(edited, pristine, "the edit changed the picture");
    assert_eq!(
        std::fs::read(&original).unwrap(),
        edited,
        "the reblur overwrote the edit"
    );
    let regions = privacy.regions(image).unwrap();
    assert_eq!(regions.len(), 1, "{regions:?}");
    assert_eq!(regions[0].area, EDITED_BOX);
    let _ = std::fs::remove_dir_all(&data);
}

/// A blurrer that finds nothing: the picture is published as it came.
struct NothingFound;

impl Blurrer for NothingFound {
    fn blur(&self, jpeg: &[u8], _hints: Hints) -> Result<Blurred, BlurError> {
        Ok(Blurred {
            jpeg: jpeg.to_vec(),
            regions: Vec::new(),
        })
    }

    fn fingerprint(&self) -> String {
        String::from("nothing found")
    }
}

fn region(area: StoredBox) -> streetlevel_blur::Region {
    streetlevel_blur::Region {
        class: streetlevel_blur::RegionClass::Other,
        score: 1.0,
        x: area.x,
        y: area.y,
        width: area.width,
        height: area.height,
        model: String::from("edit"),
        model_sha256: String::new(),
    }
}

/// Two pending edits of one image (its unblurred original kept) applied at once from two
/// threads: both are applied, and the served picture is the unblurred original with both
/// boxes blurred, whichever published first. Without the check before publishing, the
/// second render (made from regions read before the first was recorded) would overwrite the
/// first box.
#[test]
fn two_edits_applied_at_once_both_end_up_in_the_picture() {
    let data = common::scratch("two-edits");
    let store = Arc::new(RwLock::new(Store::open(&data).unwrap()));
    let options = ImportOptions {
        blurring: Blurring::On {
            blurrer: Arc::new(NothingFound),
            keep_unblurred: true,
        },
        ..ImportOptions::default()
    };
    let report = import_paths(&store, &data, &[photo()], &options, &|_| {}).unwrap();
    let Outcome::Imported(image) = report.files[0].outcome else {
        panic!("{report:?}");
    };
    let unblurred = std::fs::read(data.join(format!("media/img/{}/unblurred.jpg", image.0)))
        .expect("the unblurred original is kept");
    let privacy = Arc::new(Privacy::open(Arc::clone(&store), &data).unwrap());
    // Far apart, so that each box's blur is the same whichever is laid on first.
    let boxes = [
        StoredBox {
            x: 40,
            y: 40,
            width: 200,
            height: 160,
        },
        StoredBox {
            x: 700,
            y: 500,
            width: 200,
            height: 160,
        },
    ];
    let edits: Vec<u64> = boxes
        .iter()
        .map(|&area| {
            let edit = privacy
                .propose(image, EditKind::Add, area, "user dave", false)
                .unwrap();
            assert_eq!(edit.state, EditState::Pending);
            edit.id
        })
        .collect();

    let start = Arc::new(std::sync::Barrier::new(2));
    let appliers: Vec<_> = edits
        .iter()
        .map(|&id| {
            let (privacy, start) = (Arc::clone(&privacy), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                privacy.apply(id, "administrator carol")
            })
        })
        .collect();
    for applier in appliers {
        assert_eq!(applier.join().unwrap().unwrap().state, EditState::Applied);
    }

    let expected =
        streetlevel_blur::blur_regions(&unblurred, &[region(boxes[0]), region(boxes[1])]).unwrap();
    let served = std::fs::read(data.join(format!("media/img/{}/original.jpg", image.0))).unwrap();
    assert!(served == expected, "the served picture lacks a box");
    let mut recorded: Vec<StoredBox> = privacy
        .regions(image)
        .unwrap()
        .iter()
        .map(|region| region.area)
        .collect();
    recorded.sort_by_key(|area| area.x);
    assert_eq!(recorded, boxes);
    let _ = std::fs::remove_dir_all(&data);
}
