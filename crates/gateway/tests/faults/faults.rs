//! A randomized fault run on a three-node cluster: concurrent holders acquire,
//! renew at ttl/3, release, transfer to another holder (who takes the lease up
//! between its own tenures) or abandon keys and answer forwards under the
//! owner's rules (docs/protocol.md, Forwarding to the owner), most contending
//! for a few keys, some ("steady") each cycling through a key of its own;
//! readers read owners and list every key, some at once, some a moment apart,
//! past leases taken once and never touched ("unwatched") that every list walks
//! too; forwarders forward; meanwhile the run kills -9 the stream leader and
//! restarts it, pauses a node with SIGSTOP/SIGCONT, restarts gateways, and
//! partitions a node (mostly the stream leader) from its peers, sometimes from
//! its clients too, then heals it. Every operation is recorded and the history
//! checked (`common::checker`). Fixed seed, bounded time; the schedule is
//! seeded, the interleaving is the machine's.
//!
//! Partitions need the nodes in network namespaces of their own
//! (`Cluster::start_isolated`: root and `ip netns`); where the machine does
//! not allow that, the run says so in one line and runs on loopback
//! without them.
//!
//! The short run is part of `cargo test`; the long one is
//! `cargo test --release --test faults a_long_fault_run -- --ignored --nocapture`
//! (`FAULT_RUN_SECS`, default 300, and `FAULT_RUN_SEED` to vary it;
//! `FAULT_RUN_PAUSE_LEADER=0` pauses followers only;
//! `FAULT_RUN_POLICY=1` runs the gateways with a policy, as the short run
//! always does (docs/protocol.md, Authorization);
//! `FAULT_RUN_STEADY_KEYS`, default 24, the keys with a holder each;
//! `FAULT_RUN_UNWATCHED_KEYS`, default 2000, the leases taken once, which
//! hold for 600 s, the longest TTL).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common;
use crate::common::checker::{self, Call, Op, Outcome};
use crate::common::cluster::{self, Cluster};
use crate::common::fault_report::{self, Setting};
use crate::common::history_file::{self, FaultSpan, History};
use crate::common::{Gateway, cannot_run, timestamp};
use dagnats_leases_client::wire::request::MAX_TTL_MS;
use dagnats_leases_client::{ClientError, LeaseClient};
use futures::StreamExt;
use serde_json::{Value, json};

/// The lease TTL every holder asks for; renewals come every third of it.
const TTL: Duration = Duration::from_secs(3);

/// Every gateway of the run: batching writes and read barriers as much as
/// it can, and sending a batch beside the one in flight as soon as two
/// publishes wait, so the run covers atomic batches, concurrent batches and
/// single publishes.
const GATEWAY_ARGS: &[&str] = &[
    "--replicas",
    "3",
    "--publishes-in-flight",
    "1",
    "--batch-max",
    "2",
];

/// How long the stream may take to be healthy again after a fault.
const HEALTHY_WITHIN: Duration = Duration::from_secs(120);

/// A client's bound on one call: above the gateway's 4.5 s call budget.
/// Every call but forward is sent again at half and three quarters of it.
const CALL_TIMEOUT: Duration = Duration::from_secs(6);

/// SplitMix64: a small deterministic generator, so a seed fixes every
/// choice the run makes without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.next() % (to - from))
    }
}

/// The shape of one run.
struct Plan {
    seed: u64,
    length: Duration,
    keys: usize,
    holders: usize,
    /// Keys with a holder each (`steady-<i>`, by `holder-<holders + i>`),
    /// taken, renewed, released or handed on and taken again: with them a
    /// list walks many keys, written all the while, as faults hit it.
    steady: usize,
    /// Leases taken once before the run with the longest TTL and never
    /// touched (`unwatched-<i>`, sorted after every watched key): every
    /// list's snapshot walks them too, so it runs long enough for writes
    /// to be acknowledged while it does. A list that shared a snapshot
    /// begun before it arrived would miss those writes.
    unwatched: usize,
    readers: usize,
    forwarders: usize,
    gateways: usize,
    /// Whether SIGSTOP may hit the stream leader. Leader pauses found a
    /// nats-server 2.15.1 bug (docs/operations.md): a write acknowledged as
    /// a paused leader resumes is wiped by the overdue expiry marker of the
    /// record it replaced. The gateway now refuses renews that race their
    /// lease's expiry, and both runs pause leaders to show that it holds.
    pause_leader: bool,
    /// Whether gateway `i` is pinned to node `i % 3` (its URL alone and
    /// `--nats-listed-only`: one gateway per node, none moving), instead
    /// of given every node's URL.
    pinned: bool,
    /// A policy file the gateways load ([`FAULT_RUN_POLICY`]), if any.
    policy: Option<tempfile::TempPath>,
}

/// The policy of a run with one: every client of the run is in the
/// gateways' own account, so its `local` principal, with `hold` and not
/// `admin`, so every renew, release and transfer passes the tenure check
/// and every record names the principal.
const FAULT_RUN_POLICY: &str =
    "[[principal]]\nname = \"fault-run\"\nlocal = true\nprefixes = [\"\"]\nrights = [\"hold\"]\n";

/// A policy file holding [`FAULT_RUN_POLICY`], removed when dropped.
fn fault_run_policy() -> tempfile::TempPath {
    let file = tempfile::NamedTempFile::new().expect("a temp file");
    std::fs::write(file.path(), FAULT_RUN_POLICY).expect("the policy is written");
    file.into_temp_path()
}

impl Plan {
    /// Starts gateway `index` of the run, waiting until it serves.
    async fn gateway(&self, cluster: &Cluster, index: usize) -> Gateway {
        let (urls, args) = self.gateway_setup(cluster, index);
        cluster::gateway_with(&urls, &args).await
    }

    /// The URLs and arguments gateway `index` is started with.
    fn gateway_setup(&self, cluster: &Cluster, index: usize) -> (String, Vec<&str>) {
        let (urls, mut args) = (cluster.urls(), GATEWAY_ARGS.to_vec());
        if let Some(policy) = self.policy.as_ref().and_then(|path| path.to_str()) {
            args.extend(["--policy", policy]);
        }
        if !self.pinned {
            return (urls, args);
        }
        args.push("--nats-listed-only");
        let mut each = urls.split(',');
        let count = each.clone().count();
        let url = each.nth(index % count).expect("a node URL").to_string();
        (url, args)
    }
}

/// Every operation, and the tallies the run prints.
struct Recorder {
    t0: Instant,
    ops: Mutex<Vec<Op>>,
    outcomes: Mutex<BTreeMap<String, usize>>,
    /// Error sentences of `internal` replies: each deserves a look.
    internal: Mutex<BTreeSet<String>>,
    /// Why calls answered `unavailable` (digits masked), and how often:
    /// where service time after a fault goes.
    unavailable: Mutex<BTreeMap<String, usize>>,
    /// Change events as they arrived (at most once): the server's own
    /// order of writes and expiry markers, for investigating a violation.
    events: Mutex<Vec<String>>,
    /// Each call that got no answer within [`CALL_TIMEOUT`].
    unanswered: Mutex<Vec<Unanswered>>,
    /// What the gateways stopped so far did, by path: atomic batches by
    /// outcome, those sent beside another (`beside`), and owner reads
    /// answered from what a gateway knew of the key (`owner_known`) or by
    /// a read (`owner_read`).
    paths: Mutex<BTreeMap<&'static str, u64>>,
}

/// A call that got no answer within [`CALL_TIMEOUT`].
#[derive(Clone)]
struct Unanswered {
    /// When it started.
    at: Duration,
    /// The node its client was on then.
    node: String,
    /// `api.leases.<op>`.
    op: String,
}

