//! Shard groups against a real gateway: members split the shards floor or
//! ceil of N/M each, a join or a leave moves only what it must, a graceful
//! leave hands over by transfer, a crashed member drops out by TTL, and no
//! shard is ever owned by two members at once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{Setup, command, eventually};
use dagnats_leases_client::shards::{Owned, ShardGroup, ShardOptions, assign::assign};
use dagnats_leases_client::{ChangeKind, ClientError, LeaseClient, changes};
use futures::StreamExt;
use tokio::sync::watch;

const TTL: Duration = Duration::from_secs(3);

fn member(client: &LeaseClient, group: &str, count: u32, holder: &str) -> ShardGroup {
    start(client, group, count, holder).expect("valid options")
}

/// A member of `group` as `holder`, with a [`TTL`] lease per shard, if its
/// options are valid.
fn start(
    client: &LeaseClient,
    group: &str,
    count: u32,
    holder: &str,
) -> Result<ShardGroup, ClientError> {
    let options = ShardOptions {
        group: group.into(),
        count,
        holder: holder.into(),
        ttl: TTL,
    };
    ShardGroup::start(client.clone(), options)
}

/// One member of `group` per holder, started in that order.
fn members<const N: usize>(
    client: &LeaseClient,
    group: &str,
    count: u32,
    holders: [&str; N],
) -> [ShardGroup; N] {
    holders.map(|holder| member(client, group, count, holder))
}

/// The shards each named member may act for now.
fn owned(members: &[(&str, watch::Receiver<Owned>)]) -> BTreeMap<String, BTreeSet<u32>> {
    members
        .iter()
        .map(|(name, w)| (name.to_string(), w.borrow().fences().into_keys().collect()))
        .collect()
}

/// Waits until the members own exactly what `assign` gives them, every
/// shard once; returns that split.
async fn converged(
    count: u32,
    members: &[(&str, watch::Receiver<Owned>)],
) -> BTreeMap<String, BTreeSet<u32>> {
    let mut names: Vec<String> = members.iter().map(|(n, _)| n.to_string()).collect();
    names.sort();
    let expected: BTreeMap<String, BTreeSet<u32>> = {
        let owner = assign(count, &names);
        let mut split: BTreeMap<String, BTreeSet<u32>> =
            names.iter().map(|n| (n.clone(), BTreeSet::new())).collect();
        for (shard, index) in owner.into_iter().enumerate() {
            split.get_mut(&names[index]).unwrap().insert(shard as u32);
        }
        split
    };
    eventually("the members to converge", Duration::from_secs(20), || {
        let now = owned(members);
        let done = now == expected;
        async move { done.then_some(now) }
    })
    .await
}

fn assert_no_shard_owned_twice(split: &BTreeMap<String, BTreeSet<u32>>) {
    let mut seen = BTreeSet::new();
    for shards in split.values() {
        for shard in shards {
            assert!(seen.insert(*shard), "shard {shard} owned twice: {split:?}");
        }
    }
}

#[tokio::test]
async fn members_split_the_shards_floor_or_ceil_each_and_every_shard_once() {
    let s = Setup::start().await;
    let client = LeaseClient::new(s.client.clone());
    let [a, b, c] = members(&client, "split", 8, ["m-a", "m-b", "m-c"]);
    let members = [("m-a", a.watch()), ("m-b", b.watch()), ("m-c", c.watch())];
    let split = converged(8, &members).await;
    assert_no_shard_owned_twice(&split);
    for shards in split.values() {
        assert!([2, 3].contains(&shards.len()), "{split:?}");
    }
    // Each shard's lease names the member that owns it, at its fence.
    for (name, w) in &members {
        // Copied out: a watch borrow held across an await would block the
        // member's own publish.
        let fences = w.borrow().fences();
        for (shard, fence) in fences {
            let reply = s
                .call(
                    "owner",
                    serde_json::json!({"key": format!("split-{shard}")}),
                )
                .await;
            assert_eq!(reply["holder"], *name, "{reply}");
            assert!(reply["revision"].as_u64().unwrap() >= fence, "{reply}");
        }
    }
}

