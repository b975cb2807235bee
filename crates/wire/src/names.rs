//! The names on the wire, in one place, each with the rule it comes from
//! (docs/protocol.md): subjects, headers, the bucket and the queue group.
//!
//! Tests outside this crate rely on every one of these strings: they are the
//! contract, not implementation details.

/// "Leases live in the leases KV bucket."
pub const BUCKET: &str = "leases";

/// The stream behind the bucket, named by the standard KV layout.
pub const STREAM: &str = "KV_leases";

/// The KV's subjects: one per key, the lease records (the standard KV
/// layout, which the official KV clients read).
pub const KEY_SUBJECTS: &str = "$KV.leases.>";

/// The stream's other subjects: the barriers that confirm reads and lists,
/// in the same stream as the keys (so only its leader commits them, in the
/// keys' order) and outside the KV's key space (so no KV client, and no
/// consumer of [`KEY_SUBJECTS`], ever sees one).
pub const BARRIER_SUBJECTS: &str = "dagnats.leases.barrier.*";

/// Where a replicated bucket's reads are confirmed (see `store::bucket`).
pub const READ_BARRIER_SUBJECT: &str = "dagnats.leases.barrier.read";

/// Where a list's snapshot is confirmed (see `store::snapshot`), apart
/// from the reads' barrier: an owner read's barrier never replaces the one
/// a list's consumer looks for.
pub const LIST_BARRIER_SUBJECT: &str = "dagnats.leases.barrier.list";

/// Where gateways before the barriers had subjects of their own put them,
/// inside the KV's key space: an existing bucket's messages there are
/// purged when the gateway adds [`BARRIER_SUBJECTS`] to it.
pub const KEY_SPACE_BARRIER_SUBJECTS: &str = "$KV.leases._dagnats.>";

/// "They use the queue group dagnats-leases, so exactly one dagnats instance
/// handles each request."
pub const QUEUE_GROUP: &str = "dagnats-leases";

/// Request/reply subjects of the lease API.
pub const SUBJECT_ACQUIRE: &str = "api.leases.acquire";
/// See [`SUBJECT_ACQUIRE`].
pub const SUBJECT_RENEW: &str = "api.leases.renew";
/// See [`SUBJECT_ACQUIRE`].
pub const SUBJECT_RELEASE: &str = "api.leases.release";
/// See [`SUBJECT_ACQUIRE`].
pub const SUBJECT_OWNER: &str = "api.leases.owner";
/// "api.leases.forward sends a request to whichever process holds a key."
pub const SUBJECT_FORWARD: &str = "api.leases.forward";
/// Every held lease, a page at a time (docs/protocol.md, Operations), so a
/// NATS-only service can see who holds what.
pub const SUBJECT_LIST: &str = "api.leases.list";
/// Hands a held lease to another holder in one compare-and-set write
/// (docs/protocol.md, Operations): a new tenure with no gap after the old one.
pub const SUBJECT_TRANSFER: &str = "api.leases.transfer";

/// The tenure history of the bucket, a page at a time (docs/protocol.md,
/// Tenure history): who held which key, from when to when, and how each
/// tenure ended.
pub const SUBJECT_HISTORY: &str = "api.leases.history";

/// The stream of the tenure history, beside the bucket: one subject per
/// key, [`history_subject`].
pub const HISTORY_STREAM: &str = "leases_history";

/// The first tokens of every subject of the history stream.
pub const HISTORY_PREFIX: &str = "dagnats.history";

/// The history stream's subjects.
pub const HISTORY_SUBJECTS: &str = "dagnats.history.>";

/// The durable consumer of the bucket's stream that the gateways' history
/// writers share.
pub const HISTORY_CONSUMER: &str = "dagnats_history";

/// The consumer's pinned-client priority group (ADR-42): one writer at a time.
pub const HISTORY_GROUP: &str = "history";

/// Request header of an acquire: milliseconds since the caller's first try
/// of the wait this acquire belongs to (0 on the first). With it, the
/// gateway counts how long waiting acquires waited before their grant.
pub const HEADER_WAITED_MS: &str = "Dagnats-Lease-Waited-Ms";

/// "dagnats ... makes a NATS request to dagnats.lease.inbox.<holder>.<key>".
pub const INBOX_PREFIX: &str = "dagnats.lease.inbox";

/// "... with the lease revision in the Dagnats-Lease-Fence header."
pub const HEADER_FENCE: &str = "Dagnats-Lease-Fence";

