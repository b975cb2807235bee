//! The one translation of store failures ([`StoreError`]) into the wire
//! errors callers see.

use super::error::LeaseError;
use super::lease_core::{LeaseCore, unavailable};
use super::ports::StoreError;

impl LeaseCore {
    /// `err` as the caller hears it; a missing bucket or stream also asks
    /// the store to check the bucket.
    pub(super) fn store_error(&self, err: StoreError) -> LeaseError {
        match err {
            StoreError::Unavailable(reason) => unavailable(&reason),
            StoreError::BucketMissing => {
                self.records.request_repair();
                LeaseError::Unavailable(
                    "the leases bucket is missing and is being created again; retry later".into(),
                )
            }
            // Most often an election: saying "missing" misled operators.
            StoreError::NoListener => {
                self.records.request_repair();
                unavailable(
                    "no stream took the write: the leases stream is electing a leader, \
                     or the bucket is gone (the gateway is checking it)",
                )
            }
            StoreError::Corrupt { cause, .. } | StoreError::Unexpected(cause) => {
                LeaseError::internal(cause)
            }
            StoreError::Conflict => LeaseError::internal("compare-and-set conflict not handled"),
            StoreError::TooLate => {
                unavailable("a write waited to be sent until its lease was about to expire")
            }
        }
    }
}
