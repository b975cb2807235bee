//! The owner hop of forward: one NATS request to
//! `dagnats.lease.inbox.<holder>.<key>` with the fence in a header.
//!
//! It only reports what happened; the retry rule lives in the core.

use std::time::Duration;

use async_nats::{Client, HeaderMap, RequestErrorKind};
use bytes::Bytes;

use dagnats_leases_client::headers;
use dagnats_leases_wire::names::{HEADER_FENCE, inbox_subject};

/// What one attempt at the owner came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HopOutcome {
    /// The owner answered; its body (headers are not relayed).
    Replied(Bytes),
    /// The owner refused with `Dagnats-Lease-Reject: stale` (name and value
    /// in any case): not processed.
    Rejected,
    /// Nobody subscribes on the inbox: not processed.
    NoResponders,
    /// No answer in time: the owner may have processed it.
    TimedOut,
    /// The request could not be sent (e.g. NATS is disconnected).
    Failed(String),
}

impl HopOutcome {
    /// A short name for metrics and logs.
    pub fn name(&self) -> &'static str {
        match self {
            HopOutcome::Replied(_) => "replied",
            HopOutcome::Rejected => "rejected",
            HopOutcome::NoResponders => "no_responders",
            HopOutcome::TimedOut => "timed_out",
            HopOutcome::Failed(_) => "failed",
        }
    }
}

/// Sends forwarded requests to owners; cheap to clone.
#[derive(Clone)]
pub struct OwnerInbox {
    client: Client,
}

impl OwnerInbox {
    /// An inbox sender over `client`.
    pub fn new(client: Client) -> Self {
        OwnerInbox { client }
    }

    /// The largest message the server accepts, as it told this connection.
    pub fn max_payload(&self) -> usize {
        self.client.server_info().max_payload
    }

    /// The bytes the fence header adds to a request to the owner.
    pub fn header_overhead(fence: u64) -> usize {
        // "NATS/1.0\r\n" + "Dagnats-Lease-Fence: <n>\r\n" + "\r\n"
        10 + HEADER_FENCE.len() + 2 + fence.to_string().len() + 2 + 2
    }

    /// One request to `holder`'s inbox for `key`, fenced at `fence`.
    pub async fn send(
        &self,
        holder: &str,
        key: &str,
        fence: u64,
        payload: Bytes,
        timeout: Duration,
    ) -> HopOutcome {
        let mut headers = HeaderMap::new();
        headers.insert(HEADER_FENCE, fence.to_string().as_str());
        let request = async_nats::Request::new()
            .payload(payload)
            .headers(headers)
            .timeout(Some(timeout));
        match self
            .client
            .send_request(inbox_subject(holder, key), request)
            .await
        {
            Ok(reply) => {
                if headers::is_stale_reject(reply.headers.as_ref()) {
                    HopOutcome::Rejected
                } else {
                    HopOutcome::Replied(reply.payload)
                }
            }
            Err(err) => match err.kind() {
                RequestErrorKind::NoResponders => HopOutcome::NoResponders,
                RequestErrorKind::TimedOut => HopOutcome::TimedOut,
                _ => HopOutcome::Failed(err.to_string()),
            },
        }
    }
}
