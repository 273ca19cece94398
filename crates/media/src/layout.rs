//! The media layout: the key of every object the service writes or serves, in one place.
//!
//! Keys are `/`-separated paths below the media root (the data directory on the local
//! store). Every object of an image is under [`image_prefix`], `media/img/<id>/`, so that
//! listing or removing that prefix finds every copy of the image, whatever a request made of
//! it. Meshes and `SfM` clusters are shared by the images of a reconstruction and upload
//! sessions exist before their image, so they have keys of their own.
//!
//! Data directories written before this layout keep their files where they were;
//! [`legacy_keys`] names those places: reads fall back to them and erasure removes them.

use std::fmt;
use std::path::{Path, PathBuf};

use streetlevel_model::{ImageId, MediaId};

/// The thumbnail widths the service makes: 256, 1024 and 2048 pixels.
pub const THUMBNAIL_WIDTHS: [u32; 3] = [256, 1024, 2048];

/// The lowest pyramid level the web viewer asks for (mapillary-js's
/// `TILE_MIN_REQUEST_LEVEL`): the server serves every level up to this one also for an image
/// whose own top level is lower (those levels are the image enlarged).
pub const VIEWER_MIN_LEVEL: u32 = 11;

/// The side of a pyramid tile's block, in pixels of its level.
pub const TILE_BLOCK: u32 = 1024;

/// The folder of the data directory that holds images, meshes and clusters.
pub const MEDIA_DIR: &str = "media";

/// The folder of the data directory that holds upload sessions' bytes.
pub const UPLOADS_DIR: &str = "uploads";

/// The key of one stored object: a `/`-separated path below the media root.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(String);

impl Key {
    /// A key made by this crate (the layout or a listing of it).
    pub(crate) fn from_layout(key: String) -> Self {
        Key(key)
    }

    /// The key as text, `media/img/7/256.jpg`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The file of this key on a local store rooted at `root` (the data directory).
    pub fn path(&self, root: &Path) -> PathBuf {
        let mut path = root.to_path_buf();
        path.extend(self.0.split('/').filter(|part| !part.is_empty()));
        path
    }

