//! The dashboard's "Your images": the signed-in user's sequences with forms to delete, hide
//! and restore them, and one to take down an image or sequence by ID or key (administrators:
//! anyone's). The same rules as the API's (docs/PRIVACY.md): the owner or an administrator;
//! someone else's hidden images are answered like missing ones. Erasure goes through
//! `streetlevel_import::erase_images`, the one place that lists an image's rows and files.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};

use http::StatusCode;
use maud::{Markup, html};
use streetlevel_model::{CreatorId, ImageId, SequenceId};
use streetlevel_store::{Store, TakedownNote};

use crate::form::Form;
use crate::web::{Session, Web};

/// What the dashboard needs to take images down.
pub struct Takedowns {
    /// The shared store.
    pub store: Arc<RwLock<Store>>,
    /// The data directory whose files erasure removes.
    pub data_dir: Option<PathBuf>,
    /// The usernames of administrators.
    pub administrators: Vec<String>,
}

impl std::fmt::Debug for Takedowns {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Takedowns")
            .field("data_dir", &self.data_dir)
            .field("administrators", &self.administrators)
            .finish_non_exhaustive()
    }
}

/// The images a form names.
struct NamedImages {
    subject: String,
    public: Vec<ImageId>,
    hidden: Vec<ImageId>,
    creators: Vec<CreatorId>,
}

/// One sequence of the user, for the list.
struct SequenceRow {
    key: String,
    public: usize,
    hidden: usize,
}

fn read(store: &RwLock<Store>) -> std::sync::RwLockReadGuard<'_, Store> {
    store.read().unwrap_or_else(PoisonError::into_inner)
}

impl Takedowns {
    /// Deletes (`action` `delete`), hides (`hide`) or restores (anything else) the images
    /// `named`: the IDs changed, or whether the database could not be reached.
    fn apply(
        &self,
        action: &str,
        named: &NamedImages,
        note: &TakedownNote<'_>,
    ) -> Result<Vec<ImageId>, bool> {
        let ids =
            |images: Vec<streetlevel_model::Image>| images.iter().map(|image| image.id).collect();
        match action {
            "delete" => {
                let ids: Vec<ImageId> = named.public.iter().chain(&named.hidden).copied().collect();
                streetlevel_import::erase_images(&self.store, self.data_dir.as_deref(), &ids, note)
                    .map(|erasure| erasure.images.iter().map(|image| image.id).collect())
                    .map_err(|error| error.is_unavailable())
            }
            "hide" => self
                .store
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .hide_images(&named.public, note)
                .map(ids)
                .map_err(|error| error.is_unavailable()),
            _ => self
                .store
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .restore_images(&named.hidden, note)
                .map(ids)
                .map_err(|error| error.is_unavailable()),
        }
    }
}

/// The images `raw` names: an image (public or hidden) by ID, else a sequence by key.
fn named(store: &Store, raw: &str) -> Option<NamedImages> {
    if raw.is_empty() || raw.len() > 256 {
        return None;
    }
    if let Ok(id) = raw.parse::<u64>() {
        let id = ImageId(id);
        if let Some(image) = store.image(id) {
            return Some(NamedImages {
                subject: format!("image {id}"),
                public: vec![id],
                hidden: Vec::new(),
                creators: vec![image.creator],
            });
        }
        if let Some(image) = store.hidden_image(id) {
            return Some(NamedImages {
                subject: format!("image {id}"),
                public: Vec::new(),
                hidden: vec![id],
                creators: vec![image.creator],
            });
        }
    }
    let key = SequenceId::from(raw);
    let public = store.sequence_image_ids(&key).unwrap_or_default();
    let hidden = store.hidden_images_of_sequence(&key);
    if public.is_empty() && hidden.is_empty() {
        return None;
    }
    let creators = public
        .iter()
        .filter_map(|&id| store.image(id))
        .chain(hidden.iter().filter_map(|&id| store.hidden_image(id)))
        .map(|image| image.creator)
        .collect();
    Some(NamedImages {
        subject: format!("sequence {raw}"),
        public,
        hidden,
        creators,
    })
}

impl Web {
    pub(crate) fn is_administrator(&self, session: &Session) -> bool {
        self.takedowns
            .as_ref()
            .is_some_and(|takedowns| takedowns.administrators.contains(&session.user.username))
    }

