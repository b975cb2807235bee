//! The gateway as an instance of the NATS service `dagnats-api` (ADR-32):
//! it answers `$SRV.PING`, `$SRV.INFO` and `$SRV.STATS` (alone, by name,
//! by name and id) on plain subscriptions, so every gateway answers, and
//! counts each lease endpoint's requests, errors and processing time.
//!
//! async-nats' own `service` module was not used: on an error it replies
//! with an empty body (ours keeps the `{"error", "kind"}` body), and its
//! endpoints cannot drain on shutdown as the lease front does.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::{Client, Message, Subscriber};
use futures::StreamExt;
use serde::Serialize;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use super::SUBJECTS;
use crate::metrics::Op;
use dagnats_leases_wire::kind::ErrorBody;
use dagnats_leases_wire::names::{
    QUEUE_GROUP, SERVICE_DESCRIPTION, SERVICE_INFO_TYPE, SERVICE_NAME, SERVICE_PING_TYPE,
    SERVICE_STATS_TYPE, SERVICE_VERB_INFO, SERVICE_VERB_PING, SERVICE_VERB_STATS, service_subjects,
};
use dagnats_leases_wire::service::{
    EndpointInfo, EndpointStats, InfoResponse, PingResponse, ServiceIdentity, StatsResponse,
};

/// The gateway's version, as every discovery reply gives it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// This process as a service instance: its id, when it started, and the
/// counters of every lease endpoint. Cheap to clone.
#[derive(Clone)]
pub struct Instance(Arc<Inner>);

struct Inner {
    id: String,
    started: OffsetDateTime,
    /// One per lease subject, in the order of [`SUBJECTS`].
    endpoints: Vec<Mutex<Counters>>,
}

/// What STATS reports of one endpoint.
#[derive(Default, Clone)]
struct Counters {
    requests: u64,
    errors: u64,
    last_error: String,
    processing: Duration,
}

impl Default for Instance {
    fn default() -> Self {
        Self::new()
    }
}

impl Instance {
    /// A new instance with a fresh id (a NUID: 22 characters, unique per
    /// process), started now.
    pub fn new() -> Self {
        Instance(Arc::new(Inner {
            id: nuid::next().to_string(),
            started: OffsetDateTime::now_utc(),
            endpoints: SUBJECTS.iter().map(|_| Mutex::default()).collect(),
        }))
    }

    /// The instance id, as `$SRV.*.dagnats-api.<id>` addresses it.
    pub fn id(&self) -> &str {
        &self.0.id
    }

    /// Counts one answered request of `op` that took `elapsed`; `failure`
    /// is the error it answered, if it failed.
    pub fn record(&self, op: Op, elapsed: Duration, failure: Option<&ErrorBody>) {
        let Some(index) = SUBJECTS.iter().position(|(served, _)| *served == op) else {
            return;
        };
        let mut counters = self.0.endpoints[index]
            .lock()
            .expect("counters are never left half-written");
        counters.requests += 1;
        counters.processing += elapsed;
        if let Some(failure) = failure {
            counters.errors += 1;
            counters.last_error =
                format!("{}:{}", failure.kind.http_status(), error_sentence(failure));
        }
    }

    fn identity(&self, kind: &str) -> ServiceIdentity {
        ServiceIdentity {
            kind: kind.to_string(),
            name: SERVICE_NAME.to_string(),
            id: self.0.id.clone(),
            version: VERSION.to_string(),
            metadata: Default::default(),
        }
    }

    /// The `$SRV.PING` reply.
    pub fn ping(&self) -> PingResponse {
        PingResponse {
            service: self.identity(SERVICE_PING_TYPE),
        }
    }

    /// The `$SRV.INFO` reply: every subject the lease front serves.
    pub fn info(&self) -> InfoResponse {
        InfoResponse {
            service: self.identity(SERVICE_INFO_TYPE),
            description: SERVICE_DESCRIPTION.to_string(),
            endpoints: SUBJECTS
                .iter()
                .map(|(op, subject)| EndpointInfo {
                    name: op.label().to_string(),
                    subject: subject.to_string(),
                    queue_group: QUEUE_GROUP.to_string(),
                    metadata: Default::default(),
                })
                .collect(),
        }
    }

    /// The `$SRV.STATS` reply.
    pub fn stats(&self) -> StatsResponse {
        let endpoints = SUBJECTS
            .iter()
            .zip(&self.0.endpoints)
            .map(|((op, subject), counters)| {
                let c = counters
                    .lock()
                    .expect("counters are never left half-written")
                    .clone();
                let processing = nanos(c.processing);
                EndpointStats {
                    name: op.label().to_string(),
                    subject: subject.to_string(),
                    queue_group: QUEUE_GROUP.to_string(),
                    num_requests: c.requests,
                    num_errors: c.errors,
                    last_error: c.last_error,
                    processing_time: processing,
                    average_processing_time: processing.checked_div(c.requests).unwrap_or(0),
                }
            })
            .collect();
        StatsResponse {
            service: self.identity(SERVICE_STATS_TYPE),
            endpoints,
            started: self.0.started,
        }
    }
}

