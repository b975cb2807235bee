//! [`serve_inbox`]: the owner side of forward.
//!
//! A holder that accepts forwards subscribes on
//! `dagnats.lease.inbox.<holder>.>` (a plain subscription: the subject names
//! one process) and rejects, with an empty body and
//! `Dagnats-Lease-Reject: stale`, any request when it is not acting as owner
//! of the key, when `Dagnats-Lease-Fence` is missing or not an unsigned
//! integer, or when the fence is lower than its tenure's acquire revision.
//! A rejected request is never handed to user code, and dagnats may then
//! retry it elsewhere.

use std::future::Future;
use std::sync::Arc;

use async_nats::{HeaderMap, Message};
use bytes::Bytes;
use futures::StreamExt;

use super::calls::ClientError;
use super::headers;
use dagnats_leases_wire::names::{HEADER_FENCE, HEADER_REJECT, INBOX_PREFIX, REJECT_STALE};

/// A forwarded request this process accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxRequest {
    pub key: String,
    /// The lease revision dagnats read when it forwarded.
    pub fence: u64,
    pub payload: Bytes,
}

/// Why a request was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reject {
    NotOwner,
    NoFence,
    StaleFence,
}

/// Applies the three rejection rules (docs/protocol.md, Forwarding to the
/// owner). `tenure(key)` is the acquire
/// revision of the current tenure, or `None` when not acting as owner.
fn check(
    msg: &Message,
    prefix: &str,
    tenure: impl Fn(&str) -> Option<u64>,
) -> Result<InboxRequest, Reject> {
    let key = msg
        .subject
        .as_str()
        .strip_prefix(prefix)
        .unwrap_or_default();
    let tenure = tenure(key).ok_or(Reject::NotOwner)?;
    // Digits only: `u64::from_str` would also take a leading `+`.
    let fence: u64 = headers::get(msg.headers.as_ref(), HEADER_FENCE)
        .filter(|v| v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse().ok())
        .ok_or(Reject::NoFence)?;
    if fence < tenure {
        return Err(Reject::StaleFence);
    }
    Ok(InboxRequest {
        key: key.to_string(),
        fence,
        payload: msg.payload.clone(),
    })
}

/// The owner inbox of one holder, subscribed: what the server routes to
/// `dagnats.lease.inbox.<holder>.>` from the moment
/// [`OwnerInbox::subscribe`] returns waits for [`OwnerInbox::serve`].
pub struct OwnerInbox {
    nats: async_nats::Client,
    prefix: String,
    sub: async_nats::Subscriber,
}

impl OwnerInbox {
    /// Subscribes `holder`'s inbox and returns once the server has
    /// registered the subscription, so a forward sent from any connection
    /// after this reaches it (rather than meeting no responders).
    pub async fn subscribe(nats: async_nats::Client, holder: &str) -> Result<Self, ClientError> {
        let prefix = format!("{INBOX_PREFIX}.{holder}.");
        let sub = nats
            .subscribe(format!("{prefix}>"))
            .await
            .map_err(|err| ClientError::Nats(err.to_string()))?;
        registered(&nats).await?;
        Ok(OwnerInbox { nats, prefix, sub })
    }

    /// Answers forwarded requests until the connection closes.
    /// `tenure(key)` says whether this process acts as owner of `key` now
    /// and since which revision (a keeper's [`Ownership::tenure`]);
    /// `handler` produces the reply body for each accepted request.
    /// Dropping the future unsubscribes.
    ///
    /// [`Ownership::tenure`]: super::Ownership::tenure
    pub async fn serve<T, H, F>(self, tenure: T, handler: H) -> Result<(), ClientError>
    where
        T: Fn(&str) -> Option<u64>,
        H: Fn(InboxRequest) -> F + Send + Sync + 'static,
        F: Future<Output = Bytes> + Send + 'static,
    {
        let OwnerInbox {
            nats,
            prefix,
            mut sub,
        } = self;
        let handler = Arc::new(handler);
        while let Some(msg) = sub.next().await {
            let Some(reply_to) = msg.reply.clone() else {
                continue;
            };
            match check(&msg, &prefix, &tenure) {
                Ok(req) => {
                    let (nats, handler) = (nats.clone(), handler.clone());
                    tokio::spawn(async move {
                        let body = handler(req).await;
                        if let Err(err) = nats.publish(reply_to, body).await {
                            tracing::warn!(%err, "could not answer a forwarded request");
                        }
                    });
                }
                Err(why) => {
                    tracing::debug!(?why, subject = %msg.subject, "rejecting forwarded request");
                    let mut headers = HeaderMap::new();
                    headers.insert(HEADER_REJECT, REJECT_STALE);
                    if let Err(err) = nats
                        .publish_with_headers(reply_to, headers, Bytes::new())
                        .await
                    {
                        tracing::warn!(%err, "could not reject a forwarded request");
                    }
                }
            }
        }
        Ok(())
    }
}

