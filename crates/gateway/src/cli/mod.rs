//! The ops commands of the `dagnats-leases` binary, over NATS: acquire,
//! renew, release, transfer, owner, forward, watch, hold, run, shards and
//! history.
//!
//! Replies print as JSON on stdout; failures print `kind: sentence` on
//! stderr. Exit codes tell scripts what happened (see [`Exit`]).

use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use bytes::Bytes;
use clap::{Args, Subcommand};
use futures::StreamExt;
use serde::Serialize;

use crate::config::NatsConfig;
use dagnats_leases_client::shards::{Owned, ShardGroup, ShardOptions};
use dagnats_leases_client::{
    ChangeEvent, ChangeKind, ClientError, KeeperOptions, LeaseClient, LeaseKeeper, Ownership,
};
use dagnats_leases_wire::timefmt;

mod history;
mod run;

pub use history::HistoryArgs;
pub use run::RunArgs;

/// What a command's exit code says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: done (granted, renewed, released, answered).
    Ok,
    /// 1: an error (the gateway's `kind`, or NATS unreachable).
    Error,
    /// 2: bad input; nothing was sent.
    Usage,
    /// 3: acquire was not granted: someone else holds the key.
    NotGranted,
    /// 4: `lost`: not the holder at that fence; stop acting as owner.
    Lost,
    /// `run`: the command's own status (128 + N if signal N ended it; 126
    /// or 127 if it could not be started).
    Command(u8),
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(match exit {
            Exit::Ok => 0,
            Exit::Error => 1,
            Exit::Usage => 2,
            Exit::NotGranted => 3,
            Exit::Lost => 4,
            Exit::Command(status) => status,
        })
    }
}

/// Who asks, and for how long.
#[derive(Args)]
pub struct Holding {
    /// The lease key.
    pub key: String,
    /// Holder id, unique per process.
    #[arg(long, env = "DAGNATS_HOLDER")]
    pub holder: String,
    /// Lease TTL in milliseconds (whole seconds, 1000 to 600000).
    #[arg(long, default_value_t = 15_000)]
    pub ttl_ms: u64,
}

/// Whose lease a release or transfer ends: the holder's key and fence.
#[derive(Args)]
pub struct Fence {
    /// The lease key.
    pub key: String,
    /// The current holder's id.
    #[arg(long, env = "DAGNATS_HOLDER")]
    pub holder: String,
    /// The current holder's fence, from its last reply.
    #[arg(long)]
    pub revision: u64,
}

