//! The tile cache: encoded tiles with their gzip and brotli bodies made once, a byte budget,
//! concurrent misses of one tile rendered once, rendering on blocking threads a few at a
//! time, and writes invalidating only the tiles they touched.
//!
//! Freshness: an entry remembers the store generation it was rendered at. The cache follows
//! the store's log of touched areas ([`Store::touched_since`]) into the newest generation
//! that touched each tile; an entry older than that is stale and rendered again. This holds
//! whatever the order of a render's insert and a write, so no write is ever missed.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, PoisonError, RwLock, TryLockError, Weak};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use streetlevel_mvt::TileId;
use streetlevel_store::{Store, TouchedArea, TouchedContent};
use tokio::sync::Semaphore;

use super::{Tileset, encode};
use crate::Error;
use crate::reply::{
    COMPRESS_MIN_BYTES, COMPRESS_OFF_WORKERS_BYTES, Coding, MVT_CONTENT_TYPE, Reply,
    preferred_coding,
};

/// The cache's byte budget per configured entry (`tile_cache_entries`): most tiles are far
/// smaller, a few low-zoom tiles of a large set far larger.
const BYTES_PER_ENTRY: u64 = 64 * 1024;
/// Tiles up to this zoom are kept warm: rendered in the background after start-up and after
/// each write, so no request waits for a large low-zoom tile.
pub const WARM_MAX_ZOOM: u8 = 10;
/// How often the background task looks for writes (a read of the store's generation).
const WARM_POLL: Duration = Duration::from_millis(500);
/// The highest zoom with content: coverage ends at 14, map features are at 14 only.
const MAX_CONTENT_ZOOM: u8 = 14;
/// A touched area covering more tiles than this at one zoom marks the whole zoom as touched.
const MAX_TOUCHED_TILES_PER_ZOOM: u64 = 4096;
/// Past this many remembered tiles the map is dropped and everything counts as touched.
const MAX_REMEMBERED_TILES: usize = 1 << 20;

type Key = (Tileset, u8, u32, u32);

/// An encoded tile with its `ETag` and its compressed bodies, each made the first time a
/// client asks for that coding and kept for every later one.
#[derive(Debug)]
pub struct CachedTile {
    /// The store generation it was rendered at.
    pub rendered_at: u64,
    /// The MVT bytes; empty for an empty tile.
    pub body: Bytes,
    /// Strong `ETag` of the identity body, with quotes.
    pub etag: String,
    gzip: OnceLock<Option<Bytes>>,
    brotli: OnceLock<Option<Bytes>>,
}

impl CachedTile {
    /// Encodes and compresses a tile now.
    pub fn render(store: &Store, tileset: Tileset, tile: TileId) -> Result<CachedTile, Error> {
        let body = Bytes::from(encode(store, tileset, tile)?);
        Ok(CachedTile::of(store.generation(), body))
    }

    fn of(rendered_at: u64, body: Bytes) -> CachedTile {
        let etag = format!("\"t{}\"", crate::reply::etag_of(&body).trim_matches('"'));
        CachedTile {
            rendered_at,
            body,
            etag,
            gzip: OnceLock::new(),
            brotli: OnceLock::new(),
        }
    }

    fn cell(&self, coding: Coding) -> Option<&OnceLock<Option<Bytes>>> {
        match coding {
            Coding::Identity => None,
            Coding::Gzip => Some(&self.gzip),
            Coding::Brotli => Some(&self.brotli),
        }
    }

    /// The body in `coding`, made now if no one asked for it before.
    pub fn coded(&self, coding: Coding) -> Option<Bytes> {
        self.cell(coding)?
            .get_or_init(|| coding.encode(&self.body))
            .clone()
    }

    /// The coding `request_headers` prefer among those this tile offers (none when it is too
    /// small to gain from compression).
    pub fn coding_for(&self, request_headers: &HeaderMap) -> Coding {
        if self.body.len() < COMPRESS_MIN_BYTES {
            return Coding::Identity;
        }
        preferred_coding(request_headers, true, true)
    }

