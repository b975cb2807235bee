//! A fake owner process for forward tests: it subscribes on its inbox as an
//! owner does (docs/protocol.md, Forwarding to the owner), records the fence of
//! every request it receives, and answers as told. Both forward fronts count
//! attempts with it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;

/// How an owner answers forwarded requests.
#[derive(Clone, Copy)]
pub enum Answer {
    /// `echo:<fence>:` + the body, with an `Owner-Secret` header that the
    /// gateway must not relay.
    Echo,
    /// `n` bytes of `x`.
    Bytes(usize),
    /// `Dagnats-Lease-Reject: stale`, empty body.
    Reject,
    /// An empty body with the reject header spelled as given (name, value),
    /// as an owner whose client changes the case of header names would.
    RejectSpelled(&'static str, &'static str),
    /// `Dagnats-Lease-Reject: stale`, each only after this long (requests
    /// are answered one at a time).
    RejectAfter(std::time::Duration),
    /// Never.
    Silent,
}

/// An owner subscribed on `dagnats.lease.inbox.<holder>.>`.
pub struct Owner {
    fences: Arc<Mutex<Vec<Option<String>>>>,
}

impl Owner {
    /// Subscribes `holder`'s inbox on `client`; the server knows the
    /// subscription when this returns.
    pub async fn start(client: &async_nats::Client, holder: &str, answer: Answer) -> Owner {
        let mut sub = client
            .subscribe(format!("dagnats.lease.inbox.{holder}.>"))
            .await
            .unwrap();
        dagnats_leases_testkit::nats::settle(client).await;
        let fences = Arc::new(Mutex::new(Vec::new()));
        let (seen, client) = (fences.clone(), client.clone());
        tokio::spawn(async move {
            while let Some(msg) = sub.next().await {
                let fence = msg
                    .headers
                    .as_ref()
                    .and_then(|h| h.get("Dagnats-Lease-Fence"))
                    .map(|f| f.as_str().to_string());
                seen.lock().unwrap().push(fence.clone());
                let reply = msg.reply.clone().unwrap();
                let mut headers = async_nats::HeaderMap::new();
                let body = match answer {
                    Answer::Echo => {
                        let mut body = format!("echo:{}:", fence.unwrap()).into_bytes();
                        body.extend_from_slice(&msg.payload);
                        headers.insert("Owner-Secret", "not relayed");
                        body
                    }
                    Answer::Bytes(n) => vec![b'x'; n],
                    Answer::Reject => {
                        headers.insert("Dagnats-Lease-Reject", "stale");
                        Vec::new()
                    }
                    Answer::RejectSpelled(name, value) => {
                        headers.insert(name, value);
                        Vec::new()
                    }
                    Answer::RejectAfter(delay) => {
                        tokio::time::sleep(delay).await;
                        headers.insert("Dagnats-Lease-Reject", "stale");
                        Vec::new()
                    }
                    Answer::Silent => continue,
                };
                client
                    .publish_with_headers(reply, headers, body.into())
                    .await
                    .unwrap();
            }
        });
        Owner { fences }
    }

    /// How many requests reached the inbox.
    pub fn received(&self) -> usize {
        self.fences.lock().unwrap().len()
    }

    /// Waits (with a deadline) until `requests` requests reached the inbox.
    pub async fn until_received(&self, requests: usize) {
        let what = format!("{requests} forwarded request(s) to reach the owner");
        super::eventually(&what, Duration::from_secs(10), || {
            let arrived = self.received() == requests;
            async move { arrived.then_some(()) }
        })
        .await;
    }

    /// The `Dagnats-Lease-Fence` of each request, in arrival order.
    pub fn fences(&self) -> Vec<Option<String>> {
        self.fences.lock().unwrap().clone()
    }
}
