//! Media: signed URLs for thumbnails, meshes and `SfM` clusters, and the files behind them.
//!
//! Clients fetch media WITHOUT an auth header (the web viewer cannot add one), so each URL
//! carries its own authorization: an HMAC-SHA256 over the path and an expiry time, like a CDN's
//! signed URL. Expiries are rounded up to a whole day so the same image has the same URLs all
//! day long, which keeps entity responses cacheable.

use std::net::SocketAddr;
use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use streetlevel_media::{MediaStore, Stored};

use crate::media_reply::MediaBody;
use streetlevel_media::layout::{self, ImageObject, Key};
use streetlevel_model::{Clock, ImageId, MediaId, ThumbnailSize};

use crate::query::Query;
use crate::{Config, Error};

type HmacSha256 = Hmac<Sha256>;

const DAY_SECONDS: u64 = 24 * 3600;

/// The sizes of an image that can be fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThumbSize {
    /// 256 px wide.
    W256,
    /// 1024 px wide.
    W1024,
    /// 2048 px wide.
    W2048,
    /// The original width.
    Original,
}

impl From<ThumbnailSize> for ThumbSize {
    fn from(size: ThumbnailSize) -> Self {
        match size {
            ThumbnailSize::Px256 => ThumbSize::W256,
            ThumbnailSize::Px1024 => ThumbSize::W1024,
            ThumbnailSize::Px2048 => ThumbSize::W2048,
            ThumbnailSize::Original => ThumbSize::Original,
        }
    }
}

impl ThumbSize {
    /// The path segment: `256`, `1024`, `2048` or `original`.
    pub fn as_str(self) -> &'static str {
        match self {
            ThumbSize::W256 => "256",
            ThumbSize::W1024 => "1024",
            ThumbSize::W2048 => "2048",
            ThumbSize::Original => "original",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "256" => Some(ThumbSize::W256),
            "1024" => Some(ThumbSize::W1024),
            "2048" => Some(ThumbSize::W2048),
            "original" => Some(ThumbSize::Original),
            _ => None,
        }
    }

    /// The target width in pixels, `None` for the original.
    pub fn width(self) -> Option<u32> {
        match self {
            ThumbSize::W256 => Some(256),
            ThumbSize::W1024 => Some(1024),
            ThumbSize::W2048 => Some(2048),
            ThumbSize::Original => None,
        }
    }
}

/// One fetchable media object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MediaObject {
    /// An image at a size.
    Thumb(ImageId, ThumbSize),
    /// A tile of the image pyramid: level `z`, column `x`, row `y` (1024 px blocks).
    ImageTile {
        /// The image.
        image: ImageId,
        /// The pyramid level.
        z: u32,
        /// Column.
        x: u32,
        /// Row.
        y: u32,
    },
    /// A mesh (protobuf).
    Mesh(MediaId),
    /// An `SfM` cluster (zlib JSON).
    SfmCluster(MediaId),
}

impl MediaObject {
    /// The URL path below the media root, starting with `/media/`.
    pub fn path(&self) -> String {
        let mut path = String::new();
        self.push_path(&mut path);
        path
    }

    /// Appends [`MediaObject::path`] to `text`.
    fn push_path(&self, text: &mut String) {
        use std::fmt::Write as _;
        // Writing to a `String` cannot fail.
        let _ = match self {
            MediaObject::Thumb(image, size) => {
                write!(text, "/media/thumb/{image}/{}", size.as_str())
            }
            MediaObject::ImageTile { image, z, x, y } => {
                write!(text, "/media/tile/{image}/{z}/{x}/{y}")
            }
            MediaObject::Mesh(id) => write!(text, "/media/mesh/{id}"),
            MediaObject::SfmCluster(id) => write!(text, "/media/sfm/{id}"),
        };
    }

