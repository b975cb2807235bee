//! Leases renewed by background tasks while a test reads them (lists
//! that must name every lease renewed under them).

use async_nats::Client;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{call, lease_ops};

/// What a renewer makes of a renew that is not granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The test fails: nothing else writes these leases.
    Fails,
    /// Tried again with the same fence next round: under load a renew may
    /// answer `unavailable`.
    Retried,
}

/// Leases of holder "h" renewed round after round with a TTL of `ttl_ms`
/// by tasks that each take every `workers`th of them, until
/// [`Renewing::stop`].
pub struct Renewing {
    stop: CancellationToken,
    tasks: Vec<JoinHandle<u64>>,
}

impl Renewing {
    /// Starts renewing `held` (each key with the revision it is held at).
    pub fn start(
        client: &Client,
        held: &[(String, u64)],
        workers: usize,
        ttl_ms: u64,
        refused: Refused,
    ) -> Self {
        let stop = CancellationToken::new();
        let tasks = (0..workers)
            .map(|worker| {
                let (client, stop) = (client.clone(), stop.clone());
                let mut mine: Vec<(String, u64)> =
                    held.iter().skip(worker).step_by(workers).cloned().collect();
                tokio::spawn(async move {
                    let mut renewed = 0u64;
                    while !stop.is_cancelled() {
                        for (key, revision) in &mut mine {
                            if stop.is_cancelled() {
                                break;
                            }
                            let body = lease_ops::renew(key, "h", *revision, ttl_ms);
                            let grant = call(&client, "renew", body).await;
                            match grant["revision"].as_u64() {
                                Some(next) if grant["granted"] == true => {
                                    *revision = next;
                                    renewed += 1;
                                }
                                _ => assert_eq!(refused, Refused::Retried, "{key}: {grant}"),
                            }
                        }
                    }
                    renewed
                })
            })
            .collect();
        Renewing { stop, tasks }
    }

    /// Stops renewing; how many renews were granted meanwhile.
    pub async fn stop(self) -> u64 {
        self.stop.cancel();
        let mut renewed = 0;
        for task in self.tasks {
            renewed += task.await.unwrap();
        }
        renewed
    }
}
