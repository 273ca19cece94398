//! Media on an S3-compatible object store, through the `object_store` crate: the layout's keys
//! below the store's prefix, reads streamed, large writes in parts.
//!
//! The service's code is synchronous where it writes media (the import pipeline's CPU pool,
//! the commands), so the store keeps a small runtime of its own and waits on it; the server
//! streams what it serves from the store's byte stream.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::{StreamExt as _, TryStreamExt as _};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as StorePath;
use object_store::prefix::PrefixStore;
use object_store::{ClientConfigKey, RetryConfig};
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt as _, PutPayload, WriteMultipart,
};

use crate::layout::Key;
use crate::local::Removal;
use crate::presign::Presigner;

/// Objects of at least this size are written in parts (S3's smallest part is 5 MiB).
pub const MULTIPART_BYTES: usize = 8 << 20;

/// The name of the setting, the flag's value and the environment variable's: `s3://bucket/prefix`.
pub const SCHEME: &str = "s3://";

/// Media on an object store.
#[derive(Clone)]
pub struct ObjectMedia {
    store: Arc<dyn ObjectStore>,
    url: String,
    /// The keys' prefix within the bucket, without slashes at either end.
    prefix: String,
    /// Signs `GET` URLs of the objects, when the store has static credentials and is
    /// addressed path-style.
    presigner: Option<Arc<Presigner>>,
    runtime: Arc<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for ObjectMedia {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectMedia")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// Why an object store could not be opened.
#[derive(Debug)]
pub struct OpenError(pub String);

impl ObjectMedia {
    /// The store `url` (`s3://bucket/prefix`) names, with the endpoint, region and credentials
    /// from the standard `AWS_*` environment variables, or from `settings` (the same names,
    /// from a configuration file) where the environment has no such variable.
    pub fn open(url: &str, settings: &[(String, String)]) -> Result<Self, OpenError> {
        let rest = url
            .strip_prefix(SCHEME)
            .ok_or_else(|| OpenError(format!("{url} is not an s3:// URL")))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(OpenError(format!("{url} names no bucket")));
        }
        // One crypto provider for the process's TLS (PostgreSQL's too): ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
        // A store that is down answers a request within seconds, not after object_store's
        // default three minutes of retries (an AWS_CONNECT_TIMEOUT given wins).
        let connect_timeout = AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout);
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_retry(RetryConfig {
                max_retries: 2,
                retry_timeout: std::time::Duration::from_secs(10),
                ..RetryConfig::default()
            });
        if builder.get_config_value(&connect_timeout).is_none() {
            builder = builder.with_config(connect_timeout, "3s");
        }
        for (name, value) in settings {
            let key = setting_key(name)?;
            // The environment wins over the file, as every other setting's variable does.
            if std::env::var_os(name).is_none() {
                builder = builder.with_config(key, value.clone());
            }
        }
        let presigner = presigner(&builder, bucket).map(Arc::new);
        let store = builder
            .build()
            .map_err(|error| OpenError(format!("cannot open {url}: {error}")))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("media-store")
            .enable_all()
            .build()
            .map_err(|error| {
                OpenError(format!("cannot start the media store's runtime: {error}"))
            })?;
        let prefix = prefix.trim_matches('/');
        let store: Arc<dyn ObjectStore> = if prefix.is_empty() {
            Arc::new(store)
        } else {
            Arc::new(PrefixStore::new(store, prefix))
        };
        Ok(ObjectMedia {
            store,
            url: url.to_owned(),
            prefix: prefix.to_owned(),
            presigner,
            runtime: Arc::new(runtime),
        })
    }

    /// `s3://bucket/prefix`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A presigned `GET` URL of `key`, the same within each time bucket of `bucket_seconds`
    /// (see [`Presigner::url`]); `None` when the store cannot presign (credentials from a
    /// provider rather than static keys, or virtual-hosted addressing).
    pub fn presigned_url(&self, key: &Key, now_unix: u64, bucket_seconds: u64) -> Option<String> {
        let signer = self.presigner.as_ref()?;
        let path = if self.prefix.is_empty() {
            key.as_str().to_owned()
        } else {
            format!("{}/{}", self.prefix, key.as_str())
        };
        Some(signer.url(&path, now_unix, bucket_seconds))
    }

    fn location(key: &Key) -> StorePath {
        StorePath::from(key.as_str())
    }

    fn wait<T>(&self, work: impl std::future::Future<Output = T>) -> T {
        self.runtime.block_on(work)
    }

    /// The bytes of `key`, `None` when there is none.
    pub fn read(&self, key: &Key) -> std::io::Result<Option<Vec<u8>>> {
        let location = Self::location(key);
        self.wait(async {
            match self.store.get(&location).await {
                Ok(got) => Ok(Some(got.bytes().await.map_err(io)?.to_vec())),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(error) => Err(io(error)),
            }
        })
    }