    /// Parses a path made by [`MediaObject::path`] (a trailing slash is accepted).
    pub fn from_path(path: &str) -> Option<Self> {
        let rest = path.strip_prefix("/media/")?.trim_end_matches('/');
        let parts: Vec<&str> = rest.split('/').collect();
        match parts.as_slice() {
            ["thumb", image, size] => Some(MediaObject::Thumb(
                image.parse().ok()?,
                ThumbSize::parse(size)?,
            )),
            ["tile", image, z, x, y] => Some(MediaObject::ImageTile {
                image: image.parse().ok()?,
                z: z.parse().ok()?,
                x: x.parse().ok()?,
                y: y.parse().ok()?,
            }),
            ["mesh", id] => Some(MediaObject::Mesh(id.parse().ok()?)),
            ["sfm", id] => Some(MediaObject::SfmCluster(id.parse().ok()?)),
            _ => None,
        }
    }

    /// The image this object shows, for thumbnails and pyramid tiles.
    pub fn image(&self) -> Option<ImageId> {
        match *self {
            MediaObject::Thumb(image, _) | MediaObject::ImageTile { image, .. } => Some(image),
            MediaObject::Mesh(_) | MediaObject::SfmCluster(_) => None,
        }
    }

    /// The image and the object of the media layout this is, for thumbnails and pyramid
    /// tiles (what a request may make and keep); `None` for the original, meshes and clusters.
    pub fn derived(&self) -> Option<(ImageId, ImageObject)> {
        match *self {
            MediaObject::Thumb(image, size) => size
                .width()
                .map(|width| (image, ImageObject::Thumbnail(width))),
            MediaObject::ImageTile { image, z, x, y } => {
                Some((image, ImageObject::Tile { z, x, y }))
            }
            MediaObject::Mesh(_) | MediaObject::SfmCluster(_) => None,
        }
    }

    /// The response's content type.
    pub fn content_type(&self) -> &'static str {
        match self {
            MediaObject::Thumb(..) | MediaObject::ImageTile { .. } => "image/jpeg",
            MediaObject::Mesh(_) => "application/x-protobuf",
            MediaObject::SfmCluster(_) => "application/octet-stream",
        }
    }
}

/// Signs and checks media URLs.
#[derive(Clone)]
pub struct Signer {
    keyed: HmacSha256,
    lifetime_seconds: u64,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("lifetime_seconds", &self.lifetime_seconds)
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// A signer with `key` whose URLs live at least `lifetime_seconds`.
    pub fn new(key: &[u8], lifetime_seconds: u64) -> Result<Self, Error> {
        let keyed = HmacSha256::new_from_slice(key)
            .map_err(|error| Error::Internal(format!("invalid media key: {error}")))?;
        Ok(Signer {
            keyed,
            lifetime_seconds,
        })
    }

    /// The MAC of `path` and `expires` (its decimal digits), over `path\nexpires`.
    fn mac(&self, path: &str, expires: &str) -> HmacSha256 {
        let mut mac = self.keyed.clone();
        mac.update(path.as_bytes());
        mac.update(b"\n");
        mac.update(expires.as_bytes());
        mac
    }

    /// The absolute signed URL of `object` under `media_root`, valid from `now_unix` for at least
    /// the lifetime (the expiry is rounded up to a whole day).
    pub fn url(&self, media_root: &str, object: &MediaObject, now_unix: u64) -> String {
        use std::fmt::Write as _;
        const QUERY: &str = "?expires=";
        let expires = (now_unix + self.lifetime_seconds).div_ceil(DAY_SECONDS) * DAY_SECONDS;
        // `{media_root}{path}?expires={expires}&signature={signature}`, written into one
        // string: the MAC reads the path and the expiry from it.
        let mut url = String::with_capacity(media_root.len() + 160);
        url.push_str(media_root);
        let path_start = url.len();
        object.push_path(&mut url);
        let expires_start = url.len() + QUERY.len();
        // Writing to a `String` cannot fail.
        let _ = write!(url, "{QUERY}{expires}");
        let signature = self
            .mac(
                &url[path_start..expires_start - QUERY.len()],
                &url[expires_start..],
            )
            .finalize()
            .into_bytes();
        url.push_str("&signature=");
        crate::reply::push_hex(&mut url, &signature);
        url
    }

