//! Whole lines to stdout: answers and events from concurrent requests
//! never interleave.

use std::io::Write;

use serde_json::{Value, json};

use crate::protocol::Failure;

#[derive(Clone, Copy, Default)]
pub struct Output;

impl Output {
    /// Prints `value` as one line, flushed, under stdout's lock.
    pub fn line(&self, value: &Value) {
        let mut stdout = std::io::stdout().lock();
        // The runner is gone if stdout is: nothing left to tell.
        let _ = writeln!(stdout, "{value}").and_then(|()| stdout.flush());
    }

    /// The answer to request `id`.
    pub fn answer(&self, id: &Value, answer: Result<Value, Failure>) {
        self.line(&match answer {
            Ok(ok) => json!({"id": id, "ok": ok}),
            Err(failure) => json!({"id": id, "error": failure.to_json()}),
        });
    }
}
