//! [`LeaseClient`]: the lease subjects as typed calls.

use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::time::{Instant, sleep_until};

use async_nats::RequestErrorKind;
use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;

use dagnats_leases_wire::history::{HistoryRequest, TenureHistory};
use dagnats_leases_wire::kind::{ErrorBody, Kind};
use dagnats_leases_wire::names::{
    HEADER_WAIT_MS, HEADER_WAITED_MS, SUBJECT_ACQUIRE, SUBJECT_FORWARD, SUBJECT_HISTORY,
    SUBJECT_LIST, SUBJECT_OWNER, SUBJECT_RELEASE, SUBJECT_RENEW, SUBJECT_TRANSFER,
};
use dagnats_leases_wire::reply::{
    Forwarded, Grant, Lease, LeaseList, MAX_REVISION, Owner, Released,
};
use dagnats_leases_wire::request::{
    AcquireRequest, ForwardRequest, ForwardTimeout, HolderId, KeyPrefix, LeaseKey, ListLimit,
    ListRequest, OwnerRequest, Payload, ReleaseRequest, RenewRequest, Revision, TransferRequest,
    Ttl,
};
use dagnats_leases_wire::wait::{self, KEY_CALL_SUBJECTS};

/// Default time to wait for the gateway's reply.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Extra time a forward call waits beyond its `timeout_ms`: "set your own
/// request timeout a little higher".
const FORWARD_MARGIN: Duration = Duration::from_secs(1);

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The gateway answered with an error.
    #[error("{message}")]
    Lease {
        kind: Kind,
        message: String,
        /// Forward: the owner last tried.
        holder: Option<String>,
        /// Forward: the fence of the owner last tried.
        revision: Option<u64>,
    },
    /// The request is out of bounds (docs/protocol.md, Input bounds); nothing
    /// was sent.
    #[error("invalid request: {0}")]
    Invalid(String),
    /// No gateway subscribes to the lease subjects.
    #[error("no dagnats-leases gateway is listening")]
    NoGateway,
    /// No reply in time; the call may or may not have happened.
    #[error("no reply from the gateway within {0:?}")]
    Timeout(Duration),
    /// The request does not fit the connection's `max_payload` (a forward's
    /// payload, base64 in its request); nothing was sent. Its
    /// [`kind`](ClientError::kind) is the gateway's for a payload that does
    /// not fit the hop to the owner: `payload_too_large`.
    #[error("the request does not fit the NATS server's max_payload: {0}")]
    PayloadTooLarge(String),
    /// NATS itself failed (e.g. disconnected).
    #[error("NATS request failed: {0}")]
    Nats(String),
    /// A reply this client cannot read: not JSON, a field missing or of
    /// the wrong type, a revision above 2^53 - 1 (every fence is below).
    #[error("unreadable reply: {0}")]
    BadReply(String),
}

impl ClientError {
    /// The wire kind, when the gateway answered with one, and
    /// `payload_too_large` for a request too large to send.
    pub fn kind(&self) -> Option<&Kind> {
        match self {
            ClientError::Lease { kind, .. } => Some(kind),
            ClientError::PayloadTooLarge(_) => Some(&Kind::PayloadTooLarge),
            _ => None,
        }
    }

    /// True when the caller is not the holder at that fence: stop acting
    /// as owner now.
    pub fn is_lost(&self) -> bool {
        self.kind() == Some(&Kind::Lost)
    }
}

/// Typed calls to the lease gateway over NATS; cheap to clone.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use dagnats_leases_client::LeaseClient;
///
/// let nats = async_nats::connect("nats://127.0.0.1:4222").await?;
/// let leases = LeaseClient::new(nats);
/// let grant = leases.acquire("notify-leader", "notify-7f3a", Duration::from_secs(15)).await?;
/// if grant.granted {
///     let renewed = leases
///         .renew("notify-leader", "notify-7f3a", grant.lease.revision, Duration::from_secs(15))
///         .await?;
///     leases.release("notify-leader", "notify-7f3a", renewed.lease.revision).await?;
/// } else {
///     println!("held by {}", grant.lease.holder);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LeaseClient {
    nats: async_nats::Client,
    timeout: Duration,
}

