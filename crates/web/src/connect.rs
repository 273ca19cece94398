//! `GET/POST /connect`: the authorization page of spec section 5.3.
//!
//! Everything about the request (client, redirect URI, scopes, state, PKCE challenge) is
//! checked by the auth crate, twice: when the page is shown and again when the answer comes back, from the query
//! the form carries. A request whose client or redirect URI is wrong gets an error page, never
//! a redirect; every other outcome redirects to the app's registered callback URL.

use bytes::Bytes;
use http::request::Parts;
use http::{Response, StatusCode};
use maud::html;
use streetlevel_auth::{
    AuthError, AuthStore, Authorization, AuthorizationErrorCode, AuthorizationRequest, Scope,
    verify_csrf,
};

use crate::form::Form;
use crate::html::{self, SignedIn};
use crate::login::login_location;
use crate::web::{Session, Web};

/// What a scope lets the app do, in words for the consent page.
fn scope_description(scope: Scope) -> &'static str {
    match scope {
        Scope::Read => "read street-level images and map data on your behalf",
        Scope::Write => "change data on your behalf",
        Scope::Upload => "upload images on your behalf",
        Scope::Blur => "have pictures blurred by this server",
    }
}

/// The outcome of checking a request: ask, or a finished response.
enum Checked {
    Prompt(AuthorizationRequest),
    Done(Response<Bytes>),
}

impl Web {
    fn check_authorization(&self, query: &str, status: StatusCode) -> Checked {
        match self.auth.authorization_request(Some(query)) {
            Ok(Authorization::Prompt(request)) if request.app.client_id == self.embed.0 => {
                Checked::Done(html::error_page(
                    StatusCode::BAD_REQUEST,
                    "Cannot authorize",
                    "This client ID belongs to the embed page, which cannot be authorized.",
                ))
            }
            Ok(Authorization::Prompt(request)) => Checked::Prompt(request),
            Ok(Authorization::Reject { location, .. }) => {
                Checked::Done(html::redirect(status, &location))
            }
            Err(error @ AuthError::Storage(_)) => Checked::Done(html::storage_failed(
                &error,
                "Cannot authorize",
                "The server failed while checking the request. Please try again later.",
            )),
            Err(error) => Checked::Done(html::error_page(
                StatusCode::BAD_REQUEST,
                "Cannot authorize",
                &format!(
                    "The app sent an authorization request that cannot be answered: {error}. \
                     Nothing was shared; tell the app's developer."
                ),
            )),
        }
    }

    pub(crate) fn connect_prompt(&self, parts: &Parts) -> Response<Bytes> {
        let query = parts.uri.query().unwrap_or("");
        let request = match self.check_authorization(query, StatusCode::FOUND) {
            Checked::Prompt(request) => request,
            Checked::Done(response) => return response,
        };
        let session = match self.session(parts) {
            Ok(Some(session)) => session,
            Ok(None) => {
                let next = format!("/connect?{query}");
                return html::redirect(StatusCode::FOUND, &login_location(&next));
            }
            Err(html::Unavailable) => return html::unavailable_page("Cannot authorize"),
        };
        consent_page(&request, &session)
    }

    pub(crate) fn connect_answer(&self, parts: &Parts, body: &[u8]) -> Response<Bytes> {
        let form = Form::parse_bytes(body);
        let request = match self
            .check_authorization(form.get("request").unwrap_or(""), StatusCode::SEE_OTHER)
        {
            Checked::Prompt(request) => request,
            Checked::Done(response) => return response,
        };
        let invalid = || {
            html::redirect(
                StatusCode::SEE_OTHER,
                &request.error_redirect(AuthorizationErrorCode::InvalidRequest),
            )
        };
        // The session may have expired, or been ended, since the page was shown.
        let session = match self.session(parts) {
            Ok(Some(session)) => session,
            Ok(None) => return invalid(),
            Err(html::Unavailable) => return html::unavailable_page("Cannot authorize"),
        };
        if !form
            .get("csrf")
            .is_some_and(|given| verify_csrf(&session.token, given))
        {
            return invalid();
        }
        let location = match form.get("decision") {
            Some("allow") => self
                .auth
                .approve(&request, session.user.id)
                .unwrap_or_else(|_| request.error_redirect(AuthorizationErrorCode::ServerError)),
            Some("deny") => AuthStore::deny(&request),
            _ => return invalid(),
        };
        html::redirect(StatusCode::SEE_OTHER, &location)
    }
}

fn consent_page(request: &AuthorizationRequest, session: &Session) -> Response<Bytes> {
    let csrf = session.csrf();
    let app_name = &request.app.name;
    // The challenge travels in the form's `request` query, so the code is bound to it.
    let pkce = match &request.code_challenge {
        Some(challenge) => format!(
            "This request is protected by PKCE ({}): only the app that started it can use your answer.",
            challenge.method.as_str()
        ),
        None => "This request is not protected by PKCE.".to_owned(),
    };
    let main = html! {
        section aria-labelledby="asks" {
            "\n"
            h2 id="asks" { span class="app-name" { (app_name) } " asks for access" } "\n"
            p {
                "The app " strong { (app_name) } " (client ID " (request.app.client_id)
                ") wants to use your account\n"
                strong { (session.user.username) } " to:"
            } "\n"
            ul class="scopes" {
                @for scope in request.scopes.iter() {
                    li { strong { (scope.as_str()) } ": " (scope_description(scope)) }
                }
            } "\n"
            p { "Your answer is sent to " code { (request.redirect_uri) } "." } "\n"
            p { (pkce) } "\n"
            form method="post" action="/connect" class="actions" {
                "\n"
                input type="hidden" name="request" value=(request.query_string()); "\n"
                input type="hidden" name="csrf" value=(csrf); "\n"
                button type="submit" name="decision" value="allow" class="primary" { "Allow" } "\n"
                button type="submit" name="decision" value="deny" { "Deny" } "\n"
            } "\n"
        }
    };
    let signed_in = SignedIn {
        username: &session.user.username,
        csrf: &csrf,
    };
    html::html(
        StatusCode::OK,
        html::page("Authorize an app", Some(&signed_in), &main),
    )
}
