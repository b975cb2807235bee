//! The ops commands of the binary: output and exit codes a script relies on.

use std::io::Write;
use std::process::{Output, Stdio};
use std::time::Duration;

use crate::common;
use crate::common::{Setup, command, eventually};
use dagnats_leases_client::{ChangeEvent, ChangeKind};
use futures::StreamExt;
use serde_json::{Value, json};

async fn run(url: &str, args: &[&str]) -> Output {
    let mut cmd = command(url, args);
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[tokio::test]
async fn exit_codes_tell_granted_not_granted_lost_and_errors_apart() {
    let s = Setup::start().await;
    let url = s.server.url.clone();
    let acquired = run(
        &url,
        &["acquire", "k", "--holder", "a", "--ttl-ms", "15000"],
    )
    .await;
    assert_eq!(acquired.status.code(), Some(0));
    let lease = stdout_json(&acquired);
    assert_eq!(
        (lease["granted"].clone(), lease["holder"].clone()),
        (json!(true), json!("a"))
    );
    let revision = lease["revision"].to_string();

    let taken = run(&url, &["acquire", "k", "--holder", "b"]).await;
    assert_eq!(taken.status.code(), Some(3), "not granted");
    assert_eq!(stdout_json(&taken)["holder"], "a");

    let lost = run(
        &url,
        &["renew", "k", "--holder", "b", "--revision", &revision],
    )
    .await;
    assert_eq!(lost.status.code(), Some(4), "lost");
    assert!(String::from_utf8_lossy(&lost.stderr).contains("lost:"));

    let renewed = run(
        &url,
        &["renew", "k", "--holder", "a", "--revision", &revision],
    )
    .await;
    assert_eq!(renewed.status.code(), Some(0));
    let revision = stdout_json(&renewed)["revision"].to_string();

    let owner = run(&url, &["owner", "k"]).await;
    assert_eq!(owner.status.code(), Some(0));
    assert_eq!(stdout_json(&owner)["revision"].to_string(), revision);

    let released = run(
        &url,
        &["release", "k", "--holder", "a", "--revision", &revision],
    )
    .await;
    assert_eq!(released.status.code(), Some(0));
    assert_eq!(stdout_json(&released)["released"], true);

    let invalid = run(&url, &["acquire", "k", "--holder", "a", "--ttl-ms", "1500"]).await;
    assert_eq!(invalid.status.code(), Some(1), "error");
    let unreachable = run("nats://127.0.0.1:1", &["owner", "k"]).await;
    assert_eq!(unreachable.status.code(), Some(1), "error");
}

#[tokio::test]
async fn transfer_prints_the_new_holders_lease_and_exits_4_when_lost_1_when_invalid() {
    let s = Setup::start().await;
    let url = s.server.url.clone();
    let a = s.acquire("k", "a", 15000).await;
    let revision = a["revision"].to_string();
    let args = |holder: &'static str, to: &'static str, revision: &str| {
        let revision = revision.to_string();
        let args = [
            "transfer",
            "k",
            "--holder",
            holder,
            "--revision",
            &revision,
            "--to",
            to,
        ];
        args.map(String::from)
    };
    let run_args = |args: [String; 8]| {
        let url = url.clone();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run(&url, &args).await
        }
    };
    let same = run_args(args("a", "a", &revision)).await;
    assert_eq!(same.status.code(), Some(1), "invalid");
    assert!(String::from_utf8_lossy(&same.stderr).contains("another holder"));

    let moved = run_args(args("a", "b", &revision)).await;
    assert_eq!(
        moved.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&moved.stderr)
    );
    let lease = stdout_json(&moved);
    assert_eq!(
        (lease["granted"].clone(), lease["holder"].clone()),
        (json!(true), json!("b"))
    );
    assert_eq!(lease["ttl_ms"], 15000, "the default TTL");
    assert!(lease["revision"].as_u64().unwrap() > a["revision"].as_u64().unwrap());
    assert_eq!(s.owner("k").await["holder"], "b");

    let new_revision = lease["revision"].to_string();
    let lost = run_args(args("a", "c", &new_revision)).await;
    assert_eq!(lost.status.code(), Some(4), "lost");
    assert!(String::from_utf8_lossy(&lost.stderr).contains("lost:"));

    let short = run(
        &s.server.url,
        &[
            "transfer",
            "k",
            "--holder",
            "b",
            "--revision",
            &new_revision,
            "--to",
            "c",
            "--ttl-ms",
            "2000",
        ],
    )
    .await;
    assert_eq!(short.status.code(), Some(0));
    assert_eq!(stdout_json(&short)["ttl_ms"], 2000);
}