/// The client commands.
#[derive(Subcommand)]
pub enum ClientCommand {
    /// Take a lease if nobody holds it (exit 3 if someone else does).
    Acquire {
        #[command(flatten)]
        nats: NatsConfig,
        #[command(flatten)]
        holding: Holding,
    },
    /// Extend a lease you hold at --revision (exit 4 if lost).
    Renew {
        #[command(flatten)]
        nats: NatsConfig,
        #[command(flatten)]
        holding: Holding,
        /// The fence from your last reply.
        #[arg(long)]
        revision: u64,
    },
    /// Free a lease you hold at --revision (exit 4 if lost).
    Release {
        #[command(flatten)]
        nats: NatsConfig,
        #[command(flatten)]
        fence: Fence,
    },
    /// Hand a lease you hold at --revision to --to (exit 4 if lost);
    /// prints the new holder's lease.
    Transfer {
        #[command(flatten)]
        nats: NatsConfig,
        #[command(flatten)]
        fence: Fence,
        /// The new holder.
        #[arg(long)]
        to: String,
        /// The new holder's TTL in milliseconds (whole seconds, 1000 to 600000).
        #[arg(long, default_value_t = 15_000)]
        ttl_ms: u64,
    },
    /// Who holds a key.
    Owner {
        #[command(flatten)]
        nats: NatsConfig,
        /// The lease key.
        key: String,
    },
    /// Send a request to whoever holds KEY; prints the owner's reply bytes.
    Forward {
        #[command(flatten)]
        nats: NatsConfig,
        /// The lease key.
        key: String,
        /// The request body; read from stdin when absent.
        payload: Option<String>,
        /// Bound on the whole call, 100 to 30000.
        #[arg(long, default_value_t = 5_000)]
        timeout_ms: u64,
    },
    /// Print change events as they arrive (every key, or KEY).
    Watch {
        #[command(flatten)]
        nats: NatsConfig,
        /// Only this key.
        key: Option<String>,
        /// One JSON object per line, for scripts.
        #[arg(long)]
        json: bool,
        /// Skip renewals: only ownership changes.
        #[arg(long)]
        ownership: bool,
    },
    /// Wait for a lease and keep it until Ctrl-C (exit 0, released) or
    /// until it is lost (exit 4): leader election for shell scripts.
    Hold {
        #[command(flatten)]
        nats: NatsConfig,
        #[command(flatten)]
        holding: Holding,
    },
    /// Run CMD while holding KEY (with --slots N, one of KEY-0 ...
    /// KEY-<N-1>), with DAGNATS_LEASE_KEY, DAGNATS_LEASE_HOLDER and
    /// DAGNATS_LEASE_FENCE set; stop it (SIGTERM, then SIGKILL) the moment
    /// the lease is lost or may run out.
    #[command(after_help = run::EXIT_CODES)]
    Run(RunArgs),
    /// Who held KEY (or every key, or a prefix's), from when to when, and
    /// how each tenure ended, newest first; exit 2 on bad input.
    History(HistoryArgs),
    /// Keep this process a member of shard group GROUP (shard i is the
    /// lease on GROUP-<i>) and own its share of the shards; on SIGINT or
    /// SIGTERM hand every shard over and exit 0.
    Shards {
        #[command(flatten)]
        nats: NatsConfig,
        /// The group's name.
        group: String,
        /// How many shards the group has.
        #[arg(long)]
        count: u32,
        /// Holder id, unique per process.
        #[arg(long, env = "DAGNATS_HOLDER")]
        holder: String,
        /// TTL of the shard and membership leases, in milliseconds.
        #[arg(long, default_value_t = 15_000)]
        ttl_ms: u64,
        /// One JSON line `{"group", "holder", "owned", "fences"}` each time
        /// the owned set changes.
        #[arg(long)]
        json: bool,
    },
}

impl ClientCommand {
    fn nats(&self) -> &NatsConfig {
        match self {
            ClientCommand::Acquire { nats, .. }
            | ClientCommand::Renew { nats, .. }
            | ClientCommand::Release { nats, .. }
            | ClientCommand::Transfer { nats, .. }
            | ClientCommand::Owner { nats, .. }
            | ClientCommand::Forward { nats, .. }
            | ClientCommand::Watch { nats, .. }
            | ClientCommand::Hold { nats, .. }
            | ClientCommand::Shards { nats, .. } => nats,
            ClientCommand::Run(args) => &args.nats,
            ClientCommand::History(args) => &args.nats,
        }
    }
}

