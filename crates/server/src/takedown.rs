//! Taking images down over the API: `DELETE {base_url}/<image id or sequence key>` erases,
//! `POST {base_url}/<id>/hide` withdraws from public view and `POST {base_url}/<id>/restore`
//! undoes that; `DELETE {base_url}/uploads/<cluster id>` erases what one upload published.
//! The caller is a user with a `write` token who owns the images, or an administrator
//! (`Config::administrators`). Each answer lists the CDN surrogate keys the change purges
//! (also logged): `image/<id>` for the image's media, `tile/<z>/<x>/<y>` (or `tiles/<z>` when
//! a zoom's tiles are too many to list) for the tiles it changed, which tile and media replies
//! carry in their `Surrogate-Key` header.

use std::collections::BTreeSet;
use std::sync::PoisonError;

use http::request::Parts;
use serde_json::json;
use streetlevel_model::{ImageId, SequenceId};
use streetlevel_mvt::TileId;
use streetlevel_store::{Store, TakedownNote};

use crate::Error;
use crate::app::App;
use crate::reply::Reply;

/// What a takedown request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Erase.
    Delete,
    /// Withdraw from public view.
    Hide,
    /// Make public again.
    Restore,
}

impl Action {
    fn verb(self) -> &'static str {
        match self {
            Action::Delete => "delete",
            Action::Hide => "hide",
            Action::Restore => "restore",
        }
    }
}

/// The `Surrogate-Key` of a tile reply: the tile's own key, its zoom's and all tiles'.
pub(crate) fn tile_surrogate_keys(tile: TileId) -> String {
    streetlevel_store::surrogate::tile_keys(tile)
}

/// The `Surrogate-Key` of an image's media replies.
pub(crate) fn image_surrogate_key(image: ImageId) -> String {
    streetlevel_store::surrogate::image_key(image)
}

/// The images a request names, and who they belong to.
struct Target {
    /// The ID or key as asked.
    raw: String,
    /// What the record calls it: `image <id>`, `sequence <key>`, `upload <id>`.
    subject: String,
    /// Public images.
    public: Vec<ImageId>,
    /// Hidden images.
    hidden: Vec<ImageId>,
    /// The usernames of the images' creators.
    owners: BTreeSet<String>,
}

impl App {
    /// `DELETE /<id>`, `POST /<id>/hide`, `POST /<id>/restore`: `raw` is the path segment, an
    /// image ID or a sequence key.
    pub(crate) fn takedown(
        &self,
        parts: &Parts,
        raw: &str,
        action: Action,
    ) -> Result<Reply, Error> {
        let (actor, is_administrator) = self.takedown_caller(parts, action)?;
        let target = {
            let store = self.read_store();
            resolve(&store, raw)?
        };
        self.take_down(&actor, is_administrator, target, action)
    }

    /// `DELETE /uploads/<cluster id>`: every image one upload published.
    pub(crate) fn takedown_upload(&self, parts: &Parts, raw: &str) -> Result<Reply, Error> {
        let (actor, is_administrator) = self.takedown_caller(parts, Action::Delete)?;
        let job_id: u64 = raw.parse().map_err(|_| Error::UnknownId(raw.to_owned()))?;
        let uploads = self
            .services
            .uploads
            .as_ref()
            .ok_or_else(|| Error::UnknownPath(String::from("uploads are not enabled")))?;
        let sequences = uploads
            .sequences_of_job(job_id)
            .map_err(|error| storage(&error))?
            .ok_or_else(|| Error::UnknownId(raw.to_owned()))?;
        let target = {
            let store = self.read_store();
            let mut target = Target {
                raw: raw.to_owned(),
                subject: format!("upload {job_id}"),
                public: Vec::new(),
                hidden: Vec::new(),
                owners: BTreeSet::new(),
            };
            for sequence in &sequences {
                for id in store.sequence_image_ids(sequence).unwrap_or_default() {
                    target.public.push(id);
                }
                target
                    .hidden
                    .extend(store.hidden_images_of_sequence(sequence));
            }
            target.owners = target
                .public
                .iter()
                .filter_map(|&id| store.image(id))
                .chain(
                    target
                        .hidden
                        .iter()
                        .filter_map(|&id| store.hidden_image(id)),
                )
                .filter_map(|image| username_of(&store, image.creator))
                .collect();
            target
        };
        // The uploader owns the upload even when all of it is gone already.
        let owner = uploads
            .job(job_id)
            .map_err(|error| storage(&error))?
            .and_then(|job| self.services.auth.username(job.user_id).ok().flatten());
        let mut target = target;
        target.owners.extend(owner);
        self.take_down(&actor, is_administrator, target, Action::Delete)
    }

