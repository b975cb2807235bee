//! Forward: deliver a request to whoever holds a key, under the retry
//! rule of docs/protocol.md, Forwarding to the owner.
//!
//! Re-send only after an outcome that proves the owner did not process the
//! request (no responders, or `Dagnats-Lease-Reject: stale`), re-reading the
//! lease first so a new owner is followed; at most 3 attempts, all within
//! `timeout_ms`. A timeout is never retried: the owner may have acted.

use tokio::time::Instant;

use super::error::{ForwardError, LeaseError, Tried};
use super::lease_core::LeaseCore;
use super::ports::HopOutcome;
use dagnats_leases_wire::reply::{Forwarded, Owner};
use dagnats_leases_wire::request::{ForwardRequest, Payload};

/// How the caller carries the owner's reply back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReplyEncoding {
    /// In a JSON reply, base64-encoded: it must fit max_payload that way.
    Base64,
    /// As raw bytes.
    Raw,
}

/// "A call makes at most 3 attempts."
pub(crate) const MAX_ATTEMPTS: u32 = 3;

/// What the JSON reply adds around the base64 payload, besides key and holder.
const REPLY_OVERHEAD: usize = 64;

impl LeaseCore {
    /// Sends `req.payload` to the key's owner and returns its reply body.
    pub(crate) async fn forward(&self, req: ForwardRequest) -> Result<Forwarded, ForwardError> {
        self.forward_as(req, ReplyEncoding::Base64).await
    }

    /// [`forward`](Self::forward) for a caller that takes the owner's reply
    /// as raw bytes (HTTP's raw mode): no base64 on the way back, so no
    /// `reply_too_large`; the reply already fit the owner hop.
    pub(crate) async fn forward_raw(&self, req: ForwardRequest) -> Result<Forwarded, ForwardError> {
        self.forward_as(req, ReplyEncoding::Raw).await
    }

    async fn forward_as(
        &self,
        req: ForwardRequest,
        encoding: ReplyEncoding,
    ) -> Result<Forwarded, ForwardError> {
        let deadline = Instant::now() + req.timeout_ms.duration();
        let key = req.key.as_str();
        let bucket = self.bucket()?;
        let max_payload = self.inbox().max_payload();
        let fail = |error, tried: &Option<Tried>| ForwardError {
            error,
            tried: tried.clone(),
        };
        let mut tried: Option<Tried> = None;
        // Why the last attempt was not processed, once there was one.
        let mut not_processed: Option<LeaseError> = None;
        let out_of_time = |not_processed: Option<LeaseError>| {
            not_processed.unwrap_or_else(|| {
                LeaseError::Unavailable(format!(
                    "timeout_ms ({} ms) ran out before the owner could be reached",
                    req.timeout_ms.duration().as_millis()
                ))
            })
        };
        for attempt in 1..=MAX_ATTEMPTS {
            let read = tokio::time::timeout_at(deadline, self.current(bucket, key)).await;
            let (holder, revision, principal) = match read {
                Err(_) => return Err(fail(out_of_time(not_processed), &tried)),
                Ok(Err(err)) => return Err(fail(err, &tried)),
                Ok(Ok((Owner::Held(lease), principal))) => {
                    (lease.holder, lease.revision, principal)
                }
                Ok(Ok((Owner::Free(_), _))) => {
                    return Err(fail(LeaseError::NotHeld(key.to_string()), &tried));
                }
            };
            tried = Some(Tried {
                holder: holder.clone(),
                revision,
            });
            let size = req.payload.0.len();
            if size + self.inbox().overhead(revision) > max_payload {
                return Err(fail(
                    LeaseError::PayloadTooLarge(format!(
                        "the payload of {size} bytes does not fit the server's max_payload of {max_payload} bytes"
                    )),
                    &tried,
                ));
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(fail(out_of_time(not_processed), &tried));
            }
            let outcome = self
                .inbox()
                .send(
                    (&holder, principal.as_deref()),
                    key,
                    revision,
                    req.payload.0.clone(),
                    remaining,
                )
                .await;
            tracing::debug!(key, holder, revision, attempt, ?outcome, "forward attempt");
            crate::metrics::forward_attempt(outcome.name());
            match outcome {
                HopOutcome::Replied(body) => {
                    let encoded = base64::encoded_len(body.len(), true).unwrap_or(usize::MAX);
                    if encoding == ReplyEncoding::Base64
                        && encoded + key.len() + holder.len() + REPLY_OVERHEAD > max_payload
                    {
                        return Err(fail(
                            LeaseError::ReplyTooLarge(format!(
                                "the owner's reply of {} bytes does not fit max_payload ({max_payload} bytes) once base64-encoded; reply with a reference instead",
                                body.len()
                            )),
                            &tried,
                        ));
                    }
                    return Ok(Forwarded {
                        key: key.to_string(),
                        holder,
                        revision,
                        payload: Payload(body),
                    });
                }
                HopOutcome::Rejected => {
                    not_processed = Some(LeaseError::OwnerRejected(format!(
                        "the owner rejected the request as stale (tried {})",
                        times(attempt)
                    )));
                }
                HopOutcome::NoResponders => {
                    not_processed = Some(LeaseError::OwnerUnavailable(format!(
                        "no process listens on the owner's inbox (tried {})",
                        times(attempt)
                    )));
                }
                HopOutcome::TimedOut => {
                    return Err(fail(
                        LeaseError::OwnerTimeout(format!(
                            "{holder} did not answer within timeout_ms; not retried, as it may have processed the request"
                        )),
                        &tried,
                    ));
                }
                HopOutcome::Failed(reason) => {
                    return Err(fail(
                        LeaseError::Unavailable(format!("could not reach the owner: {reason}")),
                        &tried,
                    ));
                }
            }
        }
        Err(fail(out_of_time(not_processed), &tried))
    }
}

/// `n` as "once" or "N times": the count reaches callers in error texts.
fn times(n: u32) -> String {
    match n {
        1 => "once".to_string(),
        n => format!("{n} times"),
    }
}

#[cfg(test)]
mod tests;
