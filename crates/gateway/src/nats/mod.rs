//! The NATS front: the `api.leases.*` request/reply subjects in queue group
//! `dagnats-leases`. Each handler decodes, checks the request against the
//! policy when one is loaded (the caller is the account and user the
//! server's `Nats-Request-Info` names), calls the core, encodes; nothing
//! else. [`service`] makes the same subjects the endpoints of the NATS
//! service `dagnats-api` (ADR-32 discovery and stats).

pub(crate) mod service;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::client::PublishErrorKind;
use async_nats::{Client, HeaderMap, Message, Subscriber};
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::core::{LeaseCore, LeaseError, ListBounds, ran_out};
use crate::metrics::{self, Op};
use crate::policy::{Access, Policy};
use dagnats_leases_wire::history::HistoryRequest;
use dagnats_leases_wire::kind::ErrorBody;
use dagnats_leases_wire::names::{
    HEADER_REQUEST_INFO, HEADER_SERVICE_ERROR, HEADER_SERVICE_ERROR_CODE, HEADER_WAIT_MS,
    HEADER_WAITED_MS, QUEUE_GROUP, SUBJECT_ACQUIRE, SUBJECT_FORWARD, SUBJECT_HISTORY, SUBJECT_LIST,
    SUBJECT_OWNER, SUBJECT_RELEASE, SUBJECT_RENEW, SUBJECT_TRANSFER,
};
use dagnats_leases_wire::request::{
    AcquireRequest, ForwardRequest, Invalid, LeaseKey, ListLimit, OwnerRequest, ReleaseRequest,
    RenewRequest, TransferRequest, decode,
};
use dagnats_leases_wire::wait::{bounds, budget_for};
use service::Instance;

/// Requests handled at once; past this the front stops reading until one
/// finishes, so a burst queues in NATS rather than in memory.
const MAX_IN_FLIGHT: usize = 4_096;

/// The lease operations this front serves, each on its subject: the one
/// list the subscriptions and the service's INFO and STATS all read.
pub(crate) const SUBJECTS: [(Op, &str); 8] = [
    (Op::Acquire, SUBJECT_ACQUIRE),
    (Op::Renew, SUBJECT_RENEW),
    (Op::Release, SUBJECT_RELEASE),
    (Op::Owner, SUBJECT_OWNER),
    (Op::Forward, SUBJECT_FORWARD),
    (Op::List, SUBJECT_LIST),
    (Op::Transfer, SUBJECT_TRANSFER),
    (Op::History, SUBJECT_HISTORY),
];

/// One subject's subscription, and the operation it serves.
pub(crate) struct Subject {
    op: Op,
    name: &'static str,
    sub: Subscriber,
}

/// Subscribes to every lease subject. Returns once the subscriptions are
/// registered with the server, so callers know requests will be answered.
pub(crate) async fn subscribe_endpoints(
    client: &Client,
) -> Result<Vec<Subject>, async_nats::Error> {
    let mut subs = Vec::new();
    for (op, name) in SUBJECTS {
        let sub = client
            .queue_subscribe(name, QUEUE_GROUP.to_string())
            .await?;
        subs.push(Subject { op, name, sub });
    }
    client.flush().await?;
    Ok(subs)
}

/// Answers requests until `shutdown`, then drains: the server stops
/// sending this gateway requests (the queue group sends them to the others)
/// and the ones already delivered are still answered. Handlers run on
/// `tasks`, which the caller awaits before draining the connection; once
/// `give_up` fires, a handler still running answers `internal` ("the
/// gateway is stopping") at once.
pub(crate) async fn serve(
    client: Client,
    (core, policy): (LeaseCore, Option<Arc<Policy>>),
    instance: Instance,
    subs: Vec<Subject>,
    tasks: TaskTracker,
    shutdown: CancellationToken,
    give_up: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let front = Front {
        client,
        core,
        policy,
        instance,
        tasks,
        permits,
        give_up,
    };
    // Unordered: a request wakes only its own subject's loop, where
    // `join_all` would poll every loop on every request.
    let loops: FuturesUnordered<_> = subs
        .into_iter()
        .map(|subject| front.serve_subject(subject, shutdown.clone()))
        .collect();
    loops.collect::<()>().await;
}

/// What every subject's loop shares.
struct Front {
    client: Client,
    core: LeaseCore,
    policy: Option<Arc<Policy>>,
    instance: Instance,
    tasks: TaskTracker,
    permits: Arc<Semaphore>,
    /// Fires when the shutdown grace runs out.
    give_up: CancellationToken,
}

enum Step {
    Drain,
    Request(Option<Message>),
}