    /// Checks the `expires` and `signature` of a request for `path` at `now_unix`.
    pub fn verify(&self, path: &str, query: &Query, now_unix: u64) -> Result<(), Error> {
        let expires: u64 = query
            .get("expires")
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| Error::Forbidden(String::from("the media url has no valid expiry")))?;
        let signature = query
            .get("signature")
            .and_then(|text| hex::decode(text).ok())
            .ok_or_else(|| {
                Error::Forbidden(String::from("the media url has no valid signature"))
            })?;
        self.mac(path.trim_end_matches('/'), &expires.to_string())
            .verify_slice(&signature)
            .map_err(|_| {
                Error::Forbidden(String::from("the media url signature does not match"))
            })?;
        if expires < now_unix {
            return Err(Error::Forbidden(String::from("the media url has expired")));
        }
        Ok(())
    }
}

/// The signed media URLs the service hands out: the signer, the public root the URLs point at
/// and the clock that dates them. Built before the app, so what needs a URL (the embed page
/// signs its thumbnail) takes this rather than reaching back into the app.
#[derive(Clone)]
pub struct MediaLinks {
    signer: Signer,
    root: String,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for MediaLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaLinks")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl MediaLinks {
    /// The links of a server configured by `config` and bound at `bound` (whose address is
    /// the media root when `config` names none).
    pub fn new(config: &Config, bound: SocketAddr, clock: Arc<dyn Clock>) -> Result<Self, Error> {
        Ok(MediaLinks {
            signer: Signer::new(&config.media_key, config.media_url_lifetime.as_secs())?,
            root: config.public_urls(bound).media,
            clock,
        })
    }

    /// The absolute signed URL of `object`, valid from now for at least the lifetime.
    pub fn url(&self, object: &MediaObject) -> String {
        self.signer
            .url(&self.root, object, self.clock.now_unix_seconds())
    }

    /// Checks a request for `path` with `query` against the signature and the clock.
    pub fn verify(&self, path: &str, query: &Query) -> Result<(), Error> {
        self.signer
            .verify(path, query, self.clock.now_unix_seconds())
    }
}

/// Where media bytes come from. The default reads the data directory's `media/`; a deployment
/// (or the fixture generator) can render missing originals on demand instead.
pub trait MediaSource: Send + Sync {
    /// The original JPEG of an image, `None` if there is none.
    fn original(&self, image: ImageId) -> Result<Option<Vec<u8>>, Error>;
    /// A mesh, `None` if unknown.
    fn mesh(&self, id: MediaId) -> Result<Option<Vec<u8>>, Error>;
    /// An `SfM` cluster, `None` if unknown.
    fn sfm_cluster(&self, id: MediaId) -> Result<Option<Vec<u8>>, Error>;

    /// What identifies the current version of an image's original (its file's inode, size and
    /// modification time), so that a thumbnail made while a blur edit replaced the original
    /// is not kept; `None` when the source cannot tell (originals that never change).
    fn original_version(&self, _image: ImageId) -> Option<OriginalVersion> {
        None
    }

    /// The original of an image opened for reading, when it is a stored object that can be
    /// streamed; `None` sends the bytes of [`MediaSource::original`] instead.
    fn open_original(&self, _image: ImageId) -> Result<Option<Stored>, Error> {
        Ok(None)
    }

    /// The images a mesh or cluster holds data of, for its reply's surrogate keys (a takedown
    /// of any of them purges it); none known by default.
    fn shown_images(&self, _object: &MediaObject) -> Vec<ImageId> {
        Vec::new()
    }
}

/// The version of a stored original: what its store says identifies it (a file's inode,
/// length and modification time; an object's `ETag`), which every write changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginalVersion(String);

/// Reads media from the media store (the data directory's files or an object store), at the
/// keys of the media layout (`streetlevel_media::layout`), falling back on files to where
/// older data sets have them.
#[derive(Debug, Clone)]
pub struct DirectoryMedia {
    files: MediaStore,
}

