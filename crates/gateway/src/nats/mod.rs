//! The NATS front: the `api.leases.*` request/reply subjects in queue group
//! `dagnats-leases`. Each handler decodes, calls the core, encodes; nothing
//! else.

use std::sync::Arc;
use std::time::Instant;

use async_nats::{Client, Message, Subscriber};
use futures::StreamExt;
use serde::Serialize;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::core::{ErrorBody, LeaseCore, ListBounds};
use crate::metrics;
use dagnats_leases_wire::names::{
    QUEUE_GROUP, SUBJECT_ACQUIRE, SUBJECT_FORWARD, SUBJECT_LIST, SUBJECT_OWNER, SUBJECT_RELEASE,
    SUBJECT_RENEW, SUBJECT_TRANSFER,
};
use dagnats_leases_wire::request::{ListLimit, decode};

/// Requests handled at once; past this the front stops reading until one
/// finishes, so a burst queues in NATS rather than in memory.
const MAX_IN_FLIGHT: usize = 4_096;

/// The operations of the lease API, one per subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Acquire,
    Renew,
    Release,
    Owner,
    Forward,
    List,
    Transfer,
}

impl Op {
    const ALL: [Op; 7] = [
        Op::Acquire,
        Op::Renew,
        Op::Release,
        Op::Owner,
        Op::Forward,
        Op::List,
        Op::Transfer,
    ];

    /// The operation's name, as metrics label it.
    pub fn name(self) -> &'static str {
        match self {
            Op::Acquire => "acquire",
            Op::Renew => "renew",
            Op::Release => "release",
            Op::Owner => "owner",
            Op::Forward => "forward",
            Op::List => "list",
            Op::Transfer => "transfer",
        }
    }

    /// The request subject of this operation.
    pub fn subject(self) -> &'static str {
        match self {
            Op::Acquire => SUBJECT_ACQUIRE,
            Op::Renew => SUBJECT_RENEW,
            Op::Release => SUBJECT_RELEASE,
            Op::Owner => SUBJECT_OWNER,
            Op::Forward => SUBJECT_FORWARD,
            Op::List => SUBJECT_LIST,
            Op::Transfer => SUBJECT_TRANSFER,
        }
    }
}

/// Subscribes to every lease subject. Returns once the subscriptions are
/// registered with the server, so callers know requests will be answered.
pub async fn subscribe(client: &Client) -> Result<Vec<(Op, Subscriber)>, async_nats::Error> {
    let mut subs = Vec::new();
    for op in Op::ALL {
        let sub = client
            .queue_subscribe(op.subject(), QUEUE_GROUP.to_string())
            .await?;
        subs.push((op, sub));
    }
    client.flush().await?;
    Ok(subs)
}

/// Answers requests until `shutdown`, then drains: the server stops
/// sending this gateway requests (the queue group sends them to the others)
/// and the ones already delivered are still answered. Handlers run on
/// `tasks`, which the caller awaits before draining the connection.
pub async fn serve(
    client: Client,
    core: LeaseCore,
    subs: Vec<(Op, Subscriber)>,
    tasks: TaskTracker,
    shutdown: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let front = Front {
        client,
        core,
        tasks,
        permits,
    };
    let loops = subs
        .into_iter()
        .map(|(op, sub)| front.serve_subject(op, sub, shutdown.clone()));
    futures::future::join_all(loops).await;
}

/// What every subject's loop shares.
struct Front {
    client: Client,
    core: LeaseCore,
    tasks: TaskTracker,
    permits: Arc<Semaphore>,
}

enum Step {
    Drain,
    Request(Option<Message>),
}

impl Front {
    async fn serve_subject(&self, op: Op, mut sub: Subscriber, shutdown: CancellationToken) {
        let mut draining = false;
        loop {
            let step = tokio::select! {
                biased;
                _ = shutdown.cancelled(), if !draining => Step::Drain,
                msg = sub.next() => Step::Request(msg),
            };
            match step {
                Step::Drain => {
                    draining = true;
                    if let Err(err) = sub.drain().await {
                        tracing::warn!(%err, subject = op.subject(), "could not drain");
                        return;
                    }
                }
                Step::Request(Some(msg)) => {
                    let permit = self.permits.clone().acquire_owned().await;
                    let (client, core) = (self.client.clone(), self.core.clone());
                    self.tasks.spawn(async move {
                        answer(&client, &core, op, msg).await;
                        drop(permit);
                    });
                }
                Step::Request(None) => return,
            }
        }
    }
}

async fn answer(client: &Client, core: &LeaseCore, op: Op, msg: Message) {
    let Some(reply_to) = msg.reply.clone() else {
        tracing::debug!(subject = %msg.subject, "request without a reply subject ignored");
        return;
    };
    // The reply must fit the server's max_payload, as it is now.
    let max_payload = client.server_info().max_payload;
    let body = handle(core, op, &msg.payload, max_payload).await;
    if let Err(err) = client.publish(reply_to, body.into()).await {
        tracing::warn!(%err, op = ?op, "could not send reply");
    }
}

/// Runs one request, encodes its reply or error, and counts it. A list
/// reply holds 1000 leases unless asked otherwise, and never more than
/// `max_payload` bytes.
async fn handle(core: &LeaseCore, op: Op, body: &[u8], max_payload: usize) -> Vec<u8> {
    let bounds = ListBounds {
        default_limit: Some(ListLimit::DEFAULT.get()),
        max_bytes: Some(max_payload),
    };
    let started = Instant::now();
    let (reply, kind) = match op {
        Op::Acquire => encode(async { core.acquire(decode(body)?).await }.await),
        Op::Renew => encode(async { core.renew(decode(body)?).await }.await),
        Op::Release => encode(async { core.release(decode(body)?).await }.await),
        Op::Owner => encode(async { core.owner(decode(body)?).await }.await),
        Op::Forward => encode(async { core.forward(decode(body)?).await }.await),
        Op::List => encode(async { core.list(decode(body)?, bounds).await }.await),
        Op::Transfer => encode(async { core.transfer(decode(body)?).await }.await),
    };
    metrics::request(metrics::Front::Nats, op.name(), kind, started.elapsed());
    reply
}

/// The reply body, and `ok` or the error kind.
fn encode<T: Serialize, E: Into<ErrorBody>>(result: Result<T, E>) -> (Vec<u8>, &'static str) {
    let (body, kind) = match result {
        Ok(reply) => (serde_json::to_vec(&reply), "ok"),
        Err(err) => {
            let body: ErrorBody = err.into();
            (serde_json::to_vec(&body), body.kind.name())
        }
    };
    (body.expect("replies serialize"), kind)
}
