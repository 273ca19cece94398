//! `--media-store`: where a command writes, reads and erases media (the data directory's files
//! by default, or an S3-compatible object store), set once for the process.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;
use streetlevel_media::MediaStore;

/// The `--media-store` flag of the commands that write or erase media.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct MediaStoreArgs {
    /// Where media are kept: `s3://bucket/prefix` for an S3-compatible object store (endpoint,
    /// region and credentials from the standard `AWS_*` environment variables), instead of
    /// the data directory's files (the default). The same as the server's.
    #[arg(long, env = "STREETLEVEL_MEDIA_STORE")]
    pub media_store: Option<String>,
    /// The store's `AWS_*` settings from `serve`'s config file (`media_store_options`), under
    /// the environment's.
    #[arg(skip)]
    pub options: BTreeMap<String, String>,
}

impl MediaStoreArgs {
    /// Makes the store the process's media store: the one named, else the one `streetlevel
    /// media migrate` recorded in the data directory, else the data directory's files. A
    /// store named that is not the one recorded is refused: the media are not there.
    pub fn apply(&self, data: &Path) -> anyhow::Result<()> {
        let recorded = recorded_store(data)?;
        if let (Some(named), Some(recorded)) = (&self.media_store, &recorded)
            && named != recorded
        {
            anyhow::bail!(
                "the media of {} are on {recorded} (recorded in {} by `streetlevel media \
                 migrate`), not on {named}",
                data.display(),
                data.join(RECORD_FILE).display()
            );
        }
        let url = self.media_store.as_deref().or(recorded.as_deref());
        use_media_store(data, url, &self.options)
    }
}

/// The file of a data directory that says which object store holds its media, written by
/// `streetlevel media migrate` (absent: the data directory's own files, or the store given
/// by `--media-store` on every command).
pub const RECORD_FILE: &str = "media-store";

/// The store `streetlevel media migrate` recorded for `data`, `None` when there is none.
pub fn recorded_store(data: &Path) -> anyhow::Result<Option<String>> {
    let path = data.join(RECORD_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some(text.trim().to_owned()).filter(|url| !url.is_empty())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
    }
}

impl From<&crate::serve::settings::Settings> for MediaStoreArgs {
    fn from(settings: &crate::serve::settings::Settings) -> Self {
        MediaStoreArgs {
            media_store: settings.media_store.clone(),
            options: settings.media_store_options.clone().unwrap_or_default(),
        }
    }
}

/// Makes the store `url` names (or the files of `data` without one) the process's media
/// store; `options` are the config file's `AWS_*` settings, under the environment's.
fn use_media_store(
    data: &Path,
    url: Option<&str>,
    options: &BTreeMap<String, String>,
) -> anyhow::Result<()> {
    let Some(url) = url else {
        return Ok(());
    };
    let store = MediaStore::connect(
        data,
        Some(url),
        &options.clone().into_iter().collect::<Vec<_>>(),
    )
    .map_err(|error| anyhow::anyhow!("{}", error.0))
    .with_context(|| format!("cannot use the media store {url}"))?;
    tracing::info!(store = %store.describe(), "media are kept on an object store");
    let _ = streetlevel_import::set_media_store(store);
    Ok(())
}
