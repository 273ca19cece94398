//! `application/x-www-form-urlencoded` parsing and the redirect URL builder.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

/// Everything but RFC 3986's unreserved characters is percent-encoded in values we emit.
const VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The name-value pairs of a query string or form body, decoded by the WHATWG rules
/// (`form_urlencoded`: `+` is a space; bytes that are not UTF-8 after decoding are replaced).
pub(crate) fn parse_pairs(text: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(text.as_bytes())
        .map(|(name, value)| (name.into_owned(), value.into_owned()))
        .collect()
}

/// One form-encoded value (HTTP Basic's client ID and secret, RFC 6749 section 2.3.1):
/// `+` is a space, invalid UTF-8 is replaced.
pub(crate) fn decode(text: &str) -> String {
    let spaced = text.replace('+', " ");
    percent_decode_str(&spaced).decode_utf8_lossy().into_owned()
}

/// Percent-encodes `value` for a query string.
pub(crate) fn encode(value: &str) -> String {
    utf8_percent_encode(value, VALUE).to_string()
}

/// Looks up a parameter that may appear at most once (RFC 6749 section 3.1).
pub(crate) struct Params {
    pairs: Vec<(String, String)>,
}

/// A parameter appeared more than once.
#[derive(Debug)]
pub(crate) struct Repeated(pub(crate) String);

impl Params {
    pub(crate) fn new(pairs: Vec<(String, String)>) -> Self {
        Self { pairs }
    }

    /// The single value of `name`; `Ok(None)` when absent or empty.
    pub(crate) fn get(&self, name: &str) -> Result<Option<&str>, Repeated> {
        let mut values = self
            .pairs
            .iter()
            .filter(|(key, _)| key == name)
            .map(|(_, value)| value);
        let first = values.next();
        if values.next().is_some() {
            return Err(Repeated(name.to_owned()));
        }
        Ok(first.map(String::as_str).filter(|value| !value.is_empty()))
    }
}

/// The URL to redirect a browser to: `callback` with `params` appended to its query,
/// percent-encoded, after `?` or `&` as the callback requires, before any fragment.
///
/// ```
/// use streetlevel_auth::redirect_url;
/// let url = redirect_url("https://app.example/cb?x=1", &[("code", "c"), ("state", "a b&c")]);
/// assert_eq!(url, "https://app.example/cb?x=1&code=c&state=a%20b%26c");
/// ```
pub fn redirect_url(callback: &str, params: &[(&str, &str)]) -> String {
    let (base, fragment) = match callback.split_once('#') {
        Some((base, fragment)) => (base, Some(fragment)),
        None => (callback, None),
    };
    let mut url = base.to_owned();
    for (name, value) in params {
        if !url.contains('?') {
            url.push('?');
        } else if !url.ends_with('?') && !url.ends_with('&') {
            url.push('&');
        }
        url.push_str(&encode(name));
        url.push('=');
        url.push_str(&encode(value));
    }
    if let Some(fragment) = fragment {
        url.push('#');
        url.push_str(fragment);
    }
    url
}
