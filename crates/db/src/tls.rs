//! TLS to PostgreSQL with rustls, as the URL's `sslmode` asks (libpq's names):
//!
//! - `disable`: never;
//! - `prefer` (the default, as libpq's): TLS when the server offers it, else plain, the
//!   certificate not checked;
//! - `require`: TLS or no connection, the certificate not checked (it encrypts, it does not
//!   authenticate the server);
//! - `verify-full`: TLS with a certificate that chains to a trusted root and names the host;
//!   the roots are those of the PEM file `sslrootcert` names, else the system's.
//!
//! `allow` and `verify-ca` are refused with a message rather than taken for a neighbour.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::SslMode as PgSslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::DbError;

/// The `sslmode` of a PostgreSQL URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS when the server offers it; the certificate is not checked.
    Prefer,
    /// TLS always; the certificate is not checked.
    Require,
    /// TLS always, with a certificate that chains to a trusted root and names the host.
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<Self, DbError> {
        match value {
            "disable" => Ok(SslMode::Disable),
            "prefer" => Ok(SslMode::Prefer),
            "require" => Ok(SslMode::Require),
            "verify-full" => Ok(SslMode::VerifyFull),
            other => Err(DbError::Unavailable(format!(
                "sslmode={other} is not supported: use disable, prefer, require or verify-full"
            ))),
        }
    }
}

/// What the URL says about TLS, taken out of it (tokio-postgres knows neither `verify-full`
/// nor `sslrootcert`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsSettings {
    pub(crate) mode: SslMode,
    pub(crate) root_certificate: Option<PathBuf>,
}

/// Splits `url` into the URL tokio-postgres parses (without `sslmode` and `sslrootcert`) and
/// the TLS settings those said.
pub(crate) fn split_url(url: &str) -> Result<(String, TlsSettings), DbError> {
    let mut settings = TlsSettings {
        mode: SslMode::Prefer,
        root_certificate: None,
    };
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), settings));
    };
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslmode" => settings.mode = SslMode::parse(&percent_decode(value)?)?,
            "sslrootcert" => settings.root_certificate = Some(percent_decode(value)?.into()),
            _ => kept.push(pair),
        }
    }
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((rest, settings))
}

fn percent_decode(value: &str) -> Result<String, DbError> {
    let bad = || DbError::Unavailable(format!("bad percent-encoding in the URL: {value:?}"));
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        if byte == b'%' {
            let hex = value.get(index + 1..index + 3).ok_or_else(bad)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            index += 3;
        } else {
            out.push(byte);
            index += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

impl TlsSettings {
    /// tokio-postgres's own mode for these settings.
    pub(crate) fn pg_mode(&self) -> PgSslMode {
        match self.mode {
            SslMode::Disable => PgSslMode::Disable,
            SslMode::Prefer => PgSslMode::Prefer,
            SslMode::Require | SslMode::VerifyFull => PgSslMode::Require,
        }
    }

    /// The connector: rustls with the ring provider, checking the server's certificate only
    /// for `verify-full`. (With `disable` tokio-postgres never calls it.)
    pub(crate) fn connector(&self) -> Result<MakeRustlsConnect, DbError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|error| DbError::Unavailable(format!("TLS: {error}")))?;
        let config = match self.mode {
            SslMode::VerifyFull => builder
                .with_root_certificates(self.roots()?)
                .with_no_client_auth(),
            SslMode::Disable | SslMode::Prefer | SslMode::Require => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Unchecked(
                    provider.signature_verification_algorithms,
                )))
                .with_no_client_auth(),
        };
        Ok(MakeRustlsConnect::new(config))
    }

    fn roots(&self) -> Result<RootCertStore, DbError> {
        let mut roots = RootCertStore::empty();
        let Some(path) = &self.root_certificate else {
            let found = rustls_native_certs::load_native_certs();
            let (added, _ignored) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(DbError::Unavailable(
                    "sslmode=verify-full found no trusted root certificates on this system: \
                     name the server's CA with sslrootcert=PATH in the URL"
                        .into(),
                ));
            }
            return Ok(roots);
        };
        for certificate in read_pem(path)? {
            roots.add(certificate).map_err(|error| {
                DbError::Unavailable(format!("sslrootcert {}: {error}", path.display()))
            })?;
        }
        Ok(roots)
    }
}

fn read_pem(path: &Path) -> Result<Vec<CertificateDer<'static>>, DbError> {
    let unreadable = |error: &dyn std::fmt::Display| {
        DbError::Unavailable(format!("sslrootcert {}: {error}", path.display()))
    };
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|error| unreadable(&error))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| unreadable(&error))?;
    if certificates.is_empty() {
        return Err(unreadable(&"no PEM certificate in the file"));
    }
    Ok(certificates)
}

/// The verifier of `prefer` and `require`: any certificate is taken (as libpq takes it
/// without a root file), but the handshake's signatures are still checked against it.
#[derive(Debug)]
struct Unchecked(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, certificate, signature, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, certificate, signature, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslmode_and_sslrootcert_leave_the_url_and_other_options_stay() {
        let (url, settings) = split_url(
            "postgres://u@h/d?sslmode=verify-full&application_name=x&sslrootcert=%2Ftmp%2Fca.pem",
        )
        .unwrap();
        assert_eq!(url, "postgres://u@h/d?application_name=x");
        assert_eq!(settings.mode, SslMode::VerifyFull);
        assert_eq!(
            settings.root_certificate,
            Some(PathBuf::from("/tmp/ca.pem"))
        );
        let (url, settings) = split_url("postgres://u@h/d").unwrap();
        assert_eq!(url, "postgres://u@h/d");
        assert_eq!(settings.mode, SslMode::Prefer, "libpq's default");
        let (url, settings) = split_url("postgres://u@h/d?sslmode=disable").unwrap();
        assert_eq!(url, "postgres://u@h/d");
        assert_eq!(settings.mode, SslMode::Disable);
    }

    #[test]
    fn modes_that_would_be_taken_for_a_neighbour_are_refused() {
        for mode in ["verify-ca", "allow", "REQUIRE", ""] {
            let error = split_url(&format!("postgres://u@h/d?sslmode={mode}")).unwrap_err();
            assert!(
                error
                    .to_string()
                    .contains("use disable, prefer, require or verify-full"),
                "{mode}: {error}"
            );
        }
    }
}