#[tokio::test]
async fn a_join_moves_only_the_shards_it_must_and_a_graceful_leave_hands_over() {
    let s = Setup::start().await;
    let client = LeaseClient::new(s.client.clone());
    let count = 12;
    let [a, b] = members(&client, "join", count, ["j-a", "j-b"]);
    let before = converged(count, &[("j-a", a.watch()), ("j-b", b.watch())]).await;

    let c = member(&client, "join", count, "j-c");
    let members = [("j-a", a.watch()), ("j-b", b.watch()), ("j-c", c.watch())];
    let after = converged(count, &members).await;
    let moved: usize = ["j-a", "j-b"]
        .iter()
        .map(|m| before[*m].difference(&after[*m]).count())
        .sum();
    assert_eq!(after["j-c"].len(), 4, "{after:?}");
    // The newcomer's 4 must move; a shift between the others is allowed
    // only as far as the assignment's own bound.
    assert!(
        (4..=6).contains(&moved),
        "moved {moved}: {before:?} -> {after:?}"
    );

    // c leaves gracefully: every one of its shards changes hands by a
    // transfer (an `acquired` change naming the new holder), not by expiry.
    let mut events = s
        .client
        .subscribe(dagnats_leases_client::ChangeEvent::subject(None))
        .await
        .unwrap();
    let leaving = after["j-c"].clone();
    c.shutdown().await;
    let back = converged(count, &[("j-a", a.watch()), ("j-b", b.watch())]).await;
    assert_eq!(back, before, "a leave restores the assignment without c");
    let mut handed: BTreeSet<u32> = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while handed != leaving {
        let msg = tokio::time::timeout_at(deadline, events.next())
            .await
            .expect("a transfer for every shard c owned")
            .unwrap();
        let Some(change) = changes::from_message(&msg) else {
            continue;
        };
        assert_ne!(change.event, ChangeKind::Expired, "{change:?}");
        if change.event == ChangeKind::Acquired
            && let Some(shard) = change.key.strip_prefix("join-")
            && let Ok(shard) = shard.parse::<u32>()
            && leaving.contains(&shard)
        {
            assert_ne!(change.holder.as_deref(), Some("j-c"), "{change:?}");
            handed.insert(shard);
        }
    }
}

/// Who holds each shard of `group`, by the leases themselves.
async fn lease_split(client: &LeaseClient, group: &str) -> BTreeMap<String, BTreeSet<u32>> {
    let mut split: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    let prefix = format!("{group}-");
    let Ok(list) = client.list(&prefix, None, None).await else {
        return split;
    };
    for lease in list.leases {
        if let Ok(shard) = lease.key[prefix.len()..].parse::<u32>() {
            split.entry(lease.holder).or_default().insert(shard);
        }
    }
    split
}

/// The `shards` command as member `holder` of `group` with `count` shards
/// and a 3 s TTL, then `extra` arguments.
fn shards_command(
    url: &str,
    (group, count, holder): (&str, u32, &str),
    extra: &[&str],
) -> std::process::Command {
    let count = count.to_string();
    let member = ["shards", group, "--count", &count, "--holder", holder];
    let args = [&member[..], &["--ttl-ms", "3000"], extra].concat();
    command(url, &args)
}

