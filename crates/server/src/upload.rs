//! The official uploader's endpoints (`mapillary_tools`): sign-in, `/me`, resumable upload
//! sessions, the finish call and its telemetry, and the status of a user's uploads, which
//! the original service does not offer.
//!
//! Upload bodies stream to disk as they arrive (never through the in-memory body limit);
//! the session files, the queue and the processing belong to `streetlevel-import`.

use std::borrow::Cow;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http_body_util::BodyExt;
use serde_json::{Map, Value, json};
use streetlevel_import::{Job, UploaderGeneration, Uploads};
use streetlevel_model::{OrganizationId, Timestamp};
use streetlevel_ratelimit::{ClientAddr, SignInRefusal};

use crate::Error;
use crate::app::{App, Caller};
use crate::reply::Reply;

/// How long an upload body may send nothing before the request is ended (what reached the
/// disk stays: the client resumes from the stored offset).
pub const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The most bytes of a refused upload body read and dropped before answering.
const MAX_DRAINED_BYTES: usize = 16 << 20;

/// Chunks in flight between the connection and the file writer.
const CHUNKS_IN_FLIGHT: usize = 8;

impl App {
    fn uploads(&self) -> Result<&Arc<Uploads>, Error> {
        self.services
            .uploads
            .as_ref()
            .ok_or_else(|| Error::UnknownPath(String::from("uploads are not enabled")))
    }

    /// The caller of an upload request: a user's token with the `upload` scope.
    fn uploader(&self, parts: &Parts) -> Result<(Caller, u64), Error> {
        let caller = self.services.auth.authenticate(parts)?;
        match caller.user_id {
            Some(user_id) if caller.may_upload => Ok((caller, user_id)),
            _ => Err(Error::Forbidden(String::from(
                "uploads need a user access token with the upload scope",
            ))),
        }
    }

    /// `POST /login` with JSON `{"email", "password"}` and an app's client token.
    pub(crate) fn upload_login(&self, parts: &Parts, body: &Bytes) -> Result<Reply, Error> {
        #[derive(serde::Deserialize)]
        struct Login {
            email: String,
            password: String,
        }
        let login: Login = serde_json::from_slice(body).map_err(|error| {
            Error::BadBody(format!("expected JSON with email and password: {error}"))
        })?;
        let address = parts
            .extensions
            .get::<ClientAddr>()
            .map(|address| address.0.ip());
        // Throttled and queued before the password is hashed: a flood costs a lookup.
        let _hashing =
            self.services.sign_in.admit(&login.email, address).map_err(
                |refusal| match refusal {
                    SignInRefusal::Throttled(wait) => Error::SignInThrottled(wait),
                    SignInRefusal::Busy => Error::Busy,
                },
            )?;
        let signed_in = self
            .services
            .auth
            .upload_login(parts, &login.email, &login.password)?;
        let creator = self.creator_of(&signed_in.username)?;
        let mut reply = Reply::json(&json!({
            "access_token": signed_in.access_token,
            "user_id": creator.to_string(),
        }));
        reply.cache_control = Some(Cow::Borrowed("no-store"));
        Ok(reply)
    }

    /// `GET /me`: the user of a user access token, as the creator their images carry.
    pub(crate) fn me(&self, parts: &Parts) -> Result<Reply, Error> {
        let caller = self.services.auth.authenticate(parts)?;
        let user_id = caller.user_id.ok_or_else(|| {
            Error::Forbidden(String::from("/me needs a user access token, not an app's"))
        })?;
        let username = self
            .services
            .auth
            .username(user_id)?
            .ok_or_else(|| Error::Unauthorized(String::from("The user no longer exists")))?;
        let creator = self.creator_of(&username)?;
        Ok(Reply::json(
            &json!({"id": creator.to_string(), "username": username}),
        ))
    }

    /// The store's creator for a username, created on first use.
    fn creator_of(&self, username: &str) -> Result<u64, Error> {
        let mut store = self
            .services
            .store
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        store
            .ensure_creator(username)
            .map(|id| id.0)
            .map_err(|error| Error::storage(error.is_unavailable(), &error))
    }

    /// `GET /upload/<key>`: the bytes stored for the session, 0 for a new one.
    pub(crate) fn upload_offset(&self, parts: &Parts, key: &str) -> Result<Reply, Error> {
        let (_, user_id) = self.uploader(parts)?;
        let offset = self.uploads()?.offset(user_id, key)?;
        let mut reply = Reply::json(&json!({ "offset": offset }));
        reply.cache_control = Some(Cow::Borrowed("no-store"));
        Ok(reply)
    }

