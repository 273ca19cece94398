//! [`EmbedImages`]: how the embed page learns about the image it shows.

use std::sync::{Arc, PoisonError, RwLock};

use streetlevel_model::{ImageId, ThumbnailSize, Timestamp};
use streetlevel_store::Store;

/// What the embed page needs to know about an image before any JavaScript runs.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedImage {
    /// The image.
    pub id: ImageId,
    /// Longitude of the (computed, else original) location, degrees.
    pub longitude: f64,
    /// Latitude of the (computed, else original) location, degrees.
    pub latitude: f64,
    /// When it was taken.
    pub captured_at: Timestamp,
    /// A URL of the 2048 px thumbnail that a browser can fetch without a token (a signed media
    /// URL), shown as a plain `<img>` when the viewer cannot run. `None` if there is none.
    pub thumb_2048_url: Option<String>,
    /// A URL of the 1024 px thumbnail fetchable without a token, the picture of the share
    /// link's preview card (`og:image`). `None` if there is none.
    pub thumb_1024_url: Option<String>,
}

/// Looks up images for the embed page.
pub trait EmbedImages: Send + Sync {
    /// The image with this ID, `None` if there is none or it is hidden or deleted: the
    /// pages that show it publish signed URLs of its thumbnails.
    fn embed_image(&self, id: ImageId) -> Option<EmbedImage>;

    /// West, south, east and north of every image's locations, degrees, for the
    /// explorer's first view without an image; `None` without images.
    fn extent(&self) -> Option<[f64; 4]> {
        None
    }
}

/// Signs thumbnail URLs: the server's media signer, handed in by whoever wires the crates.
pub type ThumbUrl = dyn Fn(ImageId, ThumbnailSize) -> Option<String> + Send + Sync;

/// [`EmbedImages`] over the shared in-memory store.
pub struct StoreImages {
    store: Arc<RwLock<Store>>,
    thumb_url: Box<ThumbUrl>,
}

impl std::fmt::Debug for StoreImages {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("StoreImages")
            .finish_non_exhaustive()
    }
}

impl StoreImages {
    /// Images from `store`, with thumbnail URLs from `thumb_url`.
    pub fn new(
        store: Arc<RwLock<Store>>,
        thumb_url: impl Fn(ImageId, ThumbnailSize) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        Self {
            store,
            thumb_url: Box::new(thumb_url),
        }
    }
}

impl EmbedImages for StoreImages {
    fn embed_image(&self, id: ImageId) -> Option<EmbedImage> {
        // The store answers for visible images only: a hidden or deleted one is unknown here.
        let image = self
            .store
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .image(id)?;
        let location = image.computed_geometry.unwrap_or(image.geometry);
        Some(EmbedImage {
            id,
            longitude: location.lon,
            latitude: location.lat,
            captured_at: image.captured_at,
            thumb_2048_url: (self.thumb_url)(id, ThumbnailSize::Px2048),
            thumb_1024_url: (self.thumb_url)(id, ThumbnailSize::Px1024),
        })
    }

    fn extent(&self) -> Option<[f64; 4]> {
        self.store
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .image_extent()
    }
}