impl DirectoryMedia {
    /// The media of `store`.
    pub fn new(store: MediaStore) -> Self {
        DirectoryMedia { files: store }
    }
}

impl MediaSource for DirectoryMedia {
    fn original(&self, image: ImageId) -> Result<Option<Vec<u8>>, Error> {
        Ok(self.files.read_image_object(image, ImageObject::Original)?)
    }

    fn open_original(&self, image: ImageId) -> Result<Option<Stored>, Error> {
        Ok(self.files.open_image_object(image, ImageObject::Original)?)
    }

    fn original_version(&self, image: ImageId) -> Option<OriginalVersion> {
        let key = self
            .files
            .find_image_object(image, ImageObject::Original)
            .ok()??;
        self.files.version(&key).ok().flatten().map(OriginalVersion)
    }

    fn mesh(&self, id: MediaId) -> Result<Option<Vec<u8>>, Error> {
        Ok(self.files.read_first(&layout::mesh_read_keys(id))?)
    }

    fn sfm_cluster(&self, id: MediaId) -> Result<Option<Vec<u8>>, Error> {
        Ok(self.files.read_first(&layout::cluster_read_keys(id))?)
    }
}

/// The body of `object` for a reply: a stored object (an original, a thumbnail or tile kept
/// before) opened to be streamed, or the bytes made now (a thumbnail or tile cut from the
/// original and kept in `kept`, a mesh, a cluster). `None` when the object does not exist.
pub fn load_body(
    source: &dyn MediaSource,
    kept: &MediaStore,
    object: &MediaObject,
) -> Result<Option<MediaBody>, Error> {
    let stored = match *object {
        MediaObject::Thumb(image, ThumbSize::Original) => source.open_original(image)?,
        MediaObject::Thumb(..) | MediaObject::ImageTile { .. } => match object.derived() {
            Some((image, derived)) => kept.open_image_object(image, derived)?,
            None => None,
        },
        MediaObject::Mesh(_) | MediaObject::SfmCluster(_) => None,
    };
    if let Some(stored) = stored {
        return Ok(Some(MediaBody::Stored(stored)));
    }
    Ok(load(source, kept, object)?.map(|bytes| MediaBody::Bytes(bytes::Bytes::from(bytes))))
}

/// Makes the bytes of `object`, resizing and keeping thumbnails and pyramid tiles in `kept`
/// at their keys of the media layout. `None` when the object does not exist.
pub fn load(
    source: &dyn MediaSource,
    kept: &MediaStore,
    object: &MediaObject,
) -> Result<Option<Vec<u8>>, Error> {
    match *object {
        MediaObject::Mesh(id) => source.mesh(id),
        MediaObject::SfmCluster(id) => source.sfm_cluster(id),
        MediaObject::Thumb(image, ThumbSize::Original) => source.original(image),
        MediaObject::Thumb(image, size) => {
            let width = size.width().unwrap_or(u32::MAX);
            let derived = ImageObject::Thumbnail(width);
            if let Some(bytes) = kept.read_image_object(image, derived)? {
                return Ok(Some(bytes));
            }
            made_from_current(source, image, kept, &derived.key(image), |original| {
                resize_jpeg(original, width).map(Some)
            })
        }
        MediaObject::ImageTile { image, z, x, y } => {
            let derived = ImageObject::Tile { z, x, y };
            if let Some(bytes) = kept.read_image_object(image, derived)? {
                return Ok(Some(bytes));
            }
            made_from_current(source, image, kept, &derived.key(image), |original| {
                pyramid_tile(original, z, x, y)
            })
        }
    }
}

/// How often a thumbnail is made again when its original was replaced (a blur edit) while
/// it was being made.
const REMAKE_ATTEMPTS: usize = 3;

