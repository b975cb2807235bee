//! The bucket stays a clean KV (docs/protocol.md, "Storage: the leases
//! bucket"): on a replicated bucket every owner read and every list writes
//! a barrier, and still the official KV clients (`@nats-io/kv` on Node.js,
//! nats.go) list, watch and get the lease keys only, and a consumer of
//! `$KV.leases.>` receives lease records and nothing else.
//!
//! `@nats-io/kv` is pinned in `tests/kv-clients/package.json`
//! (`scripts/install-npm-tools` installs it); nats.go is Debian's 1.22.1,
//! built here with Debian's Go in GOPATH mode, as no module proxy is
//! reachable (`scripts/test`'s `system_needs` installs both).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream;
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, pull};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::common::cluster::{self, Cluster};
use crate::common::{self, call, js_api};

const CLIENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kv-clients");

/// Runs `program` with `args` and returns its standard output as JSON.
async fn json_of(program: &Path, args: &[&str], dir: &Path) -> Value {
    let run = tokio::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .unwrap_or_else(|_| panic!("{} answers within 60 s", program.display()))
        .unwrap_or_else(|err| panic!("{} starts: {err}", program.display()));
    assert!(
        out.status.success(),
        "{} failed: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
        panic!(
            "{} printed no JSON ({err}): {}",
            program.display(),
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The bucket as `@nats-io/kv` reads it.
async fn read_with_javascript(url: &str) -> Value {
    let installed = Path::new(CLIENTS).join("node_modules/@nats-io/kv");
    assert!(
        installed.is_dir(),
        "no {}: run scripts/test, which installs it (scripts/install-npm-tools)",
        installed.display()
    );
    let node = PathBuf::from("node");
    json_of(&node, &["read-bucket.mjs", url], Path::new(CLIENTS)).await
}

/// The bucket as nats.go reads it, built from Debian's sources.
async fn read_with_go(url: &str) -> Value {
    let gopath = "/usr/share/gocode";
    assert!(
        Path::new(gopath)
            .join("src/github.com/nats-io/nats.go")
            .is_dir(),
        "no nats.go under {gopath}: run scripts/test, which installs Debian's golang-github-nats-io-go-nats-dev"
    );
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kv-clients");
    let program = out.join("read_bucket");
    let build = tokio::process::Command::new("go")
        .args(["build", "-o"])
        .arg(&program)
        .arg("read_bucket.go")
        .current_dir(CLIENTS)
        .env("GO111MODULE", "off")
        .env("GOPATH", gopath)
        .env("GOFLAGS", "")
        .env("GOPROXY", "off")
        .env("GOCACHE", out.join("go-cache"))
        .output()
        .await
        .expect("go starts: Debian's golang-go, installed by scripts/test");
    assert!(
        build.status.success(),
        "go build failed: {}",
        String::from_utf8_lossy(&build.stderr)
    );
    json_of(&program, &[url], Path::new(CLIENTS)).await
}

/// A string list of `value` as a set.
fn set(value: &Value) -> BTreeSet<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("a list: {value}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// Asserts what a KV client read: the held keys (no barrier) listed, every
/// key with a record watched, and each of them got as it is.
fn assert_clean(client: &str, read: &Value, held: &BTreeSet<String>, released: &str) {
    assert_eq!(&set(&read["keys"]), held, "{client} keys(): {read}");
    let watched: BTreeSet<String> = read["watched"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["key"].as_str().unwrap().to_string())
        .collect();
    let mut recorded = held.clone();
    recorded.insert(released.to_string());
    assert_eq!(watched, recorded, "{client} watch(): {read}");
    for key in held {
        assert_eq!(read["gets"][key], "PUT", "{client} get({key}): {read}");
    }
    // A released key is purged: nats.go finds no entry, @nats-io/kv the purge.
    let got = &read["gets"][released];
    assert!(
        [Value::Null, json!("PURGE")].contains(got),
        "{client} get({released}): {read}"
    );
    for key in ["_dagnats.read", "_dagnats.list"] {
        assert_eq!(
            read["gets"][key],
            Value::Null,
            "{client} get({key}): {read}"
        );
    }
}

#[tokio::test]
async fn kv_clients_and_a_consumer_of_the_keys_see_only_lease_keys_after_reads_and_lists() {
    let cluster = Cluster::start().await;
    let url = cluster.nodes[0].url.clone();
    let _gateway = cluster::gateway(&url).await;
    let client = common::client(&url).await;

    // A durable consumer of every key, made before the first barrier.
    let stream = jetstream::new(client.clone())
        .get_stream("KV_leases")
        .await
        .expect("the bucket's stream");
    let tap = stream
        .create_consumer(pull::Config {
            durable_name: Some("tap".into()),
            filter_subject: "$KV.leases.>".into(),
            deliver_policy: DeliverPolicy::All,
            ack_policy: AckPolicy::None,
            ..Default::default()
        })
        .await
        .expect("a consumer of the keys");
    let received = Arc::new(Mutex::new(Vec::new()));
    let mut messages = tap.messages().await.expect("the consumer's messages");
    let reading = {
        let received = received.clone();
        tokio::spawn(async move {
            while let Some(Ok(message)) = messages.next().await {
                received.lock().unwrap().push(message.subject.to_string());
            }
        })
    };

    let held: BTreeSet<String> = (0..3).map(|i| format!("k-{i}")).collect();
    let mut gone = Value::Null;
    for key in held.iter().map(String::as_str).chain(["gone"]) {
        let acquire = json!({"key": key, "holder": "h", "ttl_ms": 60000});
        gone = call(&client, "acquire", acquire).await;
        assert_eq!(gone["granted"], true, "{gone}");
    }
    let released = call(
        &client,
        "release",
        json!({"key": "gone", "holder": "h", "revision": gone["revision"]}),
    )
    .await;
    assert_eq!(released["released"], true, "{released}");
    for key in &held {
        for _ in 0..3 {
            let owner = call(&client, "owner", json!({"key": key})).await;
            assert_eq!(owner["holder"], "h", "{owner}");
        }
    }
    for _ in 0..3 {
        let list = call(&client, "list", json!({})).await;
        assert_eq!(list["leases"].as_array().map(Vec::len), Some(3), "{list}");
    }
    // The reads and lists were confirmed: both barrier subjects hold one.
    let info = js_api(
        &client,
        "STREAM.INFO.KV_leases",
        json!({"subjects_filter": "dagnats.leases.barrier.*"}),
    )
    .await;
    let barriers: BTreeSet<String> = info["state"]["subjects"]
        .as_object()
        .unwrap_or_else(|| panic!("no barrier was written: {info}"))
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        barriers,
        ["dagnats.leases.barrier.list", "dagnats.leases.barrier.read"]
            .map(String::from)
            .into()
    );

    assert_clean(
        "@nats-io/kv",
        &read_with_javascript(&url).await,
        &held,
        "gone",
    );
    assert_clean("nats.go", &read_with_go(&url).await, &held, "gone");

    // The consumer, reading all along, got writes to lease keys only.
    let mut expected: BTreeSet<String> = held.iter().map(|k| format!("$KV.leases.{k}")).collect();
    expected.insert("$KV.leases.gone".into());
    let subjects = common::eventually(
        "the consumer to catch up",
        Duration::from_secs(10),
        || async {
            let subjects: BTreeSet<String> = received.lock().unwrap().iter().cloned().collect();
            let pending = tap.get_info().await.ok()?.num_pending;
            (pending == 0 && subjects.is_superset(&expected)).then_some(subjects)
        },
    )
    .await;
    reading.abort();
    assert_eq!(
        subjects, expected,
        "what the consumer of $KV.leases.> received"
    );
}
