//! Query-string parsing: percent-decoding and typed parameters whose errors name the parameter.

use std::str::FromStr;

use percent_encoding::percent_decode_str;
use streetlevel_model::Timestamp;

use crate::Error;

/// A bounding box: left, bottom, right, top in degrees.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bbox {
    /// Minimum longitude.
    pub min_lon: f64,
    /// Minimum latitude.
    pub min_lat: f64,
    /// Maximum longitude.
    pub max_lon: f64,
    /// Maximum latitude.
    pub max_lat: f64,
}

/// The decoded parameters of a query string, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Decodes `raw` (the part after `?`, without it): `+` is a space, `%XX` is a byte, and
    /// invalid UTF-8 is a 400 naming the parameter. Not `form_urlencoded` (which the forms of
    /// `auth` and `web` use): it replaces invalid UTF-8 silently, and an API client should
    /// learn which parameter it mangled.
    pub fn parse(raw: &str) -> Result<Self, Error> {
        let mut pairs = Vec::new();
        for piece in raw.split('&').filter(|piece| !piece.is_empty()) {
            let (raw_name, raw_value) = piece.split_once('=').unwrap_or((piece, ""));
            let name = decode(raw_name).map_err(|()| {
                Error::bad_parameter(raw_name, "the name is not valid percent-encoded utf-8")
            })?;
            let value = decode(raw_value).map_err(|()| {
                Error::bad_parameter(&name, "the value is not valid percent-encoded utf-8")
            })?;
            pairs.push((name, value));
        }
        Ok(Query { pairs })
    }

    /// The value of `name`; when repeated, the last one.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// Whether `name` is present (even with an empty value).
    pub fn contains(&self, name: &str) -> bool {
        self.pairs.iter().any(|(key, _)| key == name)
    }

    /// The value of `name`, treating an empty value as absent.
    pub fn non_empty(&self, name: &str) -> Option<&str> {
        self.get(name).filter(|value| !value.trim().is_empty())
    }

    /// Every (name, value) pair in order.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }

    /// An integer parameter within `min..=max`.
    pub fn int<T>(&self, name: &str, min: T, max: T) -> Result<Option<T>, Error>
    where
        T: FromStr + PartialOrd + std::fmt::Display + Copy,
    {
        let Some(text) = self.non_empty(name) else {
            return Ok(None);
        };
        let value: T = text.trim().parse().map_err(|_| {
            Error::bad_parameter(name, format!("expected an integer, got {text:?}"))
        })?;
        if value < min || value > max {
            return Err(Error::bad_parameter(
                name,
                format!("must be between {min} and {max}, got {value}"),
            ));
        }
        Ok(Some(value))
    }

    /// A boolean parameter: `true`/`false` (also `1`/`0`).
    pub fn boolean(&self, name: &str) -> Result<Option<bool>, Error> {
        let Some(text) = self.non_empty(name) else {
            return Ok(None);
        };
        match text.trim().to_ascii_lowercase().as_str() {
            "true" | "1" => Ok(Some(true)),
            "false" | "0" => Ok(Some(false)),
            _ => Err(Error::bad_parameter(
                name,
                format!("expected true or false, got {text:?}"),
            )),
        }
    }

    /// An ISO 8601 date-time parameter.
    pub fn timestamp(&self, name: &str) -> Result<Option<Timestamp>, Error> {
        let Some(text) = self.non_empty(name) else {
            return Ok(None);
        };
        Timestamp::parse_iso8601(text).map(Some).map_err(|_| {
            Error::bad_parameter(
                name,
                format!(
                    "expected an ISO 8601 date-time such as 2021-05-01T10:00:00Z, got {text:?}"
                ),
            )
        })
    }

    /// A bounding box `left,bottom,right,top`: four finite numbers, longitudes in -180..=180,
    /// latitudes in -90..=90, left <= right and bottom <= top.
    pub fn bbox(&self, name: &str) -> Result<Option<Bbox>, Error> {
        let Some(text) = self.get(name) else {
            return Ok(None);
        };
        let parts: Vec<&str> = text.split(',').map(str::trim).collect();
        if parts.len() != 4 {
            return Err(Error::bad_parameter(
                name,
                format!(
                    "expected four comma-separated numbers left,bottom,right,top, got {text:?}"
                ),
            ));
        }
        let mut numbers = [0.0_f64; 4];
        for (slot, part) in numbers.iter_mut().zip(&parts) {
            let number: f64 = part
                .parse()
                .map_err(|_| Error::bad_parameter(name, format!("{part:?} is not a number")))?;
            if !number.is_finite() {
                return Err(Error::bad_parameter(
                    name,
                    format!("{part:?} is not finite"),
                ));
            }
            *slot = number;
        }
        let [min_lon, min_lat, max_lon, max_lat] = numbers;
        if !(-180.0..=180.0).contains(&min_lon) || !(-180.0..=180.0).contains(&max_lon) {
            return Err(Error::bad_parameter(
                name,
                "longitudes must be between -180 and 180",
            ));
        }
        if !(-90.0..=90.0).contains(&min_lat) || !(-90.0..=90.0).contains(&max_lat) {
            return Err(Error::bad_parameter(
                name,
                "latitudes must be between -90 and 90",
            ));
        }
        if min_lon > max_lon || min_lat > max_lat {
            return Err(Error::bad_parameter(
                name,
                "the box is inverted: expected left <= right and bottom <= top",
            ));
        }
        Ok(Some(Bbox {
            min_lon,
            min_lat,
            max_lon,
            max_lat,
        }))
    }

    /// A comma-separated list; empty items are dropped. `None` when absent or empty.
    pub fn list(&self, name: &str) -> Option<Vec<String>> {
        let items: Vec<String> = self
            .get(name)?
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(str::to_owned)
            .collect();
        (!items.is_empty()).then_some(items)
    }

    /// A comma-separated list of numeric IDs.
    pub fn id_list<T: FromStr>(&self, name: &str) -> Result<Option<Vec<T>>, Error> {
        let Some(items) = self.list(name) else {
            return Ok(None);
        };
        items
            .iter()
            .map(|item| {
                item.parse()
                    .map_err(|_| Error::bad_parameter(name, format!("{item:?} is not an id")))
            })
            .collect::<Result<Vec<T>, Error>>()
            .map(Some)
    }
}

