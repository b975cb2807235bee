//! Bearer tokens: the write token guards acquire, renew, release and
//! forward; the optional read token guards owner, list and events. Tokens
//! are compared in constant time and never logged.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::Response;
use subtle::ConstantTimeEq;

use super::AppState;
use super::error::ApiError;
use crate::core::LeaseError;

/// The configured tokens. No `Debug`: they are secrets.
#[derive(Clone, Default)]
pub(crate) struct Tokens {
    pub(crate) write: Option<String>,
    pub(crate) read: Option<String>,
}

impl Tokens {
    fn check(&self, headers: &HeaderMap, write: bool) -> Result<(), LeaseError> {
        let accepted: Vec<&str> = if write {
            self.write.iter().map(String::as_str).collect()
        } else if self.read.is_some() {
            // The write token is the stronger one: it reads too.
            self.read
                .iter()
                .chain(&self.write)
                .map(String::as_str)
                .collect()
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
            return Err(LeaseError::Unauthorized(
                "this endpoint needs Authorization: Bearer <token>".into(),
            ));
        };
        // Every token is compared, so timing says nothing of which matched.
        let matched = accepted.iter().fold(subtle::Choice::from(0), |any, token| {
            any | presented.as_bytes().ct_eq(token.as_bytes())
        });
        if bool::from(matched) {
            Ok(())
        } else {
            Err(LeaseError::Unauthorized(
                "the bearer token is not valid here".into(),
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
