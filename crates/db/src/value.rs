//! The values that cross the seam: [`Param`] going in, [`ValueRef`] coming out of a [`Row`],
//! and [`FromValue`] turning a column into a Rust type. Five kinds, as in `SQLite`: integers are
//! `i64` (`BIGINT` in PostgreSQL), reals `f64`, text, blobs (`BYTEA`) and null.

use crate::DbError;

/// A statement parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Param<'a> {
    /// SQL `NULL`.
    Null,
    /// An integer (`INTEGER` in `SQLite`, `BIGINT` in PostgreSQL; also booleans as 0 and 1).
    Int(i64),
    /// A double-precision float.
    Real(f64),
    /// UTF-8 text.
    Text(&'a str),
    /// Bytes.
    Blob(&'a [u8]),
}

macro_rules! int_param {
    ($($type:ty),*) => {$(
        impl From<$type> for Param<'_> {
            fn from(value: $type) -> Self {
                Param::Int(i64::from(value))
            }
        }
    )*};
}
int_param!(i64, i32, i16, i8, u32, u16, u8, bool);

/// An unsigned 64-bit ID as the database keeps it: SQL has no unsigned 64-bit integer, so it is
/// the `i64` with the same bits (an ID above `i64::MAX` is a negative number there), read back
/// bit for bit by [`id_from_sql`]. This pair is the one place the crates turn IDs into column
/// values and back; a `u64` parameter and a `u64` column go through it.
#[must_use]
pub const fn id_to_sql(id: u64) -> i64 {
    id.cast_signed()
}

/// The ID an `i64` column holds (see [`id_to_sql`]).
#[must_use]
pub const fn id_from_sql(value: i64) -> u64 {
    value.cast_unsigned()
}

impl From<u64> for Param<'_> {
    fn from(value: u64) -> Self {
        Param::Int(id_to_sql(value))
    }
}

impl From<f64> for Param<'_> {
    fn from(value: f64) -> Self {
        Param::Real(value)
    }
}

impl From<f32> for Param<'_> {
    fn from(value: f32) -> Self {
        Param::Real(f64::from(value))
    }
}

impl<'a> From<&'a str> for Param<'a> {
    fn from(value: &'a str) -> Self {
        Param::Text(value)
    }
}

impl<'a> From<&'a String> for Param<'a> {
    fn from(value: &'a String) -> Self {
        Param::Text(value)
    }
}

impl<'a> From<&'a [u8]> for Param<'a> {
    fn from(value: &'a [u8]) -> Self {
        Param::Blob(value)
    }
}

impl<'a> From<&'a Vec<u8>> for Param<'a> {
    fn from(value: &'a Vec<u8>) -> Self {
        Param::Blob(value)
    }
}

impl<'a, const N: usize> From<&'a [u8; N]> for Param<'a> {
    fn from(value: &'a [u8; N]) -> Self {
        Param::Blob(value)
    }
}

impl<'a, T: Into<Param<'a>>> From<Option<T>> for Param<'a> {
    fn from(value: Option<T>) -> Self {
        value.map_or(Param::Null, Into::into)
    }
}

impl<'a, T: Copy + Into<Param<'a>>> From<&Option<T>> for Param<'a> {
    fn from(value: &Option<T>) -> Self {
        value.map_or(Param::Null, Into::into)
    }
}

