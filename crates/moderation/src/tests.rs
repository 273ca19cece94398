//! The service on a real store (`SQLite` in a temporary data directory): targets, the rules
//! applied, the record written, the keys returned.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use streetlevel_model::{
    Creator, CreatorId, FakeClock, Image, ImageId, Point, Sequence, SequenceId, Timestamp,
};
use streetlevel_store::{Store, TakedownAction};

use crate::{Action, Caller, Moderation, ModerationError, Names, Target};

/// A data directory removed when dropped.
struct DataDir(PathBuf);

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn image(id: u64, creator: u64, sequence: &str) -> Image {
    let offset = f64::from(u32::try_from(id).unwrap()) * 1e-4;
    Image {
        id: ImageId(id),
        altitude: None,
        atomic_scale: None,
        camera_parameters: None,
        camera_type: None,
        captured_at: Timestamp(i64::try_from(id).unwrap() * 1000),
        compass_angle: Some(90.0),
        computed_altitude: None,
        computed_compass_angle: None,
        computed_geometry: None,
        computed_rotation: None,
        creator: CreatorId(creator),
        exif_orientation: Some(1),
        geometry: Point::new(13.0 + offset, 55.0),
        height: 768,
        width: 1024,
        is_pano: false,
        make: None,
        model: None,
        merge_cc: None,
        mesh: None,
        sequence: SequenceId::from(sequence),
        sfm_cluster: None,
        quality_score: None,
        organization: None,
    }
}

