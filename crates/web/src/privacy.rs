//! Privacy pages: the public report form (`GET/POST /report?image_key=<id>`: anyone asks for
//! a blur or a takedown, no account needed), the dashboard's image page
//! (`GET/POST /dashboard/image?image_key=<id>`: draw boxes to blur, propose removing a blur)
//! and the administrators' privacy queue on the dashboard (requests and pending edits).
//!
//! The report form is protected like the sign-in form: a double-submit cookie
//! (`streetlevel_report`) whose value the form carries; every submission is charged to the
//! client address and to everyone before anything is stored (`FormThrottle`), and the import
//! crate bounds the text and the queue. What people type is stored as given and escaped where
//! a page shows it. Boxes are drawn by `/assets/streetlevel/draw.mjs` into hidden inputs as
//! shares of the upright picture; without JavaScript the text says what to blur.

use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;
use http::{Response, StatusCode};
use maud::{Markup, html};
use streetlevel_auth::verify_csrf;
use streetlevel_import::{
    BlurEdit, BlurRegion, BlurStatus, EditKind, EditState, ImportError, MAX_CONTACT_CHARS,
    MAX_REASON_CHARS, NewRequest, Privacy, PrivacyRefusal, PrivacyRequest, RequestKind,
    RequestState, Shares, StoredBox,
};
use streetlevel_model::{Clock as _, ImageId, Timestamp};
use streetlevel_moderation::Role;
use streetlevel_ratelimit::{ClientAddr, FormLimits, FormThrottle};

use crate::form::{Form, cookie};
use crate::html::{self, SignedIn};
use crate::login::login_location;
use crate::web::{Session, Web};

/// The double-submit cookie of the report form.
const REPORT_COOKIE: &str = "streetlevel_report";
/// How long the report form's token lives.
const REPORT_FORM_SECONDS: u64 = 3600;
/// Requests and edits listed in the queue at most.
const QUEUE_ROWS: usize = 100;

/// What the privacy pages need: the edits and requests, and the form's throttle.
pub(crate) struct PrivacyPages {
    pub(crate) privacy: Arc<Privacy>,
    pub(crate) throttle: FormThrottle,
    /// Submissions counted, to forget refilled addresses now and then.
    submissions: std::sync::atomic::AtomicU64,
}

/// Pages that draw: scripts and images are allowed from here (thumbnails come from the media
/// root, which may be another host).
const DRAWING_POLICY: &str = "default-src 'none'; style-src 'self'; img-src * data:; script-src 'self'; \
form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

fn drawing_page(status: StatusCode, body: Markup) -> Response<Bytes> {
    let mut response = html::html(status, body);
    html::set_header(
        &mut response,
        http::header::CONTENT_SECURITY_POLICY,
        DRAWING_POLICY,
    );
    response
}

/// `?v=<revision>` for a thumbnail URL shown on a page, so a browser does not show a copy it
/// cached before the last applied edit (media replies are cacheable for a day).
fn versioned(url: &str, revision: u64) -> String {
    format!("{url}&v={revision}")
}

/// What the report form asks for: the kind (`blur` when not given) and the box drawn, if
/// any; else what the page says.
pub(crate) fn report_fields(form: &Form) -> Result<(RequestKind, Option<Shares>), String> {
    let kind = RequestKind::parse(form.get("kind").unwrap_or("blur"))
        .ok_or_else(|| String::from("Choose whether to blur something or to remove the image."))?;
    Ok((kind, form_shares(form)?))
}

/// The box of a form, as shares of the upright picture; `Ok(None)` when none was drawn.
fn form_shares(form: &Form) -> Result<Option<Shares>, String> {
    let names = ["box_left", "box_top", "box_width", "box_height"];
    let values: Vec<&str> = names
        .iter()
        .map(|name| form.get(name).unwrap_or("").trim())
        .collect();
    if values.iter().all(|value| value.is_empty()) {
        return Ok(None);
    }
    let parsed: Option<Vec<f64>> = values
        .iter()
        .map(|value| value.parse::<f64>().ok().filter(|value| value.is_finite()))
        .collect();
    let Some(parsed) = parsed else {
        return Err(String::from("The box is not four numbers."));
    };
    Shares {
        left: parsed[0],
        top: parsed[1],
        width: parsed[2],
        height: parsed[3],
    }
    .checked()
    .map(Some)
    .ok_or_else(|| String::from("The box must lie inside the picture and be larger than a click."))
}

