//! schemathesis (PyPI) against the live OpenAPI document of a real gateway:
//! generated requests to every operation, a bounded number of examples, and
//! no 500, no response outside its schema, no crash.
//!
//! `scripts/test` installs schemathesis into `.tools/` and exports
//! `SCHEMATHESIS_BIN`. `/v1/events` is left out: its body never ends, which
//! schemathesis would only see as a timeout; tests/http_events.rs covers it.
//! `positive_data_acceptance` holds the gateway to its schema: data the
//! schema allows is never `invalid` (tests/schemathesis.toml).

use std::path::PathBuf;

use crate::common::{Http, Setup};

/// Examples per operation: enough to cover every parameter's edges, small
/// enough to run in seconds.
const MAX_EXAMPLES: &str = "100";

fn schemathesis_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("SCHEMATHESIS_BIN") {
        return bin.into();
    }
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../.tools/schemathesis/bin/schemathesis");
    assert!(
        bin.is_file(),
        "no schemathesis at {}: run ./scripts/test, which installs it",
        bin.display()
    );
    bin
}

#[tokio::test]
async fn schemathesis_finds_no_server_error_and_no_schema_violation() {
    let s = Setup::start().await;
    let base = Http::of(&s.gateway).await.base;
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/schemathesis.toml");
    let workdir = tempfile::tempdir().unwrap();
    let run = tokio::process::Command::new(schemathesis_binary())
        .current_dir(workdir.path())
        .args(["--config-file", config, "run"])
        .arg(format!("{base}/openapi.json"))
        .args([
            "--url",
            &base,
            "--max-examples",
            MAX_EXAMPLES,
            "--seed",
            "1",
        ])
        .args(["--checks", "all"])
        .args(["--exclude-path", "/v1/events", "--request-timeout", "10"])
        .args(["--generation-database", "none", "--no-color"])
        .output();
    let output = tokio::time::timeout(std::time::Duration::from_secs(300), run)
        .await
        .expect("schemathesis finishes within 300 s")
        .expect("schemathesis starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "schemathesis failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("passed"), "{stdout}");
}
