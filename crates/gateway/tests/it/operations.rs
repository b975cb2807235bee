//! `docs/operations.md` as written: the NATS permissions it lists are
//! enough for a gateway and a holder to do everything, and no more than a
//! holder needs.

use std::time::Duration;

use crate::common;
use crate::common::lease_ops::{acquire, release, renew};
use crate::common::{Gateway, Http, NatsServer, ServerOptions, call};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use futures::StreamExt;
use serde_json::json;

/// The `authorization { ... }` block of the docs, with literal passwords.
fn documented_authorization() -> String {
    let doc = include_str!("../../../../docs/operations.md");
    let start = doc
        .find("authorization {")
        .expect("the docs show an authorization block");
    let end = start + doc[start..].find("```").expect("the block ends");
    doc[start..end]
        .replace("$DAGNATS_PASSWORD", "\"gateway-secret\"")
        .replace("$NOTIFY_PASSWORD", "\"holder-secret\"")
}

/// A server with the documented authorization (its config file, to be
/// rewritten and reloaded) and a gateway logged in as the documented user.
struct Documented {
    _dir: tempfile::TempDir,
    config: std::path::PathBuf,
    server: NatsServer,
    gateway: Gateway,
}

impl Documented {
    async fn start(env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("nats.conf");
        std::fs::write(&config, documented_authorization()).unwrap();
        let server = NatsServer::start_with(ServerOptions {
            extra_args: vec!["-c".into(), config.display().to_string()],
            ..ServerOptions::default()
        })
        .await;
        let login = [
            ("NATS_USER", "dagnats"),
            ("NATS_PASSWORD", "gateway-secret"),
        ];
        let env: Vec<_> = login.iter().chain(env).copied().collect();
        let gateway = Gateway::start_with(&server.url, &[], &env).await;
        Documented {
            _dir: dir,
            config,
            server,
            gateway,
        }
    }
}

async fn connect(url: &str, user: &str, password: &str) -> async_nats::Client {
    async_nats::ConnectOptions::with_user_and_password(user.into(), password.into())
        .connect(url)
        .await
        .expect("connecting with the documented user")
}

#[tokio::test]
async fn the_documented_permissions_let_a_gateway_and_a_holder_do_their_work() {
    let Documented {
        _dir,
        server,
        gateway,
        ..
    } = Documented::start(&[]).await;

    let holder = connect(&server.url, "notify", "holder-secret").await;
    let mut events = holder
        .subscribe("dagnats.lease.changed.notify-leader")
        .await
        .unwrap();
    let mut inbox = holder
        .subscribe("dagnats.lease.inbox.notify-7f3a.>")
        .await
        .unwrap();
    holder.flush().await.unwrap();
    let owner_side = {
        let holder = holder.clone();
        tokio::spawn(async move {
            let msg = inbox.next().await.unwrap();
            holder
                .publish(msg.reply.unwrap(), "pong".into())
                .await
                .unwrap();
        })
    };

    let (key, me) = ("notify-leader", "notify-7f3a");
    let lease = call(&holder, "acquire", acquire(key, me, 15000)).await;
    assert_eq!(lease["granted"], true, "{lease}");
    let renewed = call(&holder, "renew", renew(key, me, &lease["revision"], 15000)).await;
    assert_eq!(renewed["granted"], true, "{renewed}");
    let owner = call(&holder, "owner", json!({"key": key})).await;
    assert_eq!(owner["revision"], renewed["revision"], "{owner}");
    let forwarded = call(
        &holder,
        "forward",
        json!({"key": key, "payload": STANDARD.encode("ping")}),
    )
    .await;
    assert_eq!(forwarded["payload"], STANDARD.encode("pong"), "{forwarded}");
    owner_side.await.unwrap();
    let released = call(&holder, "release", release(key, me, &renewed["revision"])).await;
    assert_eq!(released["released"], true, "{released}");
    let event = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("a change event")
        .unwrap();
    assert_eq!(
        event
            .headers
            .unwrap()
            .get("Dagnats-Lease-Event")
            .unwrap()
            .as_str(),
        "acquired"
    );

    // Discovery: the gateway answers $SRV.PING and pings for /v1/cluster.
    let view = Http::of(&gateway).await.get("/v1/cluster").await.body;
    let gateways = view["gateways"].as_array().unwrap();
    assert_eq!(gateways.len(), 1, "{view}");
    assert_eq!(gateways[0]["id"], view["gateway"]["id"], "{view}");
    assert!(view["stream"]["leader"].is_string(), "{view}");

    // A holder cannot write the bucket behind the gateway's back.
    holder
        .publish("$KV.leases.notify-leader", "forged".into())
        .await
        .unwrap();
    holder.flush().await.unwrap();
    let violation = server
        .log
        .wait_for("Publish Violation", Duration::from_secs(5))
        .await
        .expect("the server refuses the holder's raw write");
    assert!(
        violation.contains("$KV.leases.notify-leader"),
        "{violation}"
    );
    // And the gateway never hit a permission it lacks.
    let log = server.log.text();
    let refused: Vec<_> = log
        .lines()
        .filter(|l| l.contains("Violation") && l.contains("user:dagnats"))
        .collect();
    assert!(refused.is_empty(), "{refused:#?}");
}

#[tokio::test]
async fn a_gateway_that_served_keeps_answering_from_jetstream_while_its_bucket_check_fails() {
    let Documented {
        _dir,
        config,
        server,
        gateway,
    } = Documented::start(&[("DAGNATS_BUCKET_RECHECK_MS", "200")]).await;
    let holder = connect(&server.url, "notify", "holder-secret").await;
    let (key, me) = ("notify-leader", "notify-7f3a");
    let lease = call(&holder, "acquire", acquire(key, me, 30_000)).await;
    assert_eq!(lease["granted"], true, "{lease}");

    // The bucket check (STREAM.INFO) now goes unanswered, as while the
    // stream elects a leader; reads and writes still reach JetStream.
    let without_info = documented_authorization().replace("\"$JS.API.STREAM.INFO.KV_leases\",", "");
    std::fs::write(&config, without_info).unwrap();
    let reload = |server: &NatsServer| {
        let hup = std::process::Command::new("kill")
            .args(["-HUP", &server.pid().to_string()])
            .status()
            .unwrap();
        assert!(hup.success());
    };
    reload(&server);
    // The check's failure is logged once, as the state changes: its
    // request goes unanswered.
    gateway
        .log
        .wait_for(
            "leases unavailable: JetStream did not answer STREAM.INFO",
            Duration::from_secs(30),
        )
        .await
        .expect("the failed bucket check is logged");
    let http = Http::of(&gateway).await;
    assert_eq!(http.get("/readyz").await.status, 503);

    let renewed = call(&holder, "renew", renew(key, me, &lease["revision"], 30_000)).await;
    assert_eq!(renewed["granted"], true, "{renewed}");
    assert!(renewed["revision"].as_u64() > lease["revision"].as_u64());
    let owner = call(&holder, "owner", json!({"key": key})).await;
    assert_eq!(owner["holder"], me, "{owner}");
    assert_eq!(owner["revision"], renewed["revision"], "{owner}");

    std::fs::write(&config, documented_authorization()).unwrap();
    reload(&server);
    common::eventually("ready again", Duration::from_secs(30), || async {
        (http.get("/readyz").await.status == 200).then_some(())
    })
    .await;
}