impl Front {
    async fn serve_subject(&self, subject: Subject, shutdown: CancellationToken) {
        let Subject { op, name, mut sub } = subject;
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
                        tracing::warn!(%err, subject = name, "could not drain");
                        return;
                    }
                }
                Step::Request(Some(msg)) => {
                    let permit = self.permits.clone().acquire_owned().await;
                    let (client, core) = (self.client.clone(), self.core.clone());
                    let (instance, give_up) = (self.instance.clone(), self.give_up.clone());
                    let access = self.access(&msg);
                    self.tasks.spawn(async move {
                        // Boxed, so the task tokio moves when it spawns and
                        // finishes it is a few pointers, not the 1.8 KB an
                        // answer's state takes.
                        let served = (&core, &access);
                        Box::pin(answer(&client, served, &instance, op, msg, &give_up)).await;
                        drop(permit);
                    });
                }
                Step::Request(None) => return,
            }
        }
    }
}

impl Front {
    /// What the policy lets the sender of `msg` do: everything without a
    /// policy (its headers are not even looked at).
    fn access(&self, msg: &Message) -> Access {
        match &self.policy {
            None => Access::Open,
            Some(policy) => {
                let info = msg
                    .headers
                    .as_ref()
                    .and_then(|headers| headers.get(HEADER_REQUEST_INFO))
                    .map(|value| value.as_str());
                Access::of_nats(policy, info)
            }
        }
    }
}

async fn answer(
    client: &Client,
    served: (&LeaseCore, &Access),
    instance: &Instance,
    op: Op,
    msg: Message,
    give_up: &CancellationToken,
) {
    let Some(reply_to) = msg.reply.clone() else {
        tracing::debug!(subject = %msg.subject, "request without a reply subject ignored");
        return;
    };
    let started = Instant::now();
    let (body, failure) = match caller_waits(&msg, op) {
        Ok((wait, waited)) => {
            // A wait that does not bound the call would only arm a second
            // timer over the core's own budget, or none that matters.
            let wait = wait.filter(|wait| bounds(msg.subject.as_str(), *wait));
            let times = Times { wait, waited };
            handle(client, served, op, &msg.payload, times, give_up).await
        }
        Err(invalid) => encode(Err::<(), _>(invalid)),
    };
    let elapsed = started.elapsed();
    let kind = failure.as_ref().map_or("ok", |failure| failure.kind.name());
    metrics::request(metrics::Front::Nats, op, kind, elapsed);
    instance.record(op, elapsed, failure.as_ref());
    let body = Bytes::from(body);
    let sent = match &failure {
        None => client.publish(reply_to, body).await,
        Some(failure) => {
            let headers = service_error(failure);
            match client
                .publish_with_headers(reply_to.clone(), headers, body.clone())
                .await
            {
                // The body alone fits, and it is what the caller relies on.
                Err(err) if err.kind() == PublishErrorKind::MaxPayloadExceeded => {
                    client.publish(reply_to, body).await
                }
                sent => sent,
            }
        }
    };
    if let Err(err) = sent {
        tracing::warn!(%err, op = op.label(), "could not send reply");
    }
}

/// ADR-32's error headers of a failed call: the sentence, and the HTTP
/// status of its kind as the code. The JSON body stays as it is.
fn service_error(failure: &ErrorBody) -> HeaderMap {
    let sentence = service::error_sentence(failure);
    let mut headers = HeaderMap::new();
    headers.insert(HEADER_SERVICE_ERROR, sentence.as_str());
    headers.insert(
        HEADER_SERVICE_ERROR_CODE,
        failure.kind.http_status().to_string().as_str(),
    );
    headers
}

/// What the caller says of its time: how long it still waits for this
/// reply ([`HEADER_WAIT_MS`]), and, on an acquire, how long it has been
/// trying to get the key ([`HEADER_WAITED_MS`]).
struct Times {
    wait: Option<Duration>,
    waited: Option<Duration>,
}

/// The caller's [`HEADER_WAIT_MS`], and on an acquire its
/// [`HEADER_WAITED_MS`], when it sent them.
fn caller_waits(msg: &Message, op: Op) -> Result<(Option<Duration>, Option<Duration>), LeaseError> {
    let waited = match op {
        Op::Acquire => header_ms(msg, HEADER_WAITED_MS)?,
        _ => None,
    };
    Ok((header_ms(msg, HEADER_WAIT_MS)?, waited))
}

/// The header `name` of `msg` as a whole number of milliseconds, if sent.
fn header_ms(msg: &Message, name: &str) -> Result<Option<Duration>, LeaseError> {
    let Some(value) = msg.headers.as_ref().and_then(|h| h.get(name)) else {
        return Ok(None);
    };
    crate::core::header_millis(name, value.as_str()).map(Some)
}