    /// Handles a takedown form: the status and the sentence the dashboard shows.
    pub(crate) fn takedown_action(&self, session: &Session, form: &Form) -> (StatusCode, String) {
        let Some(takedowns) = &self.takedowns else {
            return (
                StatusCode::NOT_FOUND,
                String::from("Taking images down is not enabled."),
            );
        };
        let action = form.get("takedown").unwrap_or("");
        let verb = match action {
            "delete" => "Deleted",
            "hide" => "Hid",
            "restore" => "Restored",
            _ => return (StatusCode::BAD_REQUEST, String::from("Unknown action.")),
        };
        let target = form.get("target").unwrap_or("").trim();
        let missing = || {
            (
                StatusCode::NOT_FOUND,
                String::from("There is no image or sequence with this ID or key."),
            )
        };
        let Some(named) = named(&read(&takedowns.store), target) else {
            return missing();
        };
        let username = &session.user.username;
        let owner = read(&takedowns.store)
            .creator_by_username(username)
            .map(|creator| creator.id);
        let owns = !named.creators.is_empty()
            && named.creators.iter().all(|creator| Some(*creator) == owner);
        let administrator = self.is_administrator(session);
        if !owns && !administrator {
            if named.public.is_empty() {
                return missing();
            }
            return (
                StatusCode::FORBIDDEN,
                String::from("Only the owner of these images or an administrator may do this."),
            );
        }
        let actor = if owns {
            format!("user {username}")
        } else {
            format!("administrator {username}")
        };
        let note = TakedownNote {
            actor: &actor,
            subject: &named.subject,
            at: self.auth.clock().now(),
        };
        let before = read(&takedowns.store).generation();
        let done = takedowns.apply(action, &named, &note);
        match done {
            Ok(ids) => {
                // The CDN keys to purge, logged as the API's takedowns log them.
                let keys = read(&takedowns.store).surrogate_keys_since(before, &ids);
                tracing::info!(
                    actor = %actor,
                    subject = %named.subject,
                    action,
                    images = ids.len(),
                    surrogate_keys = %keys.join(" "),
                    "takedown"
                );
                (
                    StatusCode::OK,
                    format!("{verb} {} images ({}).", ids.len(), named.subject),
                )
            }
            Err(true) => (
                StatusCode::SERVICE_UNAVAILABLE,
                String::from(
                    "The database cannot be reached: nothing was changed. Try again in a few seconds.",
                ),
            ),
            Err(false) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                String::from("The server failed to take the images down. Please try again later."),
            ),
        }
    }

    /// The "Your images" section, when taking images down is enabled.
    pub(crate) fn images_section(&self, session: &Session, csrf: &str) -> Option<Markup> {
        let takedowns = self.takedowns.as_ref()?;
        let store = read(&takedowns.store);
        let mut sequences: BTreeMap<String, SequenceRow> = BTreeMap::new();
        for id in store.images_of_username(&session.user.username) {
            if let Some(image) = store.image(id) {
                let key = image.sequence.to_string();
                sequences
                    .entry(key.clone())
                    .or_insert_with(|| SequenceRow {
                        key,
                        public: 0,
                        hidden: 0,
                    })
                    .public += 1;
            }
        }
        if let Some(creator) = store.creator_by_username(&session.user.username) {
            for id in store.hidden_images_of_creator(creator.id) {
                if let Some(image) = store.hidden_image(id) {
                    let key = image.sequence.to_string();
                    sequences
                        .entry(key.clone())
                        .or_insert_with(|| SequenceRow {
                            key,
                            public: 0,
                            hidden: 0,
                        })
                        .hidden += 1;
                }
            }
        }
        drop(store);
        let administrator = self.is_administrator(session);
        let button = |target: &str, action: &str, label: &str| {
            html! {
                form method="post" action="/dashboard" class="inline" {
                    "\n"
                    input type="hidden" name="csrf" value=(csrf); "\n"
                    input type="hidden" name="action" value="takedown"; "\n"
                    input type="hidden" name="takedown" value=(action); "\n"
                    input type="hidden" name="target" value=(target); "\n"
                    button type="submit" { (label) }
                }
            }
        };
        Some(html! {
            section aria-labelledby="images" {
                h2 id="images" { "Your images" } "\n"
                p {
                    "Hidden images are unknown to everyone but you and the administrators until you restore them. "
                    "Deleting erases them for good: their files, detections and every copy the server keeps (see the privacy notes)."
                } "\n"
                @if sequences.is_empty() {
                    p { "You have no images." }
                } @else {
                    table {
                        thead { tr { th { "Sequence" } th { "Public" } th { "Hidden" } th { "Take down" } } }
                        tbody {
                            @for sequence in sequences.values() {
                                tr data-sequence=(sequence.key) {
                                    td { code { (sequence.key) } }
                                    td { (sequence.public) }
                                    td { (sequence.hidden) }
                                    td {
                                        @if sequence.public > 0 {
                                            (button(&sequence.key, "hide", "Hide")) " "
                                        }
                                        @if sequence.hidden > 0 {
                                            (button(&sequence.key, "restore", "Restore")) " "
                                        }
                                        (button(&sequence.key, "delete", "Delete"))
                                    }
                                }
                            }
                        }
                    }
                } "\n"
                form method="post" action="/dashboard" class="stack" {
                    "\n"
                    input type="hidden" name="csrf" value=(csrf); "\n"
                    input type="hidden" name="action" value="takedown"; "\n"
                    p {
                        label for="takedown-target" {
                            @if administrator { "Image ID or sequence key (any user's: you are an administrator)" }
                            @else { "Image ID or sequence key" }
                        } "\n"
                        input id="takedown-target" name="target" type="text" required maxlength="256";
                    } "\n"
                    p {
                        label for="takedown-action" { "Action" } "\n"
                        select id="takedown-action" name="takedown" {
                            option value="hide" { "Hide" }
                            option value="restore" { "Restore" }
                            option value="delete" { "Delete" }
                        }
                    } "\n"
                    p { button type="submit" { "Take down" } } "\n"
                }
            }
        })
    }
}

impl Web {
    /// Lets signed-in users delete, hide and restore their images from the dashboard (and
    /// administrators anyone's).
    #[must_use]
    pub fn with_takedowns(mut self, takedowns: Takedowns) -> Self {
        self.takedowns = Some(Arc::new(takedowns));
        self
    }
}