/// How many `calls` went unanswered, of which operations, and when they
/// started after `fault_at`: `0`, or e.g. `3 (2 acquire, 1 forward;
/// started +0.2 to +3.1 s)`.
fn counted(calls: &[&Unanswered], fault_at: Duration) -> String {
    if calls.is_empty() {
        return "0".into();
    }
    let mut ops: BTreeMap<&str, usize> = BTreeMap::new();
    for call in calls {
        *ops.entry(call.op.as_str()).or_default() += 1;
    }
    let ops: Vec<String> = ops.iter().map(|(op, n)| format!("{n} {op}")).collect();
    let after = |call: &&Unanswered| (call.at - fault_at).as_secs_f64();
    let first = calls.iter().map(after).fold(f64::INFINITY, f64::min);
    let last = calls.iter().map(after).fold(0.0, f64::max);
    format!(
        "{} ({}; started +{first:.1} to +{last:.1} s)",
        calls.len(),
        ops.join(", ")
    )
}

impl Recorder {
    fn now(&self) -> Duration {
        self.t0.elapsed()
    }

    fn record(&self, op: Op) {
        self.ops.lock().unwrap().push(op);
    }

    /// `api.leases.<op>`, tallied; a call left unanswered is kept with
    /// the node its client was connected to when it asked.
    async fn request(
        &self,
        client: &async_nats::Client,
        op: &str,
        body: Value,
    ) -> Result<Value, String> {
        let (start, node) = (self.now(), client.server_info().server_name);
        let reply = request(client, op, body).await;
        if matches!(&reply, Err(why) if why == "timeout") {
            let op = op.to_string();
            let call = Unanswered {
                at: start,
                node,
                op,
            };
            self.unanswered.lock().unwrap().push(call);
        }
        self.tally(op, &reply);
        reply
    }

    /// Tallies a reply by its outcome label, keeping `internal` sentences.
    fn tally(&self, op: &str, reply: &Result<Value, String>) {
        if let Ok(v) = reply
            && v["kind"] == "internal"
        {
            let sentence = format!("{op}: {}", v["error"]);
            self.internal.lock().unwrap().insert(sentence);
        }
        if let Ok(v) = reply
            && v["kind"] == "unavailable"
        {
            let why = v["error"].as_str().unwrap_or_default();
            let why: String = why
                .chars()
                .map(|c| if c.is_ascii_digit() { '#' } else { c })
                .collect();
            *self.unavailable.lock().unwrap().entry(why).or_default() += 1;
        }
        self.count(label(op, reply));
    }

    fn count(&self, what: String) {
        *self.outcomes.lock().unwrap().entry(what).or_default() += 1;
    }
}

/// One call's reply, sent as the Rust client sends it (every call but
/// forward sent again at half and three quarters of its timeout): JSON,
/// or why there was none.
async fn request(client: &async_nats::Client, op: &str, body: Value) -> Result<Value, String> {
    let payload = serde_json::to_vec(&body).unwrap();
    let leases = LeaseClient::new(client.clone()).with_timeout(CALL_TIMEOUT);
    match leases
        .request(&format!("api.leases.{op}"), payload.into())
        .await
    {
        Err(ClientError::Timeout(_)) => Err("timeout".into()),
        Err(ClientError::NoGateway) => Err("noresponders".into()),
        Err(err) => Err(err.to_string()),
        Ok(reply) => serde_json::from_slice(&reply).map_err(|_| "not-json".into()),
    }
}

/// The outcome label of a reply, for the tallies.
fn label(op: &str, reply: &Result<Value, String>) -> String {
    let what = match reply {
        Err(why) => why.clone(),
        Ok(v) if v["kind"].is_string() => v["kind"].as_str().unwrap().to_string(),
        Ok(v) if v["granted"] == false => "refused".into(),
        Ok(v) if v["held"] == false && op == "owner" => "free".into(),
        Ok(_) => "ok".into(),
    };
    format!("{op}: {what}")
}

/// What a reply to an acquire, renew or transfer sent at `wall` says
/// happened: a grant (its fence, and how long after `wall` its
/// `expires_at` lies), the key held by someone else, the lease lost, or
/// nothing known (an error or no answer).
fn outcome_of(reply: &Result<Value, String>, wall: time::OffsetDateTime) -> Outcome {
    match reply {
        Ok(v) if v["granted"] == true => {
            let lasts = timestamp(&v["expires_at"]) - wall;
            Outcome::Granted {
                revision: v["revision"].as_u64().unwrap(),
                lasts: lasts.try_into().unwrap_or(Duration::ZERO),
            }
        }
        Ok(v) if v["kind"] == "lost" => Outcome::Lost,
        Ok(v) if v["granted"] == false => Outcome::Held {
            holder: v["holder"].as_str().unwrap().into(),
            revision: v["revision"].as_u64().unwrap(),
        },
        _ => Outcome::Unknown,
    }
}

/// What a holder currently acts as owner of: key, tenure (the acquire's
/// revision), and until when (offset on the run's clock).
#[derive(Default)]
struct Acting(Option<(String, u64, Duration)>);

/// A lease a transfer handed to a holder: key, fence, until when the
/// receiver may act on it, and when the transfer was sent.
struct Handed {
    key: String,
    revision: u64,
    until: Duration,
    sent: Duration,
}

/// A holder process: its lease calls and its owner inbox.
struct Holder {
    name: String,
    client: async_nats::Client,
    rec: Arc<Recorder>,
    acting: Arc<Mutex<Acting>>,
    /// Every holder's last handed lease, by holder number (`holder-<i>`).
    mailboxes: Arc<Vec<Mutex<Option<Handed>>>>,
    index: usize,
}

impl Holder {
    /// Answers forwards under the three rejection rules (docs/protocol.md,
    /// Forwarding to the owner), recording each request it processes.
    async fn serve_inbox(&self) {
        let mut inbox = self
            .client
            .subscribe(format!("dagnats.lease.inbox.{}.>", self.name))
            .await
            .unwrap();
        common::settle(&self.client).await;
        let (client, rec, acting, name) = (
            self.client.clone(),
            self.rec.clone(),
            self.acting.clone(),
            self.name.clone(),
        );
        tokio::spawn(async move {
            while let Some(msg) = inbox.next().await {
                let key = msg.subject.rsplit('.').next().unwrap().to_string();
                let fence = msg
                    .headers
                    .as_ref()
                    .and_then(|h| h.get("Dagnats-Lease-Fence"))
                    .and_then(|v| v.as_str().parse::<u64>().ok());
                let processed = {
                    let acting = acting.lock().unwrap();
                    let at = rec.now();
                    match (&acting.0, fence) {
                        (Some((k, tenure, until)), Some(fence))
                            if *k == key && at < *until && fence >= *tenure =>
                        {
                            rec.record(Op {
                                key: key.clone(),
                                start: at,
                                end: at,
                                call: Call::Processed {
                                    holder: name.clone(),
                                    fence,
                                },
                            });
                            true
                        }
                        _ => false,
                    }
                };
                let Some(reply) = msg.reply else { continue };
                let mut headers = async_nats::HeaderMap::new();
                if !processed {
                    headers.insert("Dagnats-Lease-Reject", "stale");
                }
                let _ = client
                    .publish_with_headers(reply, headers, "done".into())
                    .await;
            }
        });
    }

