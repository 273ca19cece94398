//! CDN surrogate keys: the names a cache in front of the server purges by. Tile replies carry
//! `tile/<z>/<x>/<y> tiles/<z> tiles` and media replies `image/<id>` in their `Surrogate-Key`
//! header; a takedown lists the keys of what it changed. Every process that takes images down
//! (a server's API and dashboard, the command line) names them here, from the areas the
//! store's change log says the write touched, so that each says the same.

use std::collections::BTreeSet;

use streetlevel_model::ImageId;
use streetlevel_mvt::TileId;

use crate::Store;
use crate::changes::TouchedArea;

/// The highest zoom whose tiles carry surrogate keys (coverage ends at 14, map features are
/// at 14).
pub const MAX_KEYED_ZOOM: u8 = 14;
/// A zoom whose touched tiles are more than this is purged whole (`tiles/<z>`).
const MAX_TILE_KEYS_PER_ZOOM: u64 = 64;

/// The `Surrogate-Key` of a tile reply: the tile's own key, its zoom's and all tiles'.
pub fn tile_keys(tile: TileId) -> String {
    format!(
        "tile/{}/{}/{} tiles/{} tiles",
        tile.z(),
        tile.x(),
        tile.y(),
        tile.z()
    )
}

/// The `Surrogate-Key` of an image's media replies.
pub fn image_key(image: ImageId) -> String {
    format!("image/{image}")
}

impl Store {
    /// The surrogate keys of what changed since generation `before` (read before the write
    /// with [`Store::generation`]): `image/<id>` for the media of `images`, and for the areas
    /// the change log names, `tile/<z>/<x>/<y>` for each tile at z0–14 they cover with its
    /// neighbours (whose buffers show them), or `tiles/<z>` where a zoom's tiles are too many
    /// to list; `tiles` when the log no longer reaches back to `before`.
    pub fn surrogate_keys_since(&self, before: u64, images: &[ImageId]) -> Vec<String> {
        let mut keys: Vec<String> = images.iter().map(|&id| image_key(id)).collect();
        let Some(areas) = self.touched_since(before) else {
            keys.push(String::from("tiles"));
            return keys;
        };
        let areas: Vec<TouchedArea> = areas.into_iter().map(|(_, area)| area).collect();
        let mut tiles = BTreeSet::new();
        for z in 0..=MAX_KEYED_ZOOM {
            let mut zoom = BTreeSet::new();
            let mut whole = false;
            for area in &areas {
                let (Ok(north_west), Ok(south_east)) = (
                    TileId::containing(area.min_lon, area.max_lat, z),
                    TileId::containing(area.max_lon, area.min_lat, z),
                ) else {
                    whole = true;
                    continue;
                };
                // A tile's buffer shows what lies just beyond its edges: its neighbours change
                // too.
                let last = TileId::tiles_per_axis(z) - 1;
                let (west, east) = (
                    north_west.x().saturating_sub(1),
                    (south_east.x() + 1).min(last),
                );
                let (north, south) = (
                    north_west.y().saturating_sub(1),
                    (south_east.y() + 1).min(last),
                );
                let columns = u64::from(east - west) + 1;
                let rows = u64::from(south - north) + 1;
                if columns * rows > MAX_TILE_KEYS_PER_ZOOM {
                    whole = true;
                    continue;
                }
                for x in west..=east {
                    for y in north..=south {
                        zoom.insert(format!("tile/{z}/{x}/{y}"));
                    }
                }
            }
            if whole || zoom.len() as u64 > MAX_TILE_KEYS_PER_ZOOM {
                tiles.insert(format!("tiles/{z}"));
            } else {
                tiles.extend(zoom);
            }
        }
        keys.extend(tiles);
        keys
    }
}
