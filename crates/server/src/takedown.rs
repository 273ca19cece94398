//! Taking images down over the API: `DELETE {base_url}/<image id or sequence key>` erases,
//! `POST {base_url}/<id>/hide` withdraws from public view and `POST {base_url}/<id>/restore`
//! undoes that; `DELETE {base_url}/uploads/<cluster id>` erases what one upload published.
//! The caller is a user with a `write` token; who may act on which images, the action, the
//! record and the CDN surrogate keys are `streetlevel-moderation`'s. Each answer lists the
//! surrogate keys the change purges: `image/<id>` for the image's media, `tile/<z>/<x>/<y>`
//! (or `tiles/<z>` when a zoom's tiles are too many to list) for the tiles it changed, which
//! tile and media replies carry in their `Surrogate-Key` header.

use http::request::Parts;
use serde_json::json;
use streetlevel_model::ImageId;
use streetlevel_moderation::{Caller, ModerationError, Names, Target};
use streetlevel_mvt::TileId;

pub(crate) use streetlevel_moderation::Action;

use crate::Error;
use crate::app::App;
use crate::reply::Reply;

/// The `Surrogate-Key` of a tile reply: the tile's own key, its zoom's and all tiles'.
pub(crate) fn tile_surrogate_keys(tile: TileId) -> String {
    streetlevel_store::surrogate::tile_keys(tile)
}

/// The `Surrogate-Key` of an image's media replies.
pub(crate) fn image_surrogate_key(image: ImageId) -> String {
    streetlevel_store::surrogate::image_key(image)
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
        let (username, _) = self.takedown_caller(parts, action)?;
        let moderation = &self.services.moderation;
        let target = Target::resolve(&moderation.store(), raw, Names::Any)
            .ok_or_else(|| Error::UnknownId(raw.to_owned()))?;
        self.take_down(&username, raw, &target, action)
    }

    /// `DELETE /uploads/<cluster id>`: every image one upload published.
    pub(crate) fn takedown_upload(&self, parts: &Parts, raw: &str) -> Result<Reply, Error> {
        let (username, _) = self.takedown_caller(parts, Action::Delete)?;
        let job_id: u64 = raw.parse().map_err(|_| Error::UnknownId(raw.to_owned()))?;
        let uploads = self
            .services
            .uploads
            .as_ref()
            .ok_or_else(|| Error::UnknownPath(String::from("uploads are not enabled")))?;
        let target = Target::upload(&self.services.moderation.store(), uploads, job_id, |user| {
            self.services.auth.username(user).ok().flatten()
        })
        .map_err(|error| Error::storage(error.is_unavailable(), &error))?
        .ok_or_else(|| Error::UnknownId(raw.to_owned()))?;
        self.take_down(&username, raw, &target, Action::Delete)
    }

    /// The caller's username and whether they are an administrator: a user token with the
    /// `write` scope, or 401 (no valid token) / 403 (another token).
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
        let is_administrator = self.services.moderation.is_administrator(&username);
        Ok((username, is_administrator))
    }

    fn take_down(
        &self,
        username: &str,
        raw: &str,
        target: &Target,
        action: Action,
    ) -> Result<Reply, Error> {
        let done = self
            .services
            .moderation
            .take_down(Caller::User(username), target, action)
            .map_err(|error| match error {
                ModerationError::Unknown => Error::UnknownId(raw.to_owned()),
                ModerationError::Forbidden(_) => Error::Forbidden(error.to_string()),
                ModerationError::Storage { unavailable, .. } => Error::storage(unavailable, &error),
            })?;
        let mut reply = Reply::json(&json!({
            "success": true,
            "images": done.images.len(),
            "surrogate_keys": done.surrogate_keys,
        }));
        reply.cache_control = Some(std::borrow::Cow::Borrowed("no-store"));
        Ok(reply)
    }
}