    /// Writes `bytes` as `key`: in one request, or in parts from [`MULTIPART_BYTES`].
    pub fn write(&self, key: &Key, bytes: &[u8]) -> std::io::Result<()> {
        let location = Self::location(key);
        self.wait(async {
            if bytes.len() < MULTIPART_BYTES {
                self.store
                    .put(&location, PutPayload::from(bytes.to_vec()))
                    .await
                    .map_err(io)?;
                return Ok(());
            }
            let upload = self.store.put_multipart(&location).await.map_err(io)?;
            let mut writer = WriteMultipart::new_with_chunk_size(upload, MULTIPART_BYTES);
            writer.write(bytes);
            writer.finish().await.map_err(io)?;
            Ok(())
        })
    }

    /// Removes `key` (nothing when there is none).
    pub fn remove(&self, key: &Key) -> std::io::Result<()> {
        let location = Self::location(key);
        self.wait(async {
            match self.store.delete(&location).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(error) => Err(io(error)),
            }
        })
    }

    /// The keys under `prefix`.
    pub fn list(&self, prefix: &Key) -> std::io::Result<Vec<Key>> {
        let location = Self::location(prefix);
        self.wait(async {
            let mut keys: Vec<Key> = self
                .store
                .list(Some(&location))
                .map_ok(|meta| Key::from_layout(meta.location.as_ref().to_owned()))
                .try_collect()
                .await
                .map_err(io)?;
            keys.sort();
            Ok(keys)
        })
    }

    /// The length and version (`ETag`) of `key`, `None` when there is none.
    pub fn head(&self, key: &Key) -> std::io::Result<Option<(u64, String)>> {
        let location = Self::location(key);
        self.wait(async {
            match self.store.head(&location).await {
                Ok(meta) => Ok(Some((meta.size, meta.e_tag.unwrap_or_default()))),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(error) => Err(io(error)),
            }
        })
    }

    /// Bytes `start..start + count` of `key`, as the store sends them.
    pub fn stream(
        &self,
        key: &Key,
        start: u64,
        count: u64,
    ) -> futures_util::stream::BoxStream<'static, std::io::Result<Bytes>> {
        let store = Arc::clone(&self.store);
        let location = Self::location(key);
        futures_util::stream::once(async move {
            let options = GetOptions {
                range: Some(GetRange::Bounded(start..start + count)),
                ..GetOptions::default()
            };
            store
                .get_opts(&location, options)
                .await
                .map(|got| got.into_stream().map_err(io))
                .map_err(io)
        })
        .try_flatten()
        .boxed()
    }
}

impl ObjectMedia {
    /// The keys under `prefix` with their lengths, in order.
    pub fn list_sized(&self, prefix: &Key) -> std::io::Result<Vec<(Key, u64)>> {
        let location = Self::location(prefix);
        self.wait(async {
            let mut keys: Vec<(Key, u64)> = self
                .store
                .list(Some(&location))
                .map_ok(|meta| {
                    (
                        Key::from_layout(meta.location.as_ref().to_owned()),
                        meta.size,
                    )
                })
                .try_collect()
                .await
                .map_err(io)?;
            keys.sort();
            Ok(keys)
        })
    }

    /// Bytes `start..start + count` of `key` written into `sink` as they arrive (never the
    /// whole object in memory); how many there were.
    pub fn copy_to(
        &self,
        key: &Key,
        start: u64,
        count: u64,
        sink: &mut dyn std::io::Write,
    ) -> std::io::Result<u64> {
        let mut stream = self.stream(key, start, count);
        self.wait(async {
            let mut copied = 0;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk?;
                sink.write_all(&chunk)?;
                copied += chunk.len() as u64;
            }
            Ok(copied)
        })
    }

    /// A writer of the object `key`, which appears whole when [`ObjectWriter::finish`]
    /// completes it (in one request up to [`MULTIPART_BYTES`], in parts from there on) and
    /// never when the writer is dropped unfinished.
    pub fn writer(&self, key: &Key) -> ObjectWriter {
        ObjectWriter {
            media: self.clone(),
            location: Self::location(key),
            buffer: Vec::new(),
            upload: None,
            written: 0,
        }
    }
}

/// Parts being uploaded at once by one [`ObjectWriter`]: with the part being filled, what it
/// holds in memory is at most this many parts and one more.
const PARTS_IN_FLIGHT: usize = 2;

/// Writes one object as its bytes come, holding at most a few parts of it in memory (see
/// [`ObjectMedia::writer`]).
pub struct ObjectWriter {
    media: ObjectMedia,
    location: StorePath,
    /// The bytes before the upload in parts starts.
    buffer: Vec<u8>,
    upload: Option<WriteMultipart>,
    written: u64,
}

impl std::fmt::Debug for ObjectWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectWriter")
            .field("location", &self.location)
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

