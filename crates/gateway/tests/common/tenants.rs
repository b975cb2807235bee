//! The tenants of docs/operations.md's example on a real server: the
//! accounts `LEASES`, `TEAM_A` and `TEAM_B`, gateways in `LEASES` with a
//! policy (the doc's, unless a test writes its own), a client per user.

use std::collections::HashMap;
use std::time::Duration;

use dagnats_leases_testkit::accounts;
use serde_json::{Value, json};
use tempfile::TempDir;

use super::{Gateway, NatsServer, js_api};

/// The bearer token whose digest the doc's policy names for
/// `team-a-dashboard`.
pub const DASHBOARD_TOKEN: &str = "team-a-dashboard-token";
/// The admin token the gateways run with (`DAGNATS_HTTP_TOKEN`).
pub const ADMIN_TOKEN: &str = "operators-admin-token";

/// A server with the example's accounts, gateways with a policy, and one
/// client per user of the example.
pub struct Tenants {
    pub gateways: Vec<Gateway>,
    pub clients: HashMap<&'static str, async_nats::Client>,
    pub server: NatsServer,
    /// The directory of the policy file, if the gateways have one.
    policy: Option<TempDir>,
}

impl Tenants {
    /// One gateway with the doc's policy.
    pub async fn start() -> Self {
        Self::with_policy(&accounts::example("policy.toml"), 1).await
    }

    /// `gateways` gateways with `policy` as their policy file.
    pub async fn with_policy(policy: &str, gateways: usize) -> Self {
        Self::on_accounts(Some(policy), gateways).await
    }

    /// One gateway without a policy, on the same accounts.
    pub async fn without_policy() -> Self {
        Self::on_accounts(None, 1).await
    }

    async fn on_accounts(policy: Option<&str>, gateways: usize) -> Self {
        let server = accounts::server().await;
        let dir = policy.map(|policy| {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("policy.toml"), policy).unwrap();
            dir
        });
        let mut tenants = Tenants {
            gateways: Vec::new(),
            clients: HashMap::new(),
            server,
            policy: dir,
        };
        for _ in 0..gateways {
            let gateway = tenants.gateway(&[]).await;
            tenants.gateways.push(gateway);
        }
        for (_, user) in accounts::USERS {
            let client = accounts::connect(&tenants.server.url, user).await;
            tenants.clients.insert(user, client);
        }
        tenants
    }

    /// Where the policy file is, if the gateways have one.
    pub fn policy_path(&self) -> Option<String> {
        let dir = self.policy.as_ref()?;
        Some(dir.path().join("policy.toml").display().to_string())
    }

    /// A gateway in `LEASES` with the policy (if any) and the admin token,
    /// plus `env`, ready to serve.
    pub async fn gateway(&self, env: &[(&str, &str)]) -> Gateway {
        let [(user_var, user), (password_var, password)] = accounts::gateway_env();
        let policy = self.policy_path();
        let mut all = vec![
            (user_var, user.as_str()),
            (password_var, password.as_str()),
            ("DAGNATS_HTTP_TOKEN", ADMIN_TOKEN),
        ];
        if let Some(policy) = &policy {
            all.push(("DAGNATS_POLICY", policy.as_str()));
        }
        all.extend_from_slice(env);
        Gateway::start_with(&self.server.url, &[], &all).await
    }

    /// The client of `user`.
    pub fn client(&self, user: &str) -> &async_nats::Client {
        &self.clients[user]
    }

    /// `api.leases.<op>` as `user`: the reply, and its
    /// `Nats-Service-Error-Code` when it failed.
    pub async fn call(&self, user: &str, op: &str, body: Value) -> (Value, Option<String>) {
        call_with(self.client(user), op, body, None).await
    }

    /// `user` acquires `key` for `holder` (30 s), which must be granted;
    /// the grant.
    pub async fn hold(&self, user: &str, key: &str, holder: &str) -> Value {
        let body = json!({"key": key, "holder": holder, "ttl_ms": 30_000});
        let (grant, code) = self.call(user, "acquire", body).await;
        assert_eq!(code, None, "{user} acquires {key}: {grant}");
        assert_eq!(grant["granted"], true, "{user} acquires {key}: {grant}");
        grant
    }

    /// The key's last message in the bucket, as JetStream holds it: its
    /// revision and its body (`None`: the key has no message).
    pub async fn record(&self, key: &str) -> Option<(u64, Value)> {
        let got = js_api(
            self.client("ops"),
            "STREAM.MSG.GET.KV_leases",
            json!({"last_by_subj": format!("$KV.leases.{key}")}),
        )
        .await;
        if got["error"]["err_code"] == 10037 {
            return None;
        }
        let message = &got["message"];
        let seq = message["seq"].as_u64().unwrap_or_else(|| panic!("{got}"));
        let data = message["data"].as_str().unwrap_or_default();
        use base64::Engine;
        let body = base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("base64 data");
        let body = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&body).expect("a JSON record")
        };
        Some((seq, body))
    }
}

/// `api.leases.<op>` on `client`, with a `Nats-Request-Info` header when
/// `request_info` is given: the reply and its `Nats-Service-Error-Code`.
pub async fn call_with(
    client: &async_nats::Client,
    op: &str,
    body: Value,
    request_info: Option<&str>,
) -> (Value, Option<String>) {
    let mut headers = async_nats::HeaderMap::new();
    if let Some(info) = request_info {
        headers.insert("Nats-Request-Info", info);
    }
    let reply = tokio::time::timeout(
        Duration::from_secs(10),
        client.request_with_headers(
            format!("api.leases.{op}"),
            headers,
            serde_json::to_vec(&body).unwrap().into(),
        ),
    )
    .await
    .expect("reply within 10 s")
    .expect("request answered");
    let code = reply
        .headers
        .as_ref()
        .and_then(|h| h.get("Nats-Service-Error-Code"))
        .map(|v| v.as_str().to_string());
    let body = serde_json::from_slice(&reply.payload).expect("reply is JSON");
    (body, code)
}

/// Asserts `reply` is `forbidden` on both the body and the service code.
pub fn assert_forbidden(what: &str, (body, code): &(Value, Option<String>)) {
    assert_eq!(body["kind"], "forbidden", "{what}: {body}");
    assert_eq!(code.as_deref(), Some("403"), "{what}: {body}");
}

/// The doc's policy without the principals named `names`.
pub fn example_policy_without(names: &[&str]) -> String {
    let policy = accounts::example("policy.toml");
    let mut blocks = policy.split("[[principal]]");
    let mut kept = blocks.next().unwrap_or_default().to_string();
    for block in blocks {
        let named = |name: &&str| block.contains(&format!("name = \"{name}\"\n"));
        if !names.iter().any(named) {
            kept.push_str("[[principal]]");
            kept.push_str(block);
        }
    }
    kept
}

/// The doc's policy, with `shared-` keys held by both team-a and team-b.
pub fn shared_policy() -> String {
    accounts::example("policy.toml")
        .replace(
            "prefixes = [\"team-a-\"]\nrights = [\"hold\"]",
            "prefixes = [\"team-a-\", \"shared-\"]\nrights = [\"hold\"]",
        )
        .replace(
            "nats_user = \"bob\"\nprefixes = [\"team-b-\"]",
            "nats_user = \"bob\"\nprefixes = [\"team-b-\", \"shared-\"]",
        )
}