/// The inputs a drawing fills, and the picture to draw on.
fn drawing(thumb_url: Option<&str>, label: &str, regions: &[(String, [f64; 4])]) -> Markup {
    html! {
        figure class="draw" data-draw="box" {
            "\n"
            @if let Some(url) = thumb_url {
                img class="picture" src=(url) alt=(label) draggable="false";
            } @else {
                p { "No picture of this image is available." }
            }
            "\n"
            @for (label, [left, top, width, height]) in regions {
                span class="region" data-left=(left) data-top=(top) data-width=(width) data-height=(height) title=(label) {}
            }
            figcaption {
                "Drag on the picture to draw the box to blur. "
                span class="box-said" role="status" {}
                " "
                button type="button" class="clear-box" { "Clear the box" }
            }
        }
        input type="hidden" name="box_left" value="";
        input type="hidden" name="box_top" value="";
        input type="hidden" name="box_width" value="";
        input type="hidden" name="box_height" value="";
        "\n"
        script type="module" src="/assets/streetlevel/draw.mjs" {}
        "\n"
    }
}

/// A duration in words: `45 s`, `12 min`, `3 h 5 min`, `2 d 4 h`.
pub(crate) fn duration_words(millis: i64) -> String {
    let seconds = millis.max(0) / 1000;
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min", seconds / 60),
        3600..86_400 => format!("{} h {} min", seconds / 3600, seconds % 3600 / 60),
        _ => format!("{} d {} h", seconds / 86_400, seconds % 86_400 / 3600),
    }
}

impl Web {
    /// Takes privacy requests from the report form and lets signed-in users edit blur, with
    /// the form's default limits.
    #[must_use]
    pub fn with_privacy(self, privacy: Arc<Privacy>) -> Self {
        self.with_privacy_limits(privacy, FormLimits::default())
    }

    /// [`Web::with_privacy`] with the report form throttled by `limits`.
    #[must_use]
    pub fn with_privacy_limits(mut self, privacy: Arc<Privacy>, limits: FormLimits) -> Self {
        let throttle = FormThrottle::new(limits, self.auth.clock());
        self.privacy = Some(Arc::new(PrivacyPages {
            privacy,
            throttle,
            submissions: std::sync::atomic::AtomicU64::new(0),
        }));
        self
    }

    /// `GET /report?image_key=<id>`.
    pub(crate) fn report_form(&self, parts: &Parts) -> Response<Bytes> {
        let query = Form::parse(parts.uri.query().unwrap_or(""));
        let key = query.get("image_key").unwrap_or("");
        self.report_page(StatusCode::OK, key, None, &Form::default())
    }

    /// The report page for image `key`, with a new form token (and its cookie).
    fn report_page(
        &self,
        status: StatusCode,
        key: &str,
        alert: Option<&str>,
        kept: &Form,
    ) -> Response<Bytes> {
        if self.privacy.is_none() {
            return html::error_page(
                StatusCode::NOT_FOUND,
                "Report an image",
                "This server takes no privacy requests through this page; ask its operator.",
            );
        }
        let image = key
            .parse::<ImageId>()
            .ok()
            .and_then(|id| self.images.embed_image(id));
        let Some(image) = image else {
            return html::error_page(
                StatusCode::NOT_FOUND,
                "Report an image",
                &format!("There is no image with the ID {key}."),
            );
        };
        let form_token = self.random_token();
        let label = format!("Street-level image {}", image.id);
        let kind = kept.get("kind").unwrap_or("blur");
        let action = format!("/report?image_key={}", image.id);
        let main = html! {
            @if let Some(alert) = alert {
                p role="alert" class="alert" { (alert) }
            }
            p {
                "Ask the operator of this server to blur something in image " code { (image.id) }
                " (a face, a licence plate, a house, a person) or to take the image down. "
                "No account is needed; an administrator handles each request."
            } "\n"
            form method="post" action=(action) class="stack report" {
                "\n"
                input type="hidden" name="csrf" value=(form_token); "\n"
                fieldset {
                    legend { "What do you ask for?" }
                    label { input type="radio" name="kind" value="blur" checked[kind != "remove"]; " Blur something" } " "
                    label { input type="radio" name="kind" value="remove" checked[kind == "remove"]; " Remove the image" }
                } "\n"
                p {
                    label for="report-reason" { "What should be blurred, or why should the image be removed?" } "\n"
                    textarea id="report-reason" name="reason" required maxlength=(MAX_REASON_CHARS) rows="4" {
                        (kept.get("reason").unwrap_or(""))
                    }
                } "\n"
                (drawing(image.thumb_2048_url.as_deref(), &label, &[]))
                p {
                    label for="report-contact" { "How can we reach you? (optional: an email address or a phone number)" } "\n"
                    input id="report-contact" name="contact" type="text" maxlength=(MAX_CONTACT_CHARS)
                        value=(kept.get("contact").unwrap_or(""));
                } "\n"
                p { button type="submit" { "Send the request" } } "\n"
            }
        };
        let mut response =
            drawing_page(status, html::page("Report / request blurring", None, &main));
        html::set_cookie(
            &mut response,
            &format!(
                "{REPORT_COOKIE}={form_token}{}",
                self.cookie_attributes("/report", REPORT_FORM_SECONDS)
            ),
        );
        response
    }