/// Alice's sequence `walk` (images 101-103), Bob's `ride` (201) and `shared` with one image
/// of each (301 Alice's, 302 Bob's); Carol is an administrator without images.
fn service(name: &str) -> (Moderation, DataDir) {
    let dir = std::env::temp_dir().join(format!("moderation-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut store = Store::open(&dir).unwrap();
    let creators = [(1, "alice"), (2, "bob"), (3, "carol")].map(|(id, username)| Creator {
        id: CreatorId(id),
        username: String::from(username),
    });
    store.insert_creators(&creators).unwrap();
    let images = [
        image(101, 1, "walk"),
        image(102, 1, "walk"),
        image(103, 1, "walk"),
        image(201, 2, "ride"),
        image(301, 1, "shared"),
        image(302, 2, "shared"),
    ];
    let sequences = [
        ("walk", 1, &[101, 102, 103][..]),
        ("ride", 2, &[201]),
        ("shared", 1, &[301, 302]),
    ]
    .map(|(key, creator, ids)| Sequence {
        id: SequenceId::from(key),
        creator: CreatorId(creator),
        organization: None,
        image_ids: ids.iter().copied().map(ImageId).collect(),
    });
    store.insert_sequences(&sequences).unwrap();
    store.insert_images(&images).unwrap();
    let clock = FakeClock::new(Timestamp(1_700_000_000_000));
    let moderation = Moderation::new(
        Arc::new(RwLock::new(store)),
        Some(dir.clone()),
        vec![String::from("carol")],
        Arc::new(clock),
    );
    (moderation, DataDir(dir))
}

fn resolve(moderation: &Moderation, raw: &str) -> Target {
    Target::resolve(&moderation.store(), raw, Names::Any).unwrap()
}

#[test]
fn a_name_resolves_to_an_image_or_a_sequence_as_the_command_allows() {
    let (moderation, _dir) = service("names");
    let store = moderation.store();
    let image = Target::resolve(&store, "102", Names::Any).unwrap();
    assert_eq!(
        (image.subject.as_str(), image.public.as_slice()),
        ("image 102", &[ImageId(102)][..])
    );
    let walk = Target::resolve(&store, "walk", Names::Any).unwrap();
    assert_eq!(walk.public.len(), 3);
    assert_eq!(
        walk.owners.iter().copied().collect::<Vec<_>>(),
        [CreatorId(1)]
    );
    let shared = Target::resolve(&store, "shared", Names::Sequences).unwrap();
    assert_eq!(shared.owners.len(), 2);
    assert_eq!(Target::resolve(&store, "walk", Names::Images), None);
    assert_eq!(Target::resolve(&store, "102", Names::Sequences), None);
    assert_eq!(Target::resolve(&store, "999", Names::Any), None);
    assert_eq!(Target::resolve(&store, "", Names::Any), None);
    assert_eq!(Target::resolve(&store, &"w".repeat(257), Names::Any), None);
}

#[test]
fn the_owner_hides_and_restores_and_the_record_and_keys_say_so() {
    let (moderation, _dir) = service("owner");
    let walk = resolve(&moderation, "walk");
    let done = moderation
        .take_down(Caller::User("alice"), &walk, Action::Hide)
        .unwrap();
    assert_eq!(done.images, [ImageId(101), ImageId(102), ImageId(103)]);
    assert_eq!(done.actor, "user alice");
    for id in [101, 102, 103] {
        assert!(
            done.surrogate_keys.contains(&format!("image/{id}")),
            "{:?}",
            done.surrogate_keys
        );
    }
    assert!(
        done.surrogate_keys
            .iter()
            .any(|key| key.starts_with("tile/"))
    );
    assert!(moderation.store().image(ImageId(101)).is_none());
    // Hidden now: unknown to Bob, still Alice's to restore.
    let hidden = resolve(&moderation, "walk");
    assert_eq!(hidden.hidden.len(), 3);
    assert!(matches!(
        moderation.take_down(Caller::User("bob"), &hidden, Action::Restore),
        Err(ModerationError::Unknown)
    ));
    let done = moderation
        .take_down(Caller::User("alice"), &hidden, Action::Restore)
        .unwrap();
    assert_eq!(done.images.len(), 3);
    assert!(moderation.store().image(ImageId(101)).is_some());
    let record = moderation.store().takedowns(10).unwrap();
    let actions: Vec<_> = record
        .iter()
        .map(|entry| {
            (
                entry.action,
                entry.actor.as_str(),
                entry.subject.as_str(),
                entry.images,
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            (TakedownAction::Restored, "user alice", "sequence walk", 3),
            (TakedownAction::Hidden, "user alice", "sequence walk", 3),
        ]
    );
    assert_eq!(record[0].at, Timestamp(1_700_000_000_000));
}

#[test]
fn others_are_refused_and_change_nothing_administrators_are_not() {
    let (moderation, _dir) = service("others");
    let generation = moderation.store().generation();
    let walk = resolve(&moderation, "walk");
    let refused = moderation.take_down(Caller::User("bob"), &walk, Action::Delete);
    assert!(
        matches!(refused, Err(ModerationError::Forbidden("delete"))),
        "{refused:?}"
    );
    // Owning part of a sequence is not owning it.
    let shared = resolve(&moderation, "shared");
    assert!(matches!(
        moderation.take_down(Caller::User("alice"), &shared, Action::Hide),
        Err(ModerationError::Forbidden("hide"))
    ));
    // A user the store has never heard of owns nothing.
    assert!(matches!(
        moderation.take_down(Caller::User("mallory"), &walk, Action::Hide),
        Err(ModerationError::Forbidden("hide"))
    ));
    assert_eq!(moderation.store().generation(), generation);
    assert!(moderation.store().takedowns(10).unwrap().is_empty());
    let done = moderation
        .take_down(Caller::User("carol"), &shared, Action::Hide)
        .unwrap();
    assert_eq!(done.actor, "administrator carol");
    assert_eq!(done.images, [ImageId(301), ImageId(302)]);
}

#[test]
fn erasure_takes_public_and_hidden_images_and_they_are_unknown_afterwards() {
    let (moderation, _dir) = service("erase");
    let one = resolve(&moderation, "103");
    moderation
        .take_down(Caller::User("alice"), &one, Action::Hide)
        .unwrap();
    let walk = resolve(&moderation, "walk");
    assert_eq!((walk.public.len(), walk.hidden.len()), (2, 1));
    let done = moderation
        .take_down(Caller::CommandLine, &walk, Action::Delete)
        .unwrap();
    assert_eq!(done.actor, "command line");
    assert_eq!(done.images, [ImageId(101), ImageId(102), ImageId(103)]);
    assert!(done.failures.is_empty());
    let store = moderation.store();
    assert_eq!(Target::resolve(&store, "walk", Names::Any), None);
    assert_eq!(Target::resolve(&store, "103", Names::Any), None);
    assert_eq!(
        store.takedowns(1).unwrap()[0].action,
        TakedownAction::Deleted
    );
    // Bob's images are untouched.
    assert!(store.image(ImageId(201)).is_some());
}
