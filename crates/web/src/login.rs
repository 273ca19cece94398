//! `GET/POST /login` and `POST /logout`: password sign-in and the session cookie.
//!
//! The sign-in form is protected against login CSRF by a double-submit token: `GET /login`
//! sets a random `streetlevel_login` cookie and puts the same value in the form.

use bytes::Bytes;
use http::request::Parts;
use http::{Response, StatusCode};
use maud::html;
use streetlevel_auth::{AuthError, verify_csrf};
use streetlevel_ratelimit::{ClientAddr, SignInRefusal};

use crate::form::{Form, cookie, encode, same_site_path};
use crate::html;
use crate::web::{SESSION_COOKIE, Web};

/// The double-submit cookie of the sign-in form.
const LOGIN_COOKIE: &str = "streetlevel_login";
/// Where a sign-in goes when it was not sent from somewhere.
const DEFAULT_NEXT: &str = "/dashboard";
/// How long the sign-in form's token lives: an hour to type a password.
const LOGIN_FORM_SECONDS: u64 = 3600;

/// Whether two strings are equal, compared in time independent of where they differ.
pub(crate) fn constant_time_eq(left: &str, right: &str) -> bool {
    left.len() == right.len()
        && left
            .bytes()
            .zip(right.bytes())
            .fold(0_u8, |difference, (a, b)| difference | (a ^ b))
            == 0
}

/// The `/login?next=...` address that brings the browser back to `next` after signing in.
pub(crate) fn login_location(next: &str) -> String {
    format!("/login?next={}", encode(next))
}

impl Web {
    pub(crate) fn login_form(&self, parts: &Parts) -> Response<Bytes> {
        let query = Form::parse(parts.uri.query().unwrap_or(""));
        let next = query
            .get("next")
            .and_then(same_site_path)
            .unwrap_or(DEFAULT_NEXT);
        self.login_page(StatusCode::OK, next, "", None)
    }

    /// The sign-in page with a new form token (and its cookie).
    fn login_page(
        &self,
        status: StatusCode,
        next: &str,
        username: &str,
        alert: Option<&str>,
    ) -> Response<Bytes> {
        let form_token = self.random_token();
        let main = html! {
            @if let Some(alert) = alert {
                p role="alert" class="alert" { (alert) }
            }
            form method="post" action="/login" class="stack" {
                "\n"
                input type="hidden" name="csrf" value=(form_token); "\n"
                input type="hidden" name="next" value=(next); "\n"
                p {
                    label for="username" { "Username" } "\n"
                    input id="username" name="username" type="text" autocomplete="username" required autofocus value=(username);
                } "\n"
                p {
                    label for="password" { "Password" } "\n"
                    input id="password" name="password" type="password" autocomplete="current-password" required;
                } "\n"
                p { button type="submit" { "Sign in" } } "\n"
            }
        };
        let mut response = html::html(status, html::page("Sign in", None, &main));
        html::set_cookie(
            &mut response,
            &format!(
                "{LOGIN_COOKIE}={form_token}{}",
                self.cookie_attributes("/login", LOGIN_FORM_SECONDS)
            ),
        );
        response
    }

    pub(crate) fn login_submit(&self, parts: &Parts, body: &[u8]) -> Response<Bytes> {
        let form = Form::parse_bytes(body);
        let next = form
            .get("next")
            .and_then(same_site_path)
            .unwrap_or(DEFAULT_NEXT);
        let username = form.get("username").unwrap_or("");
        let form_token_ok = match (cookie(&parts.headers, LOGIN_COOKIE), form.get("csrf")) {
            (Some(expected), Some(given)) => constant_time_eq(expected, given),
            _ => false,
        };
        if !form_token_ok {
            return self.login_page(
                StatusCode::FORBIDDEN,
                next,
                username,
                Some("The sign-in form expired or came from another site. Please sign in again."),
            );
        }
        let password = form.get("password").unwrap_or("");
        let address = parts
            .extensions
            .get::<ClientAddr>()
            .map(|address| address.0.ip());
        // Throttled and queued before the password is hashed: a flood costs a lookup.
        let _hashing = match self.sign_in.admit(username, address) {
            Ok(pass) => pass,
            Err(SignInRefusal::Throttled(wait)) => {
                let seconds = wait.as_secs().max(1);
                let mut response = self.login_page(
                    StatusCode::TOO_MANY_REQUESTS,
                    next,
                    username,
                    Some(&format!(
                        "Too many sign-in attempts. Please try again in {seconds} seconds."
                    )),
                );
                html::set_header(
                    &mut response,
                    http::header::RETRY_AFTER,
                    &seconds.to_string(),
                );
                return response;
            }
            Err(SignInRefusal::Busy) => {
                let mut response = html::error_page(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Sign-in busy",
                    "Too many people are signing in right now. Please try again in a moment.",
                );
                html::set_header(&mut response, http::header::RETRY_AFTER, "1");
                return response;
            }
        };
        match self.auth.login(username, password) {
            Ok((_user, session_token)) => {
                let lifetime = self.auth.config().session_lifetime.as_secs();
                let mut response = html::redirect(StatusCode::SEE_OTHER, next);
                html::set_cookie(
                    &mut response,
                    &format!(
                        "{SESSION_COOKIE}={session_token}{}",
                        self.cookie_attributes("/", lifetime)
                    ),
                );
                html::set_cookie(
                    &mut response,
                    &format!("{LOGIN_COOKIE}={}", self.cookie_attributes("/login", 0)),
                );
                response
            }
            Err(
                AuthError::InvalidCredentials
                | AuthError::InvalidPassword(_)
                | AuthError::InvalidUsername(_),
            ) => self.login_page(
                StatusCode::UNAUTHORIZED,
                next,
                username,
                Some("Wrong username or password."),
            ),
            Err(error) => html::storage_failed(
                &error,
                "Sign-in failed",
                "The server could not check the password. Please try again later.",
            ),
        }
    }

    pub(crate) fn logout(&self, parts: &Parts, body: &[u8]) -> Response<Bytes> {
        let form = Form::parse_bytes(body);
        let clear = format!("{SESSION_COOKIE}={}", self.cookie_attributes("/", 0));
        let Some(session_token) = cookie(&parts.headers, SESSION_COOKIE) else {
            let mut response = html::redirect(StatusCode::SEE_OTHER, "/login");
            html::set_cookie(&mut response, &clear);
            return response;
        };
        if !form
            .get("csrf")
            .is_some_and(|given| verify_csrf(session_token, given))
        {
            return html::error_page(
                StatusCode::FORBIDDEN,
                "Not signed out",
                "The sign-out form came from another site or an old page. Use the Sign out button of a page you just loaded.",
            );
        }
        if let Err(error) = self.auth.revoke_session(session_token) {
            return html::storage_failed(
                &error,
                "Not signed out",
                "The server could not end the session. Please try again later.",
            );
        }
        let mut response = html::redirect(StatusCode::SEE_OTHER, "/login");
        html::set_cookie(&mut response, &clear);
        response
    }
}
