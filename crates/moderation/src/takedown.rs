//! Taking a target down: the rules, the action, the record and the CDN keys, once for every
//! adapter.
//!
//! Invariant: nothing is changed for a caller the rules refuse; a change is recorded (who,
//! what, when) in the same transaction as the change itself (the store's and
//! `erase_images`' invariants), and the surrogate keys returned are the store's keys for the
//! images changed and the tiles they were drawn in.

use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};

use streetlevel_model::{Clock, CreatorId, ImageId};
use streetlevel_store::{Store, TakedownNote};

use crate::rules::{Refusal, Role, decide};
use crate::target::Target;

/// What a takedown does.
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
    /// `delete`, `hide`, `restore`: the word in forms, commands and logs.
    pub fn verb(self) -> &'static str {
        match self {
            Action::Delete => "delete",
            Action::Hide => "hide",
            Action::Restore => "restore",
        }
    }

    /// The action a form's word names.
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "delete" => Some(Action::Delete),
            "hide" => Some(Action::Hide),
            "restore" => Some(Action::Restore),
            _ => None,
        }
    }

    /// The images of `target` this action applies to: erasure takes all, hiding the public
    /// ones, restoring the hidden ones.
    fn images(self, target: &Target) -> Vec<ImageId> {
        match self {
            Action::Delete => target
                .public
                .iter()
                .chain(&target.hidden)
                .copied()
                .collect(),
            Action::Hide => target.public.clone(),
            Action::Restore => target.hidden.clone(),
        }
    }
}

/// Who asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller<'a> {
    /// A signed-in user (by the API with a `write` token, or the dashboard), by username.
    User(&'a str),
    /// An operator at the command line: an administrator.
    CommandLine,
}

/// What a takedown did.
#[derive(Debug)]
pub struct Done {
    /// The images changed.
    pub images: Vec<ImageId>,
    /// The CDN surrogate keys the change purges (`image/<id>`, `tile/<z>/<x>/<y>`, ...).
    pub surrogate_keys: Vec<String>,
    /// Who the record says acted: `user <name>`, `administrator <name>`, `command line`.
    pub actor: String,
    /// Media objects erasure could not remove, with the reason (the rows are gone).
    pub failures: Vec<(PathBuf, std::io::Error)>,
}

/// Why a takedown was not done; nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum ModerationError {
    /// The target is unknown to this caller.
    #[error("there is no image or sequence with this ID or key")]
    Unknown,
    /// The target is someone else's.
    #[error("only the owner of these images or an administrator may {0} them")]
    Forbidden(&'static str),
    /// The database or the media store failed.
    #[error("{message}")]
    Storage {
        /// Whether it could not be reached (try again) rather than failed.
        unavailable: bool,
        /// What failed.
        message: String,
    },
}

impl ModerationError {
    fn storage(unavailable: bool, error: &impl std::fmt::Display) -> Self {
        ModerationError::Storage {
            unavailable,
            message: error.to_string(),
        }
    }
}

/// The moderation service of a process: its store, media and administrators.
pub struct Moderation {
    store: Arc<RwLock<Store>>,
    data_dir: Option<PathBuf>,
    administrators: Vec<String>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Moderation {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Moderation")
            .field("data_dir", &self.data_dir)
            .field("administrators", &self.administrators)
            .finish_non_exhaustive()
    }
}

impl Moderation {
    /// The service over `store`, whose media are in `data_dir` (or the configured media
    /// store), with `administrators` (usernames) allowed to act on anyone's images.
    pub fn new(
        store: Arc<RwLock<Store>>,
        data_dir: Option<PathBuf>,
        administrators: Vec<String>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Moderation {
            store,
            data_dir,
            administrators,
            clock,
        }
    }

    /// The shared store.
    pub fn store(&self) -> std::sync::RwLockReadGuard<'_, Store> {
        self.store.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `username` is an administrator.
    pub fn is_administrator(&self, username: &str) -> bool {
        self.administrators.iter().any(|name| name == username)
    }

    /// The role `username` has on an image of `creator`: its owner, an administrator, or
    /// neither (`None`).
    pub fn role(&self, username: &str, creator: CreatorId) -> Option<Role> {
        let owner = self
            .store()
            .creator_by_username(username)
            .is_some_and(|found| found.id == creator);
        if owner {
            Some(Role::Owner)
        } else {
            self.is_administrator(username)
                .then_some(Role::Administrator)
        }
    }

    /// Does `action` to `target` for `caller`, if the rules let them: the images changed,
    /// the keys to purge and who the record names.
    pub fn take_down(
        &self,
        caller: Caller<'_>,
        target: &Target,
        action: Action,
    ) -> Result<Done, ModerationError> {
        let actor = match caller {
            Caller::CommandLine => String::from("command line"),
            Caller::User(username) => {
                let creator = self
                    .store()
                    .creator_by_username(username)
                    .map(|creator| creator.id);
                match decide(creator, self.is_administrator(username), target) {
                    Ok(Role::Owner) => format!("user {username}"),
                    Ok(Role::Administrator) => format!("administrator {username}"),
                    Err(Refusal::Unknown) => return Err(ModerationError::Unknown),
                    Err(Refusal::Forbidden) => {
                        return Err(ModerationError::Forbidden(action.verb()));
                    }
                }
            }
        };
        let note = TakedownNote {
            actor: &actor,
            subject: &target.subject,
            at: self.clock.now(),
        };
        let ids = action.images(target);
        let before = self.store().generation();
        let (images, failures): (Vec<ImageId>, _) = match action {
            Action::Delete => {
                let erasure = streetlevel_import::erase_images(
                    &self.store,
                    self.data_dir.as_deref(),
                    &ids,
                    &note,
                )
                .map_err(|error| ModerationError::storage(error.is_unavailable(), &error))?;
                let images = erasure.images.iter().map(|image| image.id).collect();
                (images, erasure.failures)
            }
            Action::Hide | Action::Restore => {
                let mut store = self.store.write().unwrap_or_else(PoisonError::into_inner);
                let changed = if action == Action::Hide {
                    store.hide_images(&ids, &note)
                } else {
                    store.restore_images(&ids, &note)
                }
                .map_err(|error| ModerationError::storage(error.is_unavailable(), &error))?;
                (changed.iter().map(|image| image.id).collect(), Vec::new())
            }
        };
        let surrogate_keys = self.store().surrogate_keys_since(before, &images);
        tracing::info!(
            actor = %actor,
            subject = %target.subject,
            action = action.verb(),
            images = images.len(),
            surrogate_keys = %surrogate_keys.join(" "),
            "takedown"
        );
        Ok(Done {
            images,
            surrogate_keys,
            actor,
            failures,
        })
    }
}
