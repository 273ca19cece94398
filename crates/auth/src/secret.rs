//! High-entropy tokens, their digests, and constant-time comparison.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::RandomSource;

/// Random bytes in every token: 256 bits.
const TOKEN_BYTES: usize = 32;

/// What a token is for; its prefix makes leaked tokens recognisable in logs and scanners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SecretKind {
    ClientToken,
    UserToken,
    EmbedToken,
    ClientSecret,
    AuthorizationCode,
    Session,
}

impl SecretKind {
    fn prefix(self) -> &'static str {
        match self {
            Self::ClientToken => "slc_",
            Self::UserToken => "slu_",
            Self::EmbedToken => "sle_",
            Self::ClientSecret => "sls_",
            Self::AuthorizationCode => "slac_",
            Self::Session => "slsn_",
        }
    }
}

/// A new random token of `kind`: its prefix and 43 URL-safe characters.
pub(crate) fn generate(random: &dyn RandomSource, kind: SecretKind) -> String {
    let mut bytes = [0_u8; TOKEN_BYTES];
    random.fill(&mut bytes);
    format!("{}{}", kind.prefix(), URL_SAFE_NO_PAD.encode(bytes))
}

/// The SHA-256 digest under which a token is stored and looked up. Tokens carry 256 random
/// bits, so a fast unsalted hash is enough: nobody can brute-force the preimage.
pub(crate) fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Compares two byte strings in time independent of where they differ.
pub(crate) fn constant_time_eq(left: &[u8], right: &[u8]) -> bool {
    left.ct_eq(right).into()
}

const CSRF_CONTEXT: &[u8] = b"streetlevel csrf v1";

/// The CSRF token of a browser session: an HMAC keyed by the session token (which only the
/// browser holds in clear), so it cannot be forged without the session cookie and needs no
/// server-side key or storage.
pub fn csrf_token(session_token: &str) -> String {
    URL_SAFE_NO_PAD.encode(csrf_mac(session_token))
}

/// Whether `candidate` is the CSRF token of `session_token`, compared in constant time.
pub fn verify_csrf(session_token: &str, candidate: &str) -> bool {
    let Ok(candidate) = URL_SAFE_NO_PAD.decode(candidate) else {
        return false;
    };
    constant_time_eq(&csrf_mac(session_token), &candidate)
}

fn csrf_mac(session_token: &str) -> [u8; 32] {
    // HMAC accepts keys of any length, so this cannot fail.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(session_token.as_bytes()) else {
        return [0; 32];
    };
    mac.update(CSRF_CONTEXT);
    mac.finalize().into_bytes().into()
}