fn invalid(err: String) -> ClientError {
    ClientError::Invalid(err)
}

fn key(key: &str) -> Result<LeaseKey, ClientError> {
    LeaseKey::try_from(key.to_string()).map_err(invalid)
}

fn holder(holder: &str) -> Result<HolderId, ClientError> {
    HolderId::try_from(holder.to_string()).map_err(invalid)
}

fn ttl(ttl: Duration) -> Result<Ttl, ClientError> {
    let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    Ttl::try_from(ms).map_err(invalid)
}

fn revision(revision: u64) -> Result<Revision, ClientError> {
    Revision::try_from(revision).map_err(invalid)
}

impl LeaseClient {
    /// A client on `nats`, waiting up to 5 s for each reply.
    pub fn new(nats: async_nats::Client) -> Self {
        LeaseClient {
            nats,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The same client with another reply timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The NATS connection underneath.
    pub fn nats(&self) -> &async_nats::Client {
        &self.nats
    }

    /// Takes `key` for `ttl` if nobody holds it; `granted: false` names the
    /// holder. Safe to retry: the holder asking again gets its lease back.
    pub async fn acquire(&self, k: &str, h: &str, t: Duration) -> Result<Grant, ClientError> {
        self.acquire_with(k, h, t, None).await
    }

    /// [`acquire`](Self::acquire) as one try of a wait for the key that
    /// began `waited` ago: the gateway counts, once it grants the key, how
    /// long its holder waited for it (`Dagnats-Lease-Waited-Ms`).
    pub async fn acquire_waited(
        &self,
        k: &str,
        h: &str,
        t: Duration,
        waited: Duration,
    ) -> Result<Grant, ClientError> {
        self.acquire_with(k, h, t, Some(waited)).await
    }

    async fn acquire_with(
        &self,
        k: &str,
        h: &str,
        t: Duration,
        waited: Option<Duration>,
    ) -> Result<Grant, ClientError> {
        let req = AcquireRequest {
            key: key(k)?,
            holder: holder(h)?,
            ttl_ms: ttl(t)?,
        };
        let body = Bytes::from(serde_json::to_vec(&req).expect("requests serialize"));
        let waited = waited.map(|waited| waited.as_millis().to_string());
        let reply = self
            .send(SUBJECT_ACQUIRE, body, self.timeout, waited.as_deref())
            .await?;
        decode_reply(&reply)
    }

    /// Extends the lease held at `rev` to `t` from now; the reply carries
    /// the new fence. [`ClientError::is_lost`] means stop acting as owner.
    pub async fn renew(
        &self,
        k: &str,
        h: &str,
        rev: u64,
        t: Duration,
    ) -> Result<Grant, ClientError> {
        let req = RenewRequest {
            key: key(k)?,
            holder: holder(h)?,
            revision: revision(rev)?,
            ttl_ms: ttl(t)?,
        };
        self.call(SUBJECT_RENEW, &req, self.timeout).await
    }

    /// Frees the lease held at `rev`.
    pub async fn release(&self, k: &str, h: &str, rev: u64) -> Result<Released, ClientError> {
        let req = ReleaseRequest {
            key: key(k)?,
            holder: holder(h)?,
            revision: revision(rev)?,
        };
        self.call(SUBJECT_RELEASE, &req, self.timeout).await
    }

    /// Who holds `key`, read through the stream leader.
    pub async fn owner(&self, k: &str) -> Result<Owner, ClientError> {
        let req = OwnerRequest { key: key(k)? };
        self.call(SUBJECT_OWNER, &req, self.timeout).await
    }

    /// Hands the lease `h` holds at `rev` to `to` for `t` from now, in one
    /// write: the reply is `to`'s lease, a new tenure at a higher fence.
    /// Stop acting as owner before calling it. [`ClientError::is_lost`]
    /// means `h` did not hold the key at `rev`.
    ///
    /// ```no_run
    /// # async fn demo(leases: dagnats_leases_client::LeaseClient, fence: u64) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// let grant = leases
    ///     .transfer("shard-7", "worker-a", fence, "worker-b", Duration::from_secs(15))
    ///     .await?;
    /// assert_eq!(grant.lease.holder, "worker-b");
    /// # Ok(()) }
    /// ```
    pub async fn transfer(
        &self,
        k: &str,
        h: &str,
        rev: u64,
        to: &str,
        t: Duration,
    ) -> Result<Grant, ClientError> {
        let req = TransferRequest::new(key(k)?, holder(h)?, revision(rev)?, holder(to)?, ttl(t)?)
            .map_err(invalid)?;
        self.call(SUBJECT_TRANSFER, &req, self.timeout).await
    }

    /// One page of the held leases whose key starts with `prefix`, ordered
    /// by key: those after `after` (a previous page's `next`), at most
    /// `limit` (1 to 5000; `None`: the gateway's 1000), and never more than
    /// fit in one NATS message. `next` is `None` on the last page.
    ///
    /// ```no_run
    /// # async fn demo(leases: dagnats_leases_client::LeaseClient) -> Result<(), Box<dyn std::error::Error>> {
    /// let mut after = None;
    /// loop {
    ///     let page = leases.list("shard-", after.as_deref(), None).await?;
    ///     for lease in &page.leases {
    ///         println!("{} held by {}", lease.key, lease.holder);
    ///     }
    ///     match page.next {
    ///         Some(next) => after = Some(next),
    ///         None => break,
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: Option<usize>,
    ) -> Result<LeaseList, ClientError> {
        let limit = limit
            .map(|n| ListLimit::try_from(u64::try_from(n).unwrap_or(u64::MAX)).map_err(invalid))
            .transpose()?;
        let req = ListRequest {
            prefix: KeyPrefix::try_from(prefix.to_string()).map_err(invalid)?,
            after: after.map(key).transpose()?,
            limit,
        };
        self.call(SUBJECT_LIST, &req, self.timeout).await
    }

    /// Every held lease whose key starts with `prefix`, ordered by key:
    /// [`list`](Self::list) page after page until `next` is null.
    pub async fn list_all(&self, prefix: &str) -> Result<Vec<Lease>, ClientError> {
        let mut leases = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = self.list(prefix, after.as_deref(), None).await?;
            leases.extend(page.leases);
            match page.next {
                Some(next) => after = Some(next),
                None => return Ok(leases),
            }
        }
    }