    /// The caller's name as the record has it and whether they are an administrator: a user
    /// token with the `write` scope, or 401 (no valid token) / 403 (another token).
    pub(crate) fn takedown_caller(
        &self,
        parts: &Parts,
        action: Action,
    ) -> Result<(String, bool), Error> {
        let caller = self.services.auth.authenticate(parts)?;
        let refused = || {
            Error::Forbidden(format!(
                "to {} images you need a user access token with the write scope",
                action.verb()
            ))
        };
        let Some(user_id) = caller.user_id else {
            return Err(refused());
        };
        if !caller.may_write {
            return Err(refused());
        }
        let username = self.services.auth.username(user_id)?.ok_or_else(refused)?;
        let is_administrator = self.config().administrators.contains(&username);
        Ok((username, is_administrator))
    }

    fn take_down(
        &self,
        username: &str,
        is_administrator: bool,
        target: Target,
        action: Action,
    ) -> Result<Reply, Error> {
        let owns = target.owners.len() == 1 && target.owners.contains(username);
        if !owns && !is_administrator {
            // Hidden images are unknown to everyone but their owner and administrators.
            if target.public.is_empty() {
                return Err(Error::UnknownId(target.raw));
            }
            return Err(Error::Forbidden(format!(
                "only the owner of these images or an administrator may {} them",
                action.verb()
            )));
        }
        let actor = if owns {
            format!("user {username}")
        } else {
            format!("administrator {username}")
        };
        let note = TakedownNote {
            actor: &actor,
            subject: &target.subject,
            at: self.services.clock.now(),
        };
        let ids: Vec<ImageId> = match action {
            Action::Delete => target
                .public
                .iter()
                .chain(&target.hidden)
                .copied()
                .collect(),
            Action::Hide => target.public.clone(),
            Action::Restore => target.hidden.clone(),
        };
        let before = self.read_store().generation();
        let done: Vec<ImageId> = match action {
            Action::Delete => {
                let erasure = streetlevel_import::erase_images(
                    &self.services.store,
                    self.services.data_dir.as_deref(),
                    &ids,
                    &note,
                )
                .map_err(|error| storage(&error))?;
                erasure.images.iter().map(|image| image.id).collect()
            }
            Action::Hide | Action::Restore => {
                let mut store = self
                    .services
                    .store
                    .write()
                    .unwrap_or_else(PoisonError::into_inner);
                let images = if action == Action::Hide {
                    store.hide_images(&ids, &note)
                } else {
                    store.restore_images(&ids, &note)
                }
                .map_err(|error| Error::storage(error.is_unavailable(), &error))?;
                images.into_iter().map(|image| image.id).collect()
            }
        };
        let keys = {
            let store = self.read_store();
            store.surrogate_keys_since(before, &done)
        };
        tracing::info!(
            actor = %actor,
            subject = %target.subject,
            action = action.verb(),
            images = done.len(),
            surrogate_keys = %keys.join(" "),
            "takedown"
        );
        let mut reply = Reply::json(&json!({
            "success": true,
            "images": done.len(),
            "surrogate_keys": keys,
        }));
        reply.cache_control = Some(std::borrow::Cow::Borrowed("no-store"));
        Ok(reply)
    }

    fn read_store(&self) -> std::sync::RwLockReadGuard<'_, Store> {
        self.services
            .store
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// The error for a failed database call of the import crate: the interface's 503 or 500, not
/// the uploader's shape.
fn storage(error: &streetlevel_import::ImportError) -> Error {
    Error::storage(error.is_unavailable(), error)
}

fn username_of(store: &Store, creator: streetlevel_model::CreatorId) -> Option<String> {
    store
        .creator(creator)
        .map(|creator| creator.username.clone())
}

/// The images `raw` names: an image (public or hidden) by ID, else a sequence by key.
fn resolve(store: &Store, raw: &str) -> Result<Target, Error> {
    let unknown = || Error::UnknownId(raw.to_owned());
    if raw.is_empty() || raw.len() > 256 {
        return Err(unknown());
    }
    if let Ok(id) = raw.parse::<u64>() {
        let id = ImageId(id);
        if let Some(image) = store.image(id) {
            return Ok(Target {
                raw: raw.to_owned(),
                subject: format!("image {id}"),
                public: vec![id],
                hidden: Vec::new(),
                owners: username_of(store, image.creator).into_iter().collect(),
            });
        }
        if let Some(image) = store.hidden_image(id) {
            return Ok(Target {
                raw: raw.to_owned(),
                subject: format!("image {id}"),
                public: Vec::new(),
                hidden: vec![id],
                owners: username_of(store, image.creator).into_iter().collect(),
            });
        }
    }
    let key = SequenceId::from(raw);
    let public = store.sequence_image_ids(&key).unwrap_or_default();
    let hidden = store.hidden_images_of_sequence(&key);
    if public.is_empty() && hidden.is_empty() {
        return Err(unknown());
    }
    let owners = public
        .iter()
        .filter_map(|&id| store.image(id))
        .chain(hidden.iter().filter_map(|&id| store.hidden_image(id)))
        .filter_map(|image| username_of(store, image.creator))
        .collect();
    Ok(Target {
        raw: raw.to_owned(),
        subject: format!("sequence {raw}"),
        public,
        hidden,
        owners,
    })
}