#[tokio::test]
async fn forward_reads_the_payload_from_stdin_and_prints_the_owners_bytes() {
    let s = Setup::start().await;
    s.acquire("k", "w", 15000).await;
    let mut inbox = s.client.subscribe("dagnats.lease.inbox.w.>").await.unwrap();
    common::settle(&s.client).await;
    let client = s.client.clone();
    tokio::spawn(async move {
        use futures::StreamExt;
        while let Some(msg) = inbox.next().await {
            let mut body = b"got:".to_vec();
            body.extend_from_slice(&msg.payload);
            client
                .publish(msg.reply.unwrap(), body.into())
                .await
                .unwrap();
        }
    });
    let mut cmd = command(&s.server.url, &["forward", "k"]);
    let out = tokio::task::spawn_blocking(move || {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"\x00bytes\xff")
            .unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"got:\x00bytes\xff");
    let free = run(&s.server.url, &["forward", "nobody", "x"]).await;
    assert_eq!(free.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&free.stderr).contains("not_held:"));
}

#[tokio::test]
async fn watch_json_prints_one_event_per_line_and_ownership_skips_renewals() {
    let s = Setup::start().await;
    // A watch prints `watching <subject>` on stderr once it is subscribed.
    let spawn_watch = |args: &[&str]| {
        let mut child = command(&s.server.url, args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (stdout, stderr) = (common::Log::default(), common::Log::default());
        stdout.follow(child.stdout.take().unwrap());
        stderr.follow(child.stderr.take().unwrap());
        (child, stdout, stderr)
    };
    let (mut all, all_out, all_err) = spawn_watch(&["watch", "k", "--json"]);
    let (mut owners, owners_out, owners_err) = spawn_watch(&["watch", "--json", "--ownership"]);
    for stderr in [&all_err, &owners_err] {
        stderr
            .wait_for("watching", Duration::from_secs(10))
            .await
            .expect("the watch subscribed");
    }
    let a = s.acquire("k", "h", 15000).await;
    let r = s.renew("k", "h", &a["revision"], 15000).await;
    s.release("k", "h", &r["revision"]).await;
    let read_lines = |out: &common::Log, n: usize| {
        let out = out.clone();
        eventually("the watch's lines", Duration::from_secs(10), move || {
            let text = out.text();
            let lines: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            std::future::ready((lines.len() >= n).then_some(lines))
        })
    };
    let events = read_lines(&all_out, 3).await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["acquired", "renewed", "released"]);
    assert_eq!(events[0]["revision"], a["revision"]);
    assert_eq!(events[0]["holder"], "h");
    assert_eq!(events[1]["lease"]["revision"], r["revision"]);
    let events = read_lines(&owners_out, 2).await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["acquired", "released"]);
    let _ = all.kill();
    let _ = owners.kill();
}

#[tokio::test]
async fn hold_keeps_the_lease_until_interrupted_then_releases_it() {
    let s = Setup::start().await;
    let mut changes = s
        .client
        .subscribe(ChangeEvent::subject(Some("leader")))
        .await
        .unwrap();
    s.client.flush().await.unwrap();
    let mut cmd = command(
        &s.server.url,
        &["hold", "leader", "--holder", "me", "--ttl-ms", "1000"],
    );
    let mut child = cmd.stderr(Stdio::piped()).spawn().unwrap();
    let log = common::Log::default();
    log.follow(child.stderr.take().unwrap());
    log.wait_for("holding leader as me", Duration::from_secs(10))
        .await
        .expect("hold reports the lease");
    // Kept past several TTLs: three renewals of one tenure.
    let renewals = async {
        let mut renewals = 0;
        while let Some(msg) = changes.next().await {
            let event = dagnats_leases_client::changes::from_message(&msg).unwrap();
            assert_eq!(event.holder.as_deref(), Some("me"), "{event:?}");
            if event.event == ChangeKind::Renewed {
                renewals += 1;
                if renewals == 3 {
                    return;
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), renewals)
        .await
        .expect("three renewals within 10 s");
    assert_eq!(s.owner("leader").await["holder"], "me");
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let owner = s.owner("leader").await;
    assert_eq!(
        owner,
        json!({"held": false, "key": "leader"}),
        "released, not left to expire"
    );
}