    /// `POST /report?image_key=<id>`.
    pub(crate) fn report_submit(&self, parts: &Parts, body: &[u8]) -> Response<Bytes> {
        let query = Form::parse(parts.uri.query().unwrap_or(""));
        let key = query.get("image_key").unwrap_or("").to_owned();
        let Some(pages) = &self.privacy else {
            return self.report_page(StatusCode::NOT_FOUND, &key, None, &Form::default());
        };
        let form = Form::parse_bytes(body);
        let token_ok = match (cookie(&parts.headers, REPORT_COOKIE), form.get("csrf")) {
            (Some(expected), Some(given)) => crate::login::constant_time_eq(expected, given),
            _ => false,
        };
        if !token_ok {
            return self.report_page(
                StatusCode::FORBIDDEN,
                &key,
                Some("The form expired or came from another site: nothing was sent. Please send it again."),
                &form,
            );
        }
        let address = parts
            .extensions
            .get::<ClientAddr>()
            .map(|address| address.0.ip());
        let count = pages
            .submissions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if count % 1024 == 1023 {
            // The addresses' map stays as small as the last minutes' senders.
            pages.throttle.retain_recent();
        }
        if let Err(wait) = pages.throttle.check(address) {
            let seconds = wait.as_secs().max(1);
            let mut response = self.report_page(
                StatusCode::TOO_MANY_REQUESTS,
                &key,
                Some(&format!(
                    "Too many requests were sent: nothing was stored. Please try again in {seconds} seconds."
                )),
                &form,
            );
            html::set_header(
                &mut response,
                http::header::RETRY_AFTER,
                &seconds.to_string(),
            );
            return response;
        }
        let (kind, area) = match report_fields(&form) {
            Ok(fields) => fields,
            Err(said) => {
                return self.report_page(StatusCode::BAD_REQUEST, &key, Some(&said), &form);
            }
        };
        let Ok(image) = key.parse::<ImageId>() else {
            return self.report_page(StatusCode::NOT_FOUND, &key, None, &form);
        };
        let request = NewRequest {
            image,
            kind,
            reason: form.get("reason").unwrap_or("").to_owned(),
            area,
            contact: form.get("contact").map(str::to_owned),
        };
        match pages.privacy.submit(&request) {
            Ok(id) => {
                tracing::info!(request = id, image = %image, kind = kind.as_str(), "privacy request received");
                let main = html! {
                    p role="status" class="done" {
                        "Thank you. Your request number " strong data-request=(id) { (id) }
                        " is in the administrators' queue."
                    }
                    p { a href={ "/embed?image_key=" (image) } { "Back to the image" } }
                };
                html::html(
                    StatusCode::CREATED,
                    html::page("Request received", None, &main),
                )
            }
            Err(error) => {
                let (status, said) = refusal(&error);
                self.report_page(status, &key, Some(&said), &form)
            }
        }
    }

    /// `GET /dashboard/image?image_key=<id>`.
    pub(crate) fn image_page(&self, parts: &Parts) -> Response<Bytes> {
        let session = match self.session(parts) {
            Ok(Some(session)) => session,
            Ok(None) => {
                let path = parts
                    .uri
                    .path_and_query()
                    .map_or("/dashboard", http::uri::PathAndQuery::as_str);
                return html::redirect(StatusCode::FOUND, &login_location(path));
            }
            Err(html::Unavailable) => return html::unavailable_page("Image"),
        };
        let query = Form::parse(parts.uri.query().unwrap_or(""));
        let key = query.get("image_key").unwrap_or("").to_owned();
        self.image_page_for(StatusCode::OK, &session, &key, None)
    }

