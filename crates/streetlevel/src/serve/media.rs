//! Media of a data directory: the files at the keys of the media layout
//! (`streetlevel_media::layout`), and for a fixture data set written
//! with `--media lazy` (marked by `media/RENDER_ON_REQUEST`) the originals, meshes and `SfM`
//! clusters rendered from the image's metadata on first request and kept. Real imagery never
//! gets synthetic scenery: without the marker a missing file is answered as unknown, but for
//! the meshes and clusters of its reconstructions, made on request from the database's rows
//! (`streetlevel-sfm`), from the images that are public now.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use streetlevel_db::Database;
use streetlevel_model::{ImageId, MediaId};
use streetlevel_server::media::MediaObject;
use streetlevel_server::{DirectoryMedia, Error as ServerError, MediaSource};
use streetlevel_store::Store;

/// The media source of `streetlevel serve`.
pub struct DataDirMedia {
    files: DirectoryMedia,
    /// Set for a fixture data set whose media are rendered on request.
    render: Option<RenderOnRequest>,
    /// The database of reconstructions (its `sfm_` tables exist) and the store that says which
    /// images are public.
    reconstructions: Option<(Database, Arc<RwLock<Store>>)>,
}

struct RenderOnRequest {
    media_dir: PathBuf,
    store: Arc<RwLock<Store>>,
}

impl DataDirMedia {
    /// The media of the data directory `data_dir`.
    pub fn new(data_dir: &Path, store: Arc<RwLock<Store>>) -> Self {
        let media_dir = Store::media_dir(data_dir);
        let marked = media_dir
            .join(streetlevel_fixtures::RENDER_ON_REQUEST_MARKER)
            .is_file();
        let database = store
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .database()
            .cloned();
        DataDirMedia {
            files: DirectoryMedia::new(streetlevel_import::media_store(data_dir)),
            reconstructions: database.map(|database| (database, Arc::clone(&store))),
            render: marked.then(|| RenderOnRequest { media_dir, store }),
        }
    }

    fn reconstructed(
        &self,
        made: impl FnOnce(
            &Database,
            &RwLock<Store>,
        )
            -> Result<Option<streetlevel_sfm::media::Served>, streetlevel_sfm::SfmError>,
    ) -> Result<Option<streetlevel_sfm::media::Served>, ServerError> {
        let Some((database, store)) = &self.reconstructions else {
            return Ok(None);
        };
        made(database, store).map_err(|error| {
            if error.is_unavailable() {
                ServerError::Unavailable(error.to_string())
            } else {
                ServerError::Internal(error.to_string())
            }
        })
    }
}

impl MediaSource for DataDirMedia {
    fn shown_images(&self, object: &MediaObject) -> Vec<ImageId> {
        self.reconstructed_images(object)
    }

    fn original_version(
        &self,
        image: ImageId,
    ) -> Option<streetlevel_server::media::OriginalVersion> {
        self.files.original_version(image)
    }

    fn open_original(
        &self,
        image: ImageId,
    ) -> Result<Option<streetlevel_media::Stored>, ServerError> {
        self.files.open_original(image)
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
            return Ok(self
                .reconstructed(|database, store| {
                    streetlevel_sfm::media::mesh_bytes(database, store, id)
                })?
                .map(|served| served.bytes));
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
            return Ok(self
                .reconstructed(|database, store| {
                    streetlevel_sfm::media::cluster_bytes(database, store, id)
                })?
                .map(|served| served.bytes));
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

impl DataDirMedia {
    /// The images a reconstruction's mesh or cluster shows (none for a file's).
    fn reconstructed_images(&self, object: &MediaObject) -> Vec<ImageId> {
        let Some((database, store)) = &self.reconstructions else {
            return Vec::new();
        };
        let shown = match *object {
            MediaObject::Mesh(id) => streetlevel_sfm::media::mesh_image(database, id)
                .map(|image| image.into_iter().collect()),
            MediaObject::SfmCluster(id) => {
                streetlevel_sfm::media::cluster_images(database, store, id)
            }
            _ => Ok(Vec::new()),
        };
        shown.unwrap_or_default()
    }
}

/// Writes media rendered on request to the data directory, atomically, so the next request
/// reads the file and a crash never leaves half a file.
fn keep(path: &Path, bytes: &[u8]) -> Result<(), ServerError> {
    Ok(streetlevel_media::write_atomically(path, bytes)?)
}