    /// `POST /upload/<key>` with `Offset: N`: appends the body to the session as it arrives
    /// and answers the session's handle `{"h": ...}`.
    pub(crate) async fn receive_upload(
        self: &Arc<Self>,
        parts: &Parts,
        key: String,
        mut body: hyper::body::Incoming,
    ) -> Result<Reply, Error> {
        let (_, user_id) = self.uploader(parts)?;
        let offset = match parts.headers.get("offset") {
            None => 0,
            Some(value) => value
                .to_str()
                .ok()
                .and_then(|text| text.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    Error::bad_parameter("Offset", "expected a whole number of bytes")
                })?,
        };
        // Uploaders up to 0.13 name the type (and up to 0.12 the length) of every append;
        // what their video keys' MD5 covers differs (docs/CLIENTS.md).
        let generation = if parts.headers.contains_key("x-entity-type")
            || parts.headers.contains_key("x-entity-length")
        {
            UploaderGeneration::UpTo013
        } else {
            UploaderGeneration::Current
        };
        let uploads = Arc::clone(self.uploads()?);
        let (sender, mut receiver) = tokio::sync::mpsc::channel::<Bytes>(CHUNKS_IN_FLIGHT);
        let writer = tokio::task::spawn_blocking(move || {
            let mut appender = uploads.append(user_id, &key, offset, generation)?;
            while let Some(chunk) = receiver.blocking_recv() {
                appender.write(&chunk)?;
            }
            appender.finish()
        });
        let mut body_error = None;
        // After the writer refused (a wrong offset, a limit), the rest of a body up to this
        // size is read and dropped, so the client sees the answer instead of a broken pipe.
        let mut drain_allowance = MAX_DRAINED_BYTES;
        let mut refused = false;
        loop {
            let frame = match tokio::time::timeout(BODY_IDLE_TIMEOUT, body.frame()).await {
                Err(_) => {
                    body_error = Some(format!(
                        "no body bytes arrived for {} s",
                        BODY_IDLE_TIMEOUT.as_secs()
                    ));
                    break;
                }
                Ok(None) => break,
                Ok(Some(Err(error))) => {
                    body_error = Some(error.to_string());
                    break;
                }
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if refused {
                match drain_allowance.checked_sub(data.len()) {
                    Some(left) => drain_allowance = left,
                    None => break,
                }
            } else if let Err(unsent) = sender.send(data).await {
                // The writer stopped (an offset, a limit or a disk error): its error is the
                // answer once the body is drained.
                refused = true;
                drain_allowance = drain_allowance.saturating_sub(unsent.0.len());
            }
        }
        drop(sender);
        let written = writer
            .await
            .map_err(|error| Error::Internal(format!("upload writer failed: {error}")))?;
        if let Some(reason) = body_error {
            // What arrived is stored; the client asks for the offset and sends the rest.
            written?;
            return Err(Error::BadBody(reason));
        }
        let handle = written?;
        let mut reply = Reply::json(&json!({ "h": handle }));
        reply.cache_control = Some(Cow::Borrowed("no-store"));
        Ok(reply)
    }

