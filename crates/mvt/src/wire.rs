//! The protocol buffer wire format, read and written by hand for the vector tile schema.
//!
//! Decoding straight from the bytes skips the intermediate prost messages (one allocation per
//! feature, tag list and value), and encoding straight into one buffer skips prost's repeated
//! length computations. The reader accepts exactly what prost accepts for
//! `vector_tile.proto` (packed or unpacked repeated fields, unknown fields and groups skipped,
//! the last of repeated singular fields winning), which a differential test checks.

use crate::MvtError;

/// Wire type of a varint field.
pub(crate) const VARINT: u8 = 0;
/// Wire type of a 64-bit field.
pub(crate) const FIXED64: u8 = 1;
/// Wire type of a length-delimited field.
pub(crate) const LEN: u8 = 2;
/// Wire type of a group start (deprecated, skipped).
const START_GROUP: u8 = 3;
/// Wire type of a group end.
const END_GROUP: u8 = 4;
/// Wire type of a 32-bit field.
pub(crate) const FIXED32: u8 = 5;

/// How deep groups and messages may nest, as prost allows.
pub(crate) const RECURSION_LIMIT: u32 = 100;

/// A protocol buffer error, named after what was being read.
pub(crate) fn malformed(what: &str) -> MvtError {
    MvtError::Protobuf(what.to_owned())
}

/// A cursor over the bytes of one message.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, position: 0 }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.position >= self.bytes.len()
    }

    /// A varint of at most ten bytes whose value fits 64 bits.
    #[inline]
    pub(crate) fn varint(&mut self) -> Result<u64, MvtError> {
        let Some(&first) = self.bytes.get(self.position) else {
            return Err(malformed("truncated varint"));
        };
        if first < 0x80 {
            self.position += 1;
            return Ok(u64::from(first));
        }
        let mut value = 0u64;
        for index in 0..10 {
            let Some(&byte) = self.bytes.get(self.position + index) else {
                return Err(malformed("truncated varint"));
            };
            if index == 9 && byte > 1 {
                return Err(malformed("invalid varint"));
            }
            value |= u64::from(byte & 0x7f) << (7 * index);
            if byte < 0x80 {
                self.position += index + 1;
                return Ok(value);
            }
        }
        Err(malformed("invalid varint"))
    }

    /// A field key: field number and wire type.
    #[inline]
    pub(crate) fn key(&mut self) -> Result<(u32, u8), MvtError> {
        let key = self.varint()?;
        let key = u32::try_from(key).map_err(|_| malformed("invalid key value"))?;
        let wire_type = (key & 7) as u8;
        if wire_type > FIXED32 {
            return Err(malformed("invalid wire type value"));
        }
        let field = key >> 3;
        if field == 0 {
            return Err(malformed("invalid tag value: 0"));
        }
        Ok((field, wire_type))
    }

    /// The payload of a length-delimited field.
    #[inline]
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], MvtError> {
        let length = self.varint()?;
        let remaining = self.bytes.len() - self.position;
        let length = usize::try_from(length)
            .ok()
            .filter(|length| *length <= remaining)
            .ok_or_else(|| malformed("buffer underflow"))?;
        let payload = &self.bytes[self.position..self.position + length];
        self.position += length;
        Ok(payload)
    }

    /// A length-delimited UTF-8 string.
    pub(crate) fn string(&mut self) -> Result<&'a str, MvtError> {
        std::str::from_utf8(self.bytes()?)
            .map_err(|_| malformed("invalid string value: data is not UTF-8 encoded"))
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], MvtError> {
        let end = self.position + N;
        let bytes: [u8; N] = self
            .bytes
            .get(self.position..end)
            .and_then(|slice| slice.try_into().ok())
            .ok_or_else(|| malformed("buffer underflow"))?;
        self.position = end;
        Ok(bytes)
    }

    /// A little-endian 32-bit field.
    pub(crate) fn fixed32(&mut self) -> Result<[u8; 4], MvtError> {
        self.fixed::<4>()
    }

    /// A little-endian 64-bit field.
    pub(crate) fn fixed64(&mut self) -> Result<[u8; 8], MvtError> {
        self.fixed::<8>()
    }

    /// Skips the value of a field that the schema does not know.
    pub(crate) fn skip(&mut self, field: u32, wire_type: u8, depth: u32) -> Result<(), MvtError> {
        match wire_type {
            VARINT => self.varint().map(drop),
            FIXED64 => self.fixed64().map(drop),
            LEN => self.bytes().map(drop),
            FIXED32 => self.fixed32().map(drop),
            START_GROUP => {
                let depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| malformed("recursion limit reached"))?;
                loop {
                    let (inner_field, inner_type) = self.key()?;
                    if inner_type == END_GROUP {
                        if inner_field != field {
                            return Err(malformed("unexpected end group tag"));
                        }
                        return Ok(());
                    }
                    self.skip(inner_field, inner_type, depth)?;
                }
            }
            _ => Err(malformed("unexpected end group tag")),
        }
    }

    /// Appends the values of a repeated `uint32` field, packed or not, to `out` (values
    /// beyond 32 bits are truncated, as prost does).
    pub(crate) fn repeated_u32(
        &mut self,
        wire_type: u8,
        out: &mut Vec<u32>,
    ) -> Result<(), MvtError> {
        match wire_type {
            VARINT => {
                out.push(low_u32(self.varint()?));
                Ok(())
            }
            LEN => {
                let mut packed = Reader::new(self.bytes()?);
                // Every value takes at least one byte.
                out.reserve(packed.bytes.len());
                while !packed.is_empty() {
                    out.push(low_u32(packed.varint()?));
                }
                Ok(())
            }
            _ => Err(malformed("invalid wire type for a repeated uint32")),
        }
    }
}

