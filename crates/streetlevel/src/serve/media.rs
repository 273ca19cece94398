//! Media of a data directory: the files under `media/`, and for a fixture data set written
//! with `--media lazy` (marked by `media/RENDER_ON_REQUEST`) the originals, meshes and `SfM`
//! clusters rendered from the image's metadata on first request and kept. Real imagery never
//! gets synthetic scenery: without the marker a missing file is answered as unknown.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use streetlevel_model::{ImageId, MediaId};
use streetlevel_server::{DirectoryMedia, Error as ServerError, MediaSource};
use streetlevel_store::Store;

/// The media source of `streetlevel serve`.
pub struct DataDirMedia {
    files: DirectoryMedia,
    /// Set for a fixture data set whose media are rendered on request.
    render: Option<RenderOnRequest>,
}

struct RenderOnRequest {
    media_dir: PathBuf,
    store: Arc<RwLock<Store>>,
}

impl DataDirMedia {
    /// The media of the data directory whose `media/` is `media_dir`.
    pub fn new(media_dir: &Path, store: Arc<RwLock<Store>>) -> Self {
        let marked = media_dir
            .join(streetlevel_fixtures::RENDER_ON_REQUEST_MARKER)
            .is_file();
        DataDirMedia {
            files: DirectoryMedia::new(media_dir),
            render: marked.then(|| RenderOnRequest {
                media_dir: media_dir.to_path_buf(),
                store,
            }),
        }
    }

    /// Whether missing fixture media are rendered on request.
    pub fn renders_on_request(&self) -> bool {
        self.render.is_some()
    }
}

impl MediaSource for DataDirMedia {
    fn original_version(
        &self,
        image: ImageId,
    ) -> Option<streetlevel_server::media::OriginalVersion> {
        self.files.original_version(image)
    }

    fn original(&self, image: ImageId) -> Result<Option<Vec<u8>>, ServerError> {
        if let Some(bytes) = self.files.original(image)? {
            return Ok(Some(bytes));
        }
        let Some(render) = &self.render else {
            return Ok(None);
        };
        let Some(metadata) = render
            .store
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .image(image)
        else {
            return Ok(None);
        };
        let bytes = streetlevel_fixtures::render_original(&metadata);
        keep(
            &streetlevel_fixtures::original_path(&render.media_dir, image),
            &bytes,
        )?;
        Ok(Some(bytes))
    }

    fn mesh(&self, id: MediaId) -> Result<Option<Vec<u8>>, ServerError> {
        if let Some(bytes) = self.files.mesh(id)? {
            return Ok(Some(bytes));
        }
        let Some(render) = &self.render else {
            return Ok(None);
        };
        let store = render.store.read().unwrap_or_else(PoisonError::into_inner);
        let Some(image) = store.image_with_mesh(id) else {
            return Ok(None);
        };
        drop(store);
        let bytes = streetlevel_fixtures::mesh_for_image(&image);
        keep(
            &streetlevel_fixtures::mesh_path(&render.media_dir, id),
            &bytes,
        )?;
        Ok(Some(bytes))
    }

    fn sfm_cluster(&self, id: MediaId) -> Result<Option<Vec<u8>>, ServerError> {
        if let Some(bytes) = self.files.sfm_cluster(id)? {
            return Ok(Some(bytes));
        }
        let Some(render) = &self.render else {
            return Ok(None);
        };
        let sequence_images = {
            let store = render.store.read().unwrap_or_else(PoisonError::into_inner);
            let Some(image) = store.image_with_sfm_cluster(id) else {
                return Ok(None);
            };
            let ids = store
                .sequence_image_ids(&image.sequence)
                .unwrap_or_default();
            store.images(&ids)
        };
        let members = streetlevel_fixtures::cluster_members(&sequence_images, id);
        let bytes = streetlevel_fixtures::sfm_cluster_bytes(&members).map_err(|error| {
            ServerError::Internal(format!("cannot build cluster {id}: {error}"))
        })?;
        keep(
            &streetlevel_fixtures::sfm_cluster_path(&render.media_dir, id),
            &bytes,
        )?;
        Ok(Some(bytes))
    }
}

/// Writes media rendered on request to the data directory, atomically, so the next request
/// reads the file and a crash never leaves half a file.
fn keep(path: &Path, bytes: &[u8]) -> Result<(), ServerError> {
    Ok(streetlevel_import::write_atomically(path, bytes)?)
}