    /// The reply carrying this tile, with the body in `coding` when it is made (see
    /// [`TileCache::reply`], which makes it off the async workers).
    pub fn reply(&self, coding: Coding, max_age_seconds: u32) -> Reply {
        let mut reply = Reply::bytes(MVT_CONTENT_TYPE, self.body.clone());
        // Never compressed per response: only the stored codings are sent.
        reply.compressible = false;
        match coding {
            Coding::Identity => {}
            Coding::Gzip => reply.encodings.gzip = self.coded(coding),
            Coding::Brotli => reply.encodings.brotli = self.coded(coding),
        }
        reply.etag = Some(self.etag.clone());
        reply.cache_control = Some(Cow::Owned(format!("public, max-age={max_age_seconds}")));
        reply
    }

    /// The bytes it may come to hold: the body, and at most as much again for the two
    /// compressed bodies (each far smaller than the body for vector tiles), which are made
    /// after moka weighed the entry.
    fn weight(&self) -> u32 {
        u32::try_from(2 * self.body.len() + self.etag.len() + 128).unwrap_or(u32::MAX)
    }
}

/// How often the cache answered and rendered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TileCacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Tiles rendered (each miss, and each stale entry, once however many asked).
    pub renders: u64,
}

/// The newest generation that touched each tile, followed from the store's log.
#[derive(Debug, Default)]
struct TouchedTiles {
    /// The generation this map has followed the store to.
    synced: u64,
    /// Everything rendered before this is stale (the log no longer reached back).
    everything: u64,
    /// Per content and zoom: areas too large to list tile by tile.
    zooms: HashMap<(TouchedContent, u8), u64>,
    tiles: HashMap<(TouchedContent, u8, u32, u32), u64>,
}

impl TouchedTiles {
    fn last_touch(&self, content: TouchedContent, tile: TileId) -> u64 {
        let zoom = self.zooms.get(&(content, tile.z())).copied().unwrap_or(0);
        let single = self
            .tiles
            .get(&(content, tile.z(), tile.x(), tile.y()))
            .copied()
            .unwrap_or(0);
        self.everything.max(zoom).max(single)
    }

    fn touch(&mut self, generation: u64, area: &TouchedArea) {
        let zooms = match area.content {
            TouchedContent::Coverage => 0..=MAX_CONTENT_ZOOM,
            TouchedContent::MapFeatures => MAX_CONTENT_ZOOM..=MAX_CONTENT_ZOOM,
        };
        for z in zooms {
            let (Ok(north_west), Ok(south_east)) = (
                TileId::containing(area.min_lon, area.max_lat, z),
                TileId::containing(area.max_lon, area.min_lat, z),
            ) else {
                self.everything = generation;
                continue;
            };
            // One tile around the box: the neighbours' buffers reach into it.
            let last = TileId::tiles_per_axis(z) - 1;
            let xs = north_west.x().saturating_sub(1)..=(south_east.x() + 1).min(last);
            let ys = north_west.y().saturating_sub(1)..=(south_east.y() + 1).min(last);
            let count =
                (u64::from(*xs.end() - *xs.start()) + 1) * (u64::from(*ys.end() - *ys.start()) + 1);
            if count > MAX_TOUCHED_TILES_PER_ZOOM {
                self.zooms.insert((area.content, z), generation);
                continue;
            }
            for x in xs {
                for y in ys.clone() {
                    self.tiles.insert((area.content, z, x, y), generation);
                }
            }
        }
        if self.tiles.len() > MAX_REMEMBERED_TILES {
            self.tiles = HashMap::new();
            self.zooms.clear();
            self.everything = generation;
        }
    }
}

/// The tile cache of one server (see the module documentation).
pub struct TileCache {
    store: Arc<RwLock<Store>>,
    /// False for a budget of 0: every request renders (benchmarks of uncached tiles).
    enabled: bool,
    entries: moka::future::Cache<Key, Arc<CachedTile>>,
    /// Renders running at once: one core is left to the rest of the API.
    render_slots: Semaphore,
    touched: RwLock<TouchedTiles>,
    hits: AtomicU64,
    renders: AtomicU64,
}