/// A varint as a `uint32` (or, reinterpreted, an `int32`) field reads it: its low 32 bits,
/// as prost does.
#[inline]
pub(crate) fn low_u32(value: u64) -> u32 {
    #[allow(clippy::cast_possible_truncation)] // the truncation is protobuf's
    let low = value as u32;
    low
}

/// Checks a field's wire type against the schema's.
#[inline]
pub(crate) fn expect_wire_type(found: u8, expected: u8) -> Result<(), MvtError> {
    if found == expected {
        Ok(())
    } else {
        Err(malformed("invalid wire type"))
    }
}

/// The number of bytes of a varint.
#[inline]
pub(crate) fn varint_len(value: u64) -> usize {
    // 1 byte per started group of 7 bits, at least one: `(9 * bits + 64) / 64` equals
    // `bits.div_ceil(7)` for 1 to 64 bits (a test checks them all) with a shift instead of a
    // division.
    let bits = 64 - (value | 1).leading_zeros() as usize;
    (9 * bits + 64) >> 6
}

/// Appends a varint.
#[inline]
pub(crate) fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    // The low byte each time (`to_le_bytes()[0]` is `as u8`'s truncation, spelt out).
    while value >= 0x80 {
        out.push(value.to_le_bytes()[0] | 0x80);
        value >>= 7;
    }
    out.push(value.to_le_bytes()[0]);
}

/// Appends a field key.
#[inline]
pub(crate) fn put_key(out: &mut Vec<u8>, field: u32, wire_type: u8) {
    put_varint(out, u64::from((field << 3) | u32::from(wire_type)));
}

/// Appends a length-delimited field holding `payload`.
pub(crate) fn put_bytes(out: &mut Vec<u8>, field: u32, payload: &[u8]) {
    put_key(out, field, LEN);
    put_varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

/// The size of a length-delimited field with a payload of `length` bytes (field numbers
/// below 16 take one key byte).
pub(crate) fn bytes_field_len(length: usize) -> usize {
    1 + varint_len(length as u64) + length
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_length_formula_matches_groups_of_seven_bits() {
        for bits in 1..=64u32 {
            let value = u64::MAX >> (64 - bits);
            assert_eq!(varint_len(value), bits.div_ceil(7) as usize, "{bits}");
        }
        assert_eq!(varint_len(0), 1);
    }

    #[test]
    fn varint_lengths() {
        for value in [
            0u64,
            1,
            127,
            128,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            assert_eq!(out.len(), varint_len(value), "{value}");
            assert_eq!(Reader::new(&out).varint().unwrap(), value);
        }
    }

    #[test]
    fn overlong_varints_are_errors() {
        let eleven = [0xff; 11];
        assert!(Reader::new(&eleven).varint().is_err());
        let ten_too_big = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert!(Reader::new(&ten_too_big).varint().is_err());
        assert!(Reader::new(&[0x80]).varint().is_err());
    }
}