    /// `POST /finish_upload` with `{"file_handle", "file_type", "organization_id"?}`: queues
    /// the upload and answers `{"cluster_id": ...}`.
    pub(crate) fn finish_upload(&self, parts: &Parts, body: &Bytes) -> Result<Reply, Error> {
        let (caller, user_id) = self.uploader(parts)?;
        let request: Value = serde_json::from_slice(body)
            .map_err(|error| Error::BadBody(format!("expected a JSON object: {error}")))?;
        let text = |name: &str| request.get(name).and_then(Value::as_str);
        let handle = text("file_handle")
            .ok_or_else(|| Error::BadBody(String::from("file_handle is missing")))?;
        let file_type = text("file_type")
            .ok_or_else(|| Error::BadBody(String::from("file_type is missing")))?;
        // The uploader passes the organization's ID as the API gave it: a string, or a number.
        let organization =
            match request.get("organization_id") {
                None | Some(Value::Null) => None,
                Some(Value::String(text)) if text.is_empty() => None,
                Some(Value::String(text)) => Some(text.parse::<u64>().map_err(|_| {
                    Error::BadBody(format!("organization_id {text:?} is not an ID"))
                })?),
                Some(Value::Number(number)) => Some(number.as_u64().ok_or_else(|| {
                    Error::BadBody(format!("organization_id {number} is not an ID"))
                })?),
                Some(_) => {
                    return Err(Error::BadBody(String::from(
                        "organization_id must be a string or a number",
                    )));
                }
            };
        if let Some(organization) = organization {
            let store = self
                .services
                .store
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            if store.organization(OrganizationId(organization)).is_none() {
                return Err(
                    streetlevel_import::ImportError::UnknownOrganization(organization).into(),
                );
            }
        }
        let username = self
            .services
            .auth
            .username(user_id)?
            .ok_or_else(|| Error::Unauthorized(String::from("The user no longer exists")))?;
        let job = self.uploads()?.finish(
            user_id,
            &username,
            handle,
            file_type,
            organization.map(OrganizationId),
        )?;
        tracing::info!(
            job,
            user_id,
            app_id = caller.app_id,
            file_type,
            "upload queued"
        );
        let mut reply = Reply::json(&json!({ "cluster_id": job.to_string() }));
        reply.cache_control = Some(Cow::Borrowed("no-store"));
        Ok(reply)
    }

    /// `POST /logging`: the uploader's telemetry, accepted from any valid token and dropped.
    pub(crate) fn logging(&self, parts: &Parts) -> Result<Reply, Error> {
        self.services.auth.authenticate(parts)?;
        Ok(Reply::json(&json!({ "success": true })))
    }

    /// `GET /uploads`: the caller's uploads, newest first.
    pub(crate) fn upload_status(&self, parts: &Parts) -> Result<Reply, Error> {
        let caller = self.services.auth.authenticate(parts)?;
        let user_id = caller.user_id.ok_or_else(|| {
            Error::Forbidden(String::from(
                "/uploads needs a user access token, not an app's",
            ))
        })?;
        let jobs = self.uploads()?.jobs_of(user_id)?;
        // A job read as published is served as soon as the answer says so: its images may
        // have committed a moment ago and not be in memory yet.
        streetlevel_store::catch_up(&self.services.store)
            .map_err(|error| Error::storage(error.is_unavailable(), &error))?;
        let data: Vec<Value> = jobs.iter().map(job_json).collect();
        let mut reply = Reply::json(&json!({ "data": data }));
        reply.cache_control = Some(Cow::Borrowed("no-store"));
        Ok(reply)
    }
}

/// A job in the status JSON; members without a value are left out.
pub fn job_json(job: &Job) -> Value {
    let mut object = Map::new();
    object.insert(String::from("id"), Value::from(job.id.to_string()));
    object.insert(String::from("state"), Value::from(job.state.as_str()));
    object.insert(
        String::from("file_type"),
        Value::from(job.file_type.as_str()),
    );
    object.insert(String::from("files"), Value::from(job.files));
    object.insert(String::from("images"), Value::from(job.images));
    object.insert(String::from("duplicates"), Value::from(job.duplicates));
    let refused: Vec<Value> = job
        .refused
        .iter()
        .map(|(file, reason)| json!({"file": file, "reason": reason}))
        .collect();
    object.insert(String::from("refused"), Value::from(refused));
    let time_sources: Map<String, Value> = job
        .time_sources
        .iter()
        .map(|(source, count)| (source.clone(), Value::from(*count)))
        .collect();
    object.insert(
        String::from("capture_time_sources"),
        Value::Object(time_sources),
    );
    let warnings: Vec<Value> = job
        .warnings
        .iter()
        .map(|(file, warning)| json!({"file": file, "warning": warning}))
        .collect();
    object.insert(String::from("warnings"), Value::from(warnings));
    if let Some(reason) = &job.reason {
        object.insert(String::from("reason"), Value::from(reason.clone()));
    }
    if let Some(organization) = job.organization {
        object.insert(
            String::from("organization_id"),
            Value::from(organization.to_string()),
        );
    }
    object.insert(
        String::from("created_at"),
        Value::from(Timestamp(job.created_at).to_iso8601()),
    );
    object.insert(
        String::from("updated_at"),
        Value::from(Timestamp(job.updated_at).to_iso8601()),
    );
    Value::Object(object)
}