    /// One page of the tenure history `req` asks for, newest first; pass
    /// its `next` back as `req.before` for the page after it.
    ///
    /// ```no_run
    /// # async fn demo(leases: dagnats_leases_client::LeaseClient) -> Result<(), Box<dyn std::error::Error>> {
    /// use dagnats_leases_client::wire::history::HistoryRequest;
    /// use dagnats_leases_client::wire::request::decode;
    /// let req: HistoryRequest = decode(br#"{"key": "notify-leader", "limit": 10}"#)?;
    /// for tenure in leases.history(&req).await?.tenures {
    ///     println!("{} from {} ({:?})", tenure.holder, tenure.acquired_at, tenure.end);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn history(&self, req: &HistoryRequest) -> Result<TenureHistory, ClientError> {
        self.call(SUBJECT_HISTORY, req, self.timeout).await
    }

    /// Sends `payload` to whoever holds `key`; `timeout` bounds the call.
    pub async fn forward(
        &self,
        k: &str,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Forwarded, ClientError> {
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let req = ForwardRequest {
            key: key(k)?,
            payload: Payload(payload),
            timeout_ms: ForwardTimeout::try_from(ms).map_err(invalid)?,
        };
        self.call(SUBJECT_FORWARD, &req, timeout + FORWARD_MARGIN)
            .await
    }

    /// `subject` (one of `api.leases.*`) with a JSON `body` as it is, sent
    /// as the typed calls send it (timeout, and copies of every call but
    /// forward when its reply is late, see [`Resend`]):
    /// the reply body as the gateway wrote it, error replies included.
    /// For tools that relay JSON rather than typed values.
    pub async fn request(&self, subject: &str, body: Bytes) -> Result<Bytes, ClientError> {
        self.send(subject, body, self.timeout, None).await
    }

    async fn call<Req: Serialize, Rep: DeserializeOwned>(
        &self,
        subject: &str,
        req: &Req,
        timeout: Duration,
    ) -> Result<Rep, ClientError> {
        let body = Bytes::from(serde_json::to_vec(req).expect("requests serialize"));
        decode_reply(&self.send(subject, body, timeout, None).await?)
    }

    /// Sends `body`, and again at each of [`Resend`]'s times that passes
    /// with no reply; the first reply wins. A copy tells the gateway how
    /// long it is still waited for (`Dagnats-Lease-Wait-Ms`) where that
    /// bounds the call ([`wait::bounds`]), and every copy carries
    /// `waited` (milliseconds) as `Dagnats-Lease-Waited-Ms` when given. A
    /// failure (no gateway, the connection gone) is the answer only when
    /// no other copy is in flight.
    async fn send(
        &self,
        subject: &str,
        body: Bytes,
        timeout: Duration,
        waited: Option<&str>,
    ) -> Result<Bytes, ClientError> {
        let start = Instant::now();
        let deadline = start + timeout;
        let send = || {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut request = async_nats::Request::new()
                .payload(body.clone())
                .timeout(Some(left));
            // A copy sent late asks for an answer within what is left,
            // where that bounds the call.
            let bounded = wait::bounds(subject, left);
            if bounded || waited.is_some() {
                let mut headers = async_nats::HeaderMap::new();
                if bounded {
                    headers.insert(HEADER_WAIT_MS, left.as_millis().to_string().as_str());
                }
                if let Some(waited) = waited {
                    headers.insert(HEADER_WAITED_MS, waited);
                }
                request = request.headers(headers);
            }
            self.nats.send_request(subject.to_string(), request)
        };
        let mut copies_at = Resend::of(subject)
            .copies(timeout)
            .into_iter()
            .map(|at| start + at);
        let mut next_copy = copies_at.next();
        let mut in_flight = FuturesUnordered::new();
        in_flight.push(send());
        let reply = loop {
            tokio::select! {
                Some(reply) = in_flight.next() => match reply {
                    Ok(reply) => break Ok(reply),
                    Err(err) if in_flight.is_empty() => break Err(err),
                    Err(_) => {}
                },
                () = sleep_until(next_copy.unwrap_or(deadline)), if next_copy.is_some() => {
                    in_flight.push(send());
                    next_copy = copies_at.next();
                }
            }
        };
        let reply = reply.map_err(|err| match err.kind() {
            RequestErrorKind::NoResponders => ClientError::NoGateway,
            RequestErrorKind::TimedOut => ClientError::Timeout(timeout),
            RequestErrorKind::MaxPayloadExceeded => ClientError::PayloadTooLarge(err.to_string()),
            _ => ClientError::Nats(err.to_string()),
        })?;
        Ok(reply.payload)
    }
}

