//! Bearer tokens. Without a policy, the write token guards acquire, renew,
//! release, transfer, revoke and forward, and the optional read token
//! guards owner, list and events. Under a policy a token is a principal's
//! (docs/protocol.md, Authorization): every lease endpoint needs one, and
//! what it may do is the policy's to say. Either way a missing or unknown
//! token is `unauthorized`, tokens are never logged, and they are compared
//! by their SHA-256 digests in constant time: a byte-wise comparison of the
//! tokens themselves would return early on a length mismatch, telling a
//! caller how long the token is.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::Response;
use subtle::ConstantTimeEq;

use super::AppState;
use super::error::ApiError;
use crate::policy::{Access, Policy, TokenDigest, digest};
use dagnats_leases_wire::kind::Kind;

/// The configured tokens, kept only as digests, or the policy whose
/// principals the tokens are. No `Debug`: even digests of secrets stay out
/// of logs.
#[derive(Clone, Default)]
pub(crate) struct Tokens {
    write: Option<TokenDigest>,
    read: Option<TokenDigest>,
    policy: Option<Arc<Policy>>,
}

impl Tokens {
    /// The tokens that guard writes and, optionally, reads; under a
    /// `policy`, its principals' tokens instead (the two settings are
    /// principals of it).
    pub fn new(write: Option<&str>, read: Option<&str>, policy: Option<Arc<Policy>>) -> Self {
        Tokens {
            write: write.map(digest),
            read: read.map(digest),
            policy,
        }
    }

    /// What the request's token lets it do on a route that changes leases
    /// (`write`) or reads them.
    fn check(&self, headers: &HeaderMap, write: bool) -> Result<Access, ApiError> {
        if let Some(policy) = &self.policy {
            let presented = bearer(headers).ok_or_else(missing)?;
            return match policy.token_caller(presented) {
                Some(principal) => Ok(Access::Principal {
                    principal,
                    policy: policy.clone(),
                }),
                None => Err(not_valid()),
            };
        }
        let accepted: Vec<&TokenDigest> = if write {
            self.write.iter().collect()
        } else if self.read.is_some() {
            // The write token is the stronger one: it reads too.
            self.read.iter().chain(&self.write).collect()
        } else {
            Vec::new()
        };
        if accepted.is_empty() {
            return Ok(Access::Open);
        }
        let presented = bearer(headers).ok_or_else(missing)?;
        // Every token is compared, so timing says nothing of which matched;
        // digests have one length, so it says nothing of the token's either.
        let presented = digest(presented);
        let matched = accepted.iter().fold(subtle::Choice::from(0), |any, token| {
            any | presented.ct_eq(*token)
        });
        if bool::from(matched) {
            Ok(Access::Open)
        } else {
            Err(not_valid())
        }
    }
}

/// The token of `Authorization: Bearer <token>`, if the request has one.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

fn missing() -> ApiError {
    ApiError::front(
        Kind::Unauthorized,
        "this endpoint needs Authorization: Bearer <token>",
    )
}

fn not_valid() -> ApiError {
    ApiError::front(Kind::Unauthorized, "the bearer token is not valid here")
}

/// Middleware for routes that change leases: the request carries its
/// [`Access`] on to the handler.
pub(crate) async fn writes(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let access = state.tokens.check(req.headers(), true)?;
    req.extensions_mut().insert(access);
    Ok(next.run(req).await)
}

/// Middleware for routes that read leases or watch them: the request
/// carries its [`Access`] on to the handler.
pub(crate) async fn reads(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let access = state.tokens.check(req.headers(), false)?;
    req.extensions_mut().insert(access);
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
        let tokens = Tokens::new(Some("s3cret"), None, None);
        assert!(tokens.check(&bearer("s3cret"), true).is_ok());
        for wrong in ["s3cre", "s3crett", "S3CRET", "x"] {
            assert!(tokens.check(&bearer(wrong), true).is_err(), "{wrong}");
        }
        assert!(tokens.check(&HeaderMap::new(), true).is_err());
    }

    #[test]
    fn the_write_token_reads_too_and_the_read_token_does_not_write() {
        let tokens = Tokens::new(Some("w"), Some("r"), None);
        assert!(tokens.check(&bearer("r"), false).is_ok());
        assert!(tokens.check(&bearer("w"), false).is_ok());
        assert!(tokens.check(&bearer("r"), true).is_err());
    }

    #[test]
    fn under_a_policy_every_route_needs_a_principals_token() {
        let text = "[[principal]]\nname = \"dash\"\nhttp_token_sha256 = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"\nprefixes = [\"a-\"]\nrights = [\"read\"]\n";
        let tokens_of = crate::policy::HttpTokens {
            write: Some("w"),
            read: None,
        };
        let policy = Arc::new(Policy::parse(text, tokens_of).unwrap());
        let tokens = Tokens::new(Some("w"), None, Some(policy));
        for write in [true, false] {
            assert!(tokens.check(&HeaderMap::new(), write).is_err());
            assert!(tokens.check(&bearer("nobody's"), write).is_err());
            let Ok(Access::Principal { principal, .. }) = tokens.check(&bearer("test"), write)
            else {
                panic!("the dashboard's token names its principal")
            };
            assert_eq!(&*principal.name, "dash");
            let Ok(Access::Principal { principal, .. }) = tokens.check(&bearer("w"), write) else {
                panic!("the write token is a principal too")
            };
            assert_eq!(&*principal.name, "DAGNATS_HTTP_TOKEN");
        }
    }

    #[test]
    fn without_tokens_nothing_is_asked() {
        assert!(Tokens::default().check(&HeaderMap::new(), true).is_ok());
        let writes_only = Tokens::new(Some("w"), None, None);
        assert!(writes_only.check(&HeaderMap::new(), false).is_ok());
    }
}