/// Runs one request: its reply body, and the error it answered if it
/// failed; answers `unavailable` when a caller's wait that bounds the
/// call (less room for the way back) or the core's budget runs out first;
/// stops it with `internal` when `give_up` fires first. A list reply
/// holds 1000 leases unless asked otherwise, and never more than the
/// server's `max_payload` bytes, as it is now.
async fn handle(
    client: &Client,
    (core, access): (&LeaseCore, &Access),
    op: Op,
    body: &[u8],
    Times { wait, waited }: Times,
    give_up: &CancellationToken,
) -> (Vec<u8>, Option<ErrorBody>) {
    // Only a list asks: the server info is cloned whole (1.7 k
    // instructions a call).
    let list_bounds = || ListBounds {
        default_limit: Some(ListLimit::DEFAULT.get()),
        max_bytes: Some(client.server_info().max_payload),
    };
    let run = async {
        match op {
            Op::Acquire => {
                call(body, |req: AcquireRequest| async move {
                    let caller = access.admit(op, req.key.as_str())?;
                    core.acquire_waited(req, &caller, waited).await
                })
                .await
            }
            Op::Renew => {
                call(body, |req: RenewRequest| async move {
                    let caller = access.admit(op, req.key.as_str())?;
                    core.renew(req, &caller).await
                })
                .await
            }
            Op::Release => {
                call(body, |req: ReleaseRequest| async move {
                    let caller = access.admit(op, req.key.as_str())?;
                    core.release(req, &caller).await
                })
                .await
            }
            Op::Owner => {
                call(body, |req: OwnerRequest| async move {
                    access.admit(op, req.key.as_str())?;
                    core.owner(req).await
                })
                .await
            }
            Op::Forward => {
                call(body, |req: ForwardRequest| async move {
                    access.admit(op, req.key.as_str())?;
                    core.forward(req).await
                })
                .await
            }
            Op::List => {
                call(body, |req| async move {
                    access.admit_any_key(op)?;
                    core.list(req, list_bounds(), &|key| access.reads(key))
                        .await
                })
                .await
            }
            Op::Transfer => {
                call(body, |req: TransferRequest| async move {
                    let caller = access.admit_transfer(&req)?;
                    core.transfer(req, &caller).await
                })
                .await
            }
            Op::History => {
                call(body, |req: HistoryRequest| async move {
                    access.admit_read(op, req.key.as_ref().map(LeaseKey::as_str))?;
                    core.history(req, &|key| access.reads(key)).await
                })
                .await
            }
            other => unreachable!("{other:?} has no NATS subject"),
        }
    };
    let run = async {
        match wait {
            Some(wait) => {
                let budget = budget_for(wait);
                tokio::time::timeout(budget, run)
                    .await
                    .unwrap_or_else(|_| encode(Err::<(), _>(ran_out(budget))))
            }
            None => run.await,
        }
    };
    tokio::select! {
        biased;
        done = run => done,
        () = give_up.cancelled() => {
            tracing::warn!(op = op.label(), "a call was still running when the shutdown grace ran out");
            encode(Err::<(), _>(LeaseError::Stopping))
        }
    }
}

/// Decodes `body` into `core_call`'s request, runs it and encodes its
/// reply. Its state is boxed, so the spawned task holds a pointer, not the
/// largest operation's state, which every spawn would otherwise copy.
async fn call<R, T, E, F>(
    body: &[u8],
    core_call: impl FnOnce(R) -> F,
) -> (Vec<u8>, Option<ErrorBody>)
where
    R: DeserializeOwned,
    T: Serialize,
    E: From<Invalid> + Into<ErrorBody>,
    F: Future<Output = Result<T, E>>,
{
    encode(async { Box::pin(core_call(decode(body)?)).await }.await)
}

/// Bytes reserved for a reply body up front.
const REPLY_CAPACITY: usize = 320;

/// The reply body, and the error body too when the call failed.
fn encode<T: Serialize, E: Into<ErrorBody>>(result: Result<T, E>) -> (Vec<u8>, Option<ErrorBody>) {
    match result {
        Ok(reply) => {
            // Room for a lease reply (about 200 bytes) without regrowing
            // from serde_json's 128.
            let mut body = Vec::with_capacity(REPLY_CAPACITY);
            serde_json::to_writer(&mut body, &reply).expect("replies serialize");
            (body, None)
        }
        Err(err) => {
            let body: ErrorBody = err.into();
            let json = serde_json::to_vec(&body).expect("error bodies serialize");
            (json, Some(body))
        }
    }
}
