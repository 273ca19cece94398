//! Property values of features, one variant per MVT value type.

#[cfg(test)]
use crate::vector_tile::tile;

/// A feature property value. Each variant is one field of the MVT `Value` message, so a
/// value keeps its wire type through a round trip: integers are never widened to floats.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `string_value`.
    String(String),
    /// `float_value` (32 bits).
    Float(f32),
    /// `double_value` (64 bits).
    Double(f64),
    /// `int_value` (varint; efficient for non-negative numbers).
    Int(i64),
    /// `uint_value` (varint): IDs beyond 2^53 belong here.
    Uint(u64),
    /// `sint_value` (zigzag varint; efficient for negative numbers).
    Sint(i64),
    /// `bool_value`.
    Bool(bool),
}

impl Value {
    /// The string, if this is a string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(text) => Some(text),
            _ => None,
        }
    }

    /// The number as `i128` if it is one of the integer types, whatever its wire type.
    pub fn as_integer(&self) -> Option<i128> {
        match *self {
            Value::Int(number) | Value::Sint(number) => Some(i128::from(number)),
            Value::Uint(number) => Some(i128::from(number)),
            _ => None,
        }
    }

    /// The number as `f64` if it is a float or double.
    pub fn as_float(&self) -> Option<f64> {
        match *self {
            Value::Float(number) => Some(f64::from(number)),
            Value::Double(number) => Some(number),
            _ => None,
        }
    }

    /// The boolean, if this is a bool value.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(flag) => Some(flag),
            _ => None,
        }
    }

    /// The value of a message holding exactly one field, or the number of fields it holds
    /// (the prost-based decoding that the differential test compares with).
    #[cfg(test)]
    pub(crate) fn from_message(message: tile::Value) -> Result<Self, usize> {
        let tile::Value {
            string_value,
            float_value,
            double_value,
            int_value,
            uint_value,
            sint_value,
            bool_value,
        } = message;
        let mut found = Vec::with_capacity(1);
        if let Some(text) = string_value {
            found.push(Value::String(text));
        }
        if let Some(number) = float_value {
            found.push(Value::Float(number));
        }
        if let Some(number) = double_value {
            found.push(Value::Double(number));
        }
        if let Some(number) = int_value {
            found.push(Value::Int(number));
        }
        if let Some(number) = uint_value {
            found.push(Value::Uint(number));
        }
        if let Some(number) = sint_value {
            found.push(Value::Sint(number));
        }
        if let Some(flag) = bool_value {
            found.push(Value::Bool(flag));
        }
        if found.len() == 1 {
            found.pop().ok_or(0)
        } else {
            Err(found.len())
        }
    }

    /// A hashable identity for deduplication: floats by their bits, so `0.0` and `-0.0`
    /// stay distinct and a NaN equals itself.
    pub(crate) fn dedup_key(&self) -> ScalarKey {
        match *self {
            Value::String(_) => ScalarKey(0, 0),
            Value::Float(number) => ScalarKey(1, u64::from(number.to_bits())),
            Value::Double(number) => ScalarKey(2, number.to_bits()),
            Value::Int(number) => ScalarKey(3, number.cast_unsigned()),
            Value::Uint(number) => ScalarKey(4, number),
            Value::Sint(number) => ScalarKey(5, number.cast_unsigned()),
            Value::Bool(flag) => ScalarKey(6, u64::from(flag)),
        }
    }
}

/// Wire type and bits of a non-string value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ScalarKey(pub(crate) u8, pub(crate) u64);

impl From<&str> for Value {
    fn from(text: &str) -> Self {
        Value::String(text.to_owned())
    }
}

impl From<String> for Value {
    fn from(text: String) -> Self {
        Value::String(text)
    }
}

impl From<f32> for Value {
    fn from(number: f32) -> Self {
        Value::Float(number)
    }
}

impl From<f64> for Value {
    fn from(number: f64) -> Self {
        Value::Double(number)
    }
}

impl From<i64> for Value {
    /// `int_value`.
    fn from(number: i64) -> Self {
        Value::Int(number)
    }
}

impl From<u64> for Value {
    /// `uint_value`.
    fn from(number: u64) -> Self {
        Value::Uint(number)
    }
}

impl From<bool> for Value {
    fn from(flag: bool) -> Self {
        Value::Bool(flag)
    }
}