/// Makes a derived object of `image` with `make` and keeps it at `key`, unless the
/// original changed while it was made (a blur edit replaced it, on this replica or another
/// one sharing `media/`): then what was cached is removed and it is made again from the new
/// original, so that no thumbnail of the old pixels outlives the edit.
fn made_from_current(
    source: &dyn MediaSource,
    image: ImageId,
    kept: &MediaStore,
    key: &Key,
    make: impl Fn(&[u8]) -> Result<Option<Vec<u8>>, Error>,
) -> Result<Option<Vec<u8>>, Error> {
    let mut last = None;
    for _ in 0..REMAKE_ATTEMPTS {
        let before = source.original_version(image);
        let Some(original) = source.original(image)? else {
            return Ok(None);
        };
        let Some(bytes) = make(&original)? else {
            return Ok(None);
        };
        kept.write(key, &bytes)?;
        if source.original_version(image) == before {
            return Ok(Some(bytes));
        }
        let _ = kept.remove(key);
        last = Some(bytes);
    }
    // Replaced again and again: answer the last one made, cache nothing.
    Ok(last)
}

/// Scales a JPEG down to `width` pixels wide once upright, keeping the aspect ratio; never
/// upscales (an original narrower than `width` is returned unchanged).
pub fn resize_jpeg(original: &[u8], width: u32) -> Result<Vec<u8>, Error> {
    let (upright_width, upright_height, orientation) = picture_shape(original)?;
    if upright_width <= width {
        return Ok(original.to_vec());
    }
    // Below the original's height (`width` is below its width), so it fits.
    let height = (u64::from(upright_height) * u64::from(width))
        .div_ceil(u64::from(upright_width))
        .max(1);
    let height = u32::try_from(height).unwrap_or(upright_height);
    let _memory = picture_memory(original, orientation, (width, height))?;
    encode_jpeg(&upright_scaled(original, orientation, (width, height))?)
}

/// The upright width and height of a JPEG and its orientation, read from its markers.
fn picture_shape(original: &[u8]) -> Result<(u32, u32, u8), Error> {
    let (stored_width, stored_height) = streetlevel_blur::stored_size(original)
        .map_err(|error| Error::Internal(format!("cannot decode original: {error}")))?;
    let orientation = streetlevel_ingest::read_orientation(original);
    let (width, height) =
        streetlevel_ingest::upright_size(stored_width, stored_height, orientation);
    Ok((width, height, orientation))
}

/// The process's picture memory for scaling `original` to `size`, waited for: the server's
/// tiles and thumbnails share it with the uploads' decodes, so many requests for the tiles of
/// a large picture cannot hold more than it at once.
fn picture_memory(
    original: &[u8],
    orientation: u8,
    size: (u32, u32),
) -> Result<streetlevel_import::PicturePermit, Error> {
    streetlevel_import::picture_permit(
        original,
        streetlevel_import::PictureWork::Serve { orientation, size },
    )
    .map_err(|reason| Error::Internal(format!("cannot cut the original: {reason}")))
}

/// `original` upright and scaled to `size`, decoded at the smallest DCT scale that reaches it.
fn upright_scaled(
    original: &[u8],
    orientation: u8,
    size: (u32, u32),
) -> Result<streetlevel_ingest::Rgb, Error> {
    streetlevel_ingest::upright_scaled(original, orientation, size)
        .map_err(|error| Error::Internal(format!("cannot decode original: {error}")))
}

fn encode_jpeg(picture: &streetlevel_ingest::Rgb) -> Result<Vec<u8>, Error> {
    streetlevel_ingest::encode_rgb(picture, 85)
        .map_err(|error| Error::Internal(format!("cannot encode jpeg: {error}")))
}

/// The part `left, top, width, height` of `picture` (inside it).
fn crop(
    picture: &streetlevel_ingest::Rgb,
    (left, top): (u32, u32),
    (width, height): (u32, u32),
) -> streetlevel_ingest::Rgb {
    let row_bytes = width as usize * 3;
    let mut pixels = Vec::with_capacity(row_bytes * height as usize);
    for row in top..top + height {
        let start = (row as usize * picture.width as usize + left as usize) * 3;
        pixels.extend_from_slice(&picture.pixels[start..start + row_bytes]);
    }
    streetlevel_ingest::Rgb {
        width,
        height,
        pixels,
    }
}