    /// Whether this key lies below `prefix` (a prefix ends with `/`).
    pub fn is_under(&self, prefix: &Key) -> bool {
        self.0.starts_with(&prefix.0)
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One object of an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ImageObject {
    /// The published picture (blurred when blurring is on).
    Original,
    /// A thumbnail this many pixels wide (one of [`THUMBNAIL_WIDTHS`]), made from the original.
    Thumbnail(u32),
    /// A block of the viewer's image pyramid: level `z`, column `x`, row `y`, made from the
    /// original.
    Tile {
        /// The pyramid level.
        z: u32,
        /// The column.
        x: u32,
        /// The row.
        y: u32,
    },
    /// The unblurred original an operator keeps for blur edits and blurring again: never
    /// served.
    Unblurred,
}

impl ImageObject {
    /// This object's key for `image`, under [`image_prefix`].
    pub fn key(self, image: ImageId) -> Key {
        let name = match self {
            ImageObject::Original => String::from("original.jpg"),
            ImageObject::Thumbnail(width) => format!("{width}.jpg"),
            ImageObject::Tile { z, x, y } => format!("tile_{z}_{x}_{y}.jpg"),
            ImageObject::Unblurred => String::from("unblurred.jpg"),
        };
        Key(format!("{}{name}", image_prefix(image).0))
    }

    /// Whether the object is made from the original on request and kept (a thumbnail or a
    /// tile): what a blur edit or blurring again makes stale.
    pub fn is_derived(self) -> bool {
        matches!(self, ImageObject::Thumbnail(_) | ImageObject::Tile { .. })
    }
}

/// The prefix of every object of `image`: `media/img/<id>/`.
pub fn image_prefix(image: ImageId) -> Key {
    Key(format!("{MEDIA_DIR}/img/{image}/"))
}

/// The prefix of every media object (not of upload sessions): `media/`.
pub fn media_prefix() -> Key {
    Key(format!("{MEDIA_DIR}/"))
}

/// The prefix of every image's objects: `media/img/`.
pub fn images_prefix() -> Key {
    Key(format!("{MEDIA_DIR}/img/"))
}

/// The image a key of the layout belongs to, if it is under an image's prefix.
pub fn image_of(key: &Key) -> Option<ImageId> {
    let rest = key.0.strip_prefix(MEDIA_DIR)?.strip_prefix("/img/")?;
    let (id, _) = rest.split_once('/')?;
    id.parse().ok()
}

/// The key of a mesh (protobuf): `media/meshes/<id>.pb`.
pub fn mesh_key(mesh: MediaId) -> Key {
    Key(format!("{MEDIA_DIR}/meshes/{mesh}.pb"))
}

/// The key of an `SfM` cluster (zlib JSON): `media/sfm/<id>.json.zz`.
pub fn cluster_key(cluster: MediaId) -> Key {
    Key(format!("{MEDIA_DIR}/sfm/{cluster}.json.zz"))
}

/// The key of an upload session's bytes: `uploads/<user>/<session key>` (the session key is
/// the uploader's file name, checked to be a plain name by the sessions).
pub fn upload_key(user: u64, session: &str) -> Key {
    Key(format!("{UPLOADS_DIR}/{user}/{session}"))
}

/// The prefix of every upload session's bytes: `uploads/`.
pub fn sessions_prefix() -> Key {
    Key(format!("{UPLOADS_DIR}/"))
}

/// The prefix of every upload session of `user`.
pub fn uploads_prefix(user: u64) -> Key {
    Key(format!("{UPLOADS_DIR}/{user}/"))
}

/// On an object store, which cannot append, a session's bytes are segments, one per request
/// that sent some, each named by the offset it starts at: the prefix of the segments of a
/// session, `uploads/<user>/<session key>/`.
pub fn upload_segments_prefix(user: u64, session: &str) -> Key {
    Key(format!("{UPLOADS_DIR}/{user}/{session}/"))
}

/// The key of the segment of a session's bytes that starts at `offset`:
/// `uploads/<user>/<session key>/<offset, 20 digits>` (so that keys sort as offsets do).
pub fn upload_segment_key(user: u64, session: &str, offset: u64) -> Key {
    Key(format!("{UPLOADS_DIR}/{user}/{session}/{offset:020}"))
}

/// The offset a segment's key (see [`upload_segment_key`]) names, `None` for another key.
pub fn upload_segment_offset(key: &Key) -> Option<u64> {
    let (_, name) = key.0.rsplit_once('/')?;
    (name.len() == 20 && name.bytes().all(|byte| byte.is_ascii_digit()))
        .then(|| name.parse().ok())
        .flatten()
}

/// Where data directories written before this layout have `object` of `image`: reads fall
/// back to these, in order, and erasure removes them.
pub fn legacy_keys(image: ImageId, object: ImageObject) -> Vec<Key> {
    match object {
        ImageObject::Original => vec![
            Key(format!("{MEDIA_DIR}/images/{image}.jpg")),
            Key(format!("{MEDIA_DIR}/originals/{image}.jpg")),
            Key(format!("{MEDIA_DIR}/{image}.jpg")),
        ],
        ImageObject::Thumbnail(width) => {
            vec![Key(format!("{MEDIA_DIR}/cache/{image}_{width}.jpg"))]
        }
        ImageObject::Tile { z, x, y } => vec![Key(format!(
            "{MEDIA_DIR}/cache/{image}_tile_{z}_{x}_{y}.jpg"
        ))],
        ImageObject::Unblurred => vec![Key(format!("unblurred/{image}.jpg"))],
    }
}

/// The keys read for `object` of `image`, in order: its key, then its [`legacy_keys`].
pub fn read_keys(image: ImageId, object: ImageObject) -> Vec<Key> {
    let mut keys = vec![object.key(image)];
    keys.extend(legacy_keys(image, object));
    keys
}

/// The keys read for a mesh, in order: [`mesh_key`], then where older data sets have it.
pub fn mesh_read_keys(mesh: MediaId) -> Vec<Key> {
    let mut keys = vec![mesh_key(mesh)];
    keys.extend(
        ["meshes/{}.pbf", "meshes/{}", "mesh/{}.pbf", "mesh/{}"]
            .iter()
            .map(|pattern| legacy(pattern, mesh)),
    );
    keys
}

/// The keys read for an `SfM` cluster, in order: [`cluster_key`], then where older data sets
/// have it.
pub fn cluster_read_keys(cluster: MediaId) -> Vec<Key> {
    let mut keys = vec![cluster_key(cluster)];
    keys.extend(
        [
            "sfm/{}.json.zlib",
            "sfm/{}",
            "sfm_clusters/{}.json.zlib",
            "clusters/{}",
        ]
        .iter()
        .map(|pattern| legacy(pattern, cluster)),
    );
    keys
}

fn legacy(pattern: &str, id: MediaId) -> Key {
    Key(format!(
        "{MEDIA_DIR}/{}",
        pattern.replace("{}", &id.to_string())
    ))
}

/// The number of pyramid levels of an image: `ceil(log2(max(width, height)))`.
pub fn pyramid_max_level(width: u32, height: u32) -> u32 {
    let side = width.max(height).max(1);
    u32::BITS - (side - 1).leading_zeros()
}

/// The highest level served for an image whose top level is `max_level`: its own, or
/// [`VIEWER_MIN_LEVEL`] for a small image (levels above its own are the image enlarged).
pub fn pyramid_top_level(max_level: u32) -> u32 {
    max_level.max(VIEWER_MIN_LEVEL)
}

/// Every tile of the viewer's pyramid an image of `width` x `height` can have, up to
/// [`pyramid_top_level`]: blocks of [`TILE_BLOCK`] pixels of the image scaled by
/// `2^(z - max)`. The stored picture's sides may be the entity's swapped (Exif orientation),
/// so both axes take the longer side: a superset of the tiles the server cuts.
pub fn pyramid_tiles(width: u32, height: u32) -> Vec<ImageObject> {
    let side = width.max(height).max(1);
    let max_level = pyramid_max_level(width, height);
    let mut tiles = Vec::new();
    for z in 0..=pyramid_top_level(max_level) {
        let scaled = if z >= max_level {
            u64::from(side) << (z - max_level)
        } else {
            u64::from((side >> (max_level - z)).max(1))
        };
        let blocks = u32::try_from(scaled.div_ceil(u64::from(TILE_BLOCK))).unwrap_or(u32::MAX);
        for x in 0..blocks {
            for y in 0..blocks {
                tiles.push(ImageObject::Tile { z, x, y });
            }
        }
    }
    tiles
}

/// Every object the service can make of an image of `width` x `height` from its original
/// (each thumbnail and each pyramid tile): what a blur edit makes stale.
pub fn derived_objects(width: u32, height: u32) -> Vec<ImageObject> {
    let mut objects: Vec<ImageObject> = THUMBNAIL_WIDTHS
        .iter()
        .map(|&width| ImageObject::Thumbnail(width))
        .collect();
    objects.extend(pyramid_tiles(width, height));
    objects
}

/// Every object an image of `width` x `height` can have: its original, its unblurred
/// original and [`derived_objects`].
pub fn image_objects(width: u32, height: u32) -> Vec<ImageObject> {
    let mut objects = vec![ImageObject::Original, ImageObject::Unblurred];
    objects.extend(derived_objects(width, height));
    objects
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_object_of_an_image_is_under_its_prefix_and_keys_are_distinct() {
        let image = ImageId(1_234_567);
        let objects = image_objects(4000, 3000);
        let keys: std::collections::BTreeSet<Key> =
            objects.iter().map(|object| object.key(image)).collect();
        assert_eq!(keys.len(), objects.len());
        for key in &keys {
            assert!(key.is_under(&image_prefix(image)), "{key}");
            assert_eq!(image_of(key), Some(image), "{key}");
        }
        // Another image's prefix is no prefix of this one's (7 and 70).
        assert!(
            !ImageObject::Original
                .key(ImageId(70))
                .is_under(&image_prefix(ImageId(7)))
        );
        assert_eq!(image_of(&mesh_key(MediaId(7))), None);
    }

    #[test]
    fn every_pyramid_tile_the_server_can_make_is_listed() {
        let tiles = pyramid_tiles(4000, 3000);
        // Level 12 (4096 ≥ 4000): up to 4 × 4 blocks; levels 0 to 10 one each, 11 2 × 2.
        assert!(tiles.contains(&ImageObject::Tile { z: 12, x: 3, y: 3 }));
        assert!(!tiles.contains(&ImageObject::Tile { z: 12, x: 4, y: 2 }));
        assert!(tiles.contains(&ImageObject::Tile { z: 0, x: 0, y: 0 }));
        assert_eq!(tiles.len(), 16 + 4 + 11);
    }

    #[test]
    fn the_enlarged_levels_of_a_small_picture_are_listed_up_to_the_viewers_first() {
        // 1024 x 768: its own top level is 10 (one block); level 11 is it enlarged twice, in
        // 2 x 2 blocks, which the server serves and caches for the viewer.
        let tiles = pyramid_tiles(1024, 768);
        for (x, y) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            assert!(tiles.contains(&ImageObject::Tile { z: 11, x, y }));
        }
        assert!(tiles.contains(&ImageObject::Tile { z: 10, x: 0, y: 0 }));
        assert!(
            !tiles
                .iter()
                .any(|tile| matches!(tile, ImageObject::Tile { z: 12, .. }))
        );
        assert_eq!(tiles.len(), 11 + 4);
    }

    #[test]
    fn keys_are_paths_below_the_root() {
        let key = ImageObject::Tile { z: 3, x: 1, y: 2 }.key(ImageId(9));
        assert_eq!(key.as_str(), "media/img/9/tile_3_1_2.jpg");
        assert_eq!(
            key.path(Path::new("/data")),
            PathBuf::from("/data/media/img/9/tile_3_1_2.jpg")
        );
        assert_eq!(upload_key(5, "a.jpg").as_str(), "uploads/5/a.jpg");
        let segment = upload_segment_key(5, "a.jpg", 8_388_608);
        assert_eq!(segment.as_str(), "uploads/5/a.jpg/00000000000008388608");
        assert!(segment.is_under(&upload_segments_prefix(5, "a.jpg")));
        assert!(segment.is_under(&uploads_prefix(5)));
        assert_eq!(upload_segment_offset(&segment), Some(8_388_608));
        assert_eq!(upload_segment_offset(&upload_key(5, "a.jpg")), None);
        assert_eq!(
            read_keys(ImageId(9), ImageObject::Original)
                .iter()
                .map(Key::as_str)
                .collect::<Vec<_>>(),
            [
                "media/img/9/original.jpg",
                "media/images/9.jpg",
                "media/originals/9.jpg",
                "media/9.jpg"
            ]
        );
    }

    #[test]
    fn pyramid_levels() {
        assert_eq!(pyramid_max_level(4000, 3000), 12);
        assert_eq!(pyramid_max_level(2048, 1024), 11);
        assert_eq!(pyramid_max_level(1, 1), 0);
        assert_eq!(pyramid_top_level(10), 11);
        assert_eq!(pyramid_top_level(12), 12);
    }
}
