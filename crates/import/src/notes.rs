//! What reading a file noted beside its outcome: where its capture time came from and what of
//! its description JSON was ignored, for the import report and the upload status.

use streetlevel_ingest::{Metadata, TimeSource};

use crate::pipeline::{FileOutcome, Outcome};

/// What reading one file's metadata noted; empty for a file that could not be read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadNotes {
    /// Where the capture time came from.
    pub time_source: Option<TimeSource>,
    /// Members of the description JSON that could not be read, and why.
    pub ignored: Vec<String>,
}

impl ReadNotes {
    /// The notes of a file whose metadata is `metadata`.
    pub(crate) fn of(metadata: &Metadata) -> Self {
        ReadNotes {
            time_source: Some(metadata.time_source),
            ignored: metadata.ignored.clone(),
        }
    }

    /// What the person who imported the file should know: a capture time that may be off by
    /// the camera's time zone, and each member of the description JSON that was ignored.
    pub fn warnings(&self) -> Vec<String> {
        self.time_source
            .and_then(TimeSource::warning)
            .map(String::from)
            .into_iter()
            .chain(
                self.ignored
                    .iter()
                    .map(|ignored| format!("ignored {ignored}")),
            )
            .collect()
    }
}

/// How many of the imported files took their capture time from each source, every source
/// listed (best first).
pub fn time_source_counts(files: &[FileOutcome]) -> Vec<(TimeSource, usize)> {
    TimeSource::ALL
        .iter()
        .map(|&source| {
            let count = imported(files)
                .filter(|file| file.notes.time_source == Some(source))
                .count();
            (source, count)
        })
        .collect()
}

/// The warnings of the imported files, as `(file, warning)`, in file order.
pub fn warnings(files: &[FileOutcome]) -> Vec<(String, String)> {
    imported(files)
        .flat_map(|file| {
            file.notes
                .warnings()
                .into_iter()
                .map(|warning| (file.file.clone(), warning))
        })
        .collect()
}

fn imported(files: &[FileOutcome]) -> impl Iterator<Item = &FileOutcome> {
    files
        .iter()
        .filter(|file| matches!(file.outcome, Outcome::Imported(_)))
}

#[cfg(test)]
mod tests {
    use streetlevel_model::ImageId;

    use super::*;

    fn file(name: &str, outcome: Outcome, source: TimeSource, ignored: &[&str]) -> FileOutcome {
        FileOutcome {
            file: String::from(name),
            outcome,
            notes: ReadNotes {
                time_source: Some(source),
                ignored: ignored.iter().map(|line| String::from(*line)).collect(),
            },
        }
    }

    #[test]
    fn counts_and_warns_for_imported_files_only() {
        let files = [
            file("a", Outcome::Imported(ImageId(1)), TimeSource::Gps, &[]),
            file(
                "b",
                Outcome::Imported(ImageId(2)),
                TimeSource::CameraAsUtc,
                &["MAPAltitude \"high\" is not a number"],
            ),
            file(
                "c",
                Outcome::Duplicate(ImageId(3)),
                TimeSource::CameraAsUtc,
                &[],
            ),
            file(
                "d",
                Outcome::Refused(String::from("duplicate")),
                TimeSource::Gps,
                &["MAPAltitude \"high\" is not a number"],
            ),
            FileOutcome {
                file: String::from("e"),
                outcome: Outcome::Refused(String::from("not a jpeg")),
                notes: ReadNotes::default(),
            },
        ];
        assert_eq!(
            time_source_counts(&files),
            [
                (TimeSource::Description, 0),
                (TimeSource::Gps, 1),
                (TimeSource::CameraWithOffset, 0),
                (TimeSource::CameraAsUtc, 1),
                (TimeSource::VideoCreationTime, 0),
                (TimeSource::UploadTime, 0),
            ]
        );
        let warnings = warnings(&files);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].1.contains("taken as UTC"), "{warnings:?}");
        assert_eq!(
            warnings[1],
            (
                String::from("b"),
                String::from("ignored MAPAltitude \"high\" is not a number")
            )
        );
    }
}