pub use streetlevel_media::layout::{VIEWER_MIN_LEVEL, pyramid_max_level, pyramid_top_level};

/// The size of an image of `width` x `height` (top level `max_level`) at level `z`: scaled by
/// `2^(z - max_level)`, at least 1 px.
pub fn pyramid_level_size(width: u32, height: u32, max_level: u32, z: u32) -> (u32, u32) {
    if z >= max_level {
        let up = z - max_level;
        (width << up, height << up)
    } else {
        let down = max_level - z;
        ((width >> down).max(1), (height >> down).max(1))
    }
}

/// One 1024 px block of the upright image (Exif orientation applied, as the thumbnails are)
/// scaled by `2^(z - max)`; `None` outside the image or above [`pyramid_top_level`]. A block
/// of a level above the image's own is its part of the original at the original's resolution,
/// which the viewer stretches over the block: nothing is enlarged here.
fn pyramid_tile(original: &[u8], z: u32, x: u32, y: u32) -> Result<Option<Vec<u8>>, Error> {
    let (width, height, orientation) = picture_shape(original)?;
    let max_level = pyramid_max_level(width, height);
    if z > pyramid_top_level(max_level) {
        return Ok(None);
    }
    // The level's size, and the side of its blocks in its own pixels (a level above the
    // image's own cuts smaller blocks of the original, which the viewer stretches).
    let (level_size, block) = if z > max_level {
        let block = 1024_u32.checked_shr(z - max_level).unwrap_or(0).max(1);
        ((width, height), block)
    } else {
        (pyramid_level_size(width, height, max_level, z), 1024)
    };
    let (Some(left), Some(top)) = (x.checked_mul(block), y.checked_mul(block)) else {
        return Ok(None);
    };
    if left >= level_size.0 || top >= level_size.1 {
        return Ok(None);
    }
    let _memory = picture_memory(original, orientation, level_size)?;
    let level = upright_scaled(original, orientation, level_size)?;
    let block_size = (
        (level.width - left).min(block),
        (level.height - top).min(block),
    );
    encode_jpeg(&crop(&level, (left, top), block_size)).map(Some)
}

#[cfg(test)]
mod tests {
    use streetlevel_model::{FakeClock, Timestamp};

    use super::*;

    #[test]
    fn signed_urls_verify_and_tampering_fails() {
        let signer = Signer::new(b"secret", 3600).unwrap();
        let object = MediaObject::Thumb(ImageId(7), ThumbSize::W256);
        let url = signer.url("http://h", &object, 1_000_000);
        let (path, query) = url.trim_start_matches("http://h").split_once('?').unwrap();
        assert_eq!(path, "/media/thumb/7/256");
        let query = Query::parse(query).unwrap();
        assert!(signer.verify(path, &query, 1_000_000).is_ok());
        assert!(
            signer
                .verify("/media/thumb/8/256", &query, 1_000_000)
                .is_err()
        );
        assert!(
            Signer::new(b"other", 3600)
                .unwrap()
                .verify(path, &query, 1_000_000)
                .is_err()
        );
        assert!(signer.verify(path, &query, 10_000_000).is_err());
        assert_eq!(MediaObject::from_path(path), Some(object));
    }

    /// Pinned: URLs handed out before an upgrade keep verifying after it, and the signature
    /// is HMAC-SHA-256 of `path\nexpires` (here computed with Python's `hmac`).
    #[test]
    fn signatures_are_hmac_sha256_of_the_path_and_the_expiry() {
        let signer = Signer::new(b"secret", 3600).unwrap();
        let object = MediaObject::Thumb(ImageId(7), ThumbSize::W256);
        assert_eq!(
            signer.url("http://h", &object, 1_000_000),
            "http://h/media/thumb/7/256?expires=1036800&signature=\
             39725b4aefa1c4677ca5896280105f49705f992480ac02a09c7e42352cb5eb39"
        );
    }