    /// `POST /dashboard/image?image_key=<id>`: a blur edit (`action` `add` with a drawn box,
    /// `remove` with a region's stored box).
    pub(crate) fn image_action(&self, parts: &Parts, body: &[u8]) -> Response<Bytes> {
        let session = match self.session(parts) {
            Ok(Some(session)) => session,
            Ok(None) => {
                return html::redirect(StatusCode::SEE_OTHER, &login_location("/dashboard"));
            }
            Err(html::Unavailable) => return html::unavailable_page("Image"),
        };
        let query = Form::parse(parts.uri.query().unwrap_or(""));
        let key = query.get("image_key").unwrap_or("").to_owned();
        let form = Form::parse_bytes(body);
        if !form
            .get("csrf")
            .is_some_and(|given| verify_csrf(&session.token, given))
        {
            return html::error_page(
                StatusCode::FORBIDDEN,
                "Not done",
                "The form came from another site or an old page. Reload the page and try again.",
            );
        }
        let (status, said) = self.blur_edit(&session, &key, &form);
        self.image_page_for(status, &session, &key, Some(&said))
    }

    fn blur_edit(&self, session: &Session, key: &str, form: &Form) -> (StatusCode, String) {
        let Some(pages) = &self.privacy else {
            return (
                StatusCode::NOT_FOUND,
                String::from("Blur edits are not enabled."),
            );
        };
        let Some(image) = key
            .parse::<ImageId>()
            .ok()
            .and_then(|id| pages.privacy.image(id))
        else {
            return (
                StatusCode::NOT_FOUND,
                String::from("There is no image with this ID."),
            );
        };
        let (may_apply, actor) = self.edit_rights(session, image.creator);
        let kind = match form.get("action") {
            Some("add") => EditKind::Add,
            Some("remove") => EditKind::Remove,
            _ => return (StatusCode::BAD_REQUEST, String::from("Unknown action.")),
        };
        let area = match kind {
            EditKind::Add => match form_shares(form) {
                Ok(Some(shares)) => match pages.privacy.stored_box(image.id, shares) {
                    Ok(area) => area,
                    Err(error) => return refusal(&error),
                },
                Ok(None) => {
                    return (
                        StatusCode::BAD_REQUEST,
                        String::from("Draw the box to blur on the picture first."),
                    );
                }
                Err(said) => return (StatusCode::BAD_REQUEST, said),
            },
            EditKind::Remove => {
                let number =
                    |name: &str| form.get(name).and_then(|value| value.parse::<u32>().ok());
                match (number("x"), number("y"), number("width"), number("height")) {
                    (Some(x), Some(y), Some(width), Some(height)) => StoredBox {
                        x,
                        y,
                        width,
                        height,
                    },
                    _ => return (StatusCode::BAD_REQUEST, String::from("Which region?")),
                }
            }
        };
        match pages
            .privacy
            .propose(image.id, kind, area, &actor, may_apply)
        {
            Ok(edit) if edit.state == EditState::Applied => (
                StatusCode::OK,
                format!(
                    "Applied edit {}: the picture and its thumbnails show it now.",
                    edit.id
                ),
            ),
            Ok(edit) => (
                StatusCode::ACCEPTED,
                format!("Edit {} is waiting for an administrator's review.", edit.id),
            ),
            Err(error) => refusal(&error),
        }
    }

    /// Whether the signed-in user may apply an edit to an image of `creator` at once, and
    /// who the record says proposed it.
    fn edit_rights(
        &self,
        session: &Session,
        creator: streetlevel_model::CreatorId,
    ) -> (bool, String) {
        let username = &session.user.username;
        match self
            .moderation
            .as_ref()
            .and_then(|moderation| moderation.role(username, creator))
        {
            Some(Role::Owner) => (true, format!("user {username}")),
            Some(Role::Administrator) => (true, format!("administrator {username}")),
            None => (false, format!("user {username}")),
        }
    }

