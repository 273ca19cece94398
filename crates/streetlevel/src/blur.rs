//! The blur settings that `serve`, `import` and `reblur` share, and the blurrer they make:
//! ONNX Runtime and the models from the models folder that the project's setup fills
//! (`cargo xtask models`), or from the paths given.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use streetlevel_blur::{
    self, BlurError, Blurrer, CENTERFACE_FILE, CENTERFACE_SHA256, Detector, LocalBlurrer,
    ModelFile, ONNXRUNTIME_LIBRARY, PLATE_TEXT_FILE, PLATE_TEXT_SHA256, RegionClass,
};
use streetlevel_blur_service::{ServiceClient, ServiceConfig};
use streetlevel_import::{Blurring, Uploads};

/// The blur flags of `import` and `reblur` (`serve` has the same ones among its settings).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct BlurArgs {
    /// Blur faces and licence plates before anything is published. [default: true]
    #[arg(long, env = "STREETLEVEL_BLUR")]
    pub blur: Option<bool>,
    /// The folder holding `libonnxruntime.so.1.32.0`, `centerface.onnx` and
    /// `PP-OCRv5_det.onnx` (default: `models/` next to the executable, else the source tree's
    /// `target/streetlevel-models`, which `cargo xtask models` fills).
    #[arg(long, env = "STREETLEVEL_BLUR_MODELS_DIR")]
    pub blur_models_dir: Option<PathBuf>,
    /// A face model (CenterFace or YuNet ONNX) instead of the pinned CenterFace; its SHA-256
    /// is recorded with every region it finds.
    #[arg(long, env = "STREETLEVEL_BLUR_FACE_MODEL")]
    pub blur_face_model: Option<PathBuf>,
    /// A licence plate detector (single-class YOLO-style ONNX, or a PP-OCR text detector, such
    /// as the models folder's `ch_PP-OCRv4_det_infer.onnx`, the default before) instead of
    /// the pinned PP-OCRv5 text detector; its SHA-256 is recorded with every region it finds.
    #[arg(long, env = "STREETLEVEL_BLUR_PLATE_MODEL")]
    pub blur_plate_model: Option<PathBuf>,
    /// Keep each unblurred original at `DATA/unblurred/<image id>.jpg` (never served), for
    /// blur edits and `reblur`. [default: false]
    #[arg(long, env = "STREETLEVEL_KEEP_UNBLURRED")]
    pub keep_unblurred: Option<bool>,
    /// An external blur service speaking Panoramax's blur API (`http://host:port`, optionally
    /// `http://<token>@host:port`): pictures are sent to `POST {url}/blur/` instead of the
    /// local models (docs/PRIVACY.md).
    #[arg(long, env = "STREETLEVEL_BLUR_URL")]
    pub blur_url: Option<String>,
}

/// The default models folder: `models/` next to the executable when it holds the runtime,
/// else the source tree's `target/streetlevel-models`.
pub fn default_models_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|executable| Some(executable.parent()?.join("models")))
        .filter(|dir| dir.join(ONNXRUNTIME_LIBRARY).is_file())
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../target/streetlevel-models"
            ))
        })
}

impl BlurArgs {
    /// What imports do: [`Blurring::Off`] when turned off, a blurrer when one can be made,
    /// and [`Blurring::Unusable`] with the reason otherwise (nothing is published then).
    pub fn blurring(&self) -> Blurring {
        if self.blur == Some(false) {
            return Blurring::Off;
        }
        if let Some(url) = &self.blur_url {
            return match ServiceClient::new(ServiceConfig::new(url)) {
                Ok(client) => Blurring::On {
                    blurrer: Arc::new(client),
                    keep_unblurred: self.keep_unblurred.unwrap_or(false),
                },
                Err(error) => {
                    Blurring::Unusable(format!("blurring is on and cannot run ({error})"))
                }
            };
        }
        match self.blurrer() {
            Ok(blurrer) => Blurring::On {
                blurrer: Arc::new(blurrer),
                keep_unblurred: self.keep_unblurred.unwrap_or(false),
            },
            Err(error) => Blurring::Unusable(format!(
                "blurring is on and cannot run ({error}); install the models with `cargo xtask \
                 models`, point --blur-models-dir at them, or turn blurring off with --blur false"
            )),
        }
    }

    /// The folder the runtime and the pinned model are read from.
    pub fn models_dir(&self) -> PathBuf {
        self.blur_models_dir
            .clone()
            .unwrap_or_else(default_models_dir)
    }

    fn blurrer(&self) -> Result<LocalBlurrer, BlurError> {
        let models = self.models_dir();
        streetlevel_blur::load_runtime(&models.join(ONNXRUNTIME_LIBRARY))?;
        let face = match &self.blur_face_model {
            Some(path) => ModelFile::read(path, None)?,
            None => ModelFile::read(&models.join(CENTERFACE_FILE), Some(CENTERFACE_SHA256))?,
        };
        let plate = match &self.blur_plate_model {
            Some(path) => ModelFile::read(path, None)?,
            None => ModelFile::read(&models.join(PLATE_TEXT_FILE), Some(PLATE_TEXT_SHA256))?,
        };
        Ok(LocalBlurrer::new(vec![
            Detector::load(face, RegionClass::Face)?,
            Detector::load(plate, RegionClass::Plate)?,
        ]))
    }
}

/// What `POST /blur/` blurs with (`None`: it answers 503).
pub type BlurApi = Option<Arc<dyn Blurrer>>;

/// The server's uploads (their tables opened on the process's one handle) with its blurring, made once and logged: a blurrer that cannot be
/// made does not stop the server, but every upload job then fails with the reason and
/// publishes nothing. Also the blurrer that `POST /blur/` uses (`None`: it answers 503).
pub fn for_server(
    data: &Path,
    database: streetlevel_db::Database,
    limits: streetlevel_import::UploadLimits,
    args: &BlurArgs,
) -> anyhow::Result<(Arc<Uploads>, BlurApi)> {
    let uploads = Uploads::open_database(data, database, limits)
        .map_err(|error| anyhow::anyhow!("cannot open the upload tables: {error}"))?;
    let blurring = args.blurring();
    let blur_api = match &blurring {
        Blurring::On { blurrer, .. } => Some(Arc::clone(blurrer)),
        _ => None,
    };
    if matches!(blurring, Blurring::Unusable(_)) {
        tracing::error!("{}", describe(&blurring, args, data));
    } else {
        tracing::info!("{}", describe(&blurring, args, data));
    }
    Ok((Arc::new(uploads.with_blurring(blurring)), blur_api))
}

/// One line for the log about what blurring will do.
pub fn describe(blurring: &Blurring, args: &BlurArgs, data: &Path) -> String {
    match blurring {
        Blurring::Off => {
            String::from("blurring is off: imported pictures are published as received")
        }
        Blurring::On {
            blurrer,
            keep_unblurred,
        } => format!(
            "blurring with {}{}{}",
            blurrer.fingerprint(),
            if args.blur_url.is_none() {
                format!(" (runtime from {})", args.models_dir().display())
            } else {
                String::new()
            },
            if *keep_unblurred {
                format!(
                    "; unblurred originals kept in {} (media/img/<id>/unblurred.jpg, never served)",
                    data.display()
                )
            } else {
                String::new()
            }
        ),
        Blurring::Unusable(reason) => format!("nothing will be published: {reason}"),
    }
}