/// Builds a `&[Param]` from expressions, each converted with `Param::from`.
///
/// ```
/// use streetlevel_db::{Param, params};
/// let name = String::from("a");
/// let list: &[Param<'_>] = params![1_i64, &name, None::<f64>];
/// assert_eq!(list, &[Param::Int(1), Param::Text("a"), Param::Null]);
/// ```
#[macro_export]
macro_rules! params {
    () => {
        &[] as &[$crate::Param<'_>]
    };
    ($($value:expr),+ $(,)?) => {
        &[$($crate::Param::from($value)),+] as &[$crate::Param<'_>]
    };
}

/// A column's value as read, borrowed from its row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    /// SQL `NULL`.
    Null,
    /// An integer (PostgreSQL's `SMALLINT`, `INTEGER`, `BIGINT` and `BOOLEAN` read as this).
    Int(i64),
    /// A float.
    Real(f64),
    /// Text.
    Text(&'a str),
    /// Bytes.
    Blob(&'a [u8]),
}

impl ValueRef<'_> {
    fn kind(&self) -> &'static str {
        match self {
            ValueRef::Null => "null",
            ValueRef::Int(_) => "integer",
            ValueRef::Real(_) => "real",
            ValueRef::Text(_) => "text",
            ValueRef::Blob(_) => "blob",
        }
    }
}

/// One row of a result.
pub trait Row {
    /// The value of column `index` (0-based).
    ///
    /// # Errors
    ///
    /// [`DbError::Column`] when there is no such column or its type is not one of the five.
    fn value(&self, index: usize) -> Result<ValueRef<'_>, DbError>;
}

impl dyn Row + '_ {
    /// Column `index` as `T`.
    ///
    /// # Errors
    ///
    /// [`DbError::Column`] when the column is missing or does not convert to `T`.
    pub fn get<T: FromValue>(&self, index: usize) -> Result<T, DbError> {
        let value = self.value(index)?;
        T::from_value(value).map_err(|expected| wrong_kind(index, expected, value))
    }

    // The readers below convert a column in place, borrowed, inlined into a per-row path
    // (the store's load reads a million rows of 27 columns, where `get`'s generic conversion
    // was a call each).

    /// Column `index` as an integer.
    ///
    /// # Errors
    ///
    /// [`DbError::Column`] when the column is missing or not an integer.
    #[inline]
    pub fn int(&self, index: usize) -> Result<i64, DbError> {
        match self.value(index)? {
            ValueRef::Int(number) => Ok(number),
            other => Err(wrong_kind(index, "integer", other)),
        }
    }

    /// Column `index` as an integer, or `None` for NULL.
    ///
    /// # Errors
    ///
    /// [`DbError::Column`] when the column is missing or another kind.
    #[inline]
    pub fn int_or_null(&self, index: usize) -> Result<Option<i64>, DbError> {
        match self.value(index)? {
            ValueRef::Int(number) => Ok(Some(number)),
            ValueRef::Null => Ok(None),
            other => Err(wrong_kind(index, "integer", other)),
        }
    }

    /// Column `index` as a float (`SQLite` keeps a whole `REAL` as an integer when it can).
    ///
    /// # Errors
    ///
    /// [`DbError::Column`] when the column is missing or not a number.
    #[inline]
    pub fn real(&self, index: usize) -> Result<f64, DbError> {
        match self.value(index)? {
            ValueRef::Real(number) => Ok(number),
            #[allow(clippy::cast_precision_loss)] // a whole REAL SQLite kept as an integer: exact
            ValueRef::Int(number) => Ok(number as f64),
            other => Err(wrong_kind(index, "real", other)),
        }
    }

    /// Column `index` as a float, or `None` for NULL.
    ///
    /// # Errors
    ///
    /// [`DbError::Column`] when the column is missing or another kind.
    #[inline]
    pub fn real_or_null(&self, index: usize) -> Result<Option<f64>, DbError> {
        match self.value(index)? {
            ValueRef::Real(number) => Ok(Some(number)),
            #[allow(clippy::cast_precision_loss)] // a whole REAL SQLite kept as an integer: exact
            ValueRef::Int(number) => Ok(Some(number as f64)),
            ValueRef::Null => Ok(None),
            other => Err(wrong_kind(index, "real", other)),
        }
    }

    /// Column `index` as borrowed text.
    ///
    /// # Errors
    ///
    /// [`DbError::Column`] when the column is missing or not text.
    #[inline]
    pub fn text(&self, index: usize) -> Result<&str, DbError> {
        match self.value(index)? {
            ValueRef::Text(text) => Ok(text),
            other => Err(wrong_kind(index, "text", other)),
        }
    }

    /// Column `index` as borrowed text, or `None` for NULL.
    ///
    /// # Errors
    ///
    /// [`DbError::Column`] when the column is missing or another kind.
    #[inline]
    pub fn text_or_null(&self, index: usize) -> Result<Option<&str>, DbError> {
        match self.value(index)? {
            ValueRef::Text(text) => Ok(Some(text)),
            ValueRef::Null => Ok(None),
            other => Err(wrong_kind(index, "text", other)),
        }
    }

    /// Column `index` as a borrowed blob, or `None` for NULL.
    ///
    /// # Errors
    ///
    /// [`DbError::Column`] when the column is missing or another kind.
    #[inline]
    pub fn blob_or_null(&self, index: usize) -> Result<Option<&[u8]>, DbError> {
        match self.value(index)? {
            ValueRef::Blob(bytes) => Ok(Some(bytes)),
            ValueRef::Null => Ok(None),
            other => Err(wrong_kind(index, "blob", other)),
        }
    }
}

/// The error of column `index` holding `found` where `expected` was read.
fn wrong_kind(index: usize, expected: &str, found: ValueRef<'_>) -> DbError {
    DbError::Column {
        index,
        message: format!("expected {expected}, found {}", found.kind()),
    }
}