    async fn run(self, keys: Vec<String>, mut rng: Rng, until: Duration) {
        self.serve_inbox().await;
        // When this holder last asked for each key: a lease handed over
        // before that is not taken up (the acquire already answered).
        let mut asked: HashMap<String, Duration> = HashMap::new();
        while self.rec.now() < until {
            let handed = self.mailboxes[self.index].lock().unwrap().take();
            if let Some(h) = handed
                && asked.get(&h.key).is_none_or(|at| *at < h.sent)
            {
                self.rec.count("holder: took up a transferred lease".into());
                self.acting.lock().unwrap().0 = Some((h.key.clone(), h.revision, h.until));
                self.hold(&h.key, h.revision, &mut rng).await;
                continue;
            }
            let key = keys[rng.below(keys.len())].clone();
            let start = self.rec.now();
            asked.insert(key.clone(), start);
            let wall = time::OffsetDateTime::now_utc();
            let body = json!({"key": key, "holder": self.name, "ttl_ms": TTL.as_millis() as u64});
            let reply = self.rec.request(&self.client, "acquire", body).await;
            let end = self.rec.now();
            let outcome = outcome_of(&reply, wall);
            if let Outcome::Granted { revision, lasts } = &outcome {
                let until = start + TTL.min(*lasts);
                self.acting.lock().unwrap().0 = Some((key.clone(), *revision, until));
            }
            let grant = matches!(outcome, Outcome::Granted { .. });
            self.rec.record(Op {
                key: key.clone(),
                start,
                end,
                call: Call::Acquire {
                    holder: self.name.clone(),
                    ttl: TTL,
                    outcome: outcome.clone(),
                },
            });
            if grant {
                let Outcome::Granted { revision, .. } = outcome else {
                    unreachable!()
                };
                self.hold(&key, revision, &mut rng).await;
            } else {
                tokio::time::sleep(rng.millis(100, 500)).await;
            }
        }
    }

    /// Renews every ttl/3 for a random number of rounds, then releases the
    /// key or abandons it to expire; stops at `lost` or when entitlement
    /// runs out.
    async fn hold(&self, key: &str, mut revision: u64, rng: &mut Rng) {
        let rounds = rng.below(6);
        let mut round = 0;
        loop {
            let acting_until = match &self.acting.lock().unwrap().0 {
                Some((_, _, until)) => *until,
                None => return,
            };
            let now = self.rec.now();
            let wake = (now + TTL / 3).min(acting_until);
            tokio::time::sleep(wake.saturating_sub(now)).await;
            if self.rec.now() >= acting_until {
                self.acting.lock().unwrap().0 = None;
                self.rec.count("holder: entitlement ran out".into());
                return;
            }
            if round == rounds {
                // Stop acting as owner first, whatever comes next.
                self.acting.lock().unwrap().0 = None;
                match rng.below(8) {
                    0 | 1 => self.rec.count("holder: abandoned".into()),
                    2..=4 => self.transfer(key, revision, rng).await,
                    _ => self.release(key, revision).await,
                }
                return;
            }
            round += 1;
            let sent = revision;
            let start = self.rec.now();
            let wall = time::OffsetDateTime::now_utc();
            let body = json!({"key": key, "holder": self.name, "revision": revision,
                              "ttl_ms": TTL.as_millis() as u64});
            let reply = self.rec.request(&self.client, "renew", body).await;
            let outcome = outcome_of(&reply, wall);
            let end = match &outcome {
                Outcome::Granted {
                    revision: new,
                    lasts,
                } => {
                    let end = self.rec.now();
                    let mut acting = self.acting.lock().unwrap();
                    if let Some((_, _, until)) = &mut acting.0 {
                        *until = (*until).max(start + TTL.min(*lasts));
                    }
                    revision = *new;
                    end
                }
                Outcome::Lost => {
                    self.acting.lock().unwrap().0 = None;
                    self.rec.now()
                }
                _ => self.rec.now(),
            };
            let lost = outcome == Outcome::Lost;
            self.rec.record(Op {
                key: key.into(),
                start,
                end,
                call: Call::Renew {
                    holder: self.name.clone(),
                    revision: sent,
                    ttl: TTL,
                    outcome,
                },
            });
            if lost {
                return;
            }
        }
    }

    /// Hands the key to another holder; a grant goes to its mailbox.
    async fn transfer(&self, key: &str, revision: u64, rng: &mut Rng) {
        let mut index = rng.below(self.mailboxes.len() - 1);
        if index >= self.index {
            index += 1;
        }
        let to = format!("holder-{index}");
        let start = self.rec.now();
        let wall = time::OffsetDateTime::now_utc();
        let body = json!({"key": key, "holder": self.name, "revision": revision, "to": to,
                          "ttl_ms": TTL.as_millis() as u64});
        let reply = self.rec.request(&self.client, "transfer", body).await;
        let outcome = outcome_of(&reply, wall);
        let end = self.rec.now();
        if let Outcome::Granted { revision, lasts } = &outcome {
            *self.mailboxes[index].lock().unwrap() = Some(Handed {
                key: key.into(),
                revision: *revision,
                until: start + TTL.min(*lasts),
                sent: start,
            });
        }
        self.rec.record(Op {
            key: key.into(),
            start,
            end,
            call: Call::Transfer {
                holder: self.name.clone(),
                revision,
                to,
                ttl: TTL,
                outcome,
            },
        });
    }

    async fn release(&self, key: &str, revision: u64) {
        let start = self.rec.now();
        let body = json!({"key": key, "holder": self.name, "revision": revision});
        let reply = self.rec.request(&self.client, "release", body).await;
        let outcome = match &reply {
            Ok(v) if v["released"] == true => Outcome::Released {
                revision: v["revision"].as_u64().unwrap(),
            },
            Ok(v) if v["kind"] == "lost" => Outcome::Lost,
            _ => Outcome::Unknown,
        };
        self.rec.record(Op {
            key: key.into(),
            start,
            end: self.rec.now(),
            call: Call::Release {
                holder: self.name.clone(),
                revision,
                outcome,
            },
        });
    }
}

/// Owner reads of one key, or lists, a reader sends at once, now and then.
const BURST: usize = 4;

/// The key reader `index` writes between two lists (`read-<index>`): each
/// reader's, so the lists name it.
fn reader_key(index: usize) -> String {
    format!("read-{index}")
}

/// Reads owners of random `keys`, and lists every key of `listed`; reader
/// `index` also writes its own key between two lists.
async fn read(
    client: async_nats::Client,
    rec: Arc<Recorder>,
    (keys, listed): (Vec<String>, Vec<String>),
    (index, mut rng): (usize, Rng),
    until: Duration,
) {
    let mut own = OwnKey {
        key: reader_key(index),
        holder: format!("reader-{index}"),
        revision: None,
    };
    let mut round = 0u64;
    while rec.now() < until {
        // One read in five is a burst of lists of every key, one in five
        // a burst of owner reads of one key: a gateway that gets three of
        // a burst shares a snapshot, or a confirmation, between the two
        // that wait. One in five is a list, a write of the reader's own
        // key a moment later, and once that is acknowledged a second list:
        // when both lists reach one gateway while the first one's snapshot
        // (begun before the write) still runs, the second must wait for
        // the next snapshot, or it misses a write acknowledged before it
        // was sent.
        let key = &keys[rng.below(keys.len())];
        // Every eighth round also reads the key's tenure history, so its
        // read path takes the faults too (without a draw of its own, so
        // the seed makes the same choices as before it).
        round += 1;
        if round.is_multiple_of(8) {
            read_history(&client, &rec, key).await;
        }
        match rng.below(5) {
            0 => {
                let burst = (0..BURST).map(|_| read_list(&client, &rec, &listed));
                futures::future::join_all(burst).await;
            }
            1 => {
                let apart = rng.millis(1, 6);
                let written_then_listed = async {
                    tokio::time::sleep(apart).await;
                    if own.write(&client, &rec).await {
                        read_list(&client, &rec, &listed).await;
                    }
                };
                futures::future::join(read_list(&client, &rec, &listed), written_then_listed).await;
            }
            2 => {
                let burst = (0..BURST).map(|_| read_owner(&client, &rec, key));
                futures::future::join_all(burst).await;
            }
            _ => read_owner(&client, &rec, key).await,
        }
        tokio::time::sleep(rng.millis(20, 120)).await;
    }
}

