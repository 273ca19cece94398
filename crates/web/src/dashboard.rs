//! `GET/POST /dashboard`: the developer dashboard (`{dashboard_url}`, spec 5.1).
//!
//! The auth crate keeps only digests of client access tokens and secrets, so the dashboard
//! shows them in clear exactly once: right after the app is created or the value rotated.
//! Lost values are replaced by rotating them. Which user owns which app is kept by
//! [`crate::Registry`].

use streetlevel_import::Job;
use streetlevel_model::Timestamp;

use bytes::Bytes;
use http::request::Parts;
use http::{Response, StatusCode};
use maud::{Markup, html};
use streetlevel_auth::{App, AuthError, ClientId, Scope, Scopes, verify_csrf};

use crate::form::Form;
use crate::html::{self, SignedIn};
use crate::login::login_location;
use crate::web::{Session, Web};

/// Values shown once after an action.
struct OneTimeValues {
    app_name: String,
    /// Label and value of each, in order.
    values: Vec<(&'static str, String)>,
}

/// What the page says after an action.
#[derive(Default)]
struct Outcome {
    fresh: Option<OneTimeValues>,
    alert: Option<String>,
    /// The create form's values, kept after a rejected submission.
    name: String,
    callback_url: String,
    /// The takedown form's target, from `?takedown=<image ID or sequence key>` (the
    /// explorer's "Hide or delete it" link).
    takedown_target: String,
}

impl Web {
    pub(crate) fn dashboard(&self, parts: &Parts) -> Response<Bytes> {
        let session = match self.session(parts) {
            Ok(Some(session)) => session,
            Ok(None) => return html::redirect(StatusCode::FOUND, &login_location("/dashboard")),
            Err(html::Unavailable) => return html::unavailable_page("Developer dashboard"),
        };
        let query = Form::parse(parts.uri.query().unwrap_or(""));
        let takedown_target = query
            .get("takedown")
            .map(|target| target.trim().chars().take(256).collect())
            .unwrap_or_default();
        let outcome = Outcome {
            takedown_target,
            ..Outcome::default()
        };
        self.dashboard_page(StatusCode::OK, &session, &outcome)
    }

    pub(crate) fn dashboard_action(&self, parts: &Parts, body: &[u8]) -> Response<Bytes> {
        let session = match self.session(parts) {
            Ok(Some(session)) => session,
            Ok(None) => {
                return html::redirect(StatusCode::SEE_OTHER, &login_location("/dashboard"));
            }
            Err(html::Unavailable) => return html::unavailable_page("Developer dashboard"),
        };
        let form = Form::parse_bytes(body);
        if !form
            .get("csrf")
            .is_some_and(|given| verify_csrf(&session.token, given))
        {
            return html::error_page(
                StatusCode::FORBIDDEN,
                "Not done",
                "The form came from another site or an old page. Reload the dashboard and try again.",
            );
        }
        let done = match form.get("action") {
            Some("create") => self.create_app(&session, &form),
            Some(action @ ("rotate_secret" | "rotate_token")) => {
                self.rotate(&session, &form, action)
            }
            Some("privacy_request" | "blur_edit") => {
                let (status, said) = self.privacy_action(&session, &form);
                Ok((
                    status,
                    Outcome {
                        alert: Some(said),
                        ..Outcome::default()
                    },
                ))
            }
            Some("takedown") => {
                let (status, said) = self.takedown_action(&session, &form);
                Ok((
                    status,
                    Outcome {
                        alert: Some(said),
                        ..Outcome::default()
                    },
                ))
            }
            _ => Ok((
                StatusCode::BAD_REQUEST,
                Outcome {
                    alert: Some(String::from("Unknown action.")),
                    ..Outcome::default()
                },
            )),
        };
        match done {
            Ok((status, outcome)) => self.dashboard_page(status, &session, &outcome),
            // Nothing was changed, and the page could not list the apps either.
            Err(html::Unavailable) => html::unavailable_page("Not done"),
        }
    }

