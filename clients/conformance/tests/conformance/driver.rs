//! One driver process, as the runner sees it: requests written as JSON
//! lines, answers routed back by `id`, event lines recorded, stderr kept,
//! and every line in the scenario's transcript (DRIVER.md).

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dagnats_leases_testkit::Log;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::library::Library;
use crate::recorder::Recorder;
use crate::transcript::{Transcript, clipped};

/// How long a driver may take to print its `ready` line (an interpreter
/// loading its modules on a loaded machine).
const READY_WITHIN: Duration = Duration::from_secs(30);

/// How long a request may go unanswered when the scenario expects no wait
/// of its own (a keeper's `wait_owner` passes its own bound).
const ANSWER_WITHIN: Duration = Duration::from_secs(20);

/// An `error` answer.
#[derive(Debug, Clone, Deserialize)]
pub struct DriverError {
    pub kind: String,
    pub message: String,
    pub holder: Option<String>,
    pub revision: Option<u64>,
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, DriverError>>>>>;

/// How to start a driver.
pub struct Start<'a> {
    pub library: Library,
    /// The label its lines carry in the transcript (`d1`, `d2`).
    pub label: String,
    pub nats_url: &'a str,
    /// `DRIVER_CALL_TIMEOUT_MS`, when the scenario sets it.
    pub call_timeout: Option<Duration>,
    pub transcript: Transcript,
}

pub struct Driver {
    pub label: String,
    child: Child,
    stdin: tokio::sync::Mutex<ChildStdin>,
    next_id: AtomicU64,
    pending: Pending,
    /// Event lines (`ownership`, `inbox`), as they arrived.
    pub events: Arc<Recorder<Value>>,
    /// Lines on stdout that are neither an answer nor an event.
    pub strays: Arc<Mutex<Vec<String>>>,
    pub stderr: Log,
    transcript: Transcript,
}

impl Driver {
    /// Starts the driver and waits for its `ready` line; the error says
    /// why it could not start, with its stderr.
    pub async fn start(start: Start<'_>) -> Result<Driver, String> {
        let (program, args) = start.library.driver_command();
        let mut cmd = Command::new(&program);
        cmd.args(&args)
            .env("NATS_URL", start.nats_url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(timeout) = start.call_timeout {
            cmd.env("DRIVER_CALL_TIMEOUT_MS", timeout.as_millis().to_string());
        }
        let shown = format!("{} {:?}", program.display(), args);
        let mut child = cmd.spawn().map_err(|err| {
            format!(
                "the {} driver cannot start ({shown}): {err}",
                start.library.name()
            )
        })?;
        let stderr = Log::default();
        stderr.follow(
            child
                .stderr
                .take()
                .unwrap()
                .into_owned_fd()
                .map(std::fs::File::from)
                .unwrap(),
        );
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let (label, transcript) = (start.label, start.transcript);
        transcript.note(&label, format!("started: {shown}"));
        let ready = tokio::time::timeout(READY_WITHIN, stdout.next_line()).await;
        let line = match ready {
            Ok(Ok(Some(line))) => line,
            Ok(_) => {
                let status = child.wait().await.ok();
                return Err(format!(
                    "the {} driver ended before its ready line ({status:?}); stderr:\n{}",
                    start.library.name(),
                    stderr.text()
                ));
            }
            Err(_) => {
                return Err(format!(
                    "the {} driver printed nothing within {READY_WITHIN:?}; stderr:\n{}",
                    start.library.name(),
                    stderr.text()
                ));
            }
        };
        transcript.note(&label, format!("<- {line}"));
        let ready: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if ready["ready"] != true || ready["library"] != start.library.name() {
            return Err(format!(
                "the {} driver's first line is not its ready line: {line}\nstderr:\n{}",
                start.library.name(),
                stderr.text()
            ));
        }
        let driver = Driver {
            stdin: tokio::sync::Mutex::new(child.stdin.take().unwrap()),
            child,
            label,
            next_id: AtomicU64::new(1),
            pending: Pending::default(),
            events: Arc::default(),
            strays: Arc::default(),
            stderr,
            transcript,
        };
        tokio::spawn(read_lines(
            stdout,
            driver.label.clone(),
            driver.transcript.clone(),
            driver.pending.clone(),
            driver.events.clone(),
            driver.strays.clone(),
        ));
        Ok(driver)
    }

    /// The process id, for signals.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("the driver runs")
    }

