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
    /// Makes the store the process's media store.
    pub fn apply(&self, data: &Path) -> anyhow::Result<()> {
        use_media_store(data, self.media_store.as_deref(), &self.options)
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