/// Request header: how many milliseconds the caller still waits for this
/// reply. The gateway answers a key call or a list within it (less room
/// for the way back), `unavailable` if it could not finish, so a copy sent
/// late in the caller's timeout still gets an answer it can act on.
/// Optional; without it a key call has the gateway's 4.5 s budget and a
/// list none ([`crate::wait`]). A forward is not cut by it (its
/// `timeout_ms` bounds it); a value that is not a whole number of
/// milliseconds is `invalid` on every subject.
pub const HEADER_WAIT_MS: &str = "Dagnats-Lease-Wait-Ms";

/// "To reject, reply with an empty body and the header
/// Dagnats-Lease-Reject: stale".
pub const HEADER_REJECT: &str = "Dagnats-Lease-Reject";

/// The only value of [`HEADER_REJECT`].
pub const REJECT_STALE: &str = "stale";

/// "The server republishes every write to the bucket on
/// dagnats.lease.changed.<key>."
pub const CHANGED_PREFIX: &str = "dagnats.lease.changed";

/// "Each event carries Nats-Sequence (the revision) and Nats-Subject
/// headers": added by the server to every republished write.
pub const HEADER_SEQUENCE: &str = "Nats-Sequence";

/// Added by the server to a republished write: when it was stored.
pub const HEADER_TIMESTAMP: &str = "Nats-Time-Stamp";

/// HTTP raw forward: the holder that answered (the fence travels in
/// [`HEADER_FENCE`]).
pub const HEADER_HOLDER: &str = "Dagnats-Lease-Holder";

/// An SSE client reconnecting names the last revision it saw.
pub const HEADER_LAST_EVENT_ID: &str = "Last-Event-ID";

/// Names why a record was written: `acquired`, `renewed` or `released`.
pub const HEADER_EVENT: &str = "Dagnats-Lease-Event";

/// On a transfer's write (an `acquired` event): the holder the lease was
/// taken from, so a subscriber tells a hand-over from a fresh acquire.
pub const HEADER_PREVIOUS_HOLDER: &str = "Dagnats-Lease-Previous-Holder";

/// The JetStream compare-and-set header: the write lands only if the key's
/// last sequence (the fence) is this one.
pub const HEADER_EXPECTED_SEQ: &str = "Nats-Expected-Last-Subject-Sequence";

/// Moves the compare-and-set check to another subject than the one
/// written: a read barrier expects the key's last sequence (nats-server 2.11+).
pub const HEADER_EXPECTED_SEQ_SUBJECT: &str = "Nats-Expected-Last-Subject-Sequence-Subject";

/// Per-message TTL (nats-server 2.11+), always whole seconds, e.g. `15s`.
pub const HEADER_TTL: &str = "Nats-TTL";

/// Set by the server on the marker it writes when a key's TTL runs out.
pub const HEADER_MARKER_REASON: &str = "Nats-Marker-Reason";

/// Standard KV operation header; a release writes `PURGE`.
pub const HEADER_KV_OPERATION: &str = "KV-Operation";

/// With `sub`, a write replaces every earlier message of its key.
pub const HEADER_ROLLUP: &str = "Nats-Rollup";

/// Atomic batch publish (nats-server 2.12+, ADR-50): the batch a message
/// belongs to, its place in it from 1, and, on the last one, `1` to commit.
pub const HEADER_BATCH_ID: &str = "Nats-Batch-Id";
pub const HEADER_BATCH_SEQUENCE: &str = "Nats-Batch-Sequence";
pub const HEADER_BATCH_COMMIT: &str = "Nats-Batch-Commit";

/// Written by nats-server on a request that crossed into the gateway's
/// account through a service import, replacing any the client sent: the
/// requester's account (`acc`) and, when the import shares it, its `user`
/// (docs/protocol.md, Authorization).
pub const HEADER_REQUEST_INFO: &str = "Nats-Request-Info";

/// Under a policy, the gateway's account routes each tenant account's
/// change events and owner inboxes under `dagnats.tenant.<account>`:
/// [`tenant_changed_subject`], [`tenant_inbox_subject`].
pub const TENANT_PREFIX: &str = "dagnats.tenant";

/// The queue group in which the gateways republish change events for
/// tenant accounts, so each event is republished once.
pub const TENANT_EVENTS_QUEUE_GROUP: &str = "dagnats-leases-tenants";