    fn image_page_for(
        &self,
        status: StatusCode,
        session: &Session,
        key: &str,
        alert: Option<&str>,
    ) -> Response<Bytes> {
        let csrf = session.csrf();
        let signed_in = SignedIn {
            username: &session.user.username,
            csrf: &csrf,
        };
        let Some(pages) = &self.privacy else {
            return html::error_page(
                StatusCode::NOT_FOUND,
                "Image",
                "Blur edits are not enabled.",
            );
        };
        let Some(image) = key
            .parse::<ImageId>()
            .ok()
            .and_then(|id| pages.privacy.image(id))
        else {
            return html::error_page(
                StatusCode::NOT_FOUND,
                "Image",
                &format!("There is no image with the ID {key}."),
            );
        };
        let (may_apply, _) = self.edit_rights(session, image.creator);
        let kept = pages.privacy.unblurred_kept(image.id);
        let (regions, edits, revision) = match (
            pages.privacy.regions(image.id),
            pages.privacy.edits_of(image.id),
            pages.privacy.revision(image.id),
        ) {
            (Ok(regions), Ok(edits), Ok(revision)) => (regions, edits, revision),
            (Err(error), _, _) | (_, Err(error), _) | (_, _, Err(error)) => {
                return import_failed(&error, "Image");
            }
        };
        let thumb = self
            .images
            .embed_image(image.id)
            .and_then(|found| found.thumb_2048_url)
            .map(|url| versioned(&url, revision));
        let orientation = image.exif_orientation.unwrap_or(1);
        let stored = stored_dimensions(&image, orientation);
        let outlines: Vec<(String, [f64; 4])> = regions
            .iter()
            .filter(|region| !region.removed)
            .map(|region| {
                let area = region.area;
                (
                    format!("{} ({})", region.class, region.source),
                    streetlevel_blur_shares(area, stored, orientation),
                )
            })
            .collect();
        let action = format!("/dashboard/image?image_key={}", image.id);
        let label = format!("Street-level image {}", image.id);
        let main = html! {
            @if let Some(alert) = alert {
                p role="alert" class="alert" { (alert) }
            }
            p {
                "Image " code { (image.id) } " of sequence " code { (image.sequence) } ". "
                @if may_apply {
                    "Your edits apply at once: the picture and its thumbnails are made anew."
                } @else {
                    "Your edits wait for an administrator's review before they apply."
                }
            } "\n"
            @if kept {
                p class="kept" { "The unblurred original is kept: blur can be added and removed." }
            } @else {
                p class="not-kept" {
                    "This server keeps no unblurred original of this image: blur can only be added, not removed."
                }
            } "\n"
            p { a class="report" href={ "/report?image_key=" (image.id) } { "Report / request blurring" } } "\n"
            form method="post" action=(action) class="stack edit" {
                "\n"
                input type="hidden" name="csrf" value=(csrf); "\n"
                input type="hidden" name="action" value="add"; "\n"
                (drawing(thumb.as_deref(), &label, &outlines))
                p { button type="submit" { @if may_apply { "Blur this box" } @else { "Propose blurring this box" } } } "\n"
            }
            section aria-labelledby="regions" {
                h2 id="regions" { "Blurred regions" } "\n"
                (regions_table(&regions, kept, may_apply, &action, &csrf))
            }
            @if !edits.is_empty() {
                section aria-labelledby="edits" {
                    h2 id="edits" { "Edits" } "\n"
                    (edits_table(&edits, None, false))
                }
            }
        };
        drawing_page(
            status,
            html::page(&format!("Image {}", image.id), Some(&signed_in), &main),
        )
    }