impl std::fmt::Debug for TileCache {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TileCache")
            .field("entries", &self.entries.entry_count())
            .field("bytes", &self.entries.weighted_size())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl TileCache {
    /// A cache for `store` with a budget of `entries` times 64 KiB (0: no cache, every
    /// request renders).
    pub fn new(store: Arc<RwLock<Store>>, entries: usize) -> Self {
        let generation = store
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .generation();
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        TileCache {
            store,
            enabled: entries > 0,
            entries: moka::future::Cache::builder()
                .max_capacity(entries as u64 * BYTES_PER_ENTRY)
                .weigher(|_key: &Key, tile: &Arc<CachedTile>| tile.weight())
                .build(),
            render_slots: Semaphore::new(cores.saturating_sub(1).max(1)),
            touched: RwLock::new(TouchedTiles {
                synced: generation,
                ..TouchedTiles::default()
            }),
            hits: AtomicU64::new(0),
            renders: AtomicU64::new(0),
        }
    }

    /// Hits and renders so far.
    pub fn stats(&self) -> TileCacheStats {
        TileCacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            renders: self.renders.load(Ordering::Relaxed),
        }
    }

    /// The tile, from the cache when fresh, else rendered on a blocking thread (once, however
    /// many ask at the same time).
    pub async fn tile(&self, tileset: Tileset, tile: TileId) -> Result<Arc<CachedTile>, Error> {
        self.lookup(tileset, tile, true).await
    }

    /// [`TileCache::tile`]; `counted`: a client's lookup, reported to metrics (the warm-up's
    /// are not).
    async fn lookup(
        &self,
        tileset: Tileset,
        tile: TileId,
        counted: bool,
    ) -> Result<Arc<CachedTile>, Error> {
        let count = |result: &'static str| {
            if counted {
                metrics::counter!(crate::metrics::TILE_CACHE, "result" => result).increment(1);
            }
        };
        let key = (tileset, tile.z(), tile.x(), tile.y());
        self.follow_writes();
        for _ in 0..if self.enabled { 2 } else { 0 } {
            let entry = self
                .entries
                .entry(key)
                .or_try_insert_with(self.render(tileset, tile))
                .await
                .map_err(|error| Error::Internal(format!("tile rendering failed: {error}")))?;
            let fresh = entry.is_fresh();
            let cached = entry.into_value();
            if fresh {
                count("miss");
                return Ok(cached);
            }
            if self.is_current(tileset, tile, &cached) {
                self.hits.fetch_add(1, Ordering::Relaxed);
                count("hit");
                return Ok(cached);
            }
            self.entries.invalidate(&key).await;
        }
        // No cache, or writes keep arriving: answer from the store as it is now.
        count("miss");
        self.render(tileset, tile)
            .await
            .map_err(|error| Error::Internal(format!("tile rendering failed: {error}")))
    }

    /// The reply for a request of `tile`: the coding the client prefers, compressed now (once
    /// per entry) if no one asked for it before, on a blocking thread when large.
    pub async fn reply(
        &self,
        tile: &Arc<CachedTile>,
        request_headers: &HeaderMap,
        max_age_seconds: u32,
    ) -> Reply {
        let coding = tile.coding_for(request_headers);
        self.compress(tile, coding).await;
        tile.reply(coding, max_age_seconds)
    }

    /// Makes `tile`'s body in `coding` if not made yet: inline when small, else on a blocking
    /// thread holding a render slot.
    async fn compress(&self, tile: &Arc<CachedTile>, coding: Coding) {
        let Some(cell) = tile.cell(coding) else {
            return;
        };
        if cell.get().is_some() || tile.body.len() < COMPRESS_OFF_WORKERS_BYTES {
            return;
        }
        let Ok(_slot) = self.render_slots.acquire().await else {
            return;
        };
        let tile = Arc::clone(tile);
        let _ = tokio::task::spawn_blocking(move || tile.coded(coding)).await;
    }

    async fn render(&self, tileset: Tileset, tile: TileId) -> Result<Arc<CachedTile>, String> {
        let _slot = self
            .render_slots
            .acquire()
            .await
            .map_err(|error| error.to_string())?;
        let store = Arc::clone(&self.store);
        let rendered = tokio::task::spawn_blocking(move || {
            let (generation, body) = {
                let store = store.read().unwrap_or_else(PoisonError::into_inner);
                (store.generation(), encode(&store, tileset, tile))
            };
            // Compress after the read lock is released: writers need not wait for it.
            body.map(|body| CachedTile::of(generation, Bytes::from(body)))
                .map_err(|error| error.to_string())
        })
        .await
        .map_err(|error| format!("tile task failed: {error}"))??;
        self.renders.fetch_add(1, Ordering::Relaxed);
        Ok(Arc::new(rendered))
    }

    fn is_current(&self, tileset: Tileset, tile: TileId, cached: &CachedTile) -> bool {
        let content = match tileset {
            Tileset::Coverage | Tileset::ComputedCoverage => TouchedContent::Coverage,
            Tileset::Points | Tileset::TrafficSigns => TouchedContent::MapFeatures,
        };
        self.touched
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .last_touch(content, tile)
            <= cached.rendered_at
    }

    /// Follows the store's log of touched areas up to its current generation. It runs on the
    /// async workers, so it never waits for the store's lock: while a writer holds it (a
    /// takedown or a follow waiting on a slow database), cached tiles are answered as they
    /// were before that write began, and the next lookup after it follows it.
    fn follow_writes(&self) {
        let store = match self.store.try_read() {
            Ok(store) => store,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        let generation = store.generation();
        if self
            .touched
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .synced
            >= generation
        {
            return;
        }
        let mut touched = self.touched.write().unwrap_or_else(PoisonError::into_inner);
        if touched.synced >= generation {
            return;
        }
        match store.touched_since(touched.synced) {
            Some(areas) => {
                for (written, area) in &areas {
                    touched.touch(*written, area);
                }
            }
            None => touched.everything = generation,
        }
        touched.synced = generation;
    }

    /// Starts the background task that keeps tiles up to [`WARM_MAX_ZOOM`] warm, when called
    /// inside a Tokio runtime; it ends when the cache is dropped.
    pub fn keep_warm(self: &Arc<Self>) {
        if !self.enabled {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(warm_loop(Arc::downgrade(self)));
        }
    }

    /// Renders every coverage tile up to [`WARM_MAX_ZOOM`] that holds something (and each
    /// empty child of one that does), one at a time; fresh tiles cost a lookup.
    pub async fn warm(&self) {
        for tileset in [Tileset::Coverage, Tileset::ComputedCoverage] {
            let mut pending: Vec<TileId> = TileId::new(0, 0, 0).into_iter().collect();
            while let Some(tile) = pending.pop() {
                let Ok(cached) = self.lookup(tileset, tile, false).await else {
                    continue;
                };
                // The codings browsers ask for, so that their first request finds them too.
                self.compress(&cached, Coding::Brotli).await;
                self.compress(&cached, Coding::Gzip).await;
                if cached.body.is_empty() || tile.z() >= WARM_MAX_ZOOM {
                    continue;
                }
                for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                    if let Ok(child) =
                        TileId::new(tile.z() + 1, tile.x() * 2 + dx, tile.y() * 2 + dy)
                    {
                        pending.push(child);
                    }
                }
            }
        }
    }
}