/// A reader's own key, and the revision it last held it at.
struct OwnKey {
    key: String,
    holder: String,
    revision: Option<u64>,
}

impl OwnKey {
    /// Renews the key, or acquires it when not held; records the call and
    /// says whether it was granted.
    async fn write(&mut self, client: &async_nats::Client, rec: &Recorder) -> bool {
        let (start, wall) = (rec.now(), time::OffsetDateTime::now_utc());
        let ttl_ms = TTL.as_millis() as u64;
        let (op, body) = match self.revision {
            Some(revision) => (
                "renew",
                json!({"key": self.key, "holder": self.holder, "revision": revision,
                       "ttl_ms": ttl_ms}),
            ),
            None => (
                "acquire",
                json!({"key": self.key, "holder": self.holder, "ttl_ms": ttl_ms}),
            ),
        };
        let reply = rec.request(client, op, body).await;
        let outcome = outcome_of(&reply, wall);
        let holder = self.holder.clone();
        let call = match self.revision {
            Some(revision) => Call::Renew {
                holder,
                revision,
                ttl: TTL,
                outcome: outcome.clone(),
            },
            None => Call::Acquire {
                holder,
                ttl: TTL,
                outcome: outcome.clone(),
            },
        };
        rec.record(Op {
            key: self.key.clone(),
            start,
            end: rec.now(),
            call,
        });
        self.revision = match outcome {
            Outcome::Granted { revision, .. } => Some(revision),
            // Not known to be held (lost, expired, or no answer): taken
            // again next time; an acquire of a key one holds is answered
            // with its lease.
            _ => None,
        };
        self.revision.is_some()
    }
}

/// Takes `count` leases (`unwatched-<i>`) for the longest TTL, some at a
/// time, for lists to walk; none is ever renewed or read. A call the
/// fresh cluster cannot serve yet is sent again.
async fn take_unwatched(client: &async_nats::Client, count: usize) {
    const AT_ONCE: usize = 50;
    let take = |i: usize| async move {
        let key = format!("unwatched-{i}");
        let body = json!({"key": key, "holder": "unwatched", "ttl_ms": MAX_TTL_MS});
        common::eventually(&format!("{key} taken"), Duration::from_secs(60), || async {
            let reply = request(client, "acquire", body.clone()).await;
            matches!(&reply, Ok(v) if v["granted"] == true).then_some(())
        })
        .await;
    };
    futures::stream::iter((0..count).map(take))
        .buffer_unordered(AT_ONCE)
        .collect::<Vec<()>>()
        .await;
}

/// Lists the bucket: one owner read of every key, over the call's span.
async fn read_list(client: &async_nats::Client, rec: &Recorder, keys: &[String]) {
    let start = rec.now();
    let Ok(reply) = rec.request(client, "list", json!({})).await else {
        return;
    };
    let Some(leases) = reply["leases"].as_array() else {
        return;
    };
    let listed: Vec<_> = leases
        .iter()
        .map(|l| {
            let (holder, revision) = (l["holder"].as_str().unwrap(), l["revision"].as_u64());
            (
                l["key"].as_str().unwrap().to_string(),
                holder.to_string(),
                revision.unwrap(),
            )
        })
        .collect();
    for op in checker::list_reads(keys, (start, rec.now()), &listed) {
        rec.record(op);
    }
}

/// One page of `key`'s tenure history, tallied like every call; what the
/// history says is checked once the run is over ([`tenures_after`]).
async fn read_history(client: &async_nats::Client, rec: &Recorder, key: &str) {
    rec.request(client, "history", json!({"key": key, "limit": 20}))
        .await
        .ok();
}

/// What the tenure history says of `keys` once it has caught up with the
/// run, against the leases held at the end: the violations of
/// docs/protocol.md's Tenure history that [`checker::check_tenures`] finds.
/// It waits (up to a minute) for the history to show every lease held at
/// the end; what it still lacks then is a violation.
async fn tenures_after(
    client: &async_nats::Client,
    history: &[Op],
    keys: &[String],
) -> Vec<checker::Violation> {
    let mut held = Vec::new();
    for key in keys {
        let owner = common::call(client, "owner", json!({"key": key})).await;
        if owner["held"] == true {
            let holder = owner["holder"].as_str().unwrap().to_string();
            held.push((key.clone(), holder, owner["revision"].as_u64().unwrap()));
        }
    }
    let read = || async {
        let mut recorded = Vec::new();
        for key in keys {
            recorded.extend(recorded_tenures(client, key).await);
        }
        checker::check_tenures(history, &recorded, &held)
    };
    let caught_up = dagnats_leases_testkit::within(Duration::from_secs(60), || async {
        let found = read().await;
        found.is_empty().then_some(())
    })
    .await;
    match caught_up {
        Some(()) => Vec::new(),
        None => read().await,
    }
}

/// Every tenure of `key` the history holds, page after page.
async fn recorded_tenures(client: &async_nats::Client, key: &str) -> Vec<checker::Recorded> {
    let mut recorded = Vec::new();
    let mut before = Value::Null;
    loop {
        let body = json!({"key": key, "limit": 1000, "before": before});
        let page = common::call(client, "history", body).await;
        let tenures = page["tenures"]
            .as_array()
            .unwrap_or_else(|| panic!("a history page of {key}: {page}"));
        recorded.extend(tenures.iter().map(|t| checker::Recorded {
            key: key.to_string(),
            holder: t["holder"].as_str().unwrap().to_string(),
            tenure: t["tenure"].as_u64().unwrap(),
            end_revision: t["end_revision"].as_u64(),
        }));
        if page["next"].is_null() {
            return recorded;
        }
        before = page["next"].clone();
    }
}

async fn read_owner(client: &async_nats::Client, rec: &Recorder, key: &str) {
    let start = rec.now();
    let reply = rec.request(client, "owner", json!({"key": key})).await;
    let outcome = match &reply {
        Ok(v) if v["held"] == true => Outcome::Held {
            holder: v["holder"].as_str().unwrap().into(),
            revision: v["revision"].as_u64().unwrap(),
        },
        Ok(v) if v["held"] == false => Outcome::Free,
        _ => Outcome::Unknown,
    };
    rec.record(Op {
        key: key.into(),
        start,
        end: rec.now(),
        call: Call::Owner { outcome },
    });
}

/// Forwards to the owners of random keys; the owners record what they process.
async fn forward(
    client: async_nats::Client,
    rec: Arc<Recorder>,
    keys: Vec<String>,
    mut rng: Rng,
    until: Duration,
) {
    while rec.now() < until {
        let key = &keys[rng.below(keys.len())];
        let body = json!({"key": key, "payload": "cGluZw==", "timeout_ms": 1000});
        let _ = rec.request(&client, "forward", body).await;
        tokio::time::sleep(rng.millis(50, 250)).await;
    }
}

/// Records every change event with its arrival offset.
async fn watch_events(client: async_nats::Client, rec: Arc<Recorder>) {
    let mut events = client.subscribe("dagnats.lease.changed.>").await.unwrap();
    while let Some(msg) = events.next().await {
        let header = |name: &str| {
            msg.headers
                .as_ref()
                .and_then(|h| h.get(name))
                .map_or("-", |v| v.as_str())
                .to_string()
        };
        let line = format!(
            "{:>9.3} {} {} {} {}",
            rec.now().as_secs_f64(),
            header("Nats-Sequence"),
            msg.subject,
            header("Dagnats-Lease-Event"),
            header("Nats-Marker-Reason"),
        );
        rec.events.lock().unwrap().push(line);
    }
}

