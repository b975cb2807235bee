//! A fault run's history as a file, in the form Jepsen and etcd's
//! robustness tests keep theirs: JSON lines, one operation per line (who,
//! what, which key, invoke and complete instants, an outcome of `ok`,
//! `fail` or `indeterminate` and the reply fields the checker uses), and
//! one line per injected fault. [`read`] turns such a file back into the
//! checker's history, so a saved run can be checked again without
//! running it, and a hand-written history is checked the same way.
//!
//! Instants are whole nanoseconds from the start of the run, so a history
//! read back is the one written, to the bit, and gets the same verdicts.

use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::checker::{Call, Op, Outcome};

/// One injected fault: what kind, on what, from when until it was healed
/// (offsets from the start of the run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultSpan {
    pub kind: String,
    pub target: String,
    pub start: Duration,
    pub end: Duration,
}

/// A history with its faults, as a file holds them.
#[derive(Debug, Clone, Default)]
pub struct History {
    pub ops: Vec<Op>,
    pub faults: Vec<FaultSpan>,
}

/// Jepsen's three outcomes: the call took effect (or the read answered),
/// it definitely did not, or nobody knows.
pub fn outcome_class(op: &Op) -> &'static str {
    match &op.call {
        Call::Processed { .. } => "ok",
        Call::Acquire {
            outcome: Outcome::Held { .. },
            ..
        } => "fail",
        Call::Acquire { outcome, .. }
        | Call::Renew { outcome, .. }
        | Call::Release { outcome, .. }
        | Call::Transfer { outcome, .. }
        | Call::Owner { outcome } => match outcome {
            Outcome::Lost => "fail",
            Outcome::Unknown => "indeterminate",
            _ => "ok",
        },
    }
}

/// The operation's name on the wire (`processed` is an owner processing
/// a forwarded request).
pub fn op_name(op: &Op) -> &'static str {
    match &op.call {
        Call::Acquire { .. } => "acquire",
        Call::Renew { .. } => "renew",
        Call::Release { .. } => "release",
        Call::Transfer { .. } => "transfer",
        Call::Owner { .. } => "owner",
        Call::Processed { .. } => "processed",
    }
}

fn nanos(d: Duration) -> u64 {
    d.as_nanos() as u64
}

fn millis(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// The reply fields the checker uses, with `result` naming the outcome.
fn reply_json(outcome: &Outcome) -> Value {
    match outcome {
        Outcome::Granted { revision, lasts } => {
            json!({"result": "granted", "revision": revision, "lasts_ns": nanos(*lasts)})
        }
        Outcome::Held { holder, revision } => {
            json!({"result": "held", "holder": holder, "revision": revision})
        }
        Outcome::Free => json!({"result": "free"}),
        Outcome::Released { revision } => json!({"result": "released", "revision": revision}),
        Outcome::Lost => json!({"result": "lost"}),
        Outcome::Unknown => json!({"result": "unknown"}),
    }
}

/// One operation as one JSON object.
pub fn op_json(op: &Op) -> Value {
    let mut line = json!({
        "type": "op",
        "op": op_name(op),
        "key": op.key,
        "invoke_ns": nanos(op.start),
        "complete_ns": nanos(op.end),
        "outcome": outcome_class(op),
    });
    let fields = line.as_object_mut().unwrap();
    let mut set = |name: &str, value: Value| {
        fields.insert(name.into(), value);
    };
    match &op.call {
        Call::Acquire {
            holder,
            ttl,
            outcome,
        } => {
            set("process", json!(holder));
            set("ttl_ms", json!(millis(*ttl)));
            set("reply", reply_json(outcome));
        }
        Call::Renew {
            holder,
            revision,
            ttl,
            outcome,
        } => {
            set("process", json!(holder));
            set("revision", json!(revision));
            set("ttl_ms", json!(millis(*ttl)));
            set("reply", reply_json(outcome));
        }
        Call::Release {
            holder,
            revision,
            outcome,
        } => {
            set("process", json!(holder));
            set("revision", json!(revision));
            set("reply", reply_json(outcome));
        }
        Call::Transfer {
            holder,
            revision,
            to,
            ttl,
            outcome,
        } => {
            set("process", json!(holder));
            set("revision", json!(revision));
            set("to", json!(to));
            set("ttl_ms", json!(millis(*ttl)));
            set("reply", reply_json(outcome));
        }
        Call::Owner { outcome } => {
            set("process", json!("reader"));
            set("reply", reply_json(outcome));
        }
        Call::Processed { holder, fence } => {
            set("process", json!(holder));
            set("fence", json!(fence));
        }
    }
    line
}

/// One fault as one JSON object.
pub fn fault_json(fault: &FaultSpan) -> Value {
    json!({
        "type": "fault",
        "kind": fault.kind,
        "target": fault.target,
        "start_ns": nanos(fault.start),
        "end_ns": nanos(fault.end),
    })
}

/// The file's text: operations in invoke order, then the faults.
pub fn to_jsonl(history: &History) -> String {
    let mut ops: Vec<&Op> = history.ops.iter().collect();
    ops.sort_by_key(|op| (op.start, op.end));
    let mut text = String::new();
    for line in ops
        .into_iter()
        .map(op_json)
        .chain(history.faults.iter().map(fault_json))
    {
        text.push_str(&line.to_string());
        text.push('\n');
    }
    text
}

/// Writes `history` to `path`, creating its directories.
pub fn write(path: &Path, history: &History) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, to_jsonl(history))
}

