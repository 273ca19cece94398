//! PKCE (RFC 7636): the code challenge of an authorization request and the check of the
//! `code_verifier` at the token exchange.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use crate::secret::constant_time_eq;

/// How a code challenge is derived from its verifier (RFC 7636 section 4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodeChallengeMethod {
    /// `S256`: the challenge is `BASE64URL(SHA256(verifier))`.
    S256,
    /// `plain`: the challenge is the verifier itself; refused unless
    /// [`crate::Config::allow_plain_pkce`] is set.
    Plain,
}

impl CodeChallengeMethod {
    /// The wire value: `S256` or `plain`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::S256 => "S256",
            Self::Plain => "plain",
        }
    }

    /// The method of a wire value; the names are case-sensitive (RFC 7636 section 4.3).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "S256" => Some(Self::S256),
            "plain" => Some(Self::Plain),
            _ => None,
        }
    }
}

/// The PKCE code challenge an authorization request carried; the code it yields can only be
/// exchanged with the matching `code_verifier`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeChallenge {
    /// The `code_challenge` value.
    pub challenge: String,
    /// The `code_challenge_method`.
    pub method: CodeChallengeMethod,
}

impl CodeChallenge {
    /// Reads `code_challenge` and `code_challenge_method` of an authorization request.
    /// `Ok(None)` when neither is sent and the app does not `require` PKCE; `Err` holds the
    /// `error_description` of an `invalid_request` redirect.
    pub(crate) fn from_request(
        challenge: Option<&str>,
        method: Option<&str>,
        allow_plain: bool,
        required: bool,
    ) -> Result<Option<Self>, &'static str> {
        let Some(challenge) = challenge else {
            if method.is_some() {
                return Err("code_challenge_method was sent without code_challenge");
            }
            if required {
                return Err(
                    "this app requires PKCE: send code_challenge with code_challenge_method S256",
                );
            }
            return Ok(None);
        };
        // RFC 7636 4.3: a challenge without a method is plain.
        let method = match method.map(CodeChallengeMethod::parse) {
            None if !allow_plain => {
                return Err(
                    "code_challenge_method is missing, which means plain, and plain is not allowed: send code_challenge_method S256",
                );
            }
            None => CodeChallengeMethod::Plain,
            Some(None) => {
                return Err("unsupported code_challenge_method: use S256");
            }
            Some(Some(CodeChallengeMethod::Plain)) if !allow_plain => {
                return Err("code_challenge_method plain is not allowed: use S256");
            }
            Some(Some(method)) => method,
        };
        let well_formed = match method {
            // 32 bytes of SHA-256 in unpadded base64url.
            CodeChallengeMethod::S256 => {
                challenge.len() == 43
                    && challenge
                        .bytes()
                        .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
            }
            CodeChallengeMethod::Plain => valid_verifier(challenge),
        };
        if !well_formed {
            return Err(match method {
                CodeChallengeMethod::S256 => {
                    "code_challenge must be 43 characters of unpadded base64url for S256"
                }
                CodeChallengeMethod::Plain => {
                    "code_challenge must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~"
                }
            });
        }
        Ok(Some(Self {
            challenge: challenge.to_owned(),
            method,
        }))
    }

    /// Whether `verifier` derives this challenge, compared in constant time. The caller checks
    /// the verifier's form first with [`valid_verifier`].
    pub(crate) fn is_derived_from(&self, verifier: &str) -> bool {
        match self.method {
            CodeChallengeMethod::S256 => {
                let derived = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
                constant_time_eq(derived.as_bytes(), self.challenge.as_bytes())
            }
            CodeChallengeMethod::Plain => {
                constant_time_eq(verifier.as_bytes(), self.challenge.as_bytes())
            }
        }
    }
}

/// Whether `verifier` is 43 to 128 characters of RFC 3986's unreserved set (RFC 7636 4.1).
pub(crate) fn valid_verifier(verifier: &str) -> bool {
    (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"-._~".contains(&byte))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7636 appendix B.
    const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

    #[test]
    fn the_rfc_example_verifies() {
        let challenge = CodeChallenge::from_request(Some(CHALLENGE), Some("S256"), false, false)
            .unwrap()
            .unwrap();
        assert!(challenge.is_derived_from(VERIFIER));
        assert!(!challenge.is_derived_from(&VERIFIER.replace('d', "e")));
    }

    #[test]
    fn verifiers_are_43_to_128_unreserved_characters() {
        assert!(valid_verifier(&"a".repeat(43)));
        assert!(valid_verifier(&"-._~".repeat(32)));
        assert!(!valid_verifier(&"a".repeat(42)));
        assert!(!valid_verifier(&"a".repeat(129)));
        assert!(!valid_verifier(&format!("{}+", "a".repeat(42))));
        assert!(!valid_verifier(&format!("{}é", "a".repeat(41))));
    }
}