/// A fault the run injected, and when.
#[derive(Debug)]
enum Fault {
    /// `elected`: when the other nodes reported a new stream leader.
    KillLeader {
        node: String,
        at: Duration,
        elected: Option<Duration>,
    },
    PauseNode {
        node: String,
        leader: bool,
        at: Duration,
    },
    RestartGateway {
        index: usize,
        at: Duration,
    },
    /// Cut off from its peers (and, `isolated`, from its clients) from
    /// `at` for `lasted`, then healed; `elected` as for a kill, when it
    /// led.
    Partition {
        node: String,
        leader: bool,
        isolated: bool,
        at: Duration,
        lasted: Duration,
        elected: Option<Duration>,
        /// The node each gateway was connected to as the cut began.
        gateways_on: Vec<String>,
    },
}

impl Fault {
    /// The fault's kind in the history file and report.
    fn name(&self) -> &'static str {
        match self {
            Fault::KillLeader { .. } => "kill",
            Fault::PauseNode { .. } => "pause",
            Fault::RestartGateway { .. } => "restart-gateway",
            Fault::Partition {
                isolated: false, ..
            } => "partition-routes",
            Fault::Partition { isolated: true, .. } => "partition-routes-and-clients",
        }
    }

    /// What it hit, with the node's role when it struck.
    fn target(&self) -> String {
        let role = |leader: bool| if leader { "stream leader" } else { "follower" };
        match self {
            Fault::KillLeader { node, .. } => format!("{node} ({})", role(true)),
            Fault::PauseNode { node, leader, .. } | Fault::Partition { node, leader, .. } => {
                format!("{node} ({})", role(*leader))
            }
            Fault::RestartGateway { index, .. } => format!("gateway {index}"),
        }
    }

    /// The node whose own clients lost it: killed, or cut off from them.
    fn node_cut_from_clients(&self) -> Option<&str> {
        match self {
            Fault::KillLeader { node, .. }
            | Fault::Partition {
                node,
                isolated: true,
                ..
            } => Some(node),
            _ => None,
        }
    }

    fn at(&self) -> Duration {
        match self {
            Fault::KillLeader { at, .. }
            | Fault::PauseNode { at, .. }
            | Fault::RestartGateway { at, .. }
            | Fault::Partition { at, .. } => *at,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Fault::KillLeader { .. } => "leader kills",
            Fault::PauseNode { leader: true, .. } => "leader pauses",
            Fault::PauseNode { leader: false, .. } => "follower pauses",
            Fault::RestartGateway { .. } => "gateway restarts",
            Fault::Partition { leader: true, .. } => "leader partitions",
            Fault::Partition { leader: false, .. } => "follower partitions",
        }
    }
}

/// How long after a fault the other nodes may take to elect a new leader
/// before the run stops watching: past raft's 9 s maximum election timeout.
const ELECTION_WATCH: Duration = Duration::from_secs(30);