    #[test]
    fn urls_are_stable_within_a_day() {
        let signer = Signer::new(b"k", 3600).unwrap();
        let object = MediaObject::Mesh(MediaId(3));
        assert_eq!(
            signer.url("", &object, 86_400),
            signer.url("", &object, 86_400 + 60)
        );
    }

    /// The path, query and `expires` of a URL for one object signed at `now`.
    fn signed(signer: &Signer, now: u64) -> (String, Query, u64) {
        let object = MediaObject::Thumb(ImageId(7), ThumbSize::W1024);
        let url = signer.url("", &object, now);
        let (path, query) = url.split_once('?').unwrap();
        let query = Query::parse(query).unwrap();
        let expires = query.get("expires").unwrap().parse().unwrap();
        (path.to_owned(), query, expires)
    }

    #[test]
    fn a_url_verifies_through_its_expiry_second_and_not_after() {
        let clock = FakeClock::new(Timestamp(1_000_000_000));
        let signer = Signer::new(b"k", 3600).unwrap();
        let (path, query, expires) = signed(&signer, clock.now_unix_seconds());
        // 1_000_000 + 3600 rounded up to a whole day.
        assert_eq!(expires, 12 * DAY_SECONDS);
        for at in [clock.now_unix_seconds(), expires - 1, expires] {
            assert!(signer.verify(&path, &query, at).is_ok(), "at {at}");
        }
        let Err(Error::Forbidden(message)) = signer.verify(&path, &query, expires + 1) else {
            panic!("a URL past its expiry verifies");
        };
        assert!(message.contains("expired"), "{message}");
    }

    /// Rounding up to a whole day never shortens a URL's life: from any signing time it
    /// verifies for the whole lifetime, and at most a day longer.
    #[test]
    fn rounding_to_a_whole_day_keeps_the_full_lifetime() {
        for lifetime in [1, 3600, DAY_SECONDS - 1, DAY_SECONDS, 30 * DAY_SECONDS] {
            let signer = Signer::new(b"k", lifetime).unwrap();
            for now in [
                100 * DAY_SECONDS - 1,
                100 * DAY_SECONDS,
                100 * DAY_SECONDS + 1,
                100 * DAY_SECONDS + DAY_SECONDS / 2,
                101 * DAY_SECONDS - lifetime % DAY_SECONDS,
            ] {
                let (path, query, expires) = signed(&signer, now);
                assert_eq!(expires % DAY_SECONDS, 0, "{lifetime} {now}");
                assert!(
                    expires >= now + lifetime && expires < now + lifetime + DAY_SECONDS,
                    "lifetime {lifetime}, signed at {now}: expires {expires}"
                );
                for at in [now, now + lifetime - 1, now + lifetime] {
                    assert!(
                        signer.verify(&path, &query, at).is_ok(),
                        "lifetime {lifetime}, signed at {now}, checked at {at}"
                    );
                }
                assert!(signer.verify(&path, &query, expires + 1).is_err());
            }
        }
    }

    #[test]
    fn thumbnails_never_upscale() {
        let original = encode_jpeg(&streetlevel_ingest::Rgb {
            width: 300,
            height: 200,
            pixels: vec![0; 300 * 200 * 3],
        })
        .unwrap();
        let small = resize_jpeg(&original, 256).unwrap();
        let decoded = image::load_from_memory(&small).unwrap();
        assert_eq!((decoded.width(), decoded.height()), (256, 171));
        assert_eq!(resize_jpeg(&original, 1024).unwrap(), original);
    }

