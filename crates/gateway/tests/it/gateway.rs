//! The gateway as a process: queue group, older servers, JetStream off,
//! NATS down at start, graceful shutdown, settings and auth.

use std::time::Duration;

use crate::common::owner::{Answer, Owner};
use crate::common::{
    Gateway, NatsServer, ServerOptions, TwoGateways, call, client, eventually, stream_info,
    try_call,
};
use futures::StreamExt;
use serde_json::{Value, json};

/// The eight lease subjects (docs/protocol.md, Operations).
const OPS: [&str; 8] = [
    "acquire", "renew", "release", "owner", "forward", "list", "transfer", "history",
];

fn valid_body(op: &str) -> Value {
    match op {
        "acquire" => json!({"key": "k", "holder": "h", "ttl_ms": 1000}),
        "owner" => json!({"key": "k"}),
        "forward" => json!({"key": "k", "payload": ""}),
        "list" | "history" => json!({}),
        "transfer" => json!({"key": "k", "holder": "h", "revision": 1, "to": "g", "ttl_ms": 1000}),
        _ => json!({"key": "k", "holder": "h", "revision": 1, "ttl_ms": 1000}),
    }
}

/// The first acquire reply that is not `unavailable`, polling for up to
/// 20 s while the gateway finds JetStream.
async fn first_available_acquire(c: &async_nats::Client) -> Value {
    eventually(
        "leases to become available",
        Duration::from_secs(20),
        || async {
            let reply = try_call(c, "acquire", valid_body("acquire")).await?;
            (reply["kind"] != "unavailable").then_some(reply)
        },
    )
    .await
}

#[tokio::test]
async fn older_server_replies_unsupported_on_every_subject() {
    let server = NatsServer::old().await;
    let gateway = Gateway::spawn(&server.url, &[], &[]);
    gateway.wait_serving().await;
    gateway
        .log
        .wait_for("older than 2.11", Duration::from_secs(10))
        .await
        .expect("the log says why");
    let c = client(&server.url).await;
    for op in OPS {
        let reply = eventually("unsupported", Duration::from_secs(10), || async {
            let reply = call(&c, op, valid_body(op)).await;
            (reply["kind"] != "unavailable").then_some(reply)
        })
        .await;
        assert_eq!(reply["kind"], "unsupported", "{op}: {reply}");
        assert!(reply["error"].as_str().unwrap().contains("2.11"), "{reply}");
    }
    let info = stream_info(&c).await;
    assert_eq!(
        info["error"]["err_code"], 10059,
        "no bucket was created: {info}"
    );
}

#[tokio::test]
async fn jetstream_off_replies_unavailable_and_recovers_once_it_is_on() {
    let mut server = NatsServer::without_jetstream().await;
    let gateway = Gateway::spawn(&server.url, &[], &[]);
    gateway.wait_serving().await;
    let c = client(&server.url).await;
    for op in OPS {
        let reply = call(&c, op, valid_body(op)).await;
        assert_eq!(reply["kind"], "unavailable", "{op}: {reply}");
    }
    server.restart_with(ServerOptions::default()).await;
    let c = client(&server.url).await;
    let granted = first_available_acquire(&c).await;
    assert_eq!(granted["granted"], true, "{granted}");
}

#[tokio::test]
async fn gateway_started_before_nats_serves_once_nats_is_up() {
    let mut server = NatsServer::start().await;
    let url = server.url.clone();
    server.stop();
    let gateway = Gateway::spawn(&url, &[], &[]);
    server.restart().await;
    gateway.wait_serving().await;
    let c = client(&url).await;
    let granted = first_available_acquire(&c).await;
    assert_eq!(granted["granted"], true, "{granted}");
}

#[tokio::test]
async fn two_gateways_answer_each_request_exactly_once() {
    let two = TwoGateways::start().await;
    let c = &two.client;
    let inbox = c.new_inbox();
    let mut replies = c.subscribe(format!("{inbox}.*")).await.unwrap();
    const N: usize = 50;
    for i in 0..N {
        let body = json!({"key": format!("k{i}"), "holder": "h", "ttl_ms": 5000});
        c.publish_with_reply(
            "api.leases.acquire",
            format!("{inbox}.{i}"),
            body.to_string().into(),
        )
        .await
        .unwrap();
    }
    c.flush().await.unwrap();
    let mut seen = vec![0; N];
    while let Ok(Some(msg)) = tokio::time::timeout(Duration::from_secs(2), replies.next()).await {
        let i: usize = msg.subject.rsplit('.').next().unwrap().parse().unwrap();
        seen[i] += 1;
        let reply: Value = serde_json::from_slice(&msg.payload).unwrap();
        assert_eq!(reply["granted"], true, "{reply}");
    }
    assert_eq!(seen, vec![1; N], "replies per request");
}