/// Watches, through a node other than `old`, for the bucket's stream to
/// report a leader (only the leader answers `STREAM.INFO`), other than
/// `old` unless `old` may lead again (a killed leader restarts and may win
/// the election); when it does, on the clock started at `t0`. Reads
/// `STREAM.INFO` every 100 ms, each given 500 ms.
async fn watch_election(
    cluster: &Cluster,
    old: usize,
    old_may_lead: bool,
    t0: Instant,
) -> tokio::task::JoinHandle<Option<Duration>> {
    let old_name = cluster.nodes[old].name.clone();
    let other = &cluster.nodes[(old + 1) % cluster.nodes.len()];
    let client = common::client(&other.url).await;
    tokio::spawn(async move {
        let deadline = Instant::now() + ELECTION_WATCH;
        while Instant::now() < deadline {
            let info = client.request("$JS.API.STREAM.INFO.KV_leases", "".into());
            if let Ok(Ok(reply)) = tokio::time::timeout(Duration::from_millis(500), info).await
                && let Ok(info) = serde_json::from_slice::<Value>(&reply.payload)
                && info["cluster"]["leader"]
                    .as_str()
                    .is_some_and(|leader| old_may_lead || leader != old_name)
            {
                return Some(t0.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        None
    })
}

/// Injects faults until `until`, healing each (restart, SIGCONT, links
/// up) and waiting for a healthy stream before the next. Partitions are
/// in the menu only when the cluster is isolated.
async fn inject(
    cluster: &mut Cluster,
    gateways: &mut [Gateway],
    rec: &Recorder,
    mut rng: Rng,
    plan: &Plan,
    partitions: bool,
    logs: &mut Vec<common::Log>,
) -> (Vec<Fault>, Vec<FaultSpan>) {
    let until = plan.length;
    let ctl = cluster.client().await;
    let mut faults = Vec::new();
    let mut spans = Vec::new();
    let mut next = 0;
    let kinds = if partitions { 4 } else { 3 };
    tokio::time::sleep(Duration::from_secs(3)).await;
    while rec.now() + Duration::from_secs(8) < until {
        // The first rounds cover every fault kind; then they come at random.
        let kind = if next < kinds { next } else { rng.below(kinds) };
        next += 1;
        match kind {
            0 => {
                let Some(leader) = cluster.stream_leader(&ctl).await else {
                    continue;
                };
                let at = rec.now();
                cluster.nodes[leader].kill();
                let election = watch_election(cluster, leader, true, rec.t0).await;
                tokio::time::sleep(rng.millis(1000, 3000)).await;
                cluster.nodes[leader].restart().await;
                faults.push(Fault::KillLeader {
                    node: cluster.nodes[leader].name.clone(),
                    at,
                    elected: election.await.unwrap(),
                });
            }
            1 => {
                let leader = cluster.stream_leader(&ctl).await;
                let index = match leader {
                    Some(leader) if plan.pause_leader && rng.below(2) == 0 => leader,
                    Some(leader) if !plan.pause_leader => {
                        (leader + 1 + rng.below(2)) % cluster.nodes.len()
                    }
                    _ => rng.below(cluster.nodes.len()),
                };
                let node = &cluster.nodes[index];
                node.pause();
                faults.push(Fault::PauseNode {
                    node: node.name.clone(),
                    leader: Some(index) == leader,
                    at: rec.now(),
                });
                tokio::time::sleep(rng.millis(1000, 5000)).await;
                node.resume();
            }
            3 => {
                // Mostly the stream leader: cut off, it keeps leading (and
                // answering its gateways) until it notices it lost its
                // quorum, while the others elect a new one. Long enough
                // for that election, sometimes past the old leader's own
                // step-down.
                // The first one is that case exactly: the leader, routes only.
                let first = next == kinds;
                let leader = cluster.stream_leader(&ctl).await;
                let index = match leader {
                    Some(leader) if first || rng.below(3) > 0 => leader,
                    _ => rng.below(cluster.nodes.len()),
                };
                let isolated = !first && rng.below(3) == 0;
                let gateways_on = gateway_nodes(gateways).await;
                let at = rec.now();
                if isolated {
                    cluster.isolate(index);
                } else {
                    cluster.partition(index);
                }
                let election = match leader == Some(index) {
                    true => Some(watch_election(cluster, index, false, rec.t0).await),
                    false => None,
                };
                let lasted = rng.millis(6000, 16000);
                tokio::time::sleep(lasted).await;
                cluster.heal(index);
                let elected = match election {
                    Some(election) => election.await.unwrap(),
                    None => None,
                };
                faults.push(Fault::Partition {
                    node: cluster.nodes[index].name.clone(),
                    leader: Some(index) == leader,
                    isolated,
                    at,
                    lasted,
                    elected,
                    gateways_on,
                });
            }
            _ => {
                let index = rng.below(gateways.len());
                count_paths(&gateways[index], rec).await;
                let (urls, args) = plan.gateway_setup(cluster, index);
                let new = Gateway::spawn(&urls, &args, &[]);
                logs.push(std::mem::replace(&mut gateways[index], new).log.clone());
                faults.push(Fault::RestartGateway {
                    index,
                    at: rec.now(),
                });
                gateways[index].wait_serving().await;
            }
        }
        // Healed (restarted, resumed, linked up, serving): the fault ends.
        let ended = faults.last().filter(|_| spans.len() < faults.len());
        let healed = rec.now();
        if let Some(fault) = ended {
            spans.push(FaultSpan {
                kind: fault.name().into(),
                target: fault.target(),
                start: fault.at(),
                end: healed,
            });
        }
        // The stream healthy again (every replica current) before the next
        // fault. After the run's first partition of a stream leader this
        // took 45 to 60 s in most long runs (nats-server 2.15.1), so the
        // bound leaves room. Each fault is told as it heals, so a run
        // stopped by the bound says which one, and then how long the
        // stream took.
        if let Some(fault) = ended {
            eprintln!(
                "fault run: {:.1} s {} {}, healed at {:.1} s",
                fault.at().as_secs_f64(),
                fault.name(),
                fault.target(),
                healed.as_secs_f64(),
            );
        }
        cluster.wait_healthy(&ctl, HEALTHY_WITHIN).await;
        if ended.is_some() {
            eprintln!(
                "fault run: the stream healthy {:.1} s later",
                (rec.now() - healed).as_secs_f64()
            );
        }
        tokio::time::sleep(rng.millis(1000, 4000)).await;
    }
    (faults, spans)
}

/// Runs `plan` and returns the number of violations, printing the figures.
async fn fault_run(plan: Plan) -> usize {
    let (mut cluster, partitions) = match Cluster::start_isolated().await {
        Ok(cluster) => (cluster, true),
        Err(why) => {
            cannot_run(
                "the fault run's partitions",
                &format!("no network namespaces: {why}"),
            );
            (Cluster::start().await, false)
        }
    };
    let mut gateways = Vec::new();
    for index in 0..plan.gateways {
        gateways.push(plan.gateway(&cluster, index).await);
    }
    let ctl = cluster.client().await;
    cluster.wait_healthy(&ctl, HEALTHY_WITHIN).await;

    let wall_t0 = time::OffsetDateTime::now_utc();
    let rec = Arc::new(Recorder {
        t0: Instant::now(),
        ops: Mutex::default(),
        outcomes: Mutex::default(),
        internal: Mutex::default(),
        unavailable: Mutex::default(),
        events: Mutex::default(),
        unanswered: Mutex::default(),
        paths: Mutex::default(),
    });
    let until = plan.length;
    let keys: Vec<String> = (0..plan.keys).map(|i| format!("shard-{i}")).collect();
    let steady: Vec<String> = (0..plan.steady).map(|i| format!("steady-{i}")).collect();
    let readers = (0..plan.readers).map(reader_key);
    let listed: Vec<String> = keys.iter().chain(&steady).cloned().chain(readers).collect();
    take_unwatched(&ctl, plan.unwatched).await;
    let mut seeds = Rng(plan.seed);
    let mut tasks = Vec::new();
    let all_holders = plan.holders + plan.steady;
    let mailboxes: Arc<Vec<_>> = Arc::new((0..all_holders).map(|_| Mutex::default()).collect());
    for i in 0..all_holders {
        let holder = Holder {
            name: format!("holder-{i}"),
            client: cluster.holder_client().await,
            rec: rec.clone(),
            acting: Arc::default(),
            mailboxes: mailboxes.clone(),
            index: i,
        };
        let wants = match i.checked_sub(plan.holders) {
            None => keys.clone(),
            Some(own) => vec![steady[own].clone()],
        };
        tasks.push(tokio::spawn(holder.run(wants, Rng(seeds.next()), until)));
    }
    for index in 0..plan.readers {
        let client = cluster.holder_client().await;
        tasks.push(tokio::spawn(read(
            client,
            rec.clone(),
            (keys.clone(), listed.clone()),
            (index, Rng(seeds.next())),
            until,
        )));
    }
    for _ in 0..plan.forwarders {
        let client = cluster.holder_client().await;
        tasks.push(tokio::spawn(forward(
            client,
            rec.clone(),
            keys.clone(),
            Rng(seeds.next()),
            until,
        )));
    }
    tokio::spawn(watch_events(cluster.holder_client().await, rec.clone()));
    let mut logs = Vec::new();
    let (faults, spans) = inject(
        &mut cluster,
        &mut gateways,
        &rec,
        Rng(seeds.next()),
        &plan,
        partitions,
        &mut logs,
    )
    .await;
    logs.extend(gateways.iter().map(|g| g.log.clone()));
    for task in tasks {
        task.await.unwrap();
    }
    // Healed and quiet: every key's final state must reflect every
    // acknowledged write.
    cluster.wait_healthy(&ctl, HEALTHY_WITHIN).await;
    for key in &keys {
        read_owner(&ctl, &rec, key).await;
    }

    let history = rec.ops.lock().unwrap().clone();
    let mut violations = checker::check(&history);
    violations.extend(tenures_after(&ctl, &history, &listed).await);
    report(&plan, &rec, &history, &faults, &violations);
    let setting = setting(&plan, &rec, &ctl, &cluster).await;
    save(
        &plan,
        &setting,
        History {
            ops: history.clone(),
            faults: spans,
        },
        &violations,
    );
    if !violations.is_empty() {
        dump(&plan, &rec, wall_t0, &history, &violations, &cluster, &logs);
    }
    // What the gateways logged about internal errors and panics.
    for line in logs
        .iter()
        .flat_map(|log| log.text().lines().map(String::from).collect::<Vec<_>>())
    {
        if line.contains("ERROR") || line.contains("panicked") {
            println!("gateway: {line}");
        }
    }
    // The run took every path: atomic batches were sent, committed (each
    // message told its revision) or refused (each sent again alone), some
    // beside another in flight; owner reads were answered both from what a
    // gateway knew and by reading, and some by a check they shared.
    for gateway in &gateways {
        count_paths(gateway, &rec).await;
    }
    let paths = rec.paths.lock().unwrap().clone();
    println!("paths every gateway of the run took: {paths:?}");
    assert!(
        paths["committed"] + paths["refused"] > 0,
        "no publish went in a batch"
    );
    assert!(paths["beside"] > 0, "no batch left beside another");
    assert!(
        paths["owner_known"] > 0,
        "no owner read from what was known"
    );
    assert!(paths["owner_read"] > 0, "no owner read by reading");
    assert!(
        paths["shared_check"] > 0,
        "no owner read answered by a check it shared"
    );
    assert!(paths["list_listed"] > 0, "no list served");
    assert!(
        paths["shared_list"] > 0,
        "no list answered by a snapshot it shared"
    );
    violations.len()
}

/// The node each gateway is connected to now (its `/v1/cluster`), `?`
/// when it does not say.
async fn gateway_nodes(gateways: &[Gateway]) -> Vec<String> {
    let mut nodes = Vec::new();
    for gateway in gateways {
        let cluster = common::Http::of(gateway).await.get("/v1/cluster").await;
        let connected = cluster.body["nodes"].as_array().and_then(|nodes| {
            nodes
                .iter()
                .find(|n| n["connected"] == true)
                .and_then(|n| n["name"].as_str())
        });
        nodes.push(connected.unwrap_or("?").to_string());
    }
    nodes
}

/// Adds what `gateway` did so far to the run's, by path.
async fn count_paths(gateway: &Gateway, rec: &Recorder) {
    let http = common::Http::of(gateway).await;
    let series = [
        (
            "committed",
            r#"dagnats_store_batches_total{outcome="committed"}"#,
        ),
        (
            "refused",
            r#"dagnats_store_batches_total{outcome="refused"}"#,
        ),
        (
            "unanswered",
            r#"dagnats_store_batches_total{outcome="unanswered"}"#,
        ),
        ("beside", "dagnats_store_batches_beside_total"),
        ("owner_known", r#"dagnats_owner_reads_total{path="known"}"#),
        ("owner_read", r#"dagnats_owner_reads_total{path="read"}"#),
        (
            "shared_check",
            r#"dagnats_store_confirmations_shared_total{what="check"}"#,
        ),
        (
            "shared_list",
            r#"dagnats_store_confirmations_shared_total{what="list"}"#,
        ),
        // Each consumer a list made, by what came of it.
        (
            "list_listed",
            r#"dagnats_list_consumers_total{outcome="listed"}"#,
        ),
        (
            "list_failed",
            r#"dagnats_list_consumers_total{outcome="failed"}"#,
        ),
        (
            "list_behind",
            r#"dagnats_list_consumers_total{outcome="behind"}"#,
        ),
        (
            "list_no_meta_leader",
            r#"dagnats_list_consumers_total{outcome="no_meta_leader"}"#,
        ),
        (
            "list_not_listening",
            r#"dagnats_list_consumers_total{outcome="not_listening"}"#,
        ),
        (
            "list_no_end",
            r#"dagnats_list_consumers_total{outcome="no_end"}"#,
        ),
    ];
    for (path, series) in series {
        let n = http.metric(series).await;
        *rec.paths.lock().unwrap().entry(path).or_default() += n;
    }
}

/// Where a run's files go: `target/fault-runs/<seed>/` in the workspace's
/// target directory.
fn run_dir(seed: u64) -> std::path::PathBuf {
    let tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent()
        .unwrap_or(tmp)
        .join("fault-runs")
        .join(seed.to_string())
}

/// Versions, configuration and clients of the run, from the servers
/// themselves where they say it.
async fn setting(
    plan: &Plan,
    rec: &Recorder,
    ctl: &async_nats::Client,
    cluster: &Cluster,
) -> Setting {
    let node = &cluster.nodes[0];
    let sync = match varz(&node.url, node.http_port).await {
        Some(varz) => sync_interval(&varz["jetstream"]["config"]),
        None => "unknown (varz unreachable)".into(),
    };
    let secs = |d: Duration| format!("{} s", d.as_secs_f64());
    let configuration = vec![
        ("nats-server version (INFO)", ctl.server_info().version),
        ("gateway version", env!("CARGO_PKG_VERSION").to_string()),
        ("nodes", cluster.nodes.len().to_string()),
        ("sync_interval", sync),
        ("bucket replicas", "3".to_string()),
        ("lease TTL", secs(TTL)),
        ("renew interval", secs(TTL / 3)),
        ("client call timeout", secs(CALL_TIMEOUT)),
        (
            "client resend (every call but forward)",
            format!(
                "{} and {}",
                secs(CALL_TIMEOUT / 2),
                secs(CALL_TIMEOUT * 3 / 4)
            ),
        ),
        ("forward timeout", "1 s".to_string()),
        ("seed", plan.seed.to_string()),
        ("duration", secs(plan.length)),
        ("leader pauses", plan.pause_leader.to_string()),
        ("gateways pinned to one node each", plan.pinned.to_string()),
        ("policy", plan.policy.is_some().to_string()),
    ];
    let clients = vec![
        ("keys", plan.keys),
        ("holders", plan.holders),
        ("steady keys, a holder each", plan.steady),
        ("unwatched leases, taken once", plan.unwatched),
        ("readers", plan.readers),
        ("forwarders", plan.forwarders),
        ("gateways", plan.gateways),
    ];
    let unrecorded = rec
        .outcomes
        .lock()
        .unwrap()
        .iter()
        .filter(|(label, _)| label.starts_with("forward:"))
        .map(|(label, n)| (label.clone(), *n))
        .collect();
    Setting {
        configuration: configuration
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        clients: clients
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        unrecorded,
    }
}

/// A node's `/varz`, from its monitoring port on the client address.
async fn varz(url: &str, http_port: u16) -> Option<Value> {
    let host = url.rsplit("//").next()?.rsplit_once(':')?.0;
    let reply = reqwest::get(format!("http://{host}:{http_port}/varz"))
        .await
        .ok()?;
    reply.json().await.ok()
}

/// `sync_interval` as the server reports it: `sync_always`, or the
/// interval in nanoseconds (absent: the 2 min default).
fn sync_interval(config: &Value) -> String {
    if config["sync_always"] == true {
        "always".into()
    } else {
        match config["sync_interval"].as_u64() {
            Some(ns) => format!("{} s", ns as f64 / 1e9),
            None => "default (2 min)".into(),
        }
    }
}

/// Writes the history and the report under `target/fault-runs/<seed>/`,
/// prints the report, and checks that the history read back from its file
/// gets the same verdicts.
fn save(plan: &Plan, setting: &Setting, history: History, violations: &[checker::Violation]) {
    let dir = run_dir(plan.seed);
    let path = dir.join("history.jsonl");
    history_file::write(&path, &history).unwrap();
    let report = fault_report::render(setting, &history.ops, &history.faults, violations);
    std::fs::write(dir.join("report.md"), &report).unwrap();
    println!("\n{report}");
    println!("history: {}", path.display());
    println!("report: {}", dir.join("report.md").display());
    let again = history_file::read(&path).unwrap();
    assert_eq!(
        fault_report::verdicts(&again.ops, &checker::check(&again.ops)),
        fault_report::verdicts(&history.ops, violations),
        "the history read back from {} gets other verdicts",
        path.display()
    );
}

/// Writes the whole history, every node's and gateway's log to a file for
/// a violation to be investigated, and says where.
fn dump(
    plan: &Plan,
    rec: &Recorder,
    wall_t0: time::OffsetDateTime,
    history: &[Op],
    violations: &[checker::Violation],
    cluster: &Cluster,
    logs: &[common::Log],
) {
    use std::fmt::Write;
    let mut text = String::new();
    for v in violations {
        let _ = writeln!(text, "violation: {v}");
    }
    let _ = writeln!(text, "\nrun start (offset 0) at {wall_t0}\n");
    let mut ops: Vec<&Op> = history.iter().collect();
    ops.sort_by_key(|op| op.start);
    for op in ops {
        let _ = writeln!(
            text,
            "{:>9.3} {:>9.3} {} {:?}",
            op.start.as_secs_f64(),
            op.end.as_secs_f64(),
            op.key,
            op.call
        );
    }
    text.push_str("\n== change events: offset, Nats-Sequence, subject, event or marker\n");
    for event in rec.events.lock().unwrap().iter() {
        let _ = writeln!(text, "{event}");
    }
    text.push_str(&cluster.logs());
    for (i, log) in logs.iter().enumerate() {
        let _ = write!(text, "\n== gateway process {i}\n{}\n", log.text());
    }
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("fault-run-seed-{}.txt", plan.seed));
    std::fs::write(&path, text).unwrap();
    println!("history and logs: {}", path.display());
}

/// The first answered call that started after `at`, as a delay from `at`.
fn back_after(history: &[Op], at: Duration) -> Option<Duration> {
    history
        .iter()
        .filter(|op| op.start >= at && !matches!(op.call, Call::Processed { .. }))
        .filter(|op| {
            let outcome = match &op.call {
                Call::Acquire { outcome, .. }
                | Call::Renew { outcome, .. }
                | Call::Release { outcome, .. }
                | Call::Transfer { outcome, .. }
                | Call::Owner { outcome } => outcome,
                Call::Processed { .. } => return false,
            };
            *outcome != Outcome::Unknown
        })
        .map(|op| op.end - at)
        .min()
}

fn served_again(back: Option<Duration>) -> String {
    match back {
        Some(back) => format!("served again after {:.1} s", back.as_secs_f64()),
        None => "no call answered after it".into(),
    }
}

fn report(
    plan: &Plan,
    rec: &Recorder,
    history: &[Op],
    faults: &[Fault],
    violations: &[checker::Violation],
) {
    println!(
        "fault run: seed {}, {} s, {} keys, {} holders, {} steady keys, {} unwatched leases, {} readers, {} forwarders, {} gateways, 3 nodes",
        plan.seed,
        plan.length.as_secs(),
        plan.keys,
        plan.holders,
        plan.steady,
        plan.unwatched,
        plan.readers,
        plan.forwarders,
        plan.gateways
    );
    let outcomes = rec.outcomes.lock().unwrap();
    let total: usize = outcomes
        .iter()
        .filter(|(k, _)| !k.starts_with("holder:"))
        .map(|(_, n)| n)
        .sum();
    println!("operations: {total}");
    for (what, n) in outcomes.iter() {
        println!("  {what}: {n}");
    }
    let processed = history
        .iter()
        .filter(|op| matches!(op.call, Call::Processed { .. }))
        .count();
    println!("  forwards processed by owners: {processed}");
    for sentence in rec.internal.lock().unwrap().iter() {
        println!("  internal error: {sentence}");
    }
    let mut unavailable: Vec<_> = rec
        .unavailable
        .lock()
        .unwrap()
        .clone()
        .into_iter()
        .collect();
    unavailable.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    for (why, n) in unavailable.iter().take(8) {
        println!("  unavailable x{n}: {why}");
    }
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for fault in faults {
        *kinds.entry(fault.kind()).or_default() += 1;
    }
    let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
    println!("faults injected: {} ({})", faults.len(), kinds.join(", "));
    // `None` once a leader kill was never followed by an answered call.
    let mut longest = Some(Duration::ZERO);
    // The same after a leader partition; `None` here means there was none.
    let mut longest_cut: Option<Option<Duration>> = None;
    // Served again after the new leader was reported, by fault kind.
    let mut after_election: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let unanswered = rec.unanswered.lock().unwrap().clone();
    for (i, fault) in faults.iter().enumerate() {
        let until = faults.get(i + 1).map_or(Duration::MAX, Fault::at);
        // Calls whose client was on the node the fault hit (killed, or cut
        // off from its clients) cannot be answered; the others must be.
        let hit = fault.node_cut_from_clients();
        let (on_it, elsewhere): (Vec<_>, Vec<_>) = unanswered
            .iter()
            .filter(|call| (fault.at()..until).contains(&call.at))
            .partition(|call| Some(call.node.as_str()) == hit);
        let lost = if on_it.is_empty() && elsewhere.is_empty() {
            String::new()
        } else {
            format!(
                "; unanswered within {} s: {} from clients elsewhere, {} from its own",
                CALL_TIMEOUT.as_secs(),
                counted(&elsewhere, fault.at()),
                counted(&on_it, fault.at()),
            )
        };
        let mut elected = |back: Option<Duration>, at: Duration, elected: Option<Duration>| {
            let Some(elected) = elected else {
                return "; no new leader reported".to_string();
            };
            let to_leader = elected.saturating_sub(at);
            let since = back.map(|b| (at + b).as_secs_f64() - elected.as_secs_f64());
            let since = since.map_or("never".into(), |s| format!("{s:+.1} s"));
            after_election
                .entry(fault.kind())
                .or_default()
                .push(since.clone());
            format!(
                "; new leader after {:.1} s, served again {since} from then",
                to_leader.as_secs_f64()
            )
        };
        match fault {
            Fault::KillLeader {
                node,
                at,
                elected: new_leader,
            } => {
                let back = back_after(history, *at);
                longest = longest.zip(back).map(|(a, b)| a.max(b));
                println!(
                    "  {:>6.1} s  kill -9 stream leader {node}, restarted; {}{}{lost}",
                    at.as_secs_f64(),
                    served_again(back),
                    elected(back, *at, *new_leader)
                );
            }
            Fault::PauseNode { node, leader, at } => {
                let what = if *leader { "stream leader" } else { "follower" };
                println!(
                    "  {:>6.1} s  SIGSTOP {what} {node}, then SIGCONT; {}{lost}",
                    at.as_secs_f64(),
                    served_again(back_after(history, *at))
                );
            }
            Fault::RestartGateway { index, at } => {
                println!(
                    "  {:>6.1} s  gateway {index} killed -9 and started again{lost}",
                    at.as_secs_f64()
                );
            }
            Fault::Partition {
                node,
                leader,
                isolated,
                at,
                lasted,
                elected: new_leader,
                gateways_on,
            } => {
                let what = if *leader { "stream leader" } else { "follower" };
                let from = if *isolated {
                    "peers and clients"
                } else {
                    "peers"
                };
                let back = back_after(history, *at);
                if *leader {
                    longest_cut = Some(match longest_cut {
                        None => back,
                        Some(longest) => longest.zip(back).map(|(a, b)| a.max(b)),
                    });
                }
                let election = match leader {
                    true => elected(back, *at, *new_leader),
                    false => String::new(),
                };
                let there = gateways_on.iter().filter(|on| *on == node).count();
                println!(
                    "  {:>6.1} s  {what} {node} cut off from its {from} for {:.1} s, then healed ({there} of the gateways on it: {}); {}{election}{lost}",
                    at.as_secs_f64(),
                    lasted.as_secs_f64(),
                    gateways_on.join(", "),
                    served_again(back)
                );
            }
        }
    }
    match longest {
        Some(longest) => println!(
            "longest unavailability after a leader kill: {:.1} s",
            longest.as_secs_f64()
        ),
        None => println!("longest unavailability after a leader kill: not served again"),
    }
    match longest_cut {
        Some(Some(longest)) => println!(
            "longest unavailability after a leader partition: {:.1} s",
            longest.as_secs_f64()
        ),
        Some(None) => println!("longest unavailability after a leader partition: not served again"),
        None => {}
    }
    for (kind, since) in &after_election {
        println!(
            "served again after the new leader was reported, {kind}: {}",
            since.join(", ")
        );
    }
    let before = faults.first().map_or(Duration::MAX, Fault::at);
    println!(
        "calls unanswered within the client's {} s timeout: {} ({} before the first fault)",
        CALL_TIMEOUT.as_secs(),
        unanswered.len(),
        unanswered.iter().filter(|call| call.at < before).count()
    );
    println!("violations: {}", violations.len());
    for v in violations.iter().take(20) {
        println!("  {v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_fault_run_finds_no_violation() {
    let plan = Plan {
        seed: 7,
        length: Duration::from_secs(70),
        keys: 3,
        holders: 6,
        steady: 6,
        unwatched: 2000,
        readers: 2,
        forwarders: 2,
        gateways: 2,
        pause_leader: true,
        pinned: false,
        policy: Some(fault_run_policy()),
    };
    assert_eq!(fault_run(plan).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long (cargo test --release --test faults a_long_fault_run -- --ignored --nocapture)"]
async fn a_long_fault_run_finds_no_violation() {
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let plan = Plan {
        seed: env("FAULT_RUN_SEED", 7),
        length: Duration::from_secs(env("FAULT_RUN_SECS", 300)),
        keys: 4,
        holders: 10,
        steady: env("FAULT_RUN_STEADY_KEYS", 24) as usize,
        unwatched: env("FAULT_RUN_UNWATCHED_KEYS", 2000) as usize,
        readers: 3,
        forwarders: 3,
        gateways: 3,
        pause_leader: env("FAULT_RUN_PAUSE_LEADER", 1) == 1,
        pinned: env("FAULT_RUN_PINNED_GATEWAYS", 1) == 1,
        policy: (env("FAULT_RUN_POLICY", 0) == 1).then(fault_run_policy),
    };
    assert_eq!(fault_run(plan).await, 0);
}
