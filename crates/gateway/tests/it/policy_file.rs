//! A policy file the gateway cannot use stops the start, with a message
//! naming the file and the line (docs/protocol.md, Authorization); one
//! test per fault.

use std::time::Duration;

use crate::common::Gateway;

/// Starts `serve` with the policy file at `path`; its exit code and
/// stderr once it has stopped.
async fn start_at(path: &str) -> (Option<i32>, String) {
    let mut gateway = Gateway::spawn("nats://127.0.0.1:1", &[], &[("DAGNATS_POLICY", path)]);
    let status = gateway
        .wait_exit(Duration::from_secs(20))
        .await
        .expect("a gateway with a bad policy stops");
    let stderr = gateway.log.text();
    assert!(
        stderr.contains(&format!("DAGNATS_POLICY {path}: ")),
        "the message names the file: {stderr}"
    );
    (status.code(), stderr)
}

/// [`start_at`] a file holding `policy`.
async fn start_with(policy: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, policy).unwrap();
    start_at(&path.display().to_string()).await
}

fn principal(name: &str, identity: &str, prefixes: &str, rights: &str) -> String {
    format!(
        "[[principal]]\nname = \"{name}\"\n{identity}\nprefixes = {prefixes}\nrights = {rights}\n\n"
    )
}

async fn assert_refused(policy: &str, line: usize, says: &str) {
    let (code, stderr) = start_with(policy).await;
    assert_eq!(code, Some(1), "a refused start exits 1: {stderr}");
    assert!(
        stderr.contains(&format!("line {line}: ")) && stderr.contains(says),
        "expected line {line} and {says:?} in: {stderr}"
    );
}

#[tokio::test]
async fn an_unknown_field_stops_the_start_naming_its_line() {
    let policy = principal(
        "a",
        "local = true\nprefix = [\"a-\"]",
        "[\"a-\"]",
        "[\"read\"]",
    );
    assert_refused(&policy, 4, "unknown field `prefix`").await;
}

#[tokio::test]
async fn a_duplicate_name_stops_the_start_naming_its_line() {
    let policy = principal("a", "nats_account = \"A\"", "[\"\"]", "[\"read\"]")
        + &principal("a", "nats_account = \"B\"", "[\"\"]", "[\"read\"]");
    assert_refused(&policy, 8, "\"a\" is used twice (first on line 1)").await;
}

#[tokio::test]
async fn an_identity_that_matches_two_principals_stops_the_start_naming_its_line() {
    let policy = principal("a", "nats_account = \"A\"", "[\"\"]", "[\"read\"]")
        + &principal(
            "b",
            "nats_account = \"A\"\nnats_user = \"u\"",
            "[\"\"]",
            "[\"hold\"]",
        );
    assert_refused(&policy, 7, "would match two principals: \"b\" and \"a\"").await;
}

#[tokio::test]
async fn a_bad_right_stops_the_start_naming_its_line() {
    let policy = principal("a", "local = true", "[\"\"]", "[\"read\", \"write\"]");
    assert_refused(&policy, 5, "unknown right \"write\"").await;
}

#[tokio::test]
async fn a_bad_prefix_stops_the_start_naming_its_line() {
    let policy = principal("a", "local = true", "[\"team.a\"]", "[\"read\"]");
    assert_refused(&policy, 4, "prefix must be").await;
}

#[tokio::test]
async fn a_policy_file_that_cannot_be_read_stops_the_start() {
    let (code, stderr) = start_at("/nonexistent/policy.toml").await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("No such file"), "{stderr}");
}

#[tokio::test]
async fn under_a_policy_http_beyond_loopback_needs_no_write_token_as_every_call_needs_a_principals()
{
    let server = crate::common::NatsServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.toml");
    let policy = principal("ops", "local = true", "[\"\"]", "[\"admin\"]");
    std::fs::write(&path, policy).unwrap();
    let path = path.display().to_string();
    let env = [
        ("DAGNATS_HTTP_ADDR", "0.0.0.0:0"),
        ("DAGNATS_POLICY", path.as_str()),
    ];
    let gateway = Gateway::start_with(&server.url, &[], &env).await;
    let http = crate::common::Http::of(&gateway).await;
    crate::common::assert_error(&http.get("/v1/leases").await, 401, "unauthorized");
}
