//! The tenants example of docs/operations.md ("Tenants in their own
//! accounts"): its nats-server accounts and its policy file, read from the
//! doc itself, so the tests run exactly the configuration the doc shows.
//!
//! Each example is the fenced block after a `<!-- example: NAME -->` line.
//! The accounts name each user's password as `$<USER>_PASSWORD`, which the
//! server takes from its environment; here every password is `<user>-pw`.

use std::path::PathBuf;

use crate::{NatsServer, ServerOptions};

/// The users of the example, by account.
pub const USERS: [(&str, &str); 5] = [
    ("LEASES", "gateway"),
    ("LEASES", "ops"),
    ("TEAM_A", "alice"),
    ("TEAM_B", "bob"),
    ("TEAM_B", "carol"),
];

/// The document the examples live in.
pub fn document() -> PathBuf {
    crate::workspace_root().join("docs/operations.md")
}

/// The example `name` of docs/operations.md, as the doc shows it.
pub fn example(name: &str) -> String {
    let path = document();
    let doc = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("reading {}: {err}", path.display()));
    let marker = format!("<!-- example: {name} -->");
    let after = doc
        .split_once(&marker)
        .unwrap_or_else(|| panic!("{} has no {marker}", path.display()))
        .1;
    let fence_start = after
        .find("```")
        .unwrap_or_else(|| panic!("no fenced block after {marker}"));
    let block = &after[fence_start + 3..];
    let body_start = block.find('\n').expect("a fence line") + 1;
    let body = &block[body_start..];
    let end = body
        .find("\n```")
        .unwrap_or_else(|| panic!("the block after {marker} is not closed"));
    body[..end + 1].to_string()
}

/// The password of `user` in these tests.
pub fn password(user: &str) -> String {
    format!("{user}-pw")
}

/// A nats-server 2.11+ with JetStream, configured with the example's
/// accounts.
pub async fn server() -> NatsServer {
    NatsServer::start_with(ServerOptions {
        config: Some(example("accounts.conf")),
        env: USERS
            .iter()
            .map(|(_, user)| (format!("{}_PASSWORD", user.to_uppercase()), password(user)))
            .collect(),
        ..ServerOptions::default()
    })
    .await
}

/// A client connected to `url` as `user`.
pub async fn connect(url: &str, user: &str) -> async_nats::Client {
    async_nats::ConnectOptions::new()
        .user_and_password(user.to_string(), password(user))
        .name(user)
        .connect(url)
        .await
        .unwrap_or_else(|err| panic!("connecting as {user}: {err}"))
}

/// The environment that makes a gateway connect as the example's
/// gateway user.
pub fn gateway_env() -> [(&'static str, String); 2] {
    [
        ("NATS_USER", "gateway".to_string()),
        ("NATS_PASSWORD", password("gateway")),
    ]
}