impl ObjectWriter {
    /// Appends `bytes`, waiting while [`PARTS_IN_FLIGHT`] parts are being uploaded.
    pub fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.written += bytes.len() as u64;
        let media = self.media.clone();
        // The upload's parts are tasks of the store's runtime.
        let _runtime = media.runtime.enter();
        if self.upload.is_none() {
            self.buffer.extend_from_slice(bytes);
            if self.buffer.len() < MULTIPART_BYTES {
                return Ok(());
            }
            let upload = media
                .wait(media.store.put_multipart(&self.location))
                .map_err(io)?;
            let mut upload = WriteMultipart::new_with_chunk_size(upload, MULTIPART_BYTES);
            upload.write(&std::mem::take(&mut self.buffer));
            self.upload = Some(upload);
        } else if let Some(upload) = self.upload.as_mut() {
            upload.write(bytes);
        }
        if let Some(upload) = self.upload.as_mut() {
            media
                .wait(upload.wait_for_capacity(PARTS_IN_FLIGHT))
                .map_err(io)?;
        }
        Ok(())
    }

    /// How many bytes were written.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Completes the object: from now on it is stored, whole. A writer given no byte writes
    /// an empty object.
    pub fn finish(mut self) -> std::io::Result<u64> {
        let media = self.media.clone();
        if let Some(upload) = self.upload.take() {
            media.wait(upload.finish()).map_err(io)?;
        } else {
            let payload = PutPayload::from(std::mem::take(&mut self.buffer));
            media
                .wait(media.store.put(&self.location, payload))
                .map_err(io)?;
        }
        Ok(self.written)
    }

    /// Gives the object up: nothing of it is stored.
    pub fn abort(mut self) -> std::io::Result<()> {
        if let Some(upload) = self.upload.take() {
            self.media.wait(upload.abort()).map_err(io)?;
        }
        Ok(())
    }
}

impl ObjectMedia {
    /// Removes every object under `prefix` (and says how many), listing it and deleting what
    /// it lists in bulk requests.
    pub fn remove_prefix(&self, prefix: &Key) -> Removal {
        let location = Self::location(prefix);
        let mut removal = Removal::default();
        let removed = self.wait(async {
            let listed = self
                .store
                .list(Some(&location))
                .map_ok(|meta| meta.location)
                .boxed();
            let mut deleted = self.store.delete_stream(listed);
            let mut count = 0;
            while let Some(result) = deleted.next().await {
                match result {
                    Ok(_) | Err(object_store::Error::NotFound { .. }) => count += 1,
                    Err(error) => return Err(error),
                }
            }
            Ok(count)
        });
        match removed {
            Ok(count) => removal.removed = count,
            Err(error) => removal
                .failures
                .push((PathBuf::from(format!("{}/{prefix}", self.url)), io(error))),
        }
        removal
    }
}

/// A signer for the store `builder` describes, when it has static credentials and path-style
/// addressing.
fn presigner(builder: &AmazonS3Builder, bucket: &str) -> Option<Presigner> {
    use AmazonS3ConfigKey as K;
    let value = |key: K| builder.get_config_value(&key);
    if value(K::VirtualHostedStyleRequest).as_deref() == Some("true") {
        return None;
    }
    Presigner::new(
        value(K::Endpoint).as_deref(),
        value(K::Region).as_deref().unwrap_or("us-east-1"),
        &value(K::AccessKeyId)?,
        &value(K::SecretAccessKey)?,
        value(K::Token).as_deref(),
        bucket,
    )
}

/// The S3 setting a config file's `name` is: one of the standard `AWS_*` names.
fn setting_key(name: &str) -> Result<AmazonS3ConfigKey, OpenError> {
    let unknown = || {
        OpenError(format!(
            "{name} is no S3 setting (the standard names: AWS_ENDPOINT_URL, AWS_REGION, \
             AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ALLOW_HTTP, ...)"
        ))
    };
    if !name.starts_with("AWS_") {
        return Err(unknown());
    }
    name.to_ascii_lowercase().parse().map_err(|_| unknown())
}

/// The store could not be used: down, unreachable, slow past its timeouts, or refusing the
/// service's credentials. Carried inside the `std::io::Error`s of the store's calls, so that
/// a server can answer "try again later" rather than a fault of its own
/// ([`is_unavailable`]).
#[derive(Debug)]
pub struct StoreUnavailable(pub String);

impl std::fmt::Display for StoreUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the media store is unavailable: {}", self.0)
    }
}

impl std::error::Error for StoreUnavailable {}

/// Whether `error` says the object store could not be used (see [`StoreUnavailable`]).
pub fn is_unavailable(error: &std::io::Error) -> bool {
    matches!(error.get_ref(), Some(inner) if inner.is::<StoreUnavailable>())
}

fn io(error: object_store::Error) -> std::io::Error {
    match error {
        object_store::Error::NotFound { .. } => {
            std::io::Error::new(std::io::ErrorKind::NotFound, error.to_string())
        }
        other => std::io::Error::other(StoreUnavailable(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_file_names_s3_settings_by_their_standard_names() {
        for name in [
            "AWS_ENDPOINT_URL",
            "AWS_REGION",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ALLOW_HTTP",
        ] {
            assert!(setting_key(name).is_ok(), "{name}");
        }
        for name in [
            "endpoint",
            "aws_region",
            "AWS_NO_SUCH_THING",
            "STREETLEVEL_DATA",
            "",
        ] {
            let error = setting_key(name).unwrap_err();
            assert!(error.0.contains("is no S3 setting"), "{name}: {}", error.0);
        }
    }
}