async fn warm_loop(cache: Weak<TileCache>) {
    let mut warmed_at = None;
    loop {
        let Some(strong) = cache.upgrade() else {
            return;
        };
        // Not while a writer holds the store: this task shares the async workers.
        let generation = match strong.store.try_read() {
            Ok(store) => Some(store.generation()),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner().generation()),
            Err(TryLockError::WouldBlock) => None,
        };
        if let Some(generation) = generation
            && warmed_at != Some(generation)
        {
            strong.follow_writes();
            strong.warm().await;
            warmed_at = Some(generation);
        }
        drop(strong);
        tokio::time::sleep(WARM_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use http::header::{self, HeaderMap, HeaderValue};
    use streetlevel_model::{CreatorId, Image, ImageId, Point, SequenceId, Timestamp};

    use super::*;
    use crate::reply::finish;

    const LUND: (f64, f64) = (13.19, 55.70);
    const STOCKHOLM: (f64, f64) = (18.07, 59.33);

    fn image(id: u64, (lon, lat): (f64, f64), sequence: &str) -> Image {
        Image {
            id: ImageId(id),
            altitude: None,
            atomic_scale: None,
            camera_parameters: None,
            camera_type: None,
            captured_at: Timestamp(1_600_000_000_000 + i64::try_from(id).unwrap()),
            compass_angle: Some(90.0),
            computed_altitude: None,
            computed_compass_angle: None,
            computed_geometry: None,
            computed_rotation: None,
            creator: CreatorId(7),
            exif_orientation: None,
            geometry: Point::new(lon + f64::from(u32::try_from(id).unwrap()) * 1e-5, lat),
            height: 3000,
            width: 4000,
            is_pano: false,
            make: None,
            model: None,
            merge_cc: None,
            mesh: None,
            sequence: SequenceId(sequence.to_owned()),
            sfm_cluster: None,
            quality_score: None,
            organization: None,
        }
    }

    /// Sequences of 40 images at Lund (IDs 1–40) and at Stockholm (101–140).
    fn two_towns() -> Arc<RwLock<Store>> {
        let mut store = Store::in_memory();
        let mut images: Vec<Image> = (1..=40).map(|id| image(id, LUND, "lund")).collect();
        images.extend((101..=140).map(|id| image(id, STOCKHOLM, "stockholm")));
        store.insert_images(&images).unwrap();
        Arc::new(RwLock::new(store))
    }

    fn tile_at((lon, lat): (f64, f64), z: u8) -> TileId {
        TileId::containing(lon, lat, z).unwrap()
    }

    fn features(body: &[u8]) -> usize {
        if body.is_empty() {
            return 0;
        }
        streetlevel_mvt::decode(body)
            .unwrap()
            .layers
            .iter()
            .map(|layer| layer.features.len())
            .sum()
    }

    #[tokio::test]
    async fn a_write_invalidates_exactly_the_tiles_it_touches() {
        let store = two_towns();
        let cache = TileCache::new(Arc::clone(&store), 100);
        let lund = tile_at(LUND, 14);
        let stockholm = [tile_at(STOCKHOLM, 14), tile_at(STOCKHOLM, 8)];
        let world = TileId::new(0, 0, 0).unwrap();
        let mut before = Vec::new();
        for tile in [lund, stockholm[0], stockholm[1], world] {
            before.push(cache.tile(Tileset::Coverage, tile).await.unwrap());
        }
        assert_eq!(cache.stats().renders, 4);
        assert_eq!(
            features(&before[0].body),
            40 + 1,
            "40 images and their sequence"
        );

        store
            .write()
            .unwrap()
            .insert_images(&[image(41, LUND, "lund")])
            .unwrap();

        // Stockholm's tiles are untouched: served from the cache, the same bytes.
        for (tile, earlier) in stockholm.iter().zip(&before[1..3]) {
            let again = cache.tile(Tileset::Coverage, *tile).await.unwrap();
            assert!(Arc::ptr_eq(&again, earlier), "{tile} was rendered again");
        }
        assert_eq!(cache.stats().renders, 4);
        assert_eq!(cache.stats().hits, 2);
        // Lund's tile and the world tile show the new image.
        let lund_after = cache.tile(Tileset::Coverage, lund).await.unwrap();
        assert_eq!(features(&lund_after.body), 41 + 1);
        let world_after = cache.tile(Tileset::Coverage, world).await.unwrap();
        assert!(!Arc::ptr_eq(&world_after, &before[3]));
        assert_eq!(cache.stats().renders, 6);
        // Map feature tiles at Lund did not change either way.
        cache.tile(Tileset::Points, lund).await.unwrap();
        cache.tile(Tileset::Points, lund).await.unwrap();
        assert_eq!(cache.stats().renders, 7);
    }

    #[tokio::test]
    async fn concurrent_misses_of_one_tile_render_once() {
        let cache = Arc::new(TileCache::new(two_towns(), 100));
        // Hold the render slot so that every request arrives while the first still waits.
        let slot = cache.render_slots.acquire().await.unwrap();
        let requests: Vec<_> = (0..8)
            .map(|_| {
                let cache = Arc::clone(&cache);
                tokio::spawn(async move {
                    cache
                        .tile(Tileset::Coverage, tile_at(LUND, 14))
                        .await
                        .unwrap()
                })
            })
            .collect();
        // On this single-threaded runtime each yield runs every task until it waits.
        for _ in 0..16 {
            tokio::task::yield_now().await;
        }
        drop(slot);
        let mut tiles = Vec::new();
        for request in requests {
            tiles.push(request.await.unwrap());
        }
        assert_eq!(cache.stats().renders, 1);
        assert!(tiles.iter().all(|tile| Arc::ptr_eq(tile, &tiles[0])));
    }

    #[tokio::test]
    async fn a_cached_tile_answers_while_a_writer_holds_the_store() {
        let store = two_towns();
        let cache = TileCache::new(Arc::clone(&store), 100);
        let first = cache
            .tile(Tileset::Coverage, tile_at(LUND, 14))
            .await
            .unwrap();
        let (locked, is_locked) = std::sync::mpsc::channel();
        let (answered, is_answered) = std::sync::mpsc::channel::<()>();
        let released = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (store, released) = (Arc::clone(&store), Arc::clone(&released));
            std::thread::spawn(move || {
                let guard = store.write().unwrap();
                locked.send(()).unwrap();
                // A writer stalled on its database, until the tile is answered (or, if the
                // lookup waits for this lock, until the bound: then the test fails below).
                let _ = is_answered.recv_timeout(Duration::from_secs(20));
                released.store(true, Ordering::SeqCst);
                drop(guard);
            })
        };
        is_locked.recv().unwrap();
        // On this single-threaded runtime a lookup that waited for the lock would block it.
        let again = cache
            .tile(Tileset::Coverage, tile_at(LUND, 14))
            .await
            .unwrap();
        assert!(
            !released.load(Ordering::SeqCst),
            "the lookup waited for the writer"
        );
        let _ = answered.send(());
        writer.join().unwrap();
        assert!(Arc::ptr_eq(&first, &again));
    }

    fn fetch(tile: &CachedTile, accept_encoding: Option<&'static str>) -> http::Response<Bytes> {
        let mut headers = HeaderMap::new();
        if let Some(value) = accept_encoding {
            headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(value));
        }
        finish(
            &headers,
            false,
            tile.reply(tile.coding_for(&headers), 60),
            "r",
        )
    }

    #[test]
    fn gzip_brotli_and_identity_bodies_are_the_same_tile() {
        let store = two_towns();
        let store = store.read().unwrap();
        let tile = CachedTile::render(&store, Tileset::Coverage, tile_at(LUND, 14)).unwrap();
        assert!(tile.body.len() > 256);
        let identity = fetch(&tile, None);
        assert!(identity.headers().get(header::CONTENT_ENCODING).is_none());
        assert_eq!(identity.body(), &tile.body);

        let gzipped = fetch(&tile, Some("gzip"));
        assert_eq!(gzipped.headers()[header::CONTENT_ENCODING], "gzip");
        let mut decoded = Vec::new();
        flate2::read::GzDecoder::new(&gzipped.body()[..])
            .read_to_end(&mut decoded)
            .unwrap();
        assert_eq!(decoded, tile.body);

        let brotli = fetch(&tile, Some("gzip, deflate, br"));
        assert_eq!(brotli.headers()[header::CONTENT_ENCODING], "br");
        let mut decoded = Vec::new();
        brotli::Decompressor::new(&brotli.body()[..], 4096)
            .read_to_end(&mut decoded)
            .unwrap();
        assert_eq!(decoded, tile.body);

        // The stored bytes pass through: no compression per response.
        assert_eq!(
            Some(gzipped.body()),
            tile.gzip.get().and_then(Option::as_ref)
        );
        assert_eq!(
            Some(brotli.body()),
            tile.brotli.get().and_then(Option::as_ref)
        );
        // Made once: a second request gets the very same bytes.
        let again = fetch(&tile, Some("br"));
        assert_eq!(again.body().as_ptr(), brotli.body().as_ptr());
        // Each representation has its own ETag, and a conditional request of each gets a 304.
        let etags: Vec<_> = [&identity, &gzipped, &brotli]
            .map(|response| response.headers()[header::ETAG].clone())
            .into();
        assert!(etags[0] != etags[1] && etags[1] != etags[2] && etags[0] != etags[2]);
        for (value, etag) in [
            (None, &etags[0]),
            (Some("gzip"), &etags[1]),
            (Some("br"), &etags[2]),
        ] {
            let mut headers = HeaderMap::new();
            if let Some(value) = value {
                headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(value));
            }
            headers.insert(header::IF_NONE_MATCH, etag.clone());
            let response = finish(
                &headers,
                false,
                tile.reply(tile.coding_for(&headers), 60),
                "r",
            );
            assert_eq!(
                response.status(),
                http::StatusCode::NOT_MODIFIED,
                "{value:?}"
            );
        }
        // A gzip ETag does not validate the identity body.
        let mut headers = HeaderMap::new();
        headers.insert(header::IF_NONE_MATCH, etags[1].clone());
        assert_eq!(
            finish(&headers, false, tile.reply(Coding::Identity, 60), "r").status(),
            http::StatusCode::OK
        );
        // Each body's Vary names the header it depends on.
        assert_eq!(identity.headers()[header::VARY], "accept-encoding");
    }
}
