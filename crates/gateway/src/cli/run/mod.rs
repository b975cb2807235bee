//! `run`: a command that runs only while this process holds a lease, the
//! way `consul lock` and `etcdctl lock` run one. The lease is one key, or
//! with `--slots N` one of `KEY-0` ... `KEY-<N-1>` (a semaphore of N).
//!
//! The command is stopped the moment this process may no longer act as
//! owner: SIGTERM to its process group, SIGKILL `--grace-ms` later, and
//! never after the keeper's deadline (the start of the last granting
//! request plus the TTL, on the monotonic clock): until then no other
//! holder can be granted the key. So SIGTERM goes out when a renew answers
//! `lost`, or when `grace` before that deadline no renewal has landed.

mod child;
mod one_of;

use std::time::Duration;

use clap::Args;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::time::{Instant, sleep_until};

use super::Exit;
use crate::config::NatsConfig;
use child::Running;
use dagnats_leases_client::{KeeperOptions, LeaseClient, LeaseKeeper, Ownership};
use dagnats_leases_wire::names::{ENV_LEASE_FENCE, ENV_LEASE_HOLDER, ENV_LEASE_KEY};
use dagnats_leases_wire::request::{HolderId, LeaseKey, Ttl};
use one_of::{Granted, Taken, take_one};

/// The most slots a semaphore may have.
const MAX_SLOTS: u32 = 1024;

/// What `run --help` says of its exit codes.
pub(super) const EXIT_CODES: &str = "\
Exit codes:
  CMD's own  CMD exited by itself (128 + N if signal N ended it); the lease is released
  2          bad input: nothing was acquired
  3          --no-wait and every key is held: CMD was not started
  4          the lease was lost or may have run out: CMD was stopped
  126, 127   CMD could not be executed, or was not found; the lease is released
  1          any other failure (NATS unreachable)";

/// `dagnats-leases run`'s arguments.
#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub nats: NatsConfig,
    /// The lease key (with --slots, the slots' prefix).
    pub key: String,
    /// Holder id, unique per process (default: run-<host>-<pid>-<random>).
    #[arg(long, env = "DAGNATS_HOLDER")]
    pub holder: Option<String>,
    /// Lease TTL in milliseconds (whole seconds, 1000 to 600000).
    #[arg(long, default_value_t = 15_000)]
    pub ttl_ms: u64,
    /// Hold one of KEY-0 ... KEY-<N-1>, whichever is free first: at most N
    /// copies of CMD run at once (1 to 1024).
    #[arg(long)]
    pub slots: Option<u32>,
    /// Exit 3 at once, starting nothing, if the key (every slot) is held.
    #[arg(long)]
    pub no_wait: bool,
    /// Time CMD gets between SIGTERM and SIGKILL, at most a third of the
    /// TTL (so a holder renewing every third of it is never stopped).
    #[arg(long, default_value_t = 5_000)]
    pub grace_ms: u64,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// A checked `run`.
pub(super) struct Plan {
    keys: Vec<String>,
    holder: String,
    ttl: Duration,
    wait: bool,
    grace: Duration,
    command: Vec<String>,
}

impl RunArgs {
    /// The plan, or why the input is bad (exit 2, before anything is
    /// acquired).
    pub(super) fn plan(&self) -> Result<Plan, String> {
        let ttl = Ttl::try_from(self.ttl_ms)?;
        let holder = match &self.holder {
            Some(holder) => holder.clone(),
            None => default_holder(),
        };
        HolderId::try_from(holder.clone())?;
        let keys = match self.slots {
            None => vec![self.key.clone()],
            Some(n) if (1..=MAX_SLOTS).contains(&n) => {
                (0..n).map(|i| format!("{}-{i}", self.key)).collect()
            }
            Some(n) => return Err(format!("--slots must be 1 to {MAX_SLOTS}, got {n}")),
        };
        for key in &keys {
            LeaseKey::try_from(key.clone())?;
        }
        if self.command.first().is_none_or(String::is_empty) {
            return Err("no command to run: give it after --".into());
        }
        Ok(Plan {
            keys,
            holder,
            ttl: ttl.duration(),
            wait: !self.no_wait,
            grace: Duration::from_millis(self.grace_ms).min(ttl.duration() / 3),
            command: self.command.clone(),
        })
    }
}