/// Runs one client command against NATS.
pub async fn run(command: ClientCommand) -> Exit {
    // `run` checks its input before it connects: bad input acquires nothing.
    let plan = match &command {
        ClientCommand::Run(args) => match args.plan() {
            Ok(plan) => Some(plan),
            Err(why) => {
                eprintln!("dagnats-leases: {why}");
                return Exit::Usage;
            }
        },
        _ => None,
    };
    // So does `history`: bad input asks nothing.
    let asked = match &command {
        ClientCommand::History(args) => match args.request(time::OffsetDateTime::now_utc()) {
            Ok(req) => Some(req),
            Err(why) => {
                eprintln!("dagnats-leases: invalid: {why}");
                return Exit::Usage;
            }
        },
        _ => None,
    };
    let nats = command.nats();
    let connected = match nats.connect_options().await {
        Ok(options) => options
            .connect(nats.servers())
            .await
            .map_err(|e| e.to_string()),
        Err(err) => Err(err),
    };
    let client = match connected {
        Ok(client) => LeaseClient::new(client),
        Err(err) => {
            eprintln!("dagnats-leases: cannot connect to NATS: {err}");
            return Exit::Error;
        }
    };
    match command {
        ClientCommand::Acquire { holding: h, .. } => {
            let ttl = Duration::from_millis(h.ttl_ms);
            match client.acquire(&h.key, &h.holder, ttl).await {
                Ok(grant) if grant.granted => print_json(&grant),
                Ok(grant) => {
                    print_json(&grant);
                    Exit::NotGranted
                }
                Err(err) => failed(err),
            }
        }
        ClientCommand::Renew {
            holding: h,
            revision,
            ..
        } => {
            let ttl = Duration::from_millis(h.ttl_ms);
            reply(client.renew(&h.key, &h.holder, revision, ttl).await)
        }
        ClientCommand::Release { fence: f, .. } => {
            reply(client.release(&f.key, &f.holder, f.revision).await)
        }
        ClientCommand::Transfer {
            fence: f,
            to,
            ttl_ms,
            ..
        } => {
            let ttl = Duration::from_millis(ttl_ms);
            reply(
                client
                    .transfer(&f.key, &f.holder, f.revision, &to, ttl)
                    .await,
            )
        }
        ClientCommand::Owner { key, .. } => reply(client.owner(&key).await),
        ClientCommand::Forward {
            key,
            payload,
            timeout_ms,
            ..
        } => forward(&client, &key, payload, timeout_ms).await,
        ClientCommand::Watch {
            key,
            json,
            ownership,
            ..
        } => watch(&client, key.as_deref(), json, ownership).await,
        ClientCommand::Hold { holding, .. } => hold(client, holding).await,
        ClientCommand::History(args) => match asked {
            Some(req) => history::history(&client, req, &args).await,
            None => unreachable!("a history request was checked before connecting"),
        },
        ClientCommand::Run(_) => match plan {
            Some(plan) => run::run(client, plan).await,
            None => unreachable!("a run command has its plan"),
        },
        ClientCommand::Shards {
            group,
            count,
            holder,
            ttl_ms,
            json,
            ..
        } => {
            let options = ShardOptions {
                group,
                count,
                holder,
                ttl: Duration::from_millis(ttl_ms),
            };
            shards(client, options, json).await
        }
    }
}

fn print_json<T: Serialize>(value: &T) -> Exit {
    println!(
        "{}",
        serde_json::to_string(value).expect("replies serialize")
    );
    Exit::Ok
}

fn reply<T: Serialize>(result: Result<T, ClientError>) -> Exit {
    match result {
        Ok(value) => print_json(&value),
        Err(err) => failed(err),
    }
}

fn failed(err: ClientError) -> Exit {
    match &err {
        ClientError::Lease { kind, .. } => eprintln!("dagnats-leases: {}: {err}", kind.as_str()),
        _ => eprintln!("dagnats-leases: {err}"),
    }
    if err.is_lost() {
        Exit::Lost
    } else {
        Exit::Error
    }
}

async fn forward(
    client: &LeaseClient,
    key: &str,
    payload: Option<String>,
    timeout_ms: u64,
) -> Exit {
    let body = match payload {
        Some(text) => Bytes::from(text),
        None => {
            let mut buf = Vec::new();
            if let Err(err) = std::io::stdin().read_to_end(&mut buf) {
                eprintln!("dagnats-leases: reading stdin: {err}");
                return Exit::Error;
            }
            Bytes::from(buf)
        }
    };
    match client
        .forward(key, body, Duration::from_millis(timeout_ms))
        .await
    {
        Ok(reply) => {
            let mut out = std::io::stdout();
            let written = out.write_all(&reply.payload.0).and_then(|()| out.flush());
            if written.is_err() {
                Exit::Error
            } else {
                Exit::Ok
            }
        }
        Err(err) => failed(err),
    }
}

