//! The dashboard's "Your images": the signed-in user's sequences with forms to delete, hide
//! and restore them, and one to take down an image or sequence by ID or key (administrators:
//! anyone's). The rules, the action, the record and the CDN keys are
//! `streetlevel-moderation`'s, the same as the API's and the command line's (docs/PRIVACY.md):
//! the owner or an administrator; someone else's hidden images are answered like missing ones.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::StatusCode;
use maud::{Markup, html};
use streetlevel_moderation::{Action, Caller, Moderation, ModerationError, Names, Target};

use crate::form::Form;
use crate::web::{Session, Web};

/// One sequence of the user, for the list.
struct SequenceRow {
    key: String,
    public: usize,
    hidden: usize,
}

impl Web {
    pub(crate) fn is_administrator(&self, session: &Session) -> bool {
        self.moderation
            .as_ref()
            .is_some_and(|moderation| moderation.is_administrator(&session.user.username))
    }

    /// Handles a takedown form: the status and the sentence the dashboard shows.
    pub(crate) fn takedown_action(&self, session: &Session, form: &Form) -> (StatusCode, String) {
        let Some(moderation) = &self.moderation else {
            return (
                StatusCode::NOT_FOUND,
                String::from("Taking images down is not enabled."),
            );
        };
        let word = form.get("takedown").unwrap_or("");
        let Some(action) = Action::parse(word) else {
            return (StatusCode::BAD_REQUEST, String::from("Unknown action."));
        };
        let verb = match action {
            Action::Delete => "Deleted",
            Action::Hide => "Hid",
            Action::Restore => "Restored",
        };
        let missing = || {
            (
                StatusCode::NOT_FOUND,
                String::from("There is no image or sequence with this ID or key."),
            )
        };
        let raw = form.get("target").unwrap_or("").trim();
        let Some(target) = Target::resolve(&moderation.store(), raw, Names::Any) else {
            return missing();
        };
        match moderation.take_down(Caller::User(&session.user.username), &target, action) {
            Ok(done) => (
                StatusCode::OK,
                format!("{verb} {} images ({}).", done.images.len(), target.subject),
            ),
            Err(ModerationError::Unknown) => missing(),
            Err(ModerationError::Forbidden(_)) => (
                StatusCode::FORBIDDEN,
                String::from("Only the owner of these images or an administrator may do this."),
            ),
            Err(ModerationError::Storage {
                unavailable: true, ..
            }) => (
                StatusCode::SERVICE_UNAVAILABLE,
                String::from(
                    "The database cannot be reached: nothing was changed. Try again in a few seconds.",
                ),
            ),
            Err(ModerationError::Storage { .. }) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                String::from("The server failed to take the images down. Please try again later."),
            ),
        }
    }

    /// The "Your images" section, when taking images down is enabled: the user's sequences
    /// with their takedown buttons, and the form taking down any image or sequence by ID or
    /// key, filled with `target`.
    pub(crate) fn images_section(
        &self,
        session: &Session,
        csrf: &str,
        target: &str,
    ) -> Option<Markup> {
        let moderation = self.moderation.as_ref()?;
        let store = moderation.store();
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
                        input id="takedown-target" name="target" type="text" required maxlength="256" value=(target);
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
    pub fn with_takedowns(mut self, moderation: Arc<Moderation>) -> Self {
        self.moderation = Some(moderation);
        self
    }
}
