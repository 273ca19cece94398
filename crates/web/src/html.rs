//! The page layout shared by every page, and the responses that carry pages.
//!
//! Pages are [`maud`] templates: every value put into them is escaped where it lands, so no
//! page builds HTML from strings. The newlines written out keep the markup one element per
//! line, as a person reads it in the browser's source view and in the snapshot tests.

use bytes::Bytes;
use http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HeaderName, HeaderValue, LOCATION,
    REFERRER_POLICY, SET_COOKIE, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use http::{Response, StatusCode};
use maud::{Markup, PreEscaped, html};

/// The first line of every page (maud's own `DOCTYPE` spells it in capitals).
pub(crate) const DOCTYPE: PreEscaped<&str> = PreEscaped("<!doctype html>\n");

/// Who is signed in, for the page header: the username and the CSRF token of the sign-out form.
pub(crate) struct SignedIn<'a> {
    pub(crate) username: &'a str,
    pub(crate) csrf: &'a str,
}

/// A full page: header (banner, sign-out form), `main` with the title as `h1`, footer.
pub(crate) fn page(title: &str, signed_in: Option<&SignedIn<'_>>, main: &Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            "\n"
            head {
                "\n"
                meta charset="utf-8"; "\n"
                meta name="viewport" content="width=device-width, initial-scale=1"; "\n"
                title { (title) " · streetlevel" } "\n"
                link rel="stylesheet" href="/assets/streetlevel/site.css"; "\n"
            } "\n"
            body {
                "\n"
                a class="skip" href="#main" { "Skip to content" } "\n"
                header {
                    p class="brand" { "streetlevel" }
                    @if let Some(signed_in) = signed_in {
                        nav aria-label="Account" {
                            span { "Signed in as " strong { (signed_in.username) } } "\n"
                            a href="/dashboard" { "Dashboard" } "\n"
                            form method="post" action="/logout" class="inline" {
                                input type="hidden" name="csrf" value=(signed_in.csrf);
                                button type="submit" { "Sign out" }
                            }
                        }
                    }
                } "\n"
                main id="main" {
                    "\n"
                    h1 { (title) } "\n"
                    (main) "\n"
                } "\n"
                footer { p { "streetlevel: street-level imagery and map data." } } "\n"
            } "\n"
        } "\n"
    }
}

/// A page that only says what went wrong.
pub(crate) fn error_page(status: StatusCode, title: &str, message: &str) -> Response<Bytes> {
    let main = html! { p role="alert" { (message) } };
    html(status, page(title, None, &main))
}

/// How long a browser is told to wait when the database cannot be reached (`Retry-After`),
/// as the API's 503 says.
const UNAVAILABLE_RETRY_AFTER_SECS: &str = "5";

/// The page for a request that needs the database while it cannot be reached (PostgreSQL
/// restarting): 503 with `Retry-After`, so that the user, and a monitor, know to try again.
pub(crate) fn unavailable_page(title: &str) -> Response<Bytes> {
    let mut response = error_page(
        StatusCode::SERVICE_UNAVAILABLE,
        title,
        "The server cannot reach its database right now. Please try again in a few seconds.",
    );
    set_header(
        &mut response,
        http::header::RETRY_AFTER,
        UNAVAILABLE_RETRY_AFTER_SECS,
    );
    response
}

/// A request needed the database while it could not be reached: answer
/// [`unavailable_page`].
pub(crate) struct Unavailable;

/// The page for a failed database call: [`unavailable_page`] when the database could not be
/// reached, else a 500 saying `message`.
pub(crate) fn storage_failed(
    error: &streetlevel_auth::AuthError,
    title: &str,
    message: &str,
) -> Response<Bytes> {
    if error.is_unavailable() {
        unavailable_page(title)
    } else {
        error_page(StatusCode::INTERNAL_SERVER_ERROR, title, message)
    }
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
pub(crate) fn html(status: StatusCode, body: Markup) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(body.into_string()));
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
    fn pages_have_landmarks_and_one_heading() {
        let body = page("Sign in", None, &html! { p { "x" } }).into_string();
        assert!(body.starts_with("<!doctype html>\n<html lang=\"en\">"));
        assert!(body.contains("<main id=\"main\">"));
        assert!(body.contains("<header>"));
        assert!(body.contains("<footer>"));
        assert_eq!(body.matches("<h1>").count(), 1);
        assert!(body.contains("<p>x</p>"));
    }

    #[test]
    fn values_are_escaped_in_text_and_attributes() {
        let hostile = r#"<a href="x" title='y'>&</a>"#;
        let signed_in = SignedIn {
            username: hostile,
            csrf: hostile,
        };
        let body = page(hostile, Some(&signed_in), &html! {}).into_string();
        assert!(!body.contains("<a href=\"x\""), "{body}");
        assert!(
            body.contains(
                "<title>&lt;a href=&quot;x&quot; title='y'&gt;&amp;&lt;/a&gt; · streetlevel</title>"
            ),
            "{body}"
        );
        assert!(
            body.contains(r#"value="&lt;a href=&quot;x&quot; title='y'&gt;&amp;&lt;/a&gt;""#),
            "{body}"
        );
    }
}