    /// The administrators' queue on the dashboard: open requests, pending edits and recently
    /// handled requests with the time each took.
    pub(crate) fn privacy_queue_section(&self, session: &Session, csrf: &str) -> Option<Markup> {
        let pages = self.privacy.as_ref()?;
        let image_link = html! {
            form method="get" action="/dashboard/image" class="stack" {
                p {
                    label for="image-key" { "Open an image's page (to blur it, or see its blur)" } "\n"
                    input id="image-key" name="image_key" type="text" required maxlength="32";
                }
                p { button type="submit" { "Open" } }
            }
        };
        if !self.is_administrator(session) {
            return Some(html! {
                section aria-labelledby="blur" { h2 id="blur" { "Blur" } (image_link) }
            });
        }
        // The service's clock: how long a request has waited is only shown.
        let now = self.auth.clock().now().millis();
        let read = (
            pages.privacy.requests(Some(RequestState::Open), QUEUE_ROWS),
            pages.privacy.pending_edits(QUEUE_ROWS),
            pages.privacy.requests(None, 2 * QUEUE_ROWS),
        );
        let (Ok(open), Ok(pending), Ok(all)) = read else {
            return Some(html! {
                p role="alert" class="alert" { "The server could not read the privacy queue." }
            });
        };
        let handled: Vec<&PrivacyRequest> = all
            .iter()
            .filter(|request| request.state != RequestState::Open)
            .take(20)
            .collect();
        let decide = |id: u64, resolution: &str, apply: bool, label: &str| {
            html! {
                form method="post" action="/dashboard" class="inline" {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="action" value="privacy_request";
                    input type="hidden" name="request" value=(id);
                    input type="hidden" name="resolution" value=(resolution);
                    @if apply { input type="hidden" name="apply" value="1"; }
                    button type="submit" { (label) }
                }
            }
        };
        let blur_status = pages.privacy.blur_status().map(|status| {
            if let Ok(status) = status {
                blur_status_section(&status)
            } else {
                html! {
                    p role="alert" class="alert" { "The server could not count what each blurrer blurred." }
                }
            }
        });
        Some(html! {
            section aria-labelledby="privacy-queue" {
                h2 id="privacy-queue" { "Privacy queue" } "\n"
                p { "Requests from the report form and blur edits waiting for an administrator (you)." } "\n"
                @if let Some(blur_status) = blur_status { (blur_status) }
                h3 { "Open requests" } "\n"
                @if open.is_empty() {
                    p class="empty" { "No open requests." }
                } @else {
                    table class="requests" {
                        thead { tr { th { "Request" } th { "Image" } th { "Asks" } th { "Text" } th { "Box" } th { "Contact" } th { "Waiting" } th { "Handle" } } }
                        tbody {
                            @for request in &open {
                                tr data-request=(request.id) data-state=(request.state.as_str()) {
                                    td { (request.id) br; (Timestamp(request.created_at).to_iso8601()) }
                                    td { a href={ "/dashboard/image?image_key=" (request.image) } { (request.image) } }
                                    td { (request.kind.as_str()) }
                                    td class="reason" { (request.reason) }
                                    td { @if request.area.is_some() { "drawn" } @else { "none" } }
                                    td class="contact" { (request.contact.as_deref().unwrap_or("")) }
                                    td class="waiting" { (duration_words(request.handling_millis(now))) }
                                    td {
                                        @if request.area.is_some() && request.kind == RequestKind::Blur {
                                            (decide(request.id, "done", true, "Apply the blur")) " "
                                        }
                                        (decide(request.id, "done", false, "Mark done")) " "
                                        (decide(request.id, "refused", false, "Refuse"))
                                    }
                                }
                            }
                        }
                    }
                } "\n"
                h3 { "Blur edits waiting for review" } "\n"
                @if pending.is_empty() {
                    p class="empty" { "No edits are waiting." }
                } @else {
                    (edits_table(&pending, Some(csrf), true))
                } "\n"
                h3 { "Recently handled requests" } "\n"
                (handled_table(&handled, now))
                (image_link)
            }
        })
    }

    /// The dashboard's queue forms (`action` `privacy_request` or `blur_edit`), for
    /// administrators: the status and the sentence the dashboard shows.
    pub(crate) fn privacy_action(&self, session: &Session, form: &Form) -> (StatusCode, String) {
        let Some(pages) = &self.privacy else {
            return (
                StatusCode::NOT_FOUND,
                String::from("The privacy queue is not enabled."),
            );
        };
        if !self.is_administrator(session) {
            return (
                StatusCode::FORBIDDEN,
                String::from("Only administrators handle the privacy queue."),
            );
        }
        let actor = format!("administrator {}", session.user.username);
        if form.get("action") == Some("privacy_request") {
            resolve_request(&pages.privacy, &actor, form)
        } else {
            decide_edit(&pages.privacy, &actor, form)
        }
    }
}

fn form_number(form: &Form, name: &str) -> Option<u64> {
    form.get(name).and_then(|value| value.parse::<u64>().ok())
}

/// The queue's request form: resolve as done or refused, applying the box with `apply`.
fn resolve_request(privacy: &Privacy, actor: &str, form: &Form) -> (StatusCode, String) {
    let Some(id) = form_number(form, "request") else {
        return (StatusCode::BAD_REQUEST, String::from("Which request?"));
    };
    let Some(state) = form
        .get("resolution")
        .and_then(RequestState::parse)
        .filter(|state| *state != RequestState::Open)
    else {
        return (
            StatusCode::BAD_REQUEST,
            String::from("Resolve as done or refused."),
        );
    };
    let apply = form.get("apply") == Some("1");
    match privacy.resolve(id, state, actor, apply) {
        Ok((request, Some(edit))) => (
            StatusCode::OK,
            format!(
                "Request {} is {}: edit {} blurred its box.",
                request.id,
                request.state.as_str(),
                edit.id
            ),
        ),
        Ok((request, None)) => (
            StatusCode::OK,
            format!("Request {} is {}.", request.id, request.state.as_str()),
        ),
        Err(error) => refusal(&error),
    }
}