    /// Sends `op` (an object without `id`) and waits up to `within` for
    /// its answer.
    pub async fn request_within(
        &self,
        mut op: Value,
        within: Duration,
    ) -> Result<Value, DriverError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        op["id"] = id.into();
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        let line = op.to_string();
        self.transcript.note(&self.label, format!("-> {line}"));
        {
            let mut stdin = self.stdin.lock().await;
            let written = async {
                stdin.write_all(line.as_bytes()).await?;
                stdin.write_all(b"\n").await?;
                stdin.flush().await
            };
            written
                .await
                .unwrap_or_else(|err| panic!("{}: cannot write to the driver: {err}", self.label));
        }
        match tokio::time::timeout(within, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => panic!(
                "{}: the driver's stdout closed before it answered {line}",
                self.label
            ),
            Err(_) => panic!("{}: no answer within {within:?} to {line}", self.label),
        }
    }

    /// Sends `op` and waits for its answer.
    pub async fn request(&self, op: Value) -> Result<Value, DriverError> {
        self.request_within(op, ANSWER_WITHIN).await
    }

    /// Sends `op`; its `ok` answer (an error answer fails the scenario).
    pub async fn ok(&self, op: Value) -> Value {
        let shown = clipped(&op.to_string());
        self.request(op)
            .await
            .unwrap_or_else(|err| panic!("{}: {shown} answered {err:?}", self.label))
    }

    /// One `LeaseClient` call.
    pub async fn call(&self, method: &str, args: Value) -> Result<Value, DriverError> {
        self.request(json!({"op": "call", "method": method, "args": args}))
            .await
    }

    /// One call that must succeed.
    pub async fn call_ok(&self, method: &str, args: Value) -> Value {
        self.ok(json!({"op": "call", "method": method, "args": args}))
            .await
    }

    /// One call that must fail with `kind`; its error.
    pub async fn call_fails(&self, method: &str, args: Value, kind: &str) -> DriverError {
        let shown = clipped(&args.to_string());
        match self.call(method, args).await {
            Ok(ok) => panic!("{}: {method} {shown} answered {ok}, not {kind}", self.label),
            Err(err) => {
                assert_eq!(err.kind, kind, "{}: {method} {shown}: {err:?}", self.label);
                assert!(
                    !err.message.is_empty(),
                    "{}: an error says why: {err:?}",
                    self.label
                );
                err
            }
        }
    }

    /// Starts keeper `name`.
    pub async fn keeper_start(
        &self,
        name: &str,
        key: &str,
        holder: &str,
        ttl: Duration,
        wait: bool,
    ) {
        self.ok(
            json!({"op": "keeper.start", "keeper": name, "key": key, "holder": holder,
                       "ttl_ms": ttl.as_millis() as u64, "wait": wait}),
        )
        .await;
    }

    /// `fence()` and `tenure()` of keeper `name` now.
    pub async fn keeper_state(&self, name: &str) -> (Option<u64>, Option<u64>) {
        let state = self.ok(json!({"op": "keeper.state", "keeper": name})).await;
        (state["fence"].as_u64(), state["tenure"].as_u64())
    }

    /// The first `ownership` event of keeper `name` from event position
    /// `from` on with `owner` as given, within `within`.
    pub async fn ownership_from(
        &self,
        from: usize,
        name: &str,
        owner: bool,
        within: Duration,
    ) -> (Instant, Value) {
        self.events
            .first_from(from, within, |e| {
                e["event"] == "ownership" && e["keeper"] == name && e["owner"] == owner
            })
            .await
            .unwrap_or_else(|| {
                panic!("{}: keeper {name} printed no ownership event with owner {owner} within {within:?}", self.label)
            })
    }

    /// Sends a signal (`STOP`, `CONT`, `KILL`) to the driver's process.
    pub fn signal(&self, signal: &str) {
        self.transcript
            .note("runner", format!("SIG{signal} {}", self.label));
        signal_process(self.pid(), signal);
    }
}

/// `kill -<signal> <pid>`.
pub fn signal_process(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{signal} {pid} failed");
}

/// Routes each stdout line: answers to their waiting request, events to
/// the recorder, anything else to the strays.
async fn read_lines(
    mut lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    label: String,
    transcript: Transcript,
    pending: Pending,
    events: Arc<Recorder<Value>>,
    strays: Arc<Mutex<Vec<String>>>,
) {
    while let Ok(Some(line)) = lines.next_line().await {
        transcript.note(&label, format!("<- {line}"));
        let value: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if value.get("event").is_some() {
            events.push(value);
            continue;
        }
        let waiting = value["id"]
            .as_u64()
            .and_then(|id| pending.lock().unwrap().remove(&id));
        let answer = match (&value["ok"], value.get("error")) {
            (ok, None) if !ok.is_null() => Some(Ok(ok.clone())),
            (Value::Null, Some(error)) => serde_json::from_value(error.clone()).ok().map(Err),
            _ => None,
        };
        match (waiting, answer) {
            (Some(waiting), Some(answer)) => {
                let _ = waiting.send(answer);
            }
            _ => strays.lock().unwrap().push(line),
        }
    }
    transcript.note(&label, "stdout closed");
}
