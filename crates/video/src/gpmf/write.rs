//! Writing GPMF key-length-value entries, for the tests and the fuzz seeds: the readers' unit
//! tests and `examples/write_sample_videos.rs` (which writes `fuzz/seeds/`) build their GoPro
//! payloads with these, so that the format is written in one place. Nothing in the crate's
//! reading path uses them; they check nothing either: an entry says what it is told, so a test
//! can write a payload that lies.

/// One GPMF entry: the four-byte `key`, the type `kind` (`b'l'` for `i32`, `0` for a nested
/// container, ...), the size of one structure in bytes and how many there are (`repeat`), then
/// `data`, padded with zeros to a multiple of 4 bytes. `data` is written as given, whatever
/// `struct_size * repeat` says.
pub fn klv(key: [u8; 4], kind: u8, struct_size: u8, repeat: u16, data: &[u8]) -> Vec<u8> {
    let mut bytes = key.to_vec();
    bytes.push(kind);
    bytes.push(struct_size);
    bytes.extend_from_slice(&repeat.to_be_bytes());
    bytes.extend_from_slice(data);
    while !bytes.len().is_multiple_of(4) {
        bytes.push(0);
    }
    bytes
}

/// A container entry (`DEVC`, `STRM`) holding `body`, entries written already: type 0,
/// structures of 1 byte, as many as `body` has. `None` when `body` is longer than the 65,535
/// bytes such an entry can say.
pub fn nested(key: [u8; 4], body: &[u8]) -> Option<Vec<u8>> {
    let length = u16::try_from(body.len()).ok()?;
    Some(klv(key, 0, 1, length, body))
}

/// `values` as GPMF stores `l` (`i32`) data: big-endian, one after the other.
pub fn big_endian(values: &[i32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|value| value.to_be_bytes())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_a_header_and_data_padded_to_four_bytes() {
        assert_eq!(
            klv(*b"DVNM", b'c', 3, 1, b"MAX"),
            b"DVNMc\x03\x00\x01MAX\x00".to_vec()
        );
        assert_eq!(
            nested(*b"STRM", &klv(*b"GPSF", b'L', 4, 1, &[0, 0, 0, 3])),
            Some(b"STRM\x00\x01\x00\x0cGPSFL\x04\x00\x01\x00\x00\x00\x03".to_vec())
        );
        assert_eq!(
            nested(*b"DEVC", &vec![0; 65_535]).map(|entry| entry.len()),
            Some(65_544)
        );
        assert_eq!(nested(*b"DEVC", &vec![0; 65_536]), None);
        assert_eq!(
            big_endian(&[1, -2]),
            vec![0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFE]
        );
    }
}
