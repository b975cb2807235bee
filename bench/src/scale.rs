//! Many holders at once: each keeps one lease with a short TTL and renews at
//! ttl/3, as the holder rules say (docs/protocol.md, Holder rules and
//! client libraries). A renewal "misses its deadline"
//! when its reply arrives after the previous grant's request start + TTL (the
//! holder would have had to stop acting as owner); a lease "wrongly lost" is
//! a renew answered `lost` although the holder renewed on schedule.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dagnats_leases_client::LeaseClient;
use dagnats_leases_client::wire::names::STREAM;
use serde::Serialize;
use tokio::sync::Mutex;
use tokio::time::{Instant, sleep_until};

use crate::http_ops;
use crate::measure::{Latency, RangeRead, Recorder};
use crate::procs::{Usage, cpu_percent, usage};

/// Every holder's key starts with this.
const PREFIX: &str = "scale-";

/// What a scale run saw.
#[derive(Debug, Clone, Serialize)]
pub struct Scale {
    pub holders: u64,
    pub ttl_ms: u64,
    pub seconds: u64,
    pub renewals: u64,
    pub renew: Latency,
    pub missed_deadlines: u64,
    pub wrongly_lost: u64,
    pub errors: u64,
    /// The gateways' CPU together, in percent of one core.
    pub gateway_cpu_percent: f64,
    /// The nats-server nodes' CPU together, in percent of one core: with
    /// the gateways' and the load generator's, how near the machine's
    /// cores the run was.
    pub servers_cpu_percent: f64,
    /// This process's CPU (the holders' side), in percent of one core.
    pub load_cpu_percent: f64,
    /// The largest resident memory of a gateway.
    pub gateway_rss_mb: f64,
    /// How often the bucket's stream changed leader during the run, and
    /// how many of its `STREAM.INFO` checks (every 250 ms) got no answer
    /// within a second: a run that loses leases met an election or a
    /// stall, or it did not.
    pub leader_changes: u64,
    pub stream_checks_unanswered: u64,
    /// The lists taken while the holders renewed; none when the run ended
    /// before the first could start.
    pub lists: Option<ListsDuring>,
}

/// Where and how often to list during a run.
pub struct Lists {
    pub http: reqwest::Client,
    /// The gateways' HTTP base URLs, each list on the next.
    pub bases: Vec<String>,
    pub calls: u64,
    /// Lists sent together each time, as that many dashboards opening at
    /// once would.
    pub at_once: u64,
}

/// What the lists taken during a run came to.
#[derive(Debug, Clone, Serialize)]
pub struct ListsDuring {
    /// The fewest leases a call answered, each call's duration, and those
    /// leases over the median call.
    #[serde(flatten)]
    pub range: RangeRead,
    /// Calls that answered fewer leases than were held all through them:
    /// a list that left a held lease out.
    pub short: u64,
}

