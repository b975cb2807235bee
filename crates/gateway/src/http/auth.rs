//! Bearer tokens: the write token guards acquire, renew, release and
//! forward; the optional read token guards owner, list and events. Tokens
//! are never logged, and are compared by their SHA-256 digests in constant
//! time: a byte-wise comparison of the tokens themselves would return early
//! on a length mismatch, telling a caller how long the token is.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::AppState;
use super::error::ApiError;
use dagnats_leases_wire::kind::Kind;

/// A token as it is kept and compared: its SHA-256 digest, always 32 bytes.
type TokenDigest = [u8; 32];

fn digest(token: &str) -> TokenDigest {
    Sha256::digest(token.as_bytes()).into()
}

/// The configured tokens, kept only as digests. No `Debug`: even digests of
/// secrets stay out of logs.
#[derive(Clone, Default)]
pub(crate) struct Tokens {
    write: Option<TokenDigest>,
    read: Option<TokenDigest>,
}

impl Tokens {
    /// The tokens that guard writes and, optionally, reads.
    pub fn new(write: Option<&str>, read: Option<&str>) -> Self {
        Tokens {
            write: write.map(digest),
            read: read.map(digest),
        }
    }

    fn check(&self, headers: &HeaderMap, write: bool) -> Result<(), ApiError> {
        let accepted: Vec<&TokenDigest> = if write {
            self.write.iter().collect()
        } else if self.read.is_some() {
            // The write token is the stronger one: it reads too.
            self.read.iter().chain(&self.write).collect()
        } else {
            Vec::new()
        };
        if accepted.is_empty() {
            return Ok(());
        }
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let Some(presented) = presented else {
            return Err(ApiError::front(
                Kind::Unauthorized,
                "this endpoint needs Authorization: Bearer <token>",
            ));
        };
        // Every token is compared, so timing says nothing of which matched;
        // digests have one length, so it says nothing of the token's either.
        let presented = digest(presented);
        let matched = accepted.iter().fold(subtle::Choice::from(0), |any, token| {
            any | presented.ct_eq(*token)
        });
        if bool::from(matched) {
            Ok(())
        } else {
            Err(ApiError::front(
                Kind::Unauthorized,
                "the bearer token is not valid here",
            ))
        }
    }
}

/// Middleware for routes that change leases.
pub(crate) async fn writes(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    state.tokens.check(req.headers(), true)?;
    Ok(next.run(req).await)
}

/// Middleware for routes that read leases or watch them.
pub(crate) async fn reads(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    state.tokens.check(req.headers(), false)?;
    Ok(next.run(req).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bearer(token: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
        headers
    }

    #[test]
    fn only_the_exact_write_token_passes_a_write() {
        let tokens = Tokens::new(Some("s3cret"), None);
        assert!(tokens.check(&bearer("s3cret"), true).is_ok());
        for wrong in ["s3cre", "s3crett", "S3CRET", "x"] {
            assert!(tokens.check(&bearer(wrong), true).is_err(), "{wrong}");
        }
        assert!(tokens.check(&HeaderMap::new(), true).is_err());
    }

    #[test]
    fn the_write_token_reads_too_and_the_read_token_does_not_write() {
        let tokens = Tokens::new(Some("w"), Some("r"));
        assert!(tokens.check(&bearer("r"), false).is_ok());
        assert!(tokens.check(&bearer("w"), false).is_ok());
        assert!(tokens.check(&bearer("r"), true).is_err());
    }

    #[test]
    fn without_tokens_nothing_is_asked() {
        assert!(Tokens::default().check(&HeaderMap::new(), true).is_ok());
        let writes_only = Tokens::new(Some("w"), None);
        assert!(writes_only.check(&HeaderMap::new(), false).is_ok());
    }
}
