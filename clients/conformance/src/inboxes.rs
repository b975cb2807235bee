//! `inbox.*` ops: `OwnerInbox` (the subscribing half of `serve_inbox`)
//! with the runner's tenures and handler mode; an `inbox` event line for
//! every request the handler receives, before it answers.

use std::collections::HashMap;
use std::sync::Mutex;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use dagnats_leases_client::{InboxRequest, OwnerInbox};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::Driver;
use crate::protocol::{Failure, InboxServe, Mode, Tenures};

/// The size of a `large` reply: more than fits the gateway's hop once
/// base64-encoded at the default 1 MB max_payload.
const LARGE_REPLY_BYTES: usize = 1_000_000;

type TenureOf = Box<dyn Fn(&str) -> Option<u64> + Send + Sync>;

#[derive(Default)]
pub struct Inboxes(Mutex<HashMap<String, JoinHandle<()>>>);

impl Inboxes {
    /// Answers once the inbox is subscribed; it serves in the background.
    pub async fn serve(&self, driver: &Driver, serve: InboxServe) -> Result<Value, Failure> {
        if self.0.lock().unwrap().contains_key(&serve.inbox) {
            let message = format!("inbox {:?} exists", serve.inbox);
            return Err(Failure::driver("bad_request", message));
        }
        let tenure: TenureOf = match serve.tenures {
            Tenures::Keeper(name) => {
                let (key, ownership) = driver.keepers.watch(&name)?;
                Box::new(move |k| (k == key).then(|| ownership.borrow().tenure()).flatten())
            }
            Tenures::Fixed(revisions) => Box::new(move |k| revisions.get(k).copied()),
        };
        let nats = driver.client.nats().clone();
        let inbox = OwnerInbox::subscribe(nats, &serve.holder).await?;
        let (out, name, mode) = (driver.out, serve.inbox.clone(), serve.mode);
        let handler = move |req: InboxRequest| {
            out.line(&json!({"event": "inbox", "inbox": name, "key": req.key,
                             "fence": req.fence, "payload_b64": BASE64.encode(&req.payload)}));
            reply(mode, req.payload)
        };
        let task = tokio::spawn(async move {
            if let Err(err) = inbox.serve(tenure, handler).await {
                eprintln!("inbox stopped: {err}");
            }
        });
        self.0.lock().unwrap().insert(serve.inbox, task);
        Ok(json!({}))
    }

    /// Stops serving: the subscription ends with the task.
    pub async fn stop(&self, name: &str) -> Result<Value, Failure> {
        let task = self.0.lock().unwrap().remove(name);
        let task =
            task.ok_or_else(|| Failure::driver("not_found", format!("no inbox {name:?}")))?;
        task.abort();
        let _ = task.await;
        Ok(json!({}))
    }
}

async fn reply(mode: Mode, payload: Bytes) -> Bytes {
    match mode {
        Mode::Echo => [b"echo:".as_slice(), &payload].concat().into(),
        Mode::Hang => std::future::pending().await,
        Mode::Large => vec![b'x'; LARGE_REPLY_BYTES].into(),
    }
}
