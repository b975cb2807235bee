//! The driver protocol's lines (DRIVER.md): requests decoded into [`Op`]s,
//! failures into the `error` object of an answer.

use std::collections::BTreeMap;

use dagnats_leases_client::ClientError;
use dagnats_leases_client::wire::kind::Kind;
use serde::Deserialize;
use serde_json::{Value, json};

/// One request line: its `id` (echoed back as it came) and what it asks.
pub struct Request {
    pub id: Value,
    pub op: Result<Op, Failure>,
}

impl Request {
    /// Decodes a line; one that does not decode is a `bad_request`
    /// answered under whatever `id` it carries.
    pub fn decode(line: &str) -> Request {
        let value: Value = match serde_json::from_str(line) {
            Ok(value) => value,
            Err(err) => {
                return Request {
                    id: Value::Null,
                    op: Err(Failure::driver("bad_request", err)),
                };
            }
        };
        let id = value.get("id").cloned().unwrap_or(Value::Null);
        let op = Op::deserialize(value).map_err(|err| Failure::driver("bad_request", err));
        Request { id, op }
    }
}

/// What a request asks the driver to do.
#[derive(Deserialize)]
#[serde(tag = "op")]
pub enum Op {
    #[serde(rename = "call")]
    Call { method: String, args: Value },
    #[serde(rename = "keeper.start")]
    KeeperStart(KeeperStart),
    #[serde(rename = "keeper.state")]
    KeeperState { keeper: String },
    #[serde(rename = "keeper.wait_owner")]
    KeeperWaitOwner {
        keeper: String,
        timeout_ms: Option<u64>,
    },
    #[serde(rename = "keeper.hand_off")]
    KeeperHandOff { keeper: String, to: String },
    #[serde(rename = "keeper.stop")]
    KeeperStop { keeper: String },
    #[serde(rename = "inbox.serve")]
    InboxServe(InboxServe),
    #[serde(rename = "inbox.stop")]
    InboxStop { inbox: String },
    #[serde(rename = "gate.admit")]
    GateAdmit { gate: String, fence: u64 },
    #[serde(rename = "exit")]
    Exit,
}

#[derive(Deserialize)]
pub struct KeeperStart {
    pub keeper: String,
    pub key: String,
    pub holder: String,
    pub ttl_ms: u64,
    pub wait: bool,
}

#[derive(Deserialize)]
pub struct InboxServe {
    pub inbox: String,
    pub holder: String,
    pub tenures: Tenures,
    pub mode: Mode,
}

/// What the `tenure(key)` given to `serve_inbox` answers.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tenures {
    /// The named keeper's `tenure()` for its own key, null for others.
    Keeper(String),
    /// These revisions for these keys, null for the rest.
    Fixed(BTreeMap<String, u64>),
}

/// What the handler does with an accepted request.
#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Echo,
    Hang,
    Large,
}

/// The `error` object of an answer.
#[derive(Debug)]
pub struct Failure {
    pub kind: String,
    pub message: String,
    pub holder: Option<String>,
    pub revision: Option<u64>,
}

impl Failure {
    /// A driver-level failure (`bad_request`, `stale_fence`, `not_found`).
    pub fn driver(kind: &str, message: impl ToString) -> Failure {
        Failure {
            kind: kind.into(),
            message: message.to_string(),
            holder: None,
            revision: None,
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "kind": self.kind,
            "message": self.message,
            "holder": self.holder,
            "revision": self.revision,
        })
    }
}

/// The library's error under the client-side kinds of DRIVER.md.
impl From<ClientError> for Failure {
    fn from(err: ClientError) -> Failure {
        let message = err.to_string();
        let (kind, holder, revision) = match err {
            ClientError::Lease {
                kind,
                holder,
                revision,
                ..
            } => (kind.as_str().to_string(), holder, revision),
            ClientError::Invalid(_) => ("invalid".into(), None, None),
            ClientError::NoGateway | ClientError::Nats(_) => ("unavailable".into(), None, None),
            ClientError::Timeout(_) => ("timeout".into(), None, None),
            ClientError::BadReply(_) => ("internal".into(), None, None),
            ClientError::PayloadTooLarge(_) => (Kind::PayloadTooLarge.as_str().into(), None, None),
        };
        Failure {
            kind,
            message,
            holder,
            revision,
        }
    }
}
