//! What a takedown request names, and whose it is.
//!
//! Invariant: a target lists every image it names, public and hidden apart, and the owners
//! are the creators (`CreatorId`) of those images, plus the uploader for an upload: the one
//! notion of owner the rules compare a caller with.

use std::collections::BTreeSet;

use streetlevel_import::{ImportError, Uploads};
use streetlevel_model::{CreatorId, ImageId, SequenceId};
use streetlevel_store::Store;

/// The longest ID or key looked up; longer ones name nothing.
const MAX_NAME_CHARS: usize = 256;

/// What the name of a request may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// An image ID, else a sequence key (the API and the dashboard).
    Any,
    /// Only an image ID (`streetlevel images ...`).
    Images,
    /// Only a sequence key (`streetlevel sequences ...`).
    Sequences,
}

/// The images a request names, and who they belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// What the record calls it: `image <id>`, `sequence <key>`, `upload <id>`.
    pub subject: String,
    /// Its public images.
    pub public: Vec<ImageId>,
    /// Its hidden images.
    pub hidden: Vec<ImageId>,
    /// The creators of its images (and an upload's uploader).
    pub owners: BTreeSet<CreatorId>,
}

impl Target {
    /// The images `raw` names in `store`, `None` when it names nothing: an image (public or
    /// hidden) by ID, else a sequence by key, as `names` allows.
    pub fn resolve(store: &Store, raw: &str, names: Names) -> Option<Target> {
        if raw.is_empty() || raw.len() > MAX_NAME_CHARS {
            return None;
        }
        if names != Names::Sequences
            && let Ok(number) = raw.parse::<u64>()
        {
            let id = ImageId(number);
            let subject = format!("image {id}");
            if let Some(image) = store.image(id) {
                return Some(Target {
                    subject,
                    public: vec![id],
                    hidden: Vec::new(),
                    owners: BTreeSet::from([image.creator]),
                });
            }
            if let Some(image) = store.hidden_image(id) {
                return Some(Target {
                    subject,
                    public: Vec::new(),
                    hidden: vec![id],
                    owners: BTreeSet::from([image.creator]),
                });
            }
        }
        if names == Names::Images {
            return None;
        }
        let target =
            Target::of_sequences(store, format!("sequence {raw}"), &[SequenceId::from(raw)]);
        (!target.is_empty()).then_some(target)
    }

    /// Every image upload job `job_id` published (public or hidden by now), `None` when
    /// there is no such job. The uploader owns the upload even when none of it is left:
    /// `username` names the user ID the job records, and the creator of that name is added
    /// to the owners.
    pub fn upload(
        store: &Store,
        uploads: &Uploads,
        job_id: u64,
        username: impl FnOnce(u64) -> Option<String>,
    ) -> Result<Option<Target>, ImportError> {
        let Some(sequences) = uploads.sequences_of_job(job_id)? else {
            return Ok(None);
        };
        let mut target = Target::of_sequences(store, format!("upload {job_id}"), &sequences);
        if let Some(job) = uploads.job(job_id)?
            && let Some(name) = username(job.user_id)
            && let Some(creator) = store.creator_by_username(&name)
        {
            target.owners.insert(creator.id);
        }
        Ok(Some(target))
    }

    /// The images of `sequences`, public and hidden, and their creators.
    fn of_sequences(store: &Store, subject: String, sequences: &[SequenceId]) -> Target {
        let mut target = Target {
            subject,
            public: Vec::new(),
            hidden: Vec::new(),
            owners: BTreeSet::new(),
        };
        for sequence in sequences {
            target
                .public
                .extend(store.sequence_image_ids(sequence).unwrap_or_default());
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
            .map(|image| image.creator)
            .collect();
        target
    }

    /// Whether it names no image.
    pub fn is_empty(&self) -> bool {
        self.public.is_empty() && self.hidden.is_empty()
    }
}