/// `run-<host>-<pid>-<random>`: unique per process, in the holder
/// alphabet.
fn default_holder() -> String {
    let host: String = hostname()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    let random = nuid::next();
    format!("run-{host}-{}-{}", std::process::id(), &random[..8])
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_else(|_| "host".into())
}

/// The signals `run` passes on to the command.
struct Relayed {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

impl Relayed {
    fn install() -> std::io::Result<Self> {
        Ok(Relayed {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// The next of them to arrive.
    async fn next(&mut self) -> i32 {
        tokio::select! {
            _ = self.interrupt.recv() => libc::SIGINT,
            _ = self.terminate.recv() => libc::SIGTERM,
            _ = self.hangup.recv() => libc::SIGHUP,
        }
    }
}

/// Runs `plan`: waits for a key, runs the command while holding it.
pub(super) async fn run(client: LeaseClient, plan: Plan) -> Exit {
    let mut relayed = match Relayed::install() {
        Ok(relayed) => relayed,
        Err(err) => {
            eprintln!("dagnats-leases: cannot install signal handlers: {err}");
            return Exit::Error;
        }
    };
    let taken = tokio::select! {
        taken = take_one(&client, &plan.keys, &plan.holder, plan.ttl, plan.wait) => taken,
        signal = relayed.next() => return Exit::Command(128 + signal as u8),
    };
    let granted = match taken {
        Ok(Taken::Granted(granted)) => granted,
        Ok(Taken::AllHeld) => {
            eprintln!(
                "dagnats-leases: {} is held; not starting the command",
                plan.keys.join(", ")
            );
            return Exit::NotGranted;
        }
        Err(err) => return super::failed(err),
    };
    hold_while_running(client, &plan, granted, &mut relayed).await
}

/// Why the command is being stopped.
enum Stop {
    /// A renew answered `lost`, or the deadline passed unrenewed.
    Lost,
    /// No renewal landed by `grace` before the deadline.
    RunningOut,
}

async fn hold_while_running(
    client: LeaseClient,
    plan: &Plan,
    granted: Granted,
    relayed: &mut Relayed,
) -> Exit {
    let Granted {
        key,
        started,
        lease,
    } = granted;
    let fence = lease.revision;
    let options = KeeperOptions {
        key: key.clone(),
        holder: plan.holder.clone(),
        ttl: plan.ttl,
        wait: false,
    };
    let keeper = LeaseKeeper::holding(client, options, started, lease);
    let mut ownership = keeper.watch();
    let mut deadline = match *ownership.borrow_and_update() {
        Ownership::Owner { until, .. } => until,
        Ownership::NotOwner => Instant::now(),
    };
    eprintln!("holding {key} as {} at revision {fence}", plan.holder);
    let env = [
        (ENV_LEASE_KEY, key.clone()),
        (ENV_LEASE_HOLDER, plan.holder.clone()),
        (ENV_LEASE_FENCE, fence.to_string()),
    ];
    let mut command = match Running::start(&plan.command, &env) {
        Ok(command) => command,
        Err((status, why)) => {
            eprintln!("dagnats-leases: cannot run {}: {why}", plan.command[0]);
            keeper.shutdown().await;
            return Exit::Command(status);
        }
    };
    let stop = loop {
        tokio::select! {
            status = command.exited() => {
                keeper.shutdown().await;
                return Exit::Command(status);
            }
            signal = relayed.next() => command.signal(signal),
            changed = ownership.changed() => match (changed, &*ownership.borrow_and_update()) {
                (Ok(()), Ownership::Owner { until, .. }) => deadline = *until,
                _ => break Stop::Lost,
            },
            () = sleep_until(deadline - plan.grace) => break Stop::RunningOut,
        }
    };
    let why = match stop {
        Stop::Lost => "the lease was lost",
        Stop::RunningOut => "no renewal landed in time and the lease may run out",
    };
    eprintln!("dagnats-leases: {why}: stopping the command (SIGTERM)");
    command.signal(libc::SIGTERM);
    let kill_at = (Instant::now() + plan.grace).min(deadline);
    loop {
        tokio::select! {
            _ = command.exited() => break,
            signal = relayed.next() => command.signal(signal),
            () = sleep_until(kill_at) => {
                eprintln!("dagnats-leases: the command outlived its grace: SIGKILL");
                command.signal(libc::SIGKILL);
                command.exited().await;
                break;
            }
        }
    }
    // Released if a late renewal kept it; otherwise the keeper just ends.
    keeper.shutdown().await;
    Exit::Lost
}