async fn watch(client: &LeaseClient, key: Option<&str>, json: bool, ownership: bool) -> Exit {
    let subject = ChangeEvent::subject(key);
    let subscribed = match client.nats().subscribe(subject.clone()).await {
        Ok(sub) => client
            .nats()
            .flush()
            .await
            .map(|()| sub)
            .map_err(|e| e.to_string()),
        Err(err) => Err(err.to_string()),
    };
    let mut sub = match subscribed {
        Ok(sub) => sub,
        Err(err) => {
            eprintln!("dagnats-leases: cannot subscribe: {err}");
            return Exit::Error;
        }
    };
    eprintln!("watching {subject}");
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        let msg = tokio::select! {
            _ = &mut interrupted => return Exit::Ok,
            msg = sub.next() => match msg {
                Some(msg) => msg,
                None => return Exit::Error,
            },
        };
        let Some(event) = dagnats_leases_client::changes::from_message(&msg) else {
            continue;
        };
        if ownership && event.event == ChangeKind::Renewed {
            continue;
        }
        if json {
            print_json(&event);
        } else {
            println!("{}", human(&event));
        }
    }
}

/// One line per event, e.g.
/// `2026-11-30T08:00:00.000Z acquired  shard-1 holder=w-a revision=42 expires_at=...`.
fn human(event: &ChangeEvent) -> String {
    let now = timefmt::format(time::OffsetDateTime::now_utc());
    let mut line = format!(
        "{now} {:<9} {} revision={}",
        event.event.as_str(),
        event.key,
        event.revision
    );
    if let Some(holder) = &event.holder {
        line.push_str(&format!(" holder={holder}"));
    }
    if let Some(from) = &event.previous_holder {
        line.push_str(&format!(" transferred_from={from}"));
    }
    if let Some(lease) = &event.lease {
        line.push_str(&format!(
            " expires_at={}",
            timefmt::format(lease.expires_at)
        ));
    }
    line
}

async fn hold(client: LeaseClient, h: Holding) -> Exit {
    let keeper = LeaseKeeper::start(
        client,
        KeeperOptions {
            key: h.key.clone(),
            holder: h.holder.clone(),
            ttl: Duration::from_millis(h.ttl_ms),
            wait: true,
        },
    );
    let mut state = keeper.watch();
    let stop = crate::shutdown_signal();
    tokio::pin!(stop);
    let mut held = false;
    loop {
        let now = state.borrow_and_update().clone();
        match now {
            Ownership::Owner { fence, .. } => {
                if !held {
                    eprintln!("holding {} as {} at revision {fence}", h.key, h.holder);
                }
                held = true;
            }
            Ownership::NotOwner if held => {
                eprintln!("lost {}", h.key);
                keeper.shutdown().await;
                return Exit::Lost;
            }
            Ownership::NotOwner => {}
        }
        tokio::select! {
            () = &mut stop => {
                keeper.shutdown().await;
                return Exit::Ok;
            }
            changed = state.changed() => if changed.is_err() {
                return Exit::Error;
            },
        }
    }
}

/// What `shards --json` prints each time the owned set changes.
#[derive(Serialize)]
struct OwnedLine<'a> {
    group: &'a str,
    holder: &'a str,
    owned: Vec<u32>,
    fences: std::collections::BTreeMap<String, u64>,
}

async fn shards(client: LeaseClient, options: ShardOptions, json: bool) -> Exit {
    let (group, holder) = (options.group.clone(), options.holder.clone());
    // Printed by the member itself, before it sends the transfer that
    // follows a change: whoever reads these lines hears a shard is gone
    // before its next owner can have it.
    let mut shown: Option<Vec<u32>> = None;
    let report = move |owned: &Owned| {
        let now = owned.fences();
        let set: Vec<u32> = now.keys().copied().collect();
        if shown.as_ref() == Some(&set) {
            return;
        }
        if json {
            print_json(&OwnedLine {
                group: &group,
                holder: &holder,
                owned: set.clone(),
                fences: now.iter().map(|(i, f)| (i.to_string(), *f)).collect(),
            });
        } else {
            eprintln!("{holder} owns {set:?} of {group}");
        }
        shown = Some(set);
    };
    let member = match ShardGroup::start_reporting(client, options, report) {
        Ok(member) => member,
        Err(err) => return failed(err),
    };
    crate::shutdown_signal().await;
    // Leaving hands every shard over, each reported empty first.
    member.shutdown().await;
    Exit::Ok
}