/// Returns once the server has handled everything `nats` sent before: it
/// handles each connection's operations in order, so a message this
/// connection sends itself comes back after them (`flush` only writes the
/// socket).
async fn registered(nats: &async_nats::Client) -> Result<(), ClientError> {
    let subject = nats.new_inbox();
    let mut echo = nats
        .subscribe(subject.clone())
        .await
        .map_err(|err| ClientError::Nats(err.to_string()))?;
    nats.publish(subject, Bytes::new())
        .await
        .map_err(|err| ClientError::Nats(err.to_string()))?;
    echo.next()
        .await
        .map(drop)
        .ok_or_else(|| ClientError::Nats("the connection closed".into()))
}

/// Answers forwarded requests for `holder` until the connection closes:
/// [`OwnerInbox::subscribe`], then [`OwnerInbox::serve`].
/// `tenure(key)` says whether this process acts as owner of `key` now and
/// since which revision (a keeper's [`Ownership::tenure`]); `handler`
/// produces the reply body for each accepted request.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use dagnats_leases_client::{serve_inbox, KeeperOptions, LeaseClient, LeaseKeeper};
///
/// let nats = async_nats::connect("nats://127.0.0.1:4222").await?;
/// let keeper = LeaseKeeper::start(LeaseClient::new(nats.clone()), KeeperOptions {
///     key: "shard-7".into(),
///     holder: "worker-a1".into(),
///     ttl: Duration::from_secs(15),
///     wait: true,
/// });
/// let ownership = keeper.watch();
/// let tenure = move |key: &str| (key == "shard-7").then(|| ownership.borrow().tenure()).flatten();
/// serve_inbox(nats, "worker-a1", tenure, |req| async move {
///     format!("handled {} bytes at fence {}", req.payload.len(), req.fence).into()
/// })
/// .await?;
/// # Ok(()) }
/// ```
///
/// [`Ownership::tenure`]: super::Ownership::tenure
pub async fn serve_inbox<T, H, F>(
    nats: async_nats::Client,
    holder: &str,
    tenure: T,
    handler: H,
) -> Result<(), ClientError>
where
    T: Fn(&str) -> Option<u64>,
    H: Fn(InboxRequest) -> F + Send + Sync + 'static,
    F: Future<Output = Bytes> + Send + 'static,
{
    OwnerInbox::subscribe(nats, holder)
        .await?
        .serve(tenure, handler)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(key: &str, fence: Option<&str>) -> Message {
        let mut headers = HeaderMap::new();
        if let Some(fence) = fence {
            headers.insert(HEADER_FENCE, fence);
        }
        Message {
            subject: format!("dagnats.lease.inbox.w.{key}").into(),
            reply: Some("_INBOX.x".into()),
            payload: Bytes::from_static(b"body"),
            headers: Some(headers),
            status: None,
            description: None,
            length: 0,
        }
    }

    const PREFIX: &str = "dagnats.lease.inbox.w.";

    fn tenure_10_on_k(key: &str) -> Option<u64> {
        (key == "k").then_some(10)
    }

    #[test]
    fn accepts_a_fence_at_or_above_the_tenure() {
        for fence in ["10", "12"] {
            let req = check(&request("k", Some(fence)), PREFIX, tenure_10_on_k).unwrap();
            assert_eq!(req.fence, fence.parse::<u64>().unwrap());
            assert_eq!(req.key, "k");
        }
    }

    #[test]
    fn reads_the_fence_header_whatever_the_case_of_its_name() {
        let mut msg = request("k", None);
        msg.headers
            .as_mut()
            .unwrap()
            .insert("dagnats-lease-fence", "11");
        let req = check(&msg, PREFIX, tenure_10_on_k).unwrap();
        assert_eq!(req.fence, 11);
    }

    #[test]
    fn rejects_when_not_acting_as_owner() {
        let got = check(&request("other", Some("12")), PREFIX, tenure_10_on_k);
        assert_eq!(got, Err(Reject::NotOwner));
    }

    #[test]
    fn rejects_a_missing_or_malformed_fence() {
        for fence in [
            None,
            Some(""),
            Some("-1"),
            Some("+12"),
            Some("1.5"),
            Some("x"),
        ] {
            let got = check(&request("k", fence), PREFIX, tenure_10_on_k);
            assert_eq!(got, Err(Reject::NoFence), "{fence:?}");
        }
    }

    #[test]
    fn rejects_a_fence_below_the_tenure() {
        let got = check(&request("k", Some("9")), PREFIX, tenure_10_on_k);
        assert_eq!(got, Err(Reject::StaleFence));
    }
}