/// Whether a call is sent again when its reply is late.
///
/// The queue group hands each request to one gateway, picked anew for
/// every request among all the cluster's gateways, not the caller's node's
/// first. One whose node froze or was cut off still gets requests until
/// its routes close (2 to 3 s with 1 s route pings), and they are lost
/// there. Copies sent at half and at three quarters of the timeout let
/// another gateway answer: the second copy leaves after any route cut
/// before the call began has closed, even with a 5 s timeout. Each copy
/// says how long it is still waited for, so a gateway stuck on an election
/// answers a late copy `unavailable` in time instead of after its own
/// 4.5 s budget. Every call the protocol makes safe to repeat is sent again:
/// acquire (idempotent: the holder asking again gets its lease back),
/// renew, release and transfer (fenced: a copy gets the first one's
/// outcome, or `lost` once the key moved on), owner and list (reads). A
/// copy held up in a paused node can still run late, as a retry after a
/// timeout can: an acquire then takes the key again after its holder
/// released it, which a waiting keeper takes up and anyone else waits out
/// for one TTL. Forward is never sent twice: the owner could process it
/// twice ("a timeout is never retried").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resend {
    Never,
    AtHalfAndThreeQuarters,
}

impl Resend {
    fn of(subject: &str) -> Self {
        if KEY_CALL_SUBJECTS.contains(&subject)
            || [SUBJECT_LIST, SUBJECT_HISTORY].contains(&subject)
        {
            Resend::AtHalfAndThreeQuarters
        } else {
            Resend::Never
        }
    }