/// A loopback port nobody listens on right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn the_lease_subjects_are_subscribed_in_queue_group_dagnats_leases() {
    let monitor = free_port();
    let server = NatsServer::start_with(ServerOptions {
        extra_args: vec!["-m".into(), monitor.to_string()],
        ..ServerOptions::default()
    })
    .await;
    let _a = Gateway::start(&server.url).await;
    let _b = Gateway::start(&server.url).await;
    // The server's own list of subscriptions, not the replies they cause.
    let url = format!("http://127.0.0.1:{monitor}/subsz?subs=1");
    let subsz: Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
    let lease_subs: Vec<&Value> = subsz["subscriptions_list"]
        .as_array()
        .unwrap_or_else(|| panic!("{subsz}"))
        .iter()
        .filter(|sub| sub["subject"].as_str().unwrap().starts_with("api.leases."))
        .collect();
    let mut subjects: Vec<&str> = lease_subs
        .iter()
        .map(|sub| sub["subject"].as_str().unwrap())
        .collect();
    subjects.sort_unstable();
    let mut expected: Vec<String> = OPS
        .iter()
        .flat_map(|op| [format!("api.leases.{op}"), format!("api.leases.{op}")])
        .collect();
    expected.sort_unstable();
    assert_eq!(
        subjects, expected,
        "each gateway subscribes each subject once"
    );
    for sub in lease_subs {
        assert_eq!(sub["qgroup"], "dagnats-leases", "{sub}");
    }
}

#[tokio::test]
async fn sigterm_finishes_in_flight_requests_and_exits_0() {
    let server = NatsServer::start().await;
    let gateway = Gateway::start(&server.url).await;
    let c = client(&server.url).await;
    let (answered_tx, mut first_answer) = tokio::sync::mpsc::unbounded_channel();
    let calls: Vec<_> = (0..200)
        .map(|i| {
            let (c, answered) = (c.clone(), answered_tx.clone());
            tokio::spawn(async move {
                let body = json!({"key": format!("k{i}"), "holder": "h", "ttl_ms": 5000});
                let reply = tokio::time::timeout(
                    Duration::from_secs(10),
                    c.request("api.leases.acquire", body.to_string().into()),
                )
                .await;
                let _ = answered.send(());
                reply
            })
        })
        .collect();
    // Terminated once it serves: the calls not answered yet are in flight.
    tokio::time::timeout(Duration::from_secs(10), first_answer.recv())
        .await
        .expect("a first answer");
    let status = gateway.terminate().await;
    assert!(status.success(), "exit status {status}");
    let mut answered = 0;
    for call in calls {
        match call.await.unwrap() {
            Err(_) => panic!("a request timed out: an in-flight call was dropped"),
            Ok(Ok(reply)) => {
                let reply: Value = serde_json::from_slice(&reply.payload).unwrap();
                assert_eq!(reply["granted"], true, "{reply}");
                answered += 1;
            }
            // Sent after the gateway unsubscribed: refused at once, not lost.
            Ok(Err(err)) => assert_eq!(err.kind(), async_nats::RequestErrorKind::NoResponders),
        }
    }
    assert!(answered > 0, "some requests were in flight");
}

#[tokio::test]
async fn a_call_still_running_when_the_shutdown_grace_ends_answers_internal() {
    let server = NatsServer::start().await;
    let env = [("DAGNATS_SHUTDOWN_GRACE_MS", "200")];
    let gateway = Gateway::start_with(&server.url, &[], &env).await;
    let c = client(&server.url).await;
    let lease = json!({"key": "k", "holder": "mute", "ttl_ms": 30000});
    assert_eq!(call(&c, "acquire", lease).await["granted"], true);
    let owner = Owner::start(&c, "mute", Answer::Silent).await;
    let pending = tokio::spawn({
        let c = c.clone();
        async move {
            let body = json!({"key": "k", "payload": "", "timeout_ms": 30000});
            // Below the forward's own 30 s: only the grace can answer first.
            tokio::time::timeout(
                Duration::from_secs(20),
                c.request("api.leases.forward", body.to_string().into()),
            )
            .await
        }
    });
    owner.until_received(1).await;
    let status = gateway.terminate().await;
    assert!(status.success(), "exit status {status}");
    let reply = pending
        .await
        .unwrap()
        .expect("answered before the forward's own timeout")
        .expect("a reply, not silence");
    let reply: Value = serde_json::from_slice(&reply.payload).unwrap();
    assert_eq!(reply["kind"], "internal", "{reply}");
    let error = reply["error"].as_str().unwrap();
    assert!(error.contains("the gateway is stopping"), "{reply}");
}

