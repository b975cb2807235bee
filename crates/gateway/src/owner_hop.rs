//! The owner hop of forward: one NATS request to
//! `dagnats.lease.inbox.<holder>.<key>` with the fence in a header, or, for
//! a tenure of a tenant account's principal under a policy, to that
//! account's inbox as the gateways' account imports it.
//!
//! It only reports what happened, as the core's [`HopOutcome`]; the retry
//! rule lives in the core.

use std::sync::Arc;
use std::time::Duration;

use async_nats::{Client, HeaderMap, HeaderName, RequestErrorKind};
use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;

use crate::core::ports::{HopOutcome, OwnerHop};

use crate::policy::Policy;
use dagnats_leases_client::headers;
use dagnats_leases_wire::names::{HEADER_FENCE, inbox_subject, tenant_inbox_subject};

/// Sends forwarded requests to owners.
pub(crate) struct OwnerInbox {
    client: Client,
    /// Under a policy, where the holders of each tenant account are.
    policy: Option<Arc<Policy>>,
}

impl OwnerInbox {
    /// An inbox sender over `client`; with a `policy`, a forward to a
    /// tenure of a tenant account's principal goes to that account.
    pub(crate) fn new(client: Client, policy: Option<Arc<Policy>>) -> Self {
        OwnerInbox { client, policy }
    }

    /// The inbox subject of `holder` for `key`: in the gateways' own
    /// account, or, for a tenure of a tenant account's principal, that
    /// account's inboxes as the gateways' account imports them
    /// (docs/operations.md, Tenants in their own accounts).
    fn subject(&self, (holder, principal): (&str, Option<&str>), key: &str) -> String {
        let account = self
            .policy
            .as_deref()
            .zip(principal)
            .and_then(|(policy, principal)| policy.account_of(principal));
        match account {
            Some(account) => tenant_inbox_subject(account, holder, key),
            None => inbox_subject(holder, key),
        }
    }

    async fn request(
        &self,
        to: (&str, Option<&str>),
        key: &str,
        fence: u64,
        payload: Bytes,
        timeout: Duration,
    ) -> HopOutcome {
        const FENCE: HeaderName = HeaderName::from_static(HEADER_FENCE);
        let mut headers = HeaderMap::new();
        headers.insert(FENCE, fence.to_string());
        let request = async_nats::Request::new()
            .payload(payload)
            .headers(headers)
            .timeout(Some(timeout));
        match self
            .client
            .send_request(self.subject(to, key), request)
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

impl OwnerHop for OwnerInbox {
    /// The largest message the server accepts, as it told this connection.
    fn max_payload(&self) -> usize {
        self.client.server_info().max_payload
    }

    /// The bytes the fence header adds to a request to the owner.
    fn overhead(&self, fence: u64) -> usize {
        // "NATS/1.0\r\n" + "Dagnats-Lease-Fence: <n>\r\n" + "\r\n"
        10 + HEADER_FENCE.len() + 2 + fence.to_string().len() + 2 + 2
    }

    fn send<'a>(
        &'a self,
        to: (&'a str, Option<&'a str>),
        key: &'a str,
        fence: u64,
        payload: Bytes,
        timeout: Duration,
    ) -> BoxFuture<'a, HopOutcome> {
        self.request(to, key, fence, payload, timeout).boxed()
    }
}