fn decode(text: &str) -> Result<String, ()> {
    if !text.bytes().any(|byte| byte == b'+' || byte == b'%') {
        // Nothing to decode (the usual case): one copy instead of two and a scan.
        return Ok(text.to_owned());
    }
    let spaced = text.replace('+', " ");
    percent_decode_str(&spaced)
        .decode_utf8()
        .map(std::borrow::Cow::into_owned)
        .map_err(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bbox_error(text: &str) -> String {
        let query = Query::parse(&format!("bbox={text}")).unwrap();
        query.bbox("bbox").unwrap_err().to_string()
    }

    #[test]
    fn decodes_percent_and_plus() {
        let query = Query::parse("fields=id%2Cgeometry&make=Sony+Corp&model=A%20B&flag").unwrap();
        assert_eq!(query.get("fields"), Some("id,geometry"));
        assert_eq!(query.get("make"), Some("Sony Corp"));
        assert_eq!(query.get("model"), Some("A B"));
        assert!(query.contains("flag"));
        assert!(Query::parse("a=%FF").is_err());
    }

    #[test]
    fn bboxes_are_checked() {
        let query = Query::parse("bbox=13.1,55.6,13.3,55.8").unwrap();
        assert_eq!(
            query.bbox("bbox").unwrap(),
            Some(Bbox {
                min_lon: 13.1,
                min_lat: 55.6,
                max_lon: 13.3,
                max_lat: 55.8
            })
        );
        for bad in [
            "1,2,3",
            "a,2,3,4",
            "NaN,1,2,3",
            "inf,1,2,3",
            "0,0,-1,1",
            "0,1,1,0",
            "0,0,181,1",
            "0,-91,1,1",
        ] {
            assert!(bbox_error(bad).contains("(bbox)"), "{bad}");
        }
    }

    #[test]
    fn ints_booleans_dates_and_ids_name_the_parameter() {
        let query = Query::parse("limit=0&is_pano=maybe&start_captured_at=yesterday&image_ids=1,x")
            .unwrap();
        assert!(
            query
                .int::<u32>("limit", 1, 2000)
                .unwrap_err()
                .to_string()
                .contains("(limit)")
        );
        assert!(
            query
                .boolean("is_pano")
                .unwrap_err()
                .to_string()
                .contains("(is_pano)")
        );
        assert!(
            query
                .timestamp("start_captured_at")
                .unwrap_err()
                .to_string()
                .contains("(start_captured_at)")
        );
        assert!(
            query
                .id_list::<u64>("image_ids")
                .unwrap_err()
                .to_string()
                .contains("(image_ids)")
        );
        let good = Query::parse("limit=5&is_pano=true&image_ids=1,,2").unwrap();
        assert_eq!(good.int::<u32>("limit", 1, 2000).unwrap(), Some(5));
        assert_eq!(good.boolean("is_pano").unwrap(), Some(true));
        assert_eq!(good.id_list::<u64>("image_ids").unwrap(), Some(vec![1, 2]));
    }
}