/// Where the gateway republishes the change event of `key` for `account`,
/// one of the accounts allowed to read it; that account imports
/// `dagnats.tenant.<account>.lease.changed.>` as [`CHANGED_PREFIX`]`.>`.
pub fn tenant_changed_subject(account: &str, key: &str) -> String {
    format!("{TENANT_PREFIX}.{account}.lease.changed.{key}")
}

/// Where the gateway sends a forward to `holder`, whose tenure belongs to
/// a principal of `account`: that account exports its
/// `dagnats.lease.inbox.>` to the gateway's account, imported there as
/// `dagnats.tenant.<account>.lease.inbox.>`.
pub fn tenant_inbox_subject(account: &str, holder: &str, key: &str) -> String {
    format!("{TENANT_PREFIX}.{account}.lease.inbox.{holder}.{key}")
}

/// The inbox of `holder` for requests about `key`.
pub fn inbox_subject(holder: &str, key: &str) -> String {
    format!("{INBOX_PREFIX}.{holder}.{key}")
}

/// Subject of `key`'s tenures in the history stream.
pub fn history_subject(key: &str) -> String {
    format!("{HISTORY_PREFIX}.{key}")
}

/// Subject of the record for `key`.
pub fn key_subject(key: &str) -> String {
    // Pushed, not format!ted: every write and read names one.
    let mut subject = String::with_capacity(5 + BUCKET.len() + key.len());
    subject.push_str("$KV.");
    subject.push_str(BUCKET);
    subject.push('.');
    subject.push_str(key);
    subject
}

/// "Five request/reply subjects belong to the dagnats-api service": every
/// gateway is one instance of this NATS service (ADR-32).
pub const SERVICE_NAME: &str = "dagnats-api";

/// What `$SRV.INFO` says the service is.
pub const SERVICE_DESCRIPTION: &str = "dagnats-leases gateway: leases over NATS request/reply, kept in the JetStream KV bucket leases";

/// ADR-32's discovery prefix: `$SRV.<verb>[.<name>[.<id>]]`.
pub const SERVICE_PREFIX: &str = "$SRV";

/// ADR-32: a failed call's error sentence, "a string describing the error
/// that could be shown to the user".
pub const HEADER_SERVICE_ERROR: &str = "Nats-Service-Error";

/// ADR-32: a failed call's code, "always safe to parse as a number"; ours
/// is the HTTP status of the error's kind.
pub const HEADER_SERVICE_ERROR_CODE: &str = "Nats-Service-Error-Code";

/// The `type` of a `$SRV.PING` reply (ADR-32).
pub const SERVICE_PING_TYPE: &str = "io.nats.micro.v1.ping_response";
/// The `type` of a `$SRV.INFO` reply (ADR-32).
pub const SERVICE_INFO_TYPE: &str = "io.nats.micro.v1.info_response";
/// The `type` of a `$SRV.STATS` reply (ADR-32).
pub const SERVICE_STATS_TYPE: &str = "io.nats.micro.v1.stats_response";

/// ADR-32's verbs: discovery, the instance and its endpoints, their stats.
pub const SERVICE_VERB_PING: &str = "PING";
/// See [`SERVICE_VERB_PING`].
pub const SERVICE_VERB_INFO: &str = "INFO";
/// See [`SERVICE_VERB_PING`].
pub const SERVICE_VERB_STATS: &str = "STATS";

/// The three subjects an instance answers `verb` on (one of the
/// `SERVICE_VERB_*`): every service, every instance of [`SERVICE_NAME`], and this
/// instance `id`.
pub fn service_subjects(verb: &str, id: &str) -> [String; 3] {
    [
        format!("{SERVICE_PREFIX}.{verb}"),
        format!("{SERVICE_PREFIX}.{verb}.{SERVICE_NAME}"),
        format!("{SERVICE_PREFIX}.{verb}.{SERVICE_NAME}.{id}"),
    ]
}

/// What `dagnats-leases run` tells the command it starts: the key it
/// holds, its holder id, and the tenure's fence (the acquire's revision, to
/// send with every write downstream).
pub const ENV_LEASE_KEY: &str = "DAGNATS_LEASE_KEY";
/// See [`ENV_LEASE_KEY`].
pub const ENV_LEASE_HOLDER: &str = "DAGNATS_LEASE_HOLDER";
/// See [`ENV_LEASE_KEY`].
pub const ENV_LEASE_FENCE: &str = "DAGNATS_LEASE_FENCE";