    /// When copies leave, counted from the first send of a call that
    /// waits `timeout` in all.
    fn copies(self, timeout: Duration) -> Vec<Duration> {
        match self {
            Resend::Never => Vec::new(),
            Resend::AtHalfAndThreeQuarters => vec![timeout / 2, timeout * 3 / 4],
        }
    }
}

/// The fields of the replies (leases, releases, list entries, forwards and
/// their errors, history's tenures) that carry a revision.
const REVISION_FIELDS: [&str; 3] = ["revision", "tenure", "end_revision"];

/// A revision anywhere in `value` above [`MAX_REVISION`], which no gateway
/// hands out.
fn unsafe_revision(value: &serde_json::Value) -> Option<u64> {
    match value {
        serde_json::Value::Object(fields) => fields.iter().find_map(|(name, field)| {
            let revision = field
                .as_u64()
                .filter(|_| REVISION_FIELDS.contains(&name.as_str()));
            match revision {
                Some(revision) => Some(revision).filter(|r| *r > MAX_REVISION),
                None => unsafe_revision(field),
            }
        }),
        serde_json::Value::Array(items) => items.iter().find_map(unsafe_revision),
        _ => None,
    }
}

fn decode_reply<Rep: DeserializeOwned>(payload: &[u8]) -> Result<Rep, ClientError> {
    let value: serde_json::Value =
        serde_json::from_slice(payload).map_err(|err| ClientError::BadReply(err.to_string()))?;
    if let Some(revision) = unsafe_revision(&value) {
        return Err(ClientError::BadReply(format!(
            "revision {revision} is above 2^53 - 1, beyond every fence"
        )));
    }
    if value.get("kind").is_some() && value.get("error").is_some() {
        let wire: ErrorBody =
            serde_json::from_value(value).map_err(|err| ClientError::BadReply(err.to_string()))?;
        return Err(ClientError::Lease {
            kind: wire.kind,
            message: wire.error,
            holder: wire.holder,
            revision: wire.revision,
        });
    }
    serde_json::from_value(value).map_err(|err| ClientError::BadReply(err.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_replies_become_lease_errors_with_their_kind() {
        let err = decode_reply::<Grant>(br#"{"error":"gone","kind":"lost"}"#).unwrap_err();
        assert!(err.is_lost());
        let err = decode_reply::<Forwarded>(
            br#"{"error":"x","kind":"owner_timeout","holder":"h","revision":4}"#,
        )
        .unwrap_err();
        assert_eq!(
            err,
            ClientError::Lease {
                kind: Kind::OwnerTimeout,
                message: "x".into(),
                holder: Some("h".into()),
                revision: Some(4),
            }
        );
        let err = decode_reply::<Grant>(br#"{"error":"x","kind":"brand_new"}"#).unwrap_err();
        assert_eq!(err.kind(), Some(&Kind::Other("brand_new".into())));
    }

    type Decode = fn(&[u8]) -> Result<(), ClientError>;

    fn decodes<Rep: DeserializeOwned>(body: &[u8]) -> Result<(), ClientError> {
        decode_reply::<Rep>(body).map(drop)
    }

    /// Every reply that carries a revision, with `{rev}` where it goes.
    const REPLIES_WITH_A_REVISION: [(&str, Decode); 7] = [
        (
            r#"{"granted":true,"held":true,"key":"k","holder":"a","revision":{rev},"acquired_at":"2026-10-18T12:00:00Z","expires_at":"2026-10-18T12:00:03Z","ttl_ms":3000}"#,
            decodes::<Grant>,
        ),
        (
            r#"{"released":true,"held":false,"key":"k","holder":"a","revision":{rev}}"#,
            decodes::<Released>,
        ),
        (
            r#"{"held":true,"key":"k","holder":"a","revision":{rev},"acquired_at":"2026-10-18T12:00:00Z","expires_at":"2026-10-18T12:00:03Z","ttl_ms":3000}"#,
            decodes::<Owner>,
        ),
        (
            r#"{"leases":[{"held":true,"key":"k","holder":"a","revision":{rev},"acquired_at":"2026-10-18T12:00:00Z","expires_at":"2026-10-18T12:00:03Z","ttl_ms":3000}],"next":null}"#,
            decodes::<LeaseList>,
        ),
        (
            r#"{"key":"k","holder":"a","revision":{rev},"payload":""}"#,
            decodes::<Forwarded>,
        ),
        (
            r#"{"tenures":[{"key":"k","holder":"a","tenure":{rev},"acquired_at":"2026-10-18T12:00:00Z","ended_at":null,"end":null,"end_revision":null,"renewals":0}],"next":null}"#,
            decodes::<TenureHistory>,
        ),
        (
            r#"{"tenures":[{"key":"k","holder":"a","tenure":7,"acquired_at":"2026-10-18T12:00:00Z","ended_at":"2026-10-18T12:00:01Z","end":"released","end_revision":{rev},"renewals":0}],"next":null}"#,
            decodes::<TenureHistory>,
        ),
    ];

    #[test]
    fn a_reply_whose_revision_is_above_2_pow_53_minus_1_is_unreadable() {
        let error = r#"{"error":"x","kind":"owner_timeout","holder":"a","revision":{rev}}"#;
        for (reply, decode) in REPLIES_WITH_A_REVISION {
            let highest = reply.replace("{rev}", &MAX_REVISION.to_string());
            assert_eq!(decode(highest.as_bytes()), Ok(()), "{highest}");
            let above = reply.replace("{rev}", &(MAX_REVISION + 1).to_string());
            assert!(
                matches!(decode(above.as_bytes()), Err(ClientError::BadReply(_))),
                "{above}"
            );
        }
        let highest = error.replace("{rev}", &MAX_REVISION.to_string());
        let err = decode_reply::<Forwarded>(highest.as_bytes()).unwrap_err();
        assert_eq!(err.kind(), Some(&Kind::OwnerTimeout));
        let above = error.replace("{rev}", &(MAX_REVISION + 1).to_string());
        let err = decode_reply::<Forwarded>(above.as_bytes()).unwrap_err();
        assert!(matches!(err, ClientError::BadReply(_)), "{err:?}");
    }

    #[test]
    fn every_call_but_forward_is_copied_at_half_and_three_quarters_of_its_timeout() {
        let timeout = Duration::from_secs(4);
        let at = [Duration::from_secs(2), Duration::from_secs(3)];
        for subject in KEY_CALL_SUBJECTS
            .into_iter()
            .chain([SUBJECT_LIST, SUBJECT_HISTORY])
        {
            assert_eq!(Resend::of(subject).copies(timeout), at, "{subject}");
        }
        assert!(Resend::of(SUBJECT_FORWARD).copies(timeout).is_empty());
    }

    #[test]
    fn out_of_bounds_requests_are_refused_before_sending() {
        assert!(matches!(
            ttl(Duration::from_millis(1500)),
            Err(ClientError::Invalid(_))
        ));
        assert!(matches!(key("a.b"), Err(ClientError::Invalid(_))));
        assert!(matches!(revision(0), Err(ClientError::Invalid(_))));
    }

    #[tokio::test]
    async fn a_transfer_to_the_holder_itself_is_refused_before_sending() {
        // No server listens here: a call that sent anything would fail
        // otherwise than `Invalid`.
        let nats = async_nats::ConnectOptions::new()
            .retry_on_initial_connect()
            .connect("nats://127.0.0.1:1")
            .await
            .unwrap();
        let leases = LeaseClient::new(nats);
        let ttl = Duration::from_secs(5);
        let err = leases.transfer("k", "a", 3, "a", ttl).await.unwrap_err();
        assert!(
            matches!(&err, ClientError::Invalid(m) if m.contains("another holder")),
            "{err:?}"
        );
        let err = leases.list("", None, Some(0)).await.unwrap_err();
        assert!(matches!(err, ClientError::Invalid(_)), "{err:?}");
        let err = leases.list("", Some("a.b"), None).await.unwrap_err();
        assert!(matches!(err, ClientError::Invalid(_)), "{err:?}");
    }
}
