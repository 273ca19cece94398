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

/// The decoded values of the parameter `name` in a form-encoded `text`, as [`parse_pairs`]
/// would find them, decoding only names and the values asked for: a request's other
/// parameters (`fields=...` on every API call) are not copied.
pub(crate) fn values_of<'a>(text: &'a str, name: &'a str) -> impl Iterator<Item = String> + 'a {
    text.split('&').filter_map(move |pair| {
        let (raw_name, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
        let matches = if raw_name.contains(['+', '%']) {
            decode(raw_name) == name
        } else {
            raw_name == name
        };
        matches.then(|| decode(raw_value))
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `values_of` finds what filtering `parse_pairs` by name finds, however the name and
    /// the value are encoded.
    #[test]
    fn values_of_agrees_with_parse_pairs() {
        let queries = [
            "",
            "access_token=abc",
            "fields=id,geometry&access_token=a%20b+c",
            "access%5Ftoken=encoded&access_token=plain",
            "access_token&access_token=&&access_token==x=y",
            "access+token=space&access_token=%FF%FE",
            "ACCESS_TOKEN=other&access_tokenx=other",
        ];
        for query in queries {
            let expected: Vec<String> = parse_pairs(query)
                .into_iter()
                .filter(|(name, _)| name == "access_token")
                .map(|(_, value)| value)
                .collect();
            let found: Vec<String> = values_of(query, "access_token").collect();
            assert_eq!(found, expected, "{query:?}");
        }
    }
}