#[tokio::test]
async fn invalid_settings_stop_the_start_with_a_clear_message() {
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 7] = [
        (&["--replicas", "9"], &[], "replicas"),
        (&["--worker-threads", "0"], &[], "worker-threads"),
        (
            &[],
            &[("DAGNATS_NATS_LISTED_ONLY", "perhaps")],
            "--nats-listed-only",
        ),
        (&[], &[("NATS_USER", "u")], "nats-password"),
        (&[], &[("DAGNATS_LOG_FORMAT", "xml")], "xml"),
        (&[], &[("DAGNATS_LOG", "[[[")], "DAGNATS_LOG"),
        (
            &[],
            &[("NATS_TLS_CA", "/nonexistent/ca.pem")],
            "NATS_TLS_CA",
        ),
    ];
    for (args, env, expected) in cases {
        let mut gateway = Gateway::spawn("nats://127.0.0.1:1", args, env);
        let status = gateway
            .wait_exit(Duration::from_secs(10))
            .await
            .expect("exits at once");
        assert!(!status.success(), "{args:?} {env:?}");
        let log = gateway.log.text();
        assert!(log.contains(expected), "{args:?} {env:?}: {log}");
    }
}

/// The names of process `pid`'s threads, sorted.
fn thread_names(pid: u32) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the gateway's threads")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim_end().to_string())
        .collect();
    names.sort();
    names
}

/// Threads of process `pid` named as tokio names its workers.
fn runtime_threads(pid: u32) -> usize {
    thread_names(pid)
        .iter()
        .filter(|name| *name == "tokio-rt-worker")
        .count()
}

/// One thread is the process's own, running tokio's current-thread
/// scheduler: no worker threads beside it.
#[tokio::test]
async fn the_gateway_runs_on_one_thread_unless_told_more() {
    let server = NatsServer::start().await;
    let one = Gateway::start(&server.url).await;
    let three = Gateway::start_with(&server.url, &[], &[("DAGNATS_WORKER_THREADS", "3")]).await;
    let c = client(&server.url).await;
    for _ in 0..4 {
        first_available_acquire(&c).await;
    }
    assert_eq!(thread_names(one.pid()), ["dagnats-leases"]);
    assert_eq!(runtime_threads(three.pid()), 3);
}

#[tokio::test]
async fn connects_with_user_and_password() {
    let server = NatsServer::start_with(ServerOptions {
        extra_args: vec![
            "--user".into(),
            "svc".into(),
            "--pass".into(),
            "s3cret".into(),
        ],
        ..ServerOptions::default()
    })
    .await;
    let gateway = Gateway::spawn(
        &server.url,
        &[],
        &[("NATS_USER", "svc"), ("NATS_PASSWORD", "s3cret")],
    );
    gateway.wait_serving().await;
    gateway
        .log
        .wait_for("leases bucket ready", Duration::from_secs(10))
        .await
        .expect("bucket ready");
    let c = async_nats::ConnectOptions::with_user_and_password("svc".into(), "s3cret".into())
        .connect(&server.url)
        .await
        .unwrap();
    assert_eq!(
        call(&c, "acquire", valid_body("acquire")).await["granted"],
        true
    );
    assert!(
        !gateway.log.text().contains("s3cret"),
        "the password is never logged"
    );
}

#[tokio::test]
async fn json_log_format_writes_one_object_per_line() {
    let server = NatsServer::start().await;
    let gateway = Gateway::spawn(&server.url, &[], &[("DAGNATS_LOG_FORMAT", "json")]);
    gateway.wait_serving().await;
    for line in gateway.log.text().lines() {
        let parsed: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert!(parsed["level"].is_string(), "{line}");
    }
}

#[tokio::test]
async fn sigterm_while_nats_is_down_still_exits_0() {
    let mut server = NatsServer::start().await;
    let gateway = Gateway::start(&server.url).await;
    server.stop();
    gateway
        .log
        .wait_for("disconnected from NATS", Duration::from_secs(10))
        .await
        .expect("the gateway notices");
    let status = gateway.terminate().await;
    assert!(status.success(), "exit status {status}");
}
