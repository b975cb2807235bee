//! The tenure history: who held which key, from when to when, and how
//! each tenure ended, kept in a stream of its own beside the bucket
//! (docs/protocol.md, Tenure history).
//!
//! - `writer`: every gateway's writer, of which the bucket's history
//!   consumer feeds one at a time; `changes` reads what a change of the
//!   bucket says, `derive` what it means for the history, `key_writes`
//!   writes a key's records exactly once, `stored` is how a record is
//!   kept, `stream` provisions the stream and the consumer.
//! - `reads`: the tenures a query may want, for the core's
//!   `TenureLog` seam ([`Tenures`]).
//! - `flapping`: keys whose holder changes too often, on `/metrics`.

mod changes;
mod derive;
mod flapping;
mod key_writes;
mod reads;
mod stored;
mod stream;
mod writer;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::core::ports::TenureLog;
use crate::settings::HistorySettings;
use crate::store::jsapi::JetStream;
use dagnats_leases_wire::history::{HistoryRequest, Tenure};

/// The history stream as the core reads it.
pub(crate) struct Tenures {
    js: JetStream,
    provisioned: watch::Receiver<Result<(), String>>,
}

impl TenureLog for Tenures {
    fn provisioned(&self) -> Result<(), String> {
        self.provisioned.borrow().clone()
    }

    fn candidates<'a>(
        &'a self,
        req: &'a HistoryRequest,
    ) -> BoxFuture<'a, Result<Vec<Tenure>, String>> {
        reads::candidates(&self.js, req).boxed()
    }
}

/// Starts the history writer on `client` until `stop`, and returns what
/// the core reads the history through; nothing when `settings` turn the
/// history off (then nothing is written either).
pub(crate) fn start(
    client: async_nats::Client,
    settings: HistorySettings,
    stop: CancellationToken,
) -> Option<(Tenures, JoinHandle<()>)> {
    if settings.max_age.is_zero() {
        return None;
    }
    let js = JetStream::new(client);
    let (told, provisioned) = watch::channel(Err("not yet tried".to_string()));
    let writer = tokio::spawn(writer::run(js.clone(), settings, told, stop));
    Some((Tenures { js, provisioned }, writer))
}
