//! ONNX Runtime, loaded once per process from a shared library file (never downloaded).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::BlurError;

/// The file name of the ONNX Runtime library the project's setup installs (from the PyPI
/// wheel `onnxruntime==1.32.0`).
pub const ONNXRUNTIME_LIBRARY: &str = "libonnxruntime.so.1.32.0";

/// The library this process loaded, or why it could not.
static LOADED: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// Loads ONNX Runtime from `library` the first time; later calls answer the same (a process
/// holds one runtime, so a second, different path is refused).
pub fn load_runtime(library: &Path) -> Result<(), BlurError> {
    let error = |reason: String| BlurError::Runtime {
        path: library.to_path_buf(),
        reason,
    };
    let loaded = LOADED.get_or_init(|| {
        if !library.is_file() {
            return Err(String::from(
                "no such file (`cargo xtask serve` or `cargo xtask test` install it into \
                 target/streetlevel-models/)",
            ));
        }
        let builder = ort::init_from(library).map_err(|error| error.to_string())?;
        // The runtime's own log goes nowhere: failures come back as errors.
        builder.with_name("streetlevel-blur").commit();
        Ok(library.to_path_buf())
    });
    match loaded {
        Ok(path) if path == library => Ok(()),
        Ok(path) => Err(error(format!(
            "this process already loaded {}",
            path.display()
        ))),
        Err(reason) => Err(error(reason.clone())),
    }
}