/// The queue's edit form: apply or refuse a pending edit.
fn decide_edit(privacy: &Privacy, actor: &str, form: &Form) -> (StatusCode, String) {
    let Some(id) = form_number(form, "edit") else {
        return (StatusCode::BAD_REQUEST, String::from("Which edit?"));
    };
    let done = match form.get("decision") {
        Some("apply") => privacy.apply(id, actor),
        Some("refuse") => privacy.refuse(id, actor),
        _ => return (StatusCode::BAD_REQUEST, String::from("Apply or refuse?")),
    };
    match done {
        Ok(edit) => (
            StatusCode::OK,
            format!("Edit {} is {}.", edit.id, edit.state.as_str()),
        ),
        Err(error) => refusal(&error),
    }
}

/// The stored size of an image whose entity has the upright size (Exif orientation 5 to 8
/// swap the sides).
fn stored_dimensions(image: &streetlevel_model::Image, orientation: u8) -> (u32, u32) {
    if (5..=8).contains(&orientation) {
        (image.height, image.width)
    } else {
        (image.width, image.height)
    }
}

fn streetlevel_blur_shares(area: StoredBox, stored: (u32, u32), orientation: u8) -> [f64; 4] {
    streetlevel_blur::stored_to_upright_shares(
        (area.x, area.y, area.width, area.height),
        stored,
        orientation,
    )
}

