//! [`LeaseCore`]: the handle every front shares, and what it knows besides
//! the bucket (revisions it saw, records it wrote). The operations live in
//! a file each (`acquire.rs`, `renew.rs`, ...).

use std::sync::Arc;

use super::error::LeaseError;
pub(crate) use super::known::Tenancy;
use super::known::{Known, KnownRevisions};
use super::ports::{Availability, OwnerHop, Records, TenureLog};
use super::written::WrittenRecords;
use dagnats_leases_wire::record::LeaseRecord;
use dagnats_leases_wire::reply::Lease;

/// How many compare-and-set rounds a call makes before it reports
/// contention as `unavailable`. Each lost round means another writer
/// landed, so the next read usually settles the answer.
pub(super) const MAX_ROUNDS: usize = 4;

/// The lease operations. Cheap to clone; every front shares one.
#[derive(Clone)]
pub(crate) struct LeaseCore {
    pub(super) records: Arc<dyn Records>,
    inbox: Arc<dyn OwnerHop>,
    pub(super) known: Arc<KnownRevisions>,
    pub(super) written: Arc<WrittenRecords>,
    /// The tenure history; `None` while it is off.
    tenures: Option<Arc<dyn TenureLog>>,
}

impl LeaseCore {
    /// A core over the bucket's `records` that forwards through `inbox`.
    pub(crate) fn new(records: Arc<dyn Records>, inbox: Arc<dyn OwnerHop>) -> Self {
        LeaseCore {
            records,
            inbox,
            known: Arc::default(),
            written: Arc::default(),
            tenures: None,
        }
    }

    /// This core, reading the tenure history through `tenures`.
    pub(crate) fn with_history(self, tenures: Arc<dyn TenureLog>) -> Self {
        LeaseCore {
            tenures: Some(tenures),
            ..self
        }
    }

    /// The tenure history, unless it is off.
    pub(super) fn tenure_log(&self) -> Option<&dyn TenureLog> {
        self.tenures.as_deref()
    }

    /// Whether calls can be served now: `Ok`, or the error every call
    /// would answer (`unavailable` or `unsupported`).
    pub(crate) fn ready(&self) -> Result<(), LeaseError> {
        match self.records.availability() {
            Availability::Degraded(reason) => Err(unavailable(&reason)),
            _ => self.bucket().map(|_| ()),
        }
    }

    /// Learns from a change event that `key` is at `revision`: `held` is
    /// what was written there and its tenancy (in a tenure of
    /// `principal`), or `None` when the key was freed. Another gateway's
    /// write then costs this one no extra read on the next renew. The
    /// bucket learns the revision too, so a bucket this gateway has to
    /// create again starts above every write any gateway made.
    pub(crate) fn observe(
        &self,
        key: &str,
        revision: u64,
        held: Option<(&Lease, Tenancy)>,
        principal: Option<&str>,
    ) {
        self.records.saw(revision);
        match held {
            Some((lease, tenancy)) => {
                let known = Known::of(revision, lease, (tenancy, principal));
                self.known.remember(key, known)
            }
            None => self.known.freed(key, revision),
        }
    }

    /// Whether the tenure history, when on, records every change from now
    /// on: a gateway is ready only then (docs/protocol.md, Tenure history).
    pub(crate) fn history_ready(&self) -> Result<(), LeaseError> {
        match self.tenure_log().map(|log| log.provisioned()) {
            Some(Err(reason)) => Err(LeaseError::Unavailable(format!(
                "the tenure history is not provisioned yet: {reason}"
            ))),
            _ => Ok(()),
        }
    }

    /// The record this gateway wrote to `key` as exactly `payload`, for
    /// the change event of its own write (see `written.rs`).
    pub(crate) fn take_written(&self, key: &str, payload: &[u8]) -> Option<LeaseRecord> {
        self.written.take(key, payload)
    }

    pub(super) fn inbox(&self) -> &dyn OwnerHop {
        &*self.inbox
    }

    /// The bucket, if calls can be served now.
    pub(super) fn bucket(&self) -> Result<&dyn Records, LeaseError> {
        match self.records.availability() {
            Availability::Ready | Availability::Degraded(_) => Ok(&*self.records),
            Availability::Unsupported { server_version } => {
                Err(LeaseError::Unsupported { server_version })
            }
            Availability::Unavailable(reason) => Err(unavailable(&reason)),
        }
    }
}

/// What a call answers while the bucket cannot serve, and why.
pub(super) fn unavailable(reason: &str) -> LeaseError {
    LeaseError::Unavailable(format!("leases are unavailable: {reason}; retry later"))
}

/// What a call answers when every compare-and-set round lost.
pub(super) fn contention(key: &str) -> LeaseError {
    LeaseError::Unavailable(format!("{key} changed on every attempt; retry later"))
}
