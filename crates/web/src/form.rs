//! Query strings and form bodies, cookies, and the `next` parameter of the sign-in page.

use http::HeaderMap;
use http::header::COOKIE;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Everything but RFC 3986's unreserved characters is percent-encoded in values we emit.
const VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The decoded name-value pairs of a query string or an
/// `application/x-www-form-urlencoded` body (`+` is a space).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Form {
    pairs: Vec<(String, String)>,
}

impl Form {
    /// Decodes by the WHATWG rules (`form_urlencoded`): `+` is a space, bytes that are not
    /// UTF-8 after decoding are replaced.
    pub(crate) fn parse(text: &str) -> Self {
        Self::parse_bytes(text.as_bytes())
    }

    pub(crate) fn parse_bytes(body: &[u8]) -> Self {
        let pairs = form_urlencoded::parse(body)
            .map(|(name, value)| (name.into_owned(), value.into_owned()))
            .collect();
        Self { pairs }
    }

    /// The first value of `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// Every value of `name`, in order.
    pub(crate) fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.pairs
            .iter()
            .filter(move |(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Percent-encodes `value` for a query string.
pub(crate) fn encode(value: &str) -> String {
    utf8_percent_encode(value, VALUE).to_string()
}

/// The value of cookie `name` among the request's `Cookie` headers.
pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim_matches('"'))
        .filter(|value| !value.is_empty())
}

/// `next` if it is a path on this site (`/dashboard`, `/connect?...`), else `None`: the
/// sign-in page never sends a browser to another site.
pub(crate) fn same_site_path(next: &str) -> Option<&str> {
    let safe = next.starts_with('/')
        && !next.starts_with("//")
        && !next.starts_with("/\\")
        && !next.contains('\\')
        && !next.chars().any(char::is_control);
    safe.then_some(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_decode_plus_and_percent() {
        let form = Form::parse("a=1+2&b=%2Fx%3Fy&a=3&flag");
        assert_eq!(form.get("a"), Some("1 2"));
        assert_eq!(form.all("a").collect::<Vec<_>>(), ["1 2", "3"]);
        assert_eq!(form.get("b"), Some("/x?y"));
        assert_eq!(form.get("flag"), Some(""));
        assert_eq!(form.get("c"), None);
    }

    #[test]
    fn cookies_are_found_among_several() {
        let mut headers = HeaderMap::new();
        headers.append(COOKIE, "a=1; session=abc".parse().unwrap());
        headers.append(COOKIE, "other=2".parse().unwrap());
        assert_eq!(cookie(&headers, "session"), Some("abc"));
        assert_eq!(cookie(&headers, "other"), Some("2"));
        assert_eq!(cookie(&headers, "missing"), None);
    }

    #[test]
    fn only_same_site_paths_are_followed() {
        for good in ["/dashboard", "/connect?client_id=1&state=a%2Fb", "/"] {
            assert_eq!(same_site_path(good), Some(good));
        }
        for bad in [
            "https://evil.example/",
            "//evil.example/",
            "/\\evil.example",
            "evil",
            "",
            "/a\nb",
            "javascript:alert(1)",
        ] {
            assert_eq!(same_site_path(bad), None, "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn encode_then_parse_round_trips(value in ".*") {
            let form = Form::parse(&format!("v={}", encode(&value)));
            proptest::prop_assert_eq!(form.get("v"), Some(value.as_str()));
        }
    }
}