/// The regions of an image's blur, each not removed with a form to remove it (only when the
/// unblurred original is `kept`).
fn regions_table(
    regions: &[BlurRegion],
    kept: bool,
    may_apply: bool,
    action: &str,
    csrf: &str,
) -> Markup {
    html! {
        @if regions.is_empty() {
            p { "Nothing is blurred in this image." }
        } @else {
            table {
                thead { tr { th { "What" } th { "Found by" } th { "Box (stored pixels)" } th { "" } } }
                tbody {
                    @for region in regions {
                        tr data-region=(format!("{},{},{},{}", region.area.x, region.area.y, region.area.width, region.area.height)) {
                            td { (region.class) }
                            td { (region.source) }
                            td { (region.area.x) ", " (region.area.y) ", " (region.area.width) " × " (region.area.height) }
                            td {
                                @if region.removed {
                                    "removed"
                                } @else if kept {
                                    form method="post" action=(action) class="inline" {
                                        input type="hidden" name="csrf" value=(csrf);
                                        input type="hidden" name="action" value="remove";
                                        input type="hidden" name="x" value=(region.area.x);
                                        input type="hidden" name="y" value=(region.area.y);
                                        input type="hidden" name="width" value=(region.area.width);
                                        input type="hidden" name="height" value=(region.area.height);
                                        button type="submit" {
                                            @if may_apply { "Remove this blur" } @else { "Propose removing this blur" }
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
}

/// Recently handled requests, with the time each took.
fn handled_table(handled: &[&PrivacyRequest], now: i64) -> Markup {
    html! {
        @if handled.is_empty() {
            p class="empty" { "None yet." }
        } @else {
            table class="handled" {
                thead { tr { th { "Request" } th { "Image" } th { "State" } th { "Time to handle" } th { "By" } } }
                tbody {
                    @for request in handled {
                        tr data-request=(request.id) data-state=(request.state.as_str()) {
                            td { (request.id) }
                            td { (request.image) }
                            td { (request.state.as_str()) }
                            td class="handling" { (duration_words(request.handling_millis(now))) }
                            td { (request.resolved_by.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
        }
    }
}

fn edits_table(edits: &[BlurEdit], csrf: Option<&str>, with_image: bool) -> Markup {
    let decide = |id: u64, decision: &str, label: &str, csrf: &str| {
        html! {
            form method="post" action="/dashboard" class="inline" {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="action" value="blur_edit";
                input type="hidden" name="edit" value=(id);
                input type="hidden" name="decision" value=(decision);
                button type="submit" { (label) }
            }
        }
    };
    html! {
        table class="edits" {
            thead {
                tr {
                    th { "Edit" }
                    @if with_image { th { "Image" } }
                    th { "Does" } th { "Box (stored pixels)" } th { "Proposed by" } th { "State" }
                    @if csrf.is_some() { th { "Review" } }
                }
            }
            tbody {
                @for edit in edits {
                    tr data-edit=(edit.id) data-state=(edit.state.as_str()) {
                        td { (edit.id) br; (Timestamp(edit.proposed_at).to_iso8601()) }
                        @if with_image {
                            td { a href={ "/dashboard/image?image_key=" (edit.image) } { (edit.image) } }
                        }
                        td { @if edit.kind == EditKind::Add { "blur a box" } @else { "remove a blur" } }
                        td { (edit.area.x) ", " (edit.area.y) ", " (edit.area.width) " × " (edit.area.height) }
                        td { (edit.proposed_by) }
                        td { (edit.state.as_str()) }
                        @if let Some(csrf) = csrf {
                            td {
                                (decide(edit.id, "apply", "Apply", csrf)) " "
                                (decide(edit.id, "refuse", "Refuse", csrf))
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The status and sentence of a refused edit or request.
fn refusal(error: &ImportError) -> (StatusCode, String) {
    match error {
        ImportError::Privacy(refusal) => {
            let status = match refusal {
                PrivacyRefusal::UnknownImage | PrivacyRefusal::Unknown => StatusCode::NOT_FOUND,
                PrivacyRefusal::Handled | PrivacyRefusal::Changed(_) => StatusCode::CONFLICT,
                PrivacyRefusal::Impossible(_) => StatusCode::UNPROCESSABLE_ENTITY,
                PrivacyRefusal::Invalid(_) => StatusCode::BAD_REQUEST,
                PrivacyRefusal::QueueFull => StatusCode::SERVICE_UNAVAILABLE,
            };
            let mut said = refusal.to_string();
            if let Some(first) = said.get(..1) {
                said = format!("{}{}.", first.to_uppercase(), &said[1..]);
            }
            (status, said)
        }
        error if error.is_unavailable() => (
            StatusCode::SERVICE_UNAVAILABLE,
            String::from(
                "The database cannot be reached: nothing was changed. Try again in a few seconds.",
            ),
        ),
        error => {
            tracing::error!(%error, "a privacy request or blur edit failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                String::from("The server failed to save this. Please try again later."),
            )
        }
    }
}

fn import_failed(error: &ImportError, title: &str) -> Response<Bytes> {
    if error.is_unavailable() {
        html::unavailable_page(title)
    } else {
        html::error_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            title,
            "The server could not read this image's blur. Please try again later.",
        )
    }
}

/// How the images stand against the blurrer configured now: those an older model (or
/// another service) blurred, and those never blurred, are what `streetlevel reblur` redoes.
fn blur_status_section(status: &BlurStatus) -> Markup {
    let (stale, never) = (status.stale(), status.never_blurred());
    html! {
        h3 id="blur-status" { "Blur models" } "\n"
        @if status.outdated() == 0 {
            p class="blur-status" data-stale="0" data-never-blurred="0" {
                "All " (status.images) " images are blurred by the blurrer configured now."
            } "\n"
        } @else {
            p role="alert" class="alert blur-status" data-stale=(stale) data-never-blurred=(never) {
                strong { (stale) } " of " (status.images) " images are blurred by an older model"
                @if never > 0 { ", and " strong { (never) } " were never blurred" }
                ": they may show faces or plates the blurrer configured now would hide. Run "
                code { "streetlevel reblur" } " on this server's data to blur them again (it can run while the server serves, and an interrupted run is taken up by the next)."
            } "\n"
            @if !status.older.is_empty() {
                table class="older-blurrers" {
                    thead { tr { th { "Blurred by" } th { "Images" } } }
                    tbody {
                        @for (blurrer, count) in &status.older {
                            tr { td { code { (blurrer) } } td { (count) } }
                        }
                    }
                } "\n"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_words() {
        assert_eq!(duration_words(-5), "0 s");
        assert_eq!(duration_words(45_000), "45 s");
        assert_eq!(duration_words(12 * 60_000 + 5), "12 min");
        assert_eq!(duration_words(3 * 3_600_000 + 5 * 60_000), "3 h 5 min");
        assert_eq!(duration_words(2 * 86_400_000 + 4 * 3_600_000), "2 d 4 h");
    }

    #[test]
    fn a_drawn_box_is_four_shares_inside_the_picture() {
        let form = Form::parse("box_left=0.1&box_top=0.2&box_width=0.3&box_height=0.4");
        assert_eq!(
            form_shares(&form),
            Ok(Some(Shares {
                left: 0.1,
                top: 0.2,
                width: 0.3,
                height: 0.4
            }))
        );
        assert_eq!(form_shares(&Form::parse("box_left=&box_top=")), Ok(None));
        for bad in [
            "box_left=0.9&box_top=0&box_width=0.3&box_height=0.4",
            "box_left=NaN&box_top=0&box_width=0.3&box_height=0.4",
            "box_left=0&box_top=0&box_width=0&box_height=0.4",
            "box_left=<script>&box_top=0&box_width=0.3&box_height=0.4",
        ] {
            assert!(form_shares(&Form::parse(bad)).is_err(), "{bad}");
        }
    }
}
