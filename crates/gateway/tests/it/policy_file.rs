//! A policy file the gateway cannot use stops the start, with a message
//! naming the file and the line (docs/protocol.md, Authorization); one
//! test per fault.

use std::time::Duration;

use crate::common::command;

/// Runs `serve` with `policy` as its policy file; its exit code and stderr.
fn start_with(policy: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, policy).unwrap();
    let mut child = command("nats://127.0.0.1:1", &["serve"])
        .env("DAGNATS_POLICY", &path)
        .env("DAGNATS_HTTP_ADDR", "127.0.0.1:0")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting dagnats-leases");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the gateway started with a bad policy");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        stderr.contains(&path.display().to_string()),
        "the message names the file: {stderr}"
    );
    (status.code(), stderr)
}

fn principal(name: &str, identity: &str, prefixes: &str, rights: &str) -> String {
    format!(
        "[[principal]]\nname = \"{name}\"\n{identity}\nprefixes = {prefixes}\nrights = {rights}\n\n"
    )
}

fn assert_refused(policy: &str, line: usize, says: &str) {
    let (code, stderr) = start_with(policy);
    assert_eq!(code, Some(1), "a refused start exits 1: {stderr}");
    assert!(
        stderr.contains(&format!("line {line}: ")) && stderr.contains(says),
        "expected line {line} and {says:?} in: {stderr}"
    );
}

#[test]
fn an_unknown_field_stops_the_start_naming_its_line() {
    let policy = principal(
        "a",
        "local = true\nprefix = [\"a-\"]",
        "[\"a-\"]",
        "[\"read\"]",
    );
    assert_refused(&policy, 4, "unknown field `prefix`");
}

#[test]
fn a_duplicate_name_stops_the_start_naming_its_line() {
    let policy = principal("a", "nats_account = \"A\"", "[\"\"]", "[\"read\"]")
        + &principal("a", "nats_account = \"B\"", "[\"\"]", "[\"read\"]");
    assert_refused(&policy, 8, "\"a\" is used twice (first on line 1)");
}

#[test]
fn an_identity_that_matches_two_principals_stops_the_start_naming_its_line() {
    let policy = principal("a", "nats_account = \"A\"", "[\"\"]", "[\"read\"]")
        + &principal(
            "b",
            "nats_account = \"A\"\nnats_user = \"u\"",
            "[\"\"]",
            "[\"hold\"]",
        );
    assert_refused(&policy, 7, "would match two principals: \"b\" and \"a\"");
}

#[test]
fn a_bad_right_stops_the_start_naming_its_line() {
    let policy = principal("a", "local = true", "[\"\"]", "[\"read\", \"write\"]");
    assert_refused(&policy, 5, "unknown right \"write\"");
}

#[test]
fn a_bad_prefix_stops_the_start_naming_its_line() {
    let policy = principal("a", "local = true", "[\"team.a\"]", "[\"read\"]");
    assert_refused(&policy, 4, "prefix must be");
}

#[test]
fn a_policy_file_that_cannot_be_read_stops_the_start() {
    let (code, stderr) = {
        let mut child = command("nats://127.0.0.1:1", &["serve"])
            .env("DAGNATS_POLICY", "/nonexistent/policy.toml")
            .env("DAGNATS_HTTP_ADDR", "127.0.0.1:0")
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let status = child.wait().unwrap();
        let mut stderr = String::new();
        use std::io::Read;
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        (status.code(), stderr)
    };
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("DAGNATS_POLICY /nonexistent/policy.toml"),
        "{stderr}"
    );
}