/// A Rust type a column converts to.
pub trait FromValue: Sized {
    /// The value as `Self`, or the name of what was expected.
    ///
    /// # Errors
    ///
    /// The expected type's name when `value` does not fit.
    fn from_value(value: ValueRef<'_>) -> Result<Self, &'static str>;
}

impl FromValue for i64 {
    fn from_value(value: ValueRef<'_>) -> Result<Self, &'static str> {
        match value {
            ValueRef::Int(number) => Ok(number),
            _ => Err("integer"),
        }
    }
}

macro_rules! narrow_int {
    ($($type:ty),*) => {$(
        impl FromValue for $type {
            fn from_value(value: ValueRef<'_>) -> Result<Self, &'static str> {
                match value {
                    ValueRef::Int(number) => {
                        <$type>::try_from(number).map_err(|_| stringify!($type))
                    }
                    _ => Err(stringify!($type)),
                }
            }
        }
    )*};
}
narrow_int!(i32, u32, u16, u8, usize);

/// A `u64` is an ID, read bit for bit as [`id_from_sql`] says.
impl FromValue for u64 {
    fn from_value(value: ValueRef<'_>) -> Result<Self, &'static str> {
        match value {
            ValueRef::Int(number) => Ok(id_from_sql(number)),
            _ => Err("u64"),
        }
    }
}

impl FromValue for bool {
    fn from_value(value: ValueRef<'_>) -> Result<Self, &'static str> {
        match value {
            ValueRef::Int(number) => Ok(number != 0),
            _ => Err("boolean"),
        }
    }
}

impl FromValue for f64 {
    fn from_value(value: ValueRef<'_>) -> Result<Self, &'static str> {
        match value {
            ValueRef::Real(number) => Ok(number),
            // SQLite stores a whole REAL as an integer when it can.
            #[allow(clippy::cast_precision_loss)] // from an f64, so exact
            ValueRef::Int(number) => Ok(number as f64),
            _ => Err("real"),
        }
    }
}

impl FromValue for String {
    fn from_value(value: ValueRef<'_>) -> Result<Self, &'static str> {
        match value {
            ValueRef::Text(text) => Ok(text.to_owned()),
            _ => Err("text"),
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(value: ValueRef<'_>) -> Result<Self, &'static str> {
        match value {
            ValueRef::Blob(bytes) => Ok(bytes.to_vec()),
            _ => Err("blob"),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: ValueRef<'_>) -> Result<Self, &'static str> {
        match value {
            ValueRef::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
}

/// Rewrites `?N` placeholders (the form every statement is written in) to PostgreSQL's `$N`,
/// leaving string literals and quoted identifiers alone.
///
/// # Errors
///
/// A message when a `?` has no number after it: each statement names its parameters so that
/// both backends bind them the same way.
pub fn dollar_placeholders(sql: &str) -> Result<String, DbError> {
    let mut out = String::with_capacity(sql.len());
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(character) = chars.next() {
        match quote {
            Some(open) => {
                out.push(character);
                if character == open {
                    quote = None;
                }
            }
            None if character == '\'' || character == '"' => {
                quote = Some(character);
                out.push(character);
            }
            None if character == '?' => {
                if !chars.peek().is_some_and(char::is_ascii_digit) {
                    return Err(DbError::Statement(format!(
                        "a `?` without a number in {sql:?}: write `?1`, `?2`, …"
                    )));
                }
                out.push('$');
            }
            None => out.push(character),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_dollars_outside_quotes() {
        assert_eq!(
            dollar_placeholders("SELECT '?1', \"?x\" FROM t WHERE a = ?1 AND b = ?12").unwrap(),
            "SELECT '?1', \"?x\" FROM t WHERE a = $1 AND b = $12"
        );
        assert!(dollar_placeholders("SELECT ? FROM t").is_err());
    }

    #[test]
    fn options_and_integers_convert_both_ways() {
        assert_eq!(Param::from(Some(3_u32)), Param::Int(3));
        assert_eq!(Param::from(None::<&str>), Param::Null);
        assert_eq!(Param::from(true), Param::Int(1));
        assert_eq!(Option::<i64>::from_value(ValueRef::Null), Ok(None));
        assert_eq!(u8::from_value(ValueRef::Int(300)), Err("u8"));
        assert_eq!(f64::from_value(ValueRef::Int(2)), Ok(2.0));
        assert_eq!(String::from_value(ValueRef::Int(2)), Err("text"));
    }
}