    #[test]
    fn pyramid_levels() {
        assert_eq!(pyramid_max_level(4000, 3000), 12);
        assert_eq!(pyramid_max_level(2048, 1024), 11);
        assert_eq!(pyramid_max_level(1, 1), 0);
        // The viewer asks a small image for level 11 at least: its blocks are then of the
        // image enlarged.
        assert_eq!(pyramid_top_level(10), 11);
        assert_eq!(pyramid_top_level(12), 12);
        assert_eq!(pyramid_level_size(1024, 768, 10, 11), (2048, 1536));
        assert_eq!(pyramid_level_size(4000, 3000, 12, 10), (1000, 750));
        assert_eq!(pyramid_level_size(4000, 3000, 12, 0), (1, 1));
    }

    /// A 1024 x 768 JPEG, left half red and right half blue, with Exif `orientation`.
    fn two_colour_jpeg(orientation: u8) -> Vec<u8> {
        use image::ImageEncoder as _;
        let picture = image::RgbImage::from_fn(1024, 768, |x, _| {
            if x < 512 {
                image::Rgb([220, 20, 20])
            } else {
                image::Rgb([20, 20, 220])
            }
        });
        // Big-endian TIFF, one IFD with one entry: Orientation (0x0112), SHORT, 1 value.
        let tiff = [
            b'M',
            b'M',
            0,
            42,
            0,
            0,
            0,
            8,
            0,
            1,
            0x01,
            0x12,
            0,
            3,
            0,
            0,
            0,
            1,
            0,
            orientation,
            0,
            0,
            0,
            0,
            0,
            0,
        ];
        let mut jpeg = Vec::new();
        let mut encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 90);
        encoder.set_exif_metadata(tiff.to_vec()).unwrap();
        encoder
            .write_image(&picture, 1024, 768, image::ExtendedColorType::Rgb8)
            .unwrap();
        jpeg
    }

    fn mean_colour(jpeg: &[u8]) -> (u32, u32, [u8; 3]) {
        let picture = image::load_from_memory(jpeg).unwrap().to_rgb8();
        let (width, height) = picture.dimensions();
        let mut sums = [0_u64; 3];
        for pixel in picture.pixels() {
            for (sum, value) in sums.iter_mut().zip(pixel.0) {
                *sum += u64::from(value);
            }
        }
        let count = u64::from(width) * u64::from(height);
        (
            width,
            height,
            sums.map(|sum| u8::try_from(sum / count).unwrap()),
        )
    }

    #[test]
    fn pyramid_tiles_are_upright_and_reach_the_viewers_lowest_level() {
        // Orientation 6 turns the stored image a quarter clockwise: upright it is 768 x 1024,
        // red above and blue below; its own top level is 10.
        let original = two_colour_jpeg(6);
        let (width, height, colour) =
            mean_colour(&pyramid_tile(&original, 10, 0, 0).unwrap().unwrap());
        assert_eq!((width, height), (768, 1024));
        assert!(colour[0] > 100 && colour[2] > 100, "{colour:?}");
        // Level 11, the image enlarged twice: 2 x 2 blocks, each its part of the original.
        let (width, height, colour) =
            mean_colour(&pyramid_tile(&original, 11, 0, 0).unwrap().unwrap());
        assert_eq!((width, height), (512, 512));
        assert!(
            colour[0] > 200 && colour[2] < 40,
            "the top is red: {colour:?}"
        );
        let (width, height, colour) =
            mean_colour(&pyramid_tile(&original, 11, 1, 1).unwrap().unwrap());
        assert_eq!((width, height), (256, 512));
        assert!(
            colour[2] > 200 && colour[0] < 40,
            "the bottom is blue: {colour:?}"
        );
        assert_eq!(pyramid_tile(&original, 11, 2, 0).unwrap(), None);
        assert_eq!(pyramid_tile(&original, 12, 0, 0).unwrap(), None);
        // Without orientation the stored image is upright: red on the left at every level.
        let plain = two_colour_jpeg(1);
        let (width, height, colour) =
            mean_colour(&pyramid_tile(&plain, 11, 0, 1).unwrap().unwrap());
        assert_eq!((width, height), (512, 256));
        assert!(colour[0] > 200 && colour[2] < 40, "{colour:?}");
    }
}
