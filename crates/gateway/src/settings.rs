//! What each part of the gateway takes from its settings: plain values that
//! [`crate::config`] builds from flags and environment variables, so the
//! parts never see the command line.

use std::time::Duration;

use axum::http::HeaderValue;

/// What the HTTP front takes from the settings.
#[derive(Clone)]
pub(crate) struct HttpSettings {
    pub(crate) write_token: Option<String>,
    pub(crate) read_token: Option<String>,
    /// Browser origins allowed; empty means no CORS headers.
    pub(crate) cors_origins: Vec<HeaderValue>,
    /// Interval of heartbeat comments on idle event streams.
    pub(crate) heartbeat: Duration,
    /// Changes buffered per event-stream client before it is dropped.
    pub(crate) sse_buffer: usize,
}

/// What the tenure history keeps (docs/protocol.md, Tenure history).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HistorySettings {
    /// How long its records are kept; zero turns the history off.
    pub(crate) max_age: Duration,
}

/// What the bucket must look like.
#[derive(Debug, Clone)]
pub(crate) struct BucketSettings {
    /// Replicas for a new bucket; `Some` also scales an existing one, once,
    /// when the gateway starts (see `store/provision.rs`).
    pub(crate) replicas: Option<usize>,
    /// How long the server keeps the marker it writes when a lease expires.
    pub(crate) marker_ttl: Duration,
    /// How often a ready bucket is checked again.
    pub(crate) recheck: Duration,
    /// How publishes are coalesced into atomic batches.
    pub(crate) coalescing: Coalescing,
}

/// How publishes are coalesced into atomic batches.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Coalescing {
    /// Sends (single publishes or batches) awaiting their answer before
    /// the next publishes wait to be batched.
    pub(crate) in_flight: usize,
    /// The most messages one batch carries (the server's limit is 1,000).
    /// Once this many wait, a batch leaves beside those in flight.
    pub(crate) max_batch: usize,
}
