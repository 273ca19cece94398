//! Privacy requests for operators' tooling: `GET {base_url}/privacy_requests` lists them and
//! `POST {base_url}/privacy_requests/<id>?state=done|refused[&apply_blur=true]` resolves one
//! (applying a blur request's box first with `apply_blur`). Administrators only
//! (`Config::administrators`), with a user token carrying the `write` scope, as takedowns.
//! Requests arrive through the report page (`streetlevel-web`); the rows and the blur edits
//! are `streetlevel_import::Privacy`'s.

use http::request::Parts;
use serde_json::{Value, json};
use streetlevel_import::{ImportError, PrivacyRefusal, PrivacyRequest, RequestState};
use streetlevel_model::Timestamp;

use crate::Error;
use crate::app::App;
use crate::query::Query;
use crate::reply::Reply;

/// Requests listed at most per call.
const MAX_LIMIT: usize = 1000;
/// Requests listed without `limit`.
const DEFAULT_LIMIT: usize = 100;

/// The members of a request as the API answers it, which `fields=` selects from.
const REQUEST_FIELDS: [&str; 11] = [
    "id",
    "image_id",
    "kind",
    "reason",
    "box",
    "contact",
    "state",
    "created_at",
    "resolved_at",
    "resolved_by",
    "handling_seconds",
];

/// The members `fields=` selects (`id` always), `None` for every member when it is absent or
/// empty; a member a request does not have is the interface's 400 for an unknown field.
fn selected_fields(query: &Query) -> Result<Option<Vec<&'static str>>, Error> {
    let text = query.get("fields").unwrap_or("");
    if text.trim().is_empty() {
        return Ok(None);
    }
    let mut selected = vec!["id"];
    for field in text
        .split(',')
        .map(str::trim)
        .filter(|field| !field.is_empty())
    {
        let known = REQUEST_FIELDS
            .iter()
            .find(|known| **known == field)
            .ok_or_else(|| Error::UnknownField {
                field: field.to_owned(),
                node_type: String::from("PrivacyRequest"),
            })?;
        if !selected.contains(known) {
            selected.push(known);
        }
    }
    Ok(Some(selected))
}

/// A request as the API answers it.
fn request_json(request: &PrivacyRequest, now: i64) -> Value {
    let mut object = json!({
        "id": request.id.to_string(),
        "image_id": request.image.to_string(),
        "kind": request.kind.as_str(),
        "reason": request.reason,
        "state": request.state.as_str(),
        "created_at": Timestamp(request.created_at).to_iso8601(),
        "handling_seconds": request.handling_millis(now) / 1000,
    });
    if let Some(area) = request.area {
        object["box"] = json!({
            "left": area.left,
            "top": area.top,
            "width": area.width,
            "height": area.height,
        });
    }
    if let Some(contact) = &request.contact {
        object["contact"] = Value::from(contact.as_str());
    }
    if let Some(at) = request.resolved_at {
        object["resolved_at"] = Value::from(Timestamp(at).to_iso8601());
    }
    if let Some(by) = &request.resolved_by {
        object["resolved_by"] = Value::from(by.as_str());
    }
    object
}

/// The interface's error for a refused or failed privacy call.
fn privacy_error(error: ImportError, raw: &str) -> Error {
    match error {
        ImportError::Privacy(PrivacyRefusal::Unknown | PrivacyRefusal::UnknownImage) => {
            Error::UnknownId(raw.to_owned())
        }
        ImportError::Privacy(PrivacyRefusal::QueueFull | PrivacyRefusal::Changed(_)) => Error::Busy,
        ImportError::Privacy(refusal) => Error::bad_parameter("state", refusal.to_string()),
        error => Error::storage(error.is_unavailable(), &error),
    }
}

