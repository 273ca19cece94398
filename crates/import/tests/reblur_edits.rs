//! A blur edit and `reblur` on one image at once: an edit applied while the image is blurred
//! again is not overwritten by the reblur (it blurs again from the edited picture), on a real
//! photo of `../shared/data/opensfm-blur-pairs` and `streetlevel-blur`'s box blur.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use streetlevel_blur::{BlurError, Blurred, Blurrer, Hints};
use streetlevel_import::{
    Blurring, EditKind, ImportOptions, Outcome, Privacy, Selection, Source, StoredBox,
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
            assert_eq!(edit.state, streetlevel_import::EditState::Applied);
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