    /// The outcome of creating an app; `Err` with the 503 page when the database cannot be
    /// reached.
    fn create_app(
        &self,
        session: &Session,
        form: &Form,
    ) -> Result<(StatusCode, Outcome), html::Unavailable> {
        let name = form.get("name").unwrap_or("").trim();
        let callback_url = form.get("callback_url").unwrap_or("").trim();
        let rejected = |message: String| {
            Ok((
                StatusCode::BAD_REQUEST,
                Outcome {
                    alert: Some(message),
                    name: name.to_owned(),
                    callback_url: callback_url.to_owned(),
                    ..Outcome::default()
                },
            ))
        };
        let mut scopes = Vec::new();
        for value in form.all("scope") {
            match Scopes::parse(value) {
                Ok(parsed) => scopes.extend(parsed.iter()),
                Err(error) => return rejected(format!("{error}.")),
            }
        }
        if scopes.is_empty() {
            return rejected(String::from("Choose at least one scope."));
        }
        let scopes = Scopes::from_scopes(&scopes);
        let owner = Some(session.user.id);
        let credentials = match self
            .auth
            .create_owned_app(owner, name, callback_url, scopes)
        {
            Ok(credentials) => credentials,
            Err(error @ (AuthError::InvalidAppName | AuthError::InvalidCallbackUrl(_))) => {
                return rejected(format!("{error}."));
            }
            Err(error) => return server_failed(&error),
        };
        let fresh = OneTimeValues {
            app_name: name.to_owned(),
            values: vec![
                ("Client ID", credentials.client_id.to_string()),
                ("Client access token", credentials.client_token),
                ("Client secret", credentials.client_secret),
            ],
        };
        Ok((
            StatusCode::CREATED,
            Outcome {
                fresh: Some(fresh),
                ..Outcome::default()
            },
        ))
    }

    /// The outcome of rotating a value; `Err` with the 503 page when the database cannot be
    /// reached.
    fn rotate(
        &self,
        session: &Session,
        form: &Form,
        action: &str,
    ) -> Result<(StatusCode, Outcome), html::Unavailable> {
        let app = match form
            .get("client_id")
            .and_then(|text| text.parse::<ClientId>().ok())
            .map(|client_id| self.auth.app(client_id))
            .transpose()
        {
            Ok(app) => app.flatten(),
            Err(error) => return server_failed(&error),
        }
        .filter(|app| app.owner == Some(session.user.id));
        let Some(app) = app else {
            return Ok((
                StatusCode::NOT_FOUND,
                Outcome {
                    alert: Some(String::from("You have no app with this client ID.")),
                    ..Outcome::default()
                },
            ));
        };
        let rotated = if action == "rotate_secret" {
            self.auth
                .rotate_client_secret(app.client_id)
                .map(|secret| ("Client secret", secret))
        } else {
            self.auth
                .rotate_client_token(app.client_id)
                .map(|token| ("Client access token", token))
        };
        let (label, value) = match rotated {
            Ok(rotated) => rotated,
            Err(error) => return server_failed(&error),
        };
        let fresh = OneTimeValues {
            app_name: app.name,
            values: vec![("Client ID", app.client_id.to_string()), (label, value)],
        };
        Ok((
            StatusCode::OK,
            Outcome {
                fresh: Some(fresh),
                ..Outcome::default()
            },
        ))
    }

