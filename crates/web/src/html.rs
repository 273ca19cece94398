//! HTML escaping, the page layout shared by every page, and the responses that carry them.

use bytes::Bytes;
use http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HeaderName, HeaderValue, LOCATION,
    REFERRER_POLICY, SET_COOKIE, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use http::{Response, StatusCode};

/// `text` with the five HTML-special characters escaped, safe in text and quoted attributes.
pub(crate) fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            other => escaped.push(other),
        }
    }
    escaped
}

/// Who is signed in, for the page header: the username and the CSRF token of the sign-out form.
pub(crate) struct SignedIn<'a> {
    pub(crate) username: &'a str,
    pub(crate) csrf: &'a str,
}

/// A full page: header (banner, sign-out form), `main` with the title as `h1`, footer.
/// `main_html` must already be escaped.
pub(crate) fn page(title: &str, signed_in: Option<&SignedIn<'_>>, main_html: &str) -> String {
    let title = escape(title);
    let account = signed_in.map_or_else(String::new, |signed_in| {
        format!(
            r#"<nav aria-label="Account"><span>Signed in as <strong>{}</strong></span>
<a href="/dashboard">Dashboard</a>
<form method="post" action="/logout" class="inline"><input type="hidden" name="csrf" value="{}"><button type="submit">Sign out</button></form></nav>"#,
            escape(signed_in.username),
            escape(signed_in.csrf)
        )
    });
    format!(
        r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · streetlevel</title>
<link rel="stylesheet" href="/assets/streetlevel/site.css">
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header><p class="brand">streetlevel</p>{account}</header>
<main id="main">
<h1>{title}</h1>
{main_html}
</main>
<footer><p>streetlevel: street-level imagery and map data.</p></footer>
</body>
</html>
"##
    )
}

/// A page that only says what went wrong.
pub(crate) fn error_page(status: StatusCode, title: &str, message: &str) -> Response<Bytes> {
    let main = format!(r#"<p role="alert">{}</p>"#, escape(message));
    html(status, page(title, None, &main))
}

/// Headers every page carries: no caching of personal pages, no framing, no sniffing.
fn page_headers(response: &mut Response<Bytes>) {
    let headers = response.headers_mut();
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
}

/// An HTML response with the page headers.
pub(crate) fn html(status: StatusCode, body: String) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    page_headers(&mut response);
    response
}

/// A redirect to `location` (`302 Found` after a GET, `303 See Other` after a POST).
pub(crate) fn redirect(status: StatusCode, location: &str) -> Response<Bytes> {
    let mut response = Response::new(Bytes::new());
    *response.status_mut() = status;
    match HeaderValue::from_str(location) {
        Ok(value) => {
            response.headers_mut().insert(LOCATION, value);
        }
        Err(_) => {
            return error_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Cannot redirect",
                "The address to continue to is not valid.",
            );
        }
    }
    page_headers(&mut response);
    response
}

/// Adds a `Set-Cookie` header.
pub(crate) fn set_cookie(response: &mut Response<Bytes>, cookie: &str) {
    if let Ok(value) = HeaderValue::from_str(cookie) {
        response.headers_mut().append(SET_COOKIE, value);
    }
}

/// Replaces a header.
pub(crate) fn set_header(response: &mut Response<Bytes>, name: HeaderName, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        response.headers_mut().insert(name, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x" title='y'>&</a>"#),
            "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;"
        );
    }

    #[test]
    fn pages_have_landmarks_and_one_heading() {
        let body = page("Sign in", None, "<p>x</p>");
        assert!(body.contains("<main id=\"main\">"));
        assert!(body.contains("<header>"));
        assert!(body.contains("<footer>"));
        assert_eq!(body.matches("<h1>").count(), 1);
        assert!(body.contains("lang=\"en\""));
    }
}