pub async fn run(
    leases: &LeaseClient,
    (gateway_pids, server_pids): (&[u32], &[u32]),
    holders: u64,
    (ttl, run_for): (Duration, Duration),
    lists: Lists,
) -> Scale {
    let ttl_ms = ttl.as_millis() as u64;
    let recorder = Arc::new(Mutex::new(Recorder::default()));
    let (missed, lost, errors, renewals, held) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let before: Vec<Usage> = gateway_pids.iter().map(|p| usage(*p)).collect();
    let servers_before: Vec<Usage> = server_pids.iter().map(|p| usage(*p)).collect();
    let load_before = usage(std::process::id());
    let begin = Instant::now();
    let end = begin + run_for;
    let tasks: Vec<_> = (0..holders)
        .map(|h| {
            let leases = leases.clone();
            let (recorder, missed, lost, errors, renewals, held) = (
                recorder.clone(),
                missed.clone(),
                lost.clone(),
                errors.clone(),
                renewals.clone(),
                held.clone(),
            );
            // Starts spread over one renew interval, as real replicas are.
            let offset = (ttl / 3).mul_f64(h as f64 / holders as f64);
            tokio::spawn(async move {
                let (key, holder) = (format!("{PREFIX}{h}"), format!("holder-{h}"));
                sleep_until(begin + offset).await;
                let mut granted_at = Instant::now();
                let mut fence = match leases.acquire(&key, &holder, ttl).await {
                    Ok(grant) if grant.granted => {
                        held.fetch_add(1, Ordering::Relaxed);
                        grant.lease.revision
                    }
                    _ => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                };
                // Plain durations, one histogram for all at the end: a
                // histogram each would be 10,000 x 140 KB.
                let mut samples = Vec::new();
                loop {
                    let next = granted_at + ttl / 3;
                    if next >= end {
                        break;
                    }
                    sleep_until(next).await;
                    let started = Instant::now();
                    let result = leases.renew(&key, &holder, fence, ttl).await;
                    let done = Instant::now();
                    samples.push(done - started);
                    renewals.fetch_add(1, Ordering::Relaxed);
                    if done > granted_at + ttl {
                        missed.fetch_add(1, Ordering::Relaxed);
                    }
                    match result {
                        Ok(grant) => {
                            fence = grant.lease.revision;
                            granted_at = started;
                        }
                        Err(err) if err.is_lost() => {
                            held.fetch_sub(1, Ordering::Relaxed);
                            lost.fetch_add(1, Ordering::Relaxed);
                            break;
                        }
                        Err(_) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                let mut recorder = recorder.lock().await;
                for sample in samples {
                    recorder.record(sample);
                }
            })
        })
        .collect();
    // Every holder has asked for its lease by a third of the TTL.
    let schedule = (begin + ttl / 2, ttl, end);
    let listing = tokio::spawn(list_while_renewing(lists, held, schedule));
    let leader = tokio::spawn(watch_leader(leases.nats().clone(), end));
    let sampler = {
        let pids = gateway_pids.to_vec();
        tokio::spawn(async move {
            let mut peak = 0;
            while Instant::now() < end {
                let largest = pids.iter().map(|p| usage(*p).rss_bytes).max();
                peak = peak.max(largest.unwrap_or(0));
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            peak
        })
    };
    for t in tasks {
        t.await.expect("holder task");
    }
    let after: Vec<Usage> = gateway_pids.iter().map(|p| usage(*p)).collect();
    let largest = after.iter().map(|u| u.rss_bytes).max().unwrap_or(0);
    let peak_rss = sampler.await.unwrap_or(0).max(largest);
    let summed = |before: Vec<Usage>, after: Vec<Usage>| -> f64 {
        before
            .into_iter()
            .zip(after)
            .map(|(b, a)| cpu_percent(b, a))
            .sum()
    };
    let gateway_cpu = summed(before, after);
    let servers_cpu = summed(
        servers_before,
        server_pids.iter().map(|p| usage(*p)).collect(),
    );
    let load_cpu = cpu_percent(load_before, usage(std::process::id()));
    let renew = recorder.lock().await.latency();
    let (leader_changes, stream_checks_unanswered) = leader.await.unwrap_or_default();
    let lists = listing.await.expect("list task");
    Scale {
        holders,
        ttl_ms,
        seconds: run_for.as_secs(),
        renewals: renewals.load(Ordering::Relaxed),
        renew,
        missed_deadlines: missed.load(Ordering::Relaxed),
        wrongly_lost: lost.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        gateway_cpu_percent: gateway_cpu,
        servers_cpu_percent: servers_cpu,
        load_cpu_percent: load_cpu,
        gateway_rss_mb: peak_rss as f64 / 1_048_576.0,
        leader_changes,
        stream_checks_unanswered,
        lists,
    }
}

/// Up to `lists.calls` lists of every holder's lease (each `lists.at_once`
/// lists sent together, on the gateways in turn), one at `from` and
/// then one every `every` (as a dashboard reloaded that often), none
/// started at `until` or later; `held` counts the leases the holders hold.
/// Spaced, not back to back: lists of every lease at once take the
/// renewals past what the machine has left for them.
async fn list_while_renewing(
    lists: Lists,
    held: Arc<AtomicU64>,
    (from, every, until): (Instant, Duration, Instant),
) -> Option<ListsDuring> {
    let (mut recorder, mut fewest, mut short) = (Recorder::default(), None::<u64>, 0);
    for call in 0..lists.calls {
        let at = from + every * u32::try_from(call).unwrap_or(u32::MAX);
        if at >= until {
            break;
        }
        sleep_until(at).await;
        let together = (0..lists.at_once).map(|i| {
            let base = http_ops::at(&lists.bases, call * lists.at_once + i);
            let (http, held) = (&lists.http, &held);
            async move {
                let before = held.load(Ordering::Relaxed);
                let started = Instant::now();
                let listed = http_ops::list_once(http, base, PREFIX).await;
                let took = started.elapsed();
                let after = held.load(Ordering::Relaxed);
                (listed, took, before == after && listed < after)
            }
        });
        for (listed, took, left_out) in futures::future::join_all(together).await {
            recorder.record(took);
            short += u64::from(left_out);
            fewest = Some(fewest.map_or(listed, |f| f.min(listed)));
        }
    }
    fewest.map(|keys| ListsDuring {
        range: RangeRead::of(keys, recorder.latency()),
        short,
    })
}

/// Asks for the bucket's stream leader every 250 ms until `until`; returns
/// how often it changed and how many asks went unanswered within 1 s.
async fn watch_leader(nats: async_nats::Client, until: Instant) -> (u64, u64) {
    let subject = format!("$JS.API.STREAM.INFO.{STREAM}");
    let (mut last, mut changes, mut unanswered) = (None::<String>, 0, 0);
    while Instant::now() < until {
        let asked = Instant::now();
        let info = tokio::time::timeout(
            Duration::from_secs(1),
            nats.request(subject.clone(), "".into()),
        )
        .await
        .ok()
        .and_then(Result::ok)
        .and_then(|reply| serde_json::from_slice::<serde_json::Value>(&reply.payload).ok())
        .filter(|info| info.get("error").is_none());
        match info {
            None => unanswered += 1,
            // A single node reports no cluster leader: nothing to follow.
            Some(info) => {
                if let Some(leader) = info["cluster"]["leader"].as_str() {
                    changes += u64::from(last.as_deref().is_some_and(|l| l != leader));
                    last = Some(leader.to_string());
                }
            }
        }
        sleep_until(asked + Duration::from_millis(250)).await;
    }
    (changes, unanswered)
}