    fn dashboard_page(
        &self,
        status: StatusCode,
        session: &Session,
        outcome: &Outcome,
    ) -> Response<Bytes> {
        let csrf = session.csrf();
        let apps: Vec<App> = match self.auth.apps_owned_by(session.user.id) {
            Ok(apps) => apps,
            Err(error) => {
                return html::storage_failed(
                    &error,
                    "Dashboard unavailable",
                    "The server could not read your apps. Please try again later.",
                );
            }
        };
        let uploads =
            self.uploads.as_ref().map(|uploads| {
                uploads.jobs_of(session.user.id.0).map_or_else(
                    |_| html! {
                        p role="alert" class="alert" { "The server could not read your uploads." }
                    },
                    |jobs| uploads_section(&jobs),
                )
            });
        let main = html! {
            @if let Some(alert) = &outcome.alert {
                p role="alert" class="alert" { (alert) }
            }
            @if let Some(fresh) = &outcome.fresh {
                (fresh_section(fresh))
            }
            section aria-labelledby="apps" {
                h2 id="apps" { "Your apps" }
                @if apps.is_empty() {
                    p { "You have no apps yet. Create one below." }
                }
                @for app in &apps {
                    (app_article(app, &csrf))
                }
            }
            (create_form(&csrf, outcome))
            @if let Some(uploads) = uploads {
                (uploads)
            }
            @if let Some(images) = self.images_section(session, &csrf, &outcome.takedown_target) {
                (images)
            }
            @if let Some(queue) = self.privacy_queue_section(session, &csrf) {
                (queue)
            }
        };
        let signed_in = SignedIn {
            username: &session.user.username,
            csrf: &csrf,
        };
        html::html(
            status,
            html::page("Developer dashboard", Some(&signed_in), &main),
        )
    }
}

/// The user's uploads from the official uploader, newest first: what each became.
fn uploads_section(jobs: &[Job]) -> Markup {
    html! {
        section aria-labelledby="uploads" {
            h2 id="uploads" { "Your uploads" }
            @if jobs.is_empty() {
                p { "No uploads yet. Upload photos with " code { "mapillary_tools" } "." }
            } @else {
                table {
                    thead {
                        tr {
                            th { "Upload" } th { "Received" } th { "State" } th { "Files" }
                            th { "New images" } th { "Stored before" } th { "Refused" }
                            th { "Warnings" }
                        }
                    }
                    tbody {
                        @for job in jobs {
                            tr data-upload=(job.id) {
                                td { (job.id) }
                                td { (Timestamp(job.created_at).to_iso8601()) }
                                td data-state=(job.state.as_str()) { (job.state.as_str()) }
                                td { (job.files) }
                                td { (job.images) }
                                td { (job.duplicates) }
                                td {
                                    (job.refused.len())
                                    @if let Some(reason) = &job.reason {
                                        br; (reason)
                                    }
                                    @for (file, why) in &job.refused {
                                        br; (file) ": " (why)
                                    }
                                }
                                td {
                                    (job.warnings.len())
                                    @for (file, warning) in &job.warnings {
                                        br; (file) ": " (warning)
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A change the database refused: the 503 page when it could not be reached, else the
/// dashboard with a 500 and an alert.
fn server_failed(error: &AuthError) -> Result<(StatusCode, Outcome), html::Unavailable> {
    if error.is_unavailable() {
        return Err(html::Unavailable);
    }
    Ok((
        StatusCode::INTERNAL_SERVER_ERROR,
        Outcome {
            alert: Some(String::from(
                "The server failed to save the change. Please try again later.",
            )),
            ..Outcome::default()
        },
    ))
}

fn fresh_section(fresh: &OneTimeValues) -> Markup {
    html! {
        section aria-labelledby="fresh" class="fresh" {
            h2 id="fresh" { "Credentials of " (fresh.app_name) } "\n"
            p {
                "Copy them now: the server keeps only their digests and cannot show them again. If one is\nlost, rotate it."
            }
            dl {
                @for (index, (label, value)) in fresh.values.iter().enumerate() {
                    @let field = format!("fresh-{index}");
                    dt { label for=(field) { (label) } }
                    dd {
                        input id=(field) class="copy" type="text" readonly value=(value)
                            data-credential=(label.to_ascii_lowercase().replace(' ', "_"));
                    }
                }
            }
        }
    }
}

fn app_article(app: &App, csrf: &str) -> Markup {
    let client_id = app.client_id;
    let heading = format!("app-{client_id}");
    let scopes = app.scopes.to_string().replace(',', ", ");
    let rotate = |action: &str, label: &str| {
        html! {
            form method="post" action="/dashboard" class="inline" {
                "\n"
                input type="hidden" name="csrf" value=(csrf); "\n"
                input type="hidden" name="action" value=(action); "\n"
                input type="hidden" name="client_id" value=(client_id); "\n"
                button type="submit" { (label) }
            }
        }
    };
    html! {
        article aria-labelledby=(heading) class="app" data-client-id=(client_id) {
            "\n"
            h3 id=(heading) { (app.name) } "\n"
            dl {
                "\n"
                dt { label for={ (heading) "-id" } { "Client ID" } }
                dd { input id={ (heading) "-id" } class="copy" type="text" readonly value=(client_id); } "\n"
                dt { "Callback URL" } dd { code { (app.callback_url) } } "\n"
                dt { "Scopes" } dd { (scopes) } "\n"
                dt { "Client access token and client secret" }
                dd { "Shown once, when the app is created or the value is rotated." } "\n"
            } "\n"
            p {
                (rotate("rotate_token", "Rotate client access token")) " "
                (rotate("rotate_secret", "Rotate client secret"))
            } "\n"
        }
    }
}

fn create_form(csrf: &str, outcome: &Outcome) -> Markup {
    html! {
        section aria-labelledby="create" {
            h2 id="create" { "Create an app" } "\n"
            form method="post" action="/dashboard" class="stack" {
                "\n"
                input type="hidden" name="csrf" value=(csrf); "\n"
                input type="hidden" name="action" value="create"; "\n"
                p {
                    label for="app-name" { "Name" } "\n"
                    input id="app-name" name="name" type="text" required value=(outcome.name);
                } "\n"
                p {
                    label for="callback-url" { "Callback URL" } "\n"
                    input id="callback-url" name="callback_url" type="url" required
                        placeholder="https://app.example/callback" value=(outcome.callback_url);
                } "\n"
                fieldset {
                    legend { "Scopes" }
                    @for scope in Scope::ALL {
                        label {
                            input type="checkbox" name="scope" value=(scope.as_str())
                                checked[scope == Scope::Read];
                            " " (scope.as_str())
                        } " "
                    }
                } "\n"
                p { button type="submit" { "Create app" } } "\n"
            }
        }
    }
}