#[tokio::test]
async fn a_crashed_member_drops_out_by_ttl_and_its_shards_are_taken() {
    let s = Setup::start().await;
    let client = LeaseClient::new(s.client.clone());
    let url = s.server.url.clone();
    let mut crashing = shards_command(&url, ("crash", 6, "x-dead"), &["--json"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let a = member(&client, "crash", 6, "x-a");
    let names = ["x-a".to_string(), "x-dead".to_string()];
    let expected = {
        let mut split: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
        for (shard, index) in assign(6, &names).into_iter().enumerate() {
            split
                .entry(names[index].clone())
                .or_default()
                .insert(shard as u32);
        }
        split
    };
    eventually(
        "both members to hold their shards",
        Duration::from_secs(20),
        || {
            let (client, expected) = (client.clone(), expected.clone());
            async move { (lease_split(&client, "crash").await == expected).then_some(()) }
        },
    )
    .await;
    crashing.kill().unwrap(); // kill -9: no hand-over
    crashing.wait().unwrap();
    let alone = converged(6, &[("x-a", a.watch())]).await;
    assert_eq!(alone["x-a"].len(), 6);
}

#[tokio::test]
async fn the_cli_prints_the_owned_set_and_hands_over_on_sigterm() {
    let s = Setup::start().await;
    let url = s.server.url.clone();
    let mut child = shards_command(&url, ("cli", 4, "c-one"), &["--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let lines = std::thread::spawn(move || {
        use std::io::BufRead;
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });
    let client = LeaseClient::new(s.client.clone());
    eventually(
        "the CLI member to own all 4 shards",
        Duration::from_secs(15),
        || {
            let client = client.clone();
            async move {
                let list = client.list("cli-", None, None).await.ok()?;
                let held = list.leases.iter().filter(|l| l.holder == "c-one").count();
                (held == 5).then_some(())
            }
        },
    )
    .await;
    let other = member(&client, "cli", 4, "c-two");
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    let split = converged(4, &[("c-two", other.watch())]).await;
    assert_eq!(split["c-two"].len(), 4);
    let lines = lines.join().unwrap();
    let first: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(first["group"], "cli");
    assert_eq!(first["holder"], "c-one");
    let full = lines
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["owned"] == serde_json::json!([0, 1, 2, 3]))
        .expect("a line with all four shards");
    for i in 0..4 {
        assert!(
            full["fences"][i.to_string()].as_u64().unwrap() > 0,
            "{full}"
        );
    }
    let last: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    assert_eq!(last["owned"], serde_json::json!([]));
}

#[tokio::test]
async fn bad_group_options_are_refused_before_anything_is_sent() {
    let s = Setup::start().await;
    let client = LeaseClient::new(s.client.clone());
    for (group, count, holder) in [
        ("g", 0, "h"),
        ("g.x", 2, "h"),
        ("g", 2, "h.x"),
        (&*"g".repeat(126), 100, "h"),
    ] {
        let refused = start(&client, group, count, holder);
        assert!(refused.is_err(), "{group} {count} {holder}");
    }
}

/// Checks, at every change of any member's owned set, that no shard is in
/// two members' sets at once (one thread: each check is one instant).
fn watch_for_overlaps(
    members: Vec<(&'static str, watch::Receiver<Owned>)>,
) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(async move {
        let mut members = members;
        let mut checks = 0;
        loop {
            let snapshot: Vec<(String, BTreeSet<u32>)> = members
                .iter()
                .map(|(n, w)| (n.to_string(), w.borrow().fences().into_keys().collect()))
                .collect();
            let mut seen: BTreeMap<u32, String> = BTreeMap::new();
            for (name, shards) in &snapshot {
                for shard in shards {
                    if let Some(other) = seen.insert(*shard, name.clone()) {
                        panic!("shard {shard} owned by {other} and {name} at once: {snapshot:?}");
                    }
                }
            }
            checks += 1;
            let changes = members.iter_mut().map(|(_, w)| Box::pin(w.changed()));
            let (changed, _, _) = futures::future::select_all(changes).await;
            if changed.is_err() {
                return checks;
            }
        }
    })
}

#[tokio::test]
async fn no_shard_is_ever_owned_by_two_members_while_members_come_and_go() {
    let s = Setup::start().await;
    let client = LeaseClient::new(s.client.clone());
    let count = 9;
    let [a, b, c] = members(&client, "safe", count, ["s-a", "s-b", "s-c"]);
    let watcher = watch_for_overlaps(vec![
        ("s-a", a.watch()),
        ("s-b", b.watch()),
        ("s-c", c.watch()),
    ]);
    converged(
        count,
        &[("s-a", a.watch()), ("s-b", b.watch()), ("s-c", c.watch())],
    )
    .await;
    c.shutdown().await;
    converged(count, &[("s-a", a.watch()), ("s-b", b.watch())]).await;
    let d = member(&client, "safe", count, "s-d");
    converged(
        count,
        &[("s-a", a.watch()), ("s-b", b.watch()), ("s-d", d.watch())],
    )
    .await;
    drop(b); // a leave without waiting for it
    converged(count, &[("s-a", a.watch()), ("s-d", d.watch())]).await;
    watcher.abort();
    match watcher.await {
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        _ => {}
    }
}

#[tokio::test]
#[should_panic(expected = "owned by m-1 and m-2 at once")]
async fn the_overlap_watch_catches_a_shard_owned_twice() {
    use dagnats_leases_client::shards::ShardTenure;
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    let one = |fence| Owned {
        shards: [(
            4,
            ShardTenure {
                fence,
                tenure: fence,
                until,
            },
        )]
        .into(),
    };
    let (_tx1, rx1) = watch::channel(one(10));
    let (_tx2, rx2) = watch::channel(one(11));
    let watcher = watch_for_overlaps(vec![("m-1", rx1), ("m-2", rx2)]);
    if let Err(err) = watcher.await {
        std::panic::resume_unwind(err.into_panic());
    }
}

/// Records, for every shard that changes hands, how long it had no owner:
/// from the moment it left one member's set to the moment it entered
/// another's; the longest such gap so far is in the returned cell. A
/// member whose watch closes (it left) is watched no more.
fn record_gaps(
    members: Vec<(&'static str, watch::Receiver<Owned>)>,
) -> (tokio::task::JoinHandle<()>, Arc<Mutex<Duration>>) {
    let longest = Arc::new(Mutex::new(Duration::ZERO));
    let task = tokio::spawn({
        let longest = longest.clone();
        async move {
            let mut members = members;
            let mut owner: BTreeMap<u32, &'static str> = BTreeMap::new();
            let mut dropped: BTreeMap<u32, tokio::time::Instant> = BTreeMap::new();
            while !members.is_empty() {
                let now = tokio::time::Instant::now();
                let mut current: BTreeMap<u32, &'static str> = BTreeMap::new();
                for (name, w) in &members {
                    for shard in w.borrow().fences().into_keys() {
                        current.insert(shard, name);
                    }
                }
                for shard in owner.keys() {
                    if !current.contains_key(shard) {
                        dropped.entry(*shard).or_insert(now);
                    }
                }
                for shard in current.keys() {
                    if let Some(at) = dropped.remove(shard) {
                        let mut longest = longest.lock().unwrap();
                        *longest = (*longest).max(now - at);
                    }
                }
                owner = current;
                let changes = members.iter_mut().map(|(_, w)| Box::pin(w.changed()));
                let (changed, index, _) = futures::future::select_all(changes).await;
                if changed.is_err() {
                    members.remove(index);
                }
            }
        }
    });
    (task, longest)
}

/// The figures docs/performance.md quotes: convergence after a join, a graceful
/// leave and a crash, shards moved against the minimum, and the longest
/// time a shard had no owner in a graceful leave. Run by hand:
/// `cargo test -p dagnats-leases --test it shard_group_figures -- --ignored --nocapture`.
/// How many shards `members` hold in `split` but not in `other`.
fn held_but_not_in(
    split: &BTreeMap<String, BTreeSet<u32>>,
    other: &BTreeMap<String, BTreeSet<u32>>,
    members: &[&str],
) -> usize {
    let only_in_split = |m: &&str| split[*m].difference(&other[*m]).count();
    members.iter().map(only_in_split).sum()
}

#[tokio::test]
#[ignore]
async fn shard_group_figures() {
    let s = Setup::start().await;
    let client = LeaseClient::new(s.client.clone());
    let (count, ttl_ms) = (64u32, 3_000u64);
    let [a, b, c] = members(&client, "fig", count, ["f-a", "f-b", "f-c"]);
    let three = [("f-a", a.watch()), ("f-b", b.watch()), ("f-c", c.watch())];
    let before = converged(count, &three).await;
    let d = member(&client, "fig", count, "f-d");
    let started = tokio::time::Instant::now();
    let four = [
        ("f-a", a.watch()),
        ("f-b", b.watch()),
        ("f-c", c.watch()),
        ("f-d", d.watch()),
    ];
    let after = converged(count, &four).await;
    let moved = held_but_not_in(&before, &after, &["f-a", "f-b", "f-c"]);
    println!(
        "join: converged in {:?}, moved {moved} shards (minimum {})",
        started.elapsed(),
        after["f-d"].len()
    );
    let (recorder, longest) = record_gaps(four.to_vec());
    let started = tokio::time::Instant::now();
    let leaving = after["f-d"].len();
    d.shutdown().await;
    let back = converged(count, &three).await;
    let moved = held_but_not_in(&back, &after, &["f-a", "f-b", "f-c"]);
    println!(
        "graceful leave: converged in {:?}, {leaving} shards handed over, {moved} gained by the others",
        started.elapsed()
    );
    recorder.abort();
    println!(
        "graceful leave: the longest time a shard had no owner was {:?}",
        *longest.lock().unwrap()
    );
    let mut crashing = shards_command(&s.server.url, ("fig", 64, "f-x"), &[])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let names = ["f-a", "f-b", "f-c", "f-x"].map(String::from);
    let owner = assign(count, &names);
    eventually("f-x to own its shards", Duration::from_secs(20), || {
        let client = client.clone();
        let want = owner.iter().filter(|&&i| i == 3).count();
        async move {
            let split = lease_split(&client, "fig").await;
            (split.get("f-x").map_or(0, |s| s.len()) == want).then_some(())
        }
    })
    .await;
    crashing.kill().unwrap();
    crashing.wait().unwrap();
    let started = tokio::time::Instant::now();
    converged(count, &three).await;
    println!(
        "crash (kill -9, ttl {ttl_ms} ms): converged in {:?}",
        started.elapsed()
    );
}