/// Longest error sentence in a header or in STATS: a sentence can quote the
/// caller's input (a 900 KB key), which must not double a reply's size.
const ERROR_SENTENCE_MAX: usize = 512;

/// A failed call's sentence as ADR-32's `Nats-Service-Error` and STATS'
/// `last_error` carry it: one line, at most [`ERROR_SENTENCE_MAX`] bytes.
pub fn error_sentence(failure: &ErrorBody) -> String {
    let mut sentence = failure.error.replace(['\r', '\n'], " ");
    if sentence.len() > ERROR_SENTENCE_MAX {
        let mut end = ERROR_SENTENCE_MAX;
        while !sentence.is_char_boundary(end) {
            end -= 1;
        }
        sentence.truncate(end);
        sentence.push('…');
    }
    sentence
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// ADR-32's verbs.
#[derive(Debug, Clone, Copy)]
enum Verb {
    Ping,
    Info,
    Stats,
}

impl Verb {
    const ALL: [Verb; 3] = [Verb::Ping, Verb::Info, Verb::Stats];

    fn as_str(self) -> &'static str {
        match self {
            Verb::Ping => SERVICE_VERB_PING,
            Verb::Info => SERVICE_VERB_INFO,
            Verb::Stats => SERVICE_VERB_STATS,
        }
    }
}

/// The discovery subscriptions of one instance.
pub struct Discovery(Vec<(Verb, Subscriber)>);

/// Subscribes to every verb's three subjects, with plain subscriptions (not
/// the queue group): each instance answers for itself.
pub async fn subscribe_discovery(
    client: &Client,
    instance: &Instance,
) -> Result<Discovery, async_nats::Error> {
    let mut subs = Vec::new();
    for verb in Verb::ALL {
        for subject in service_subjects(verb.as_str(), instance.id()) {
            subs.push((verb, client.subscribe(subject).await?));
        }
    }
    client.flush().await?;
    Ok(Discovery(subs))
}

/// Answers discovery requests until `shutdown`; then the subscriptions are
/// dropped, so a gateway that is stopping no longer counts as live.
pub async fn serve(
    client: Client,
    instance: Instance,
    subs: Discovery,
    shutdown: CancellationToken,
) {
    let mut requests = futures::stream::select_all(
        subs.0
            .into_iter()
            .map(|(verb, sub)| sub.map(move |msg| (verb, msg))),
    );
    loop {
        let next = tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            next = requests.next() => next,
        };
        let Some((verb, msg)) = next else { return };
        answer(&client, &instance, verb, msg).await;
    }
}

async fn answer(client: &Client, instance: &Instance, verb: Verb, msg: Message) {
    let Some(reply_to) = msg.reply else { return };
    let body = match verb {
        Verb::Ping => to_json(&instance.ping()),
        Verb::Info => to_json(&instance.info()),
        Verb::Stats => to_json(&instance.stats()),
    };
    if let Err(err) = client.publish(reply_to, body.into()).await {
        tracing::warn!(%err, verb = verb.as_str(), "could not answer a service request");
    }
}

fn to_json(reply: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(reply).expect("discovery replies serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use dagnats_leases_wire::Kind;

    #[test]
    fn stats_average_the_processing_time_and_keep_the_last_error() {
        let instance = Instance::new();
        let failure = ErrorBody {
            error: "ttl_ms must be whole seconds".into(),
            kind: Kind::Invalid,
            holder: None,
            revision: None,
        };
        instance.record(Op::Renew, Duration::from_nanos(1_000), None);
        instance.record(Op::Renew, Duration::from_nanos(3_000), Some(&failure));
        let stats = instance.stats();
        let renew = stats.endpoints.iter().find(|e| e.name == "renew").unwrap();
        assert_eq!(
            (renew.num_requests, renew.num_errors, renew.processing_time),
            (2, 1, 4_000)
        );
        assert_eq!(renew.average_processing_time, 2_000);
        assert_eq!(renew.last_error, "400:ttl_ms must be whole seconds");
        let acquire = stats
            .endpoints
            .iter()
            .find(|e| e.name == "acquire")
            .unwrap();
        assert_eq!(
            (acquire.num_requests, acquire.average_processing_time),
            (0, 0)
        );
        assert_eq!(acquire.last_error, "");
    }

    #[test]
    fn an_error_sentence_is_one_line_and_bounded() {
        let failure = |error: String| ErrorBody {
            error,
            kind: Kind::Invalid,
            holder: None,
            revision: None,
        };
        assert_eq!(error_sentence(&failure("a\r\nb".into())), "a  b");
        let long = error_sentence(&failure("é".repeat(400)));
        assert_eq!(long, format!("{}…", "é".repeat(256)));
    }

    #[test]
    fn ids_differ_per_instance_and_look_like_nuids() {
        let (a, b) = (Instance::new(), Instance::new());
        assert_ne!(a.id(), b.id());
        assert_eq!(a.id().len(), 22);
        assert!(a.id().chars().all(|c| c.is_ascii_alphanumeric()));
    }
}
