//! chromedriver and a headless Debian Chromium for the dashboard's browser
//! tests: the driver on a free port, a fresh profile dir, stopped on drop
//! with every Chromium process it started and every file they left.

use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tempfile::TempDir;

use crate::{eventually, free_port};

/// A running chromedriver, ready for a WebDriver session.
pub struct Driver {
    /// Where the WebDriver API listens (`http://127.0.0.1:PORT`).
    pub url: String,
    child: Child,
    /// The profile (`profile/`) and the processes' temp dir (`tmp/`):
    /// Chromium, killed, leaves its scoped dirs in `$TMPDIR`.
    dir: TempDir,
    chromium: String,
}

impl Driver {
    /// Starts chromedriver (`CHROMEDRIVER_BIN`, else `/usr/bin/chromedriver`)
    /// for Chromium (`CHROMIUM_BIN`, else `/usr/bin/chromium`).
    pub async fn start() -> Driver {
        let chromedriver =
            std::env::var("CHROMEDRIVER_BIN").unwrap_or("/usr/bin/chromedriver".into());
        let chromium = std::env::var("CHROMIUM_BIN").unwrap_or("/usr/bin/chromium".into());
        assert!(
            std::path::Path::new(&chromedriver).is_file(),
            "no chromedriver at {chromedriver}: run ./scripts/test, which installs chromium-driver"
        );
        let port = free_port();
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().join("tmp");
        std::fs::create_dir(&tmp).expect("a temp dir for chromium");
        // A process group of its own, so drop also stops its Chromium.
        let child = Command::new(chromedriver)
            .process_group(0)
            .env("TMPDIR", tmp)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting chromedriver");
        eventually(
            "chromedriver to listen",
            Duration::from_secs(15),
            || async { TcpStream::connect(("127.0.0.1", port)).ok() },
        )
        .await;
        Driver {
            url: format!("http://127.0.0.1:{port}"),
            child,
            dir,
            chromium,
        }
    }

    /// Capabilities of a headless session: the flags this machine's closed
    /// network needs, and the browser log kept.
    pub fn capabilities(&self) -> Map<String, Value> {
        let caps = json!({
            "goog:chromeOptions": {
                "binary": self.chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--window-size=1400,900",
                    format!("--user-data-dir={}", self.dir.path().join("profile").display()),
                ],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        });
        caps.as_object().expect("an object").clone()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Pages of a dropped session would otherwise go on reconnecting to
        // gateways long gone.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.wait();
    }
}