impl App {
    /// The administrator calling, as the record names them; 401/403 otherwise.
    fn privacy_administrator(&self, parts: &Parts) -> Result<String, Error> {
        let (username, is_administrator) =
            self.takedown_caller(parts, crate::takedown::Action::Hide)?;
        if !is_administrator {
            return Err(Error::Forbidden(String::from(
                "only administrators handle privacy requests",
            )));
        }
        Ok(format!("administrator {username}"))
    }

    fn privacy(&self) -> Result<&streetlevel_import::Privacy, Error> {
        self.services
            .privacy
            .as_deref()
            .ok_or_else(|| Error::UnknownPath(String::from("privacy requests are not enabled")))
    }

    /// `GET /privacy_requests?state=open|done|refused&limit=N&fields=...`.
    pub(crate) fn privacy_requests(&self, parts: &Parts, query: &Query) -> Result<Reply, Error> {
        self.privacy_administrator(parts)?;
        let fields = selected_fields(query)?;
        let state = match query.get("state") {
            None | Some("") => None,
            Some(text) => Some(RequestState::parse(text).ok_or_else(|| {
                Error::bad_parameter("state", "use open, done or refused".to_owned())
            })?),
        };
        let limit = match query.get("limit") {
            None | Some("") => DEFAULT_LIMIT,
            Some(text) => text
                .parse::<usize>()
                .ok()
                .filter(|limit| (1..=MAX_LIMIT).contains(limit))
                .ok_or_else(|| {
                    Error::bad_parameter("limit", format!("an integer from 1 to {MAX_LIMIT}"))
                })?,
        };
        let requests = self
            .privacy()?
            .requests(state, limit)
            .map_err(|error| privacy_error(error, ""))?;
        let now = self.services.clock.now().0;
        let data: Vec<Value> = requests
            .iter()
            .map(|request| {
                let mut object = request_json(request, now);
                if let (Some(fields), Value::Object(members)) = (&fields, &mut object) {
                    members.retain(|name, _| fields.contains(&name.as_str()));
                }
                object
            })
            .collect();
        let mut reply = Reply::json(&json!({ "data": data }));
        reply.cache_control = Some(std::borrow::Cow::Borrowed("no-store"));
        Ok(reply)
    }

    /// `POST /privacy_requests/<id>?state=done|refused&apply_blur=true|false`.
    pub(crate) fn resolve_privacy_request(
        &self,
        parts: &Parts,
        raw: &str,
        query: &Query,
    ) -> Result<Reply, Error> {
        let actor = self.privacy_administrator(parts)?;
        let id: u64 = raw.parse().map_err(|_| Error::UnknownId(raw.to_owned()))?;
        let state = query
            .get("state")
            .and_then(RequestState::parse)
            .filter(|state| *state != RequestState::Open)
            .ok_or_else(|| Error::bad_parameter("state", "use done or refused".to_owned()))?;
        let apply_blur = match query.get("apply_blur") {
            None | Some("" | "false") => false,
            Some("true") => true,
            Some(_) => {
                return Err(Error::bad_parameter(
                    "apply_blur",
                    "use true or false".to_owned(),
                ));
            }
        };
        let (request, edit) = self
            .privacy()?
            .resolve(id, state, &actor, apply_blur)
            .map_err(|error| privacy_error(error, raw))?;
        let mut body = json!({
            "success": true,
            "request": request_json(&request, self.services.clock.now().0),
            "surrogate_keys": [],
        });
        if let Some(edit) = &edit {
            body["blur_edit"] = json!({ "id": edit.id.to_string(), "state": edit.state.as_str() });
            body["surrogate_keys"] = json!([crate::takedown::image_surrogate_key(edit.image)]);
            tracing::info!(
                actor = %actor,
                request = request.id,
                edit = edit.id,
                surrogate_keys = %crate::takedown::image_surrogate_key(edit.image),
                "privacy request resolved with a blur edit"
            );
        }
        let mut reply = Reply::json(&body);
        reply.cache_control = Some(std::borrow::Cow::Borrowed("no-store"));
        Ok(reply)
    }
}
