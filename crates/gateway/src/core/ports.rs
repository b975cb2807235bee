//! The seams the core reaches the outside through, owned by the core:
//! [`Records`] (the bucket, implemented by `store`) and [`OwnerHop`]
//! (forward's request to an owner, implemented by `owner_hop`).
//!
//! The core knows no transport: it sees entries, revisions and outcomes in
//! its own terms, and the adapters translate server answers into these
//! types once. The unit tests of the decision logic implement both with
//! in-memory fakes (`core/fakes.rs`).
//!
//! Calls return boxed futures so the core can hold `Arc<dyn ...>`: one
//! allocation per store or hop call, next to a JetStream round trip.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use time::OffsetDateTime;

use dagnats_leases_wire::history::{HistoryRequest, Tenure};
use dagnats_leases_wire::record::{Entry, WriteEvent};

/// The bucket of lease records, as the core uses it.
pub(crate) trait Records: Send + Sync {
    /// Whether calls can be served now; checked once at the start of each
    /// call.
    fn availability(&self) -> Availability;

    /// The last entry of `key` as the key's current one (`None`: the key
    /// has no message).
    fn last<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Entry>, StoreError>>;

    /// Whether `key`'s last revision is still `revision` (0: no message),
    /// as the current stream leader sees it: `true` proves that whatever
    /// revision `revision` holds is the key's current state.
    fn still_at<'a>(
        &'a self,
        key: &'a str,
        revision: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Writes `write` to `key` if the key's last revision is `expected`
    /// (0: the key has no message), and returns the new revision; a
    /// different last revision is [`StoreError::Conflict`].
    fn write<'a>(
        &'a self,
        key: &'a str,
        expected: u64,
        write: Write,
    ) -> BoxFuture<'a, Result<u64, StoreError>>;

    /// The last entry of every key that has a message (held, released or
    /// expired), unordered, all as of one moment inside the call: on a
    /// replicated bucket, confirmed current once for all of them. A key
    /// whose last message does not parse has [`StoreError::Corrupt`].
    /// Shared: concurrent calls may get the same one (never one taken
    /// before they began).
    fn entries(&self) -> BoxFuture<'_, Result<Snapshot, StoreError>>;

    /// Asks for the bucket to be checked and created again now, after a
    /// call found it missing.
    fn request_repair(&self);

    /// Learns that the bucket reached `revision` (a change event of any
    /// gateway's write): a bucket created again starts above it.
    fn saw(&self, revision: u64);
}

/// One key of [`Records::entries`], and its last entry or why it has none.
pub(crate) type KeyEntry = (String, Result<Entry, StoreError>);

/// What [`Records::entries`] found: every key's entry.
pub(crate) type Snapshot = Arc<Vec<KeyEntry>>;

/// Whether the bucket can serve now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Availability {
    Ready,
    /// The server is older than 2.11: there is no bucket.
    Unsupported {
        server_version: String,
    },
    /// JetStream cannot be reached or the bucket is not provisioned; why.
    Unavailable(String),
    /// The bucket served, and its last check failed (no stream leader,
    /// JetStream unreachable): not ready, why, yet calls are still tried,
    /// so they are served again the moment JetStream answers them.
    Degraded(String),
}

/// Why a [`Records`] call failed, in the core's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoreError {
    /// The compare-and-set lost: the key's last revision was not the one expected.
    Conflict,
    /// JetStream cannot serve now (disconnected, no leader, timed out).
    Unavailable(String),
    /// The bucket is gone; it must be created again.
    BucketMissing,
    /// Nothing took a write on the key's subject: only the stream leader
    /// listens there, so the stream is electing one, or the bucket is gone.
    NoListener,
    /// The key's last message, at revision `seq`, does not parse: the
    /// revision lets an operator's revoke write over it.
    Corrupt { seq: u64, cause: String },
    /// An answer the store does not understand.
    Unexpected(String),
    /// The write waited past its [`Write::send_by`] and was never sent.
    TooLate,
}

/// One write: the record body and what its headers say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Write {
    pub(crate) event: WriteEvent,
    /// Whole seconds: every write carries a TTL, so no record outlives it.
    pub(crate) ttl_secs: u64,
    pub(crate) body: Bytes,
    /// A transfer names the holder it takes the lease from, in
    /// `Dagnats-Lease-Previous-Holder`.
    pub(crate) previous_holder: Option<String>,
    /// A write that would land too close to its lease's expiry to count
    /// (renew, transfer) is not sent once this passes while it waits to
    /// be: [`StoreError::TooLate`], and nothing was written.
    pub(crate) send_by: Option<OffsetDateTime>,
}

/// The tenure history, as the core reads it (docs/protocol.md, Tenure
/// history).
pub(crate) trait TenureLog: Send + Sync {
    /// Whether the history's stream and its consumer of the bucket exist:
    /// from then on no change goes unrecorded (until then, a change
    /// replaced before the consumer existed would be); `Err` says why not.
    fn provisioned(&self) -> Result<(), String>;

    /// The tenures `req` may want, each as its latest record says: at
    /// least every one it wants (the core keeps those and pages them).
    fn candidates<'a>(
        &'a self,
        req: &'a HistoryRequest,
    ) -> BoxFuture<'a, Result<Vec<Tenure>, String>>;
}

/// Forward's one request to the holder's inbox, fenced at its revision.
pub(crate) trait OwnerHop: Send + Sync {
    /// The largest message the server accepts.
    fn max_payload(&self) -> usize;

    /// The bytes the hop adds to a request fenced at `fence`, which must
    /// fit max_payload together with the payload.
    fn overhead(&self, fence: u64) -> usize;

    /// One request to the inbox of the holder `to` names, whose tenure
    /// belongs to the principal it names (under a policy), for `key`; what
    /// came of it.
    fn send<'a>(
        &'a self,
        to: (&'a str, Option<&'a str>),
        key: &'a str,
        fence: u64,
        payload: Bytes,
        timeout: Duration,
    ) -> BoxFuture<'a, HopOutcome>;
}

/// What one attempt at the owner came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HopOutcome {
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
    pub(crate) fn name(&self) -> &'static str {
        match self {
            HopOutcome::Replied(_) => "replied",
            HopOutcome::Rejected => "rejected",
            HopOutcome::NoResponders => "no_responders",
            HopOutcome::TimedOut => "timed_out",
            HopOutcome::Failed(_) => "failed",
        }
    }
}