/// Reads a file [`write`] wrote (or one written by hand the same way).
pub fn read(path: &Path) -> Result<History, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    from_jsonl(&text)
}

/// Parses JSON lines; blank lines are skipped, anything else unreadable
/// is an error naming its line.
pub fn from_jsonl(text: &str) -> Result<History, String> {
    let mut history = History::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |why: String| format!("line {}: {why}", i + 1);
        let value: Value = serde_json::from_str(line).map_err(|e| at(e.to_string()))?;
        let fields = value
            .as_object()
            .ok_or_else(|| at("not an object".into()))?;
        match str_field(fields, "type").map_err(at)? {
            "op" => history.ops.push(parse_op(fields).map_err(at)?),
            "fault" => history.faults.push(FaultSpan {
                kind: str_field(fields, "kind").map_err(at)?.into(),
                target: str_field(fields, "target").map_err(at)?.into(),
                start: ns_field(fields, "start_ns").map_err(at)?,
                end: ns_field(fields, "end_ns").map_err(at)?,
            }),
            other => return Err(at(format!("unknown type {other:?}"))),
        }
    }
    Ok(history)
}

type Fields = Map<String, Value>;

fn str_field<'a>(fields: &'a Fields, name: &str) -> Result<&'a str, String> {
    fields
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("no string field {name:?}"))
}

fn u64_field(fields: &Fields, name: &str) -> Result<u64, String> {
    fields
        .get(name)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("no integer field {name:?}"))
}

fn ns_field(fields: &Fields, name: &str) -> Result<Duration, String> {
    u64_field(fields, name).map(Duration::from_nanos)
}

fn ms_field(fields: &Fields, name: &str) -> Result<Duration, String> {
    u64_field(fields, name).map(Duration::from_millis)
}

fn parse_outcome(fields: &Fields) -> Result<Outcome, String> {
    let reply = fields
        .get("reply")
        .and_then(Value::as_object)
        .ok_or("no object field \"reply\"")?;
    Ok(match str_field(reply, "result")? {
        "granted" => Outcome::Granted {
            revision: u64_field(reply, "revision")?,
            lasts: ns_field(reply, "lasts_ns")?,
        },
        "held" => Outcome::Held {
            holder: str_field(reply, "holder")?.into(),
            revision: u64_field(reply, "revision")?,
        },
        "free" => Outcome::Free,
        "released" => Outcome::Released {
            revision: u64_field(reply, "revision")?,
        },
        "lost" => Outcome::Lost,
        "unknown" => Outcome::Unknown,
        other => return Err(format!("unknown result {other:?}")),
    })
}

fn parse_op(fields: &Fields) -> Result<Op, String> {
    let holder = || str_field(fields, "process").map(String::from);
    let call = match str_field(fields, "op")? {
        "acquire" => Call::Acquire {
            holder: holder()?,
            ttl: ms_field(fields, "ttl_ms")?,
            outcome: parse_outcome(fields)?,
        },
        "renew" => Call::Renew {
            holder: holder()?,
            revision: u64_field(fields, "revision")?,
            ttl: ms_field(fields, "ttl_ms")?,
            outcome: parse_outcome(fields)?,
        },
        "release" => Call::Release {
            holder: holder()?,
            revision: u64_field(fields, "revision")?,
            outcome: parse_outcome(fields)?,
        },
        "transfer" => Call::Transfer {
            holder: holder()?,
            revision: u64_field(fields, "revision")?,
            to: str_field(fields, "to")?.into(),
            ttl: ms_field(fields, "ttl_ms")?,
            outcome: parse_outcome(fields)?,
        },
        "owner" => Call::Owner {
            outcome: parse_outcome(fields)?,
        },
        "processed" => Call::Processed {
            holder: holder()?,
            fence: u64_field(fields, "fence")?,
        },
        other => return Err(format!("unknown op {other:?}")),
    };
    Ok(Op {
        key: str_field(fields, "key")?.into(),
        start: ns_field(fields, "invoke_ns")?,
        end: ns_field(fields, "complete_ns")?,
        call,
    })
}
