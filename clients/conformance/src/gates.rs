//! `gate.admit`: one `FenceGate` per name, made on first use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use dagnats_leases_client::FenceGate;
use serde_json::{Value, json};

use crate::protocol::Failure;

#[derive(Default)]
pub struct Gates(Mutex<HashMap<String, Arc<FenceGate>>>);

impl Gates {
    pub fn admit(&self, name: &str, fence: u64) -> Result<Value, Failure> {
        let gate = self
            .0
            .lock()
            .unwrap()
            .entry(name.into())
            .or_default()
            .clone();
        gate.admit(fence)
            .map(|()| json!({}))
            .map_err(|stale| Failure::driver("stale_fence", stale))
    }
}
