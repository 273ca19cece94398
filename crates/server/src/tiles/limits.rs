//! What the two size-bound tests of tiles (`overview_limits`, `sequence_limits`) share: the
//! bound, deterministic wide property values, and a tile as the server sends it.

use std::io::Write as _;

use flate2::Compression;
use flate2::write::GzEncoder;
use http::header::{self, HeaderMap, HeaderValue};
use streetlevel_model::SequenceId;
use streetlevel_mvt::TileId;
use streetlevel_store::Store;

use super::{CachedTile, Tileset};
use crate::reply::finish;

/// "At most 500 KB gzipped" (decimal kilobytes, the stricter reading).
pub(super) const MAX_COMPRESSED_BYTES: usize = 500_000;

/// `SplitMix64`: deterministic values without a dependency.
pub(super) struct Values(pub(super) u64);

impl Values {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A distinct-looking ID above 2^53 in the top 2^60 below `u64::MAX`: ten varint bytes.
    pub(super) fn id(&mut self) -> u64 {
        u64::MAX - (self.next() >> 4)
    }

    /// A sequence key of the real form: 22 alphanumeric characters.
    pub(super) fn sequence_key(&mut self) -> SequenceId {
        const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        SequenceId(
            (0..22)
                .map(|_| {
                    char::from(
                        ALPHABET[usize::try_from(self.next() % ALPHABET.len() as u64).unwrap()],
                    )
                })
                .collect(),
        )
    }
}

/// `tileset`/`tile` as encoded without a cache (so every call encodes afresh), and the body
/// the server sends to a client accepting gzip.
pub(super) fn served(store: &Store, tileset: Tileset, tile: TileId) -> (Vec<u8>, Vec<u8>) {
    let encoded = CachedTile::render(store, tileset, tile).unwrap();
    let mut headers = HeaderMap::new();
    headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
    let response = finish(
        &headers,
        false,
        encoded.reply(encoded.coding_for(&headers), 0),
        "tile-limits",
    );
    (encoded.body.to_vec(), response.into_body().to_vec())
}

/// The size of `bytes` gzipped at the default level, as a client's own gzip would make it.
pub(super) fn gzip_default(bytes: &[u8]) -> usize {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap().len()
}
