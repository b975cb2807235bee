//! Builders of hand-made histories, which the checker's tests and the
//! history file's tests both write.

use std::time::Duration;

use crate::common::checker::{Call, Op, Outcome};

/// The TTL every hand-made call asks for.
pub const TTL: Duration = Duration::from_secs(3);

pub fn at(key: &str, start_ms: u64, end_ms: u64, call: Call) -> Op {
    Op {
        key: key.into(),
        start: Duration::from_millis(start_ms),
        end: Duration::from_millis(end_ms),
        call,
    }
}

pub fn granted(revision: u64) -> Outcome {
    granted_lasting(revision, TTL)
}

/// A grant whose lease lasts `lasts` from the request's start, as an
/// acquire that finds the holder's own lease answers.
pub fn granted_lasting(revision: u64, lasts: Duration) -> Outcome {
    Outcome::Granted { revision, lasts }
}

pub fn acquire(holder: &str, outcome: Outcome) -> Call {
    Call::Acquire {
        holder: holder.into(),
        ttl: TTL,
        outcome,
    }
}

pub fn renew(holder: &str, revision: u64, outcome: Outcome) -> Call {
    Call::Renew {
        holder: holder.into(),
        revision,
        ttl: TTL,
        outcome,
    }
}

pub fn release(holder: &str, revision: u64, outcome: Outcome) -> Call {
    Call::Release {
        holder: holder.into(),
        revision,
        outcome,
    }
}

pub fn transfer(holder: &str, revision: u64, to: &str, outcome: Outcome) -> Call {
    Call::Transfer {
        holder: holder.into(),
        revision,
        to: to.into(),
        ttl: TTL,
        outcome,
    }
}

pub fn released(revision: u64) -> Outcome {
    Outcome::Released { revision }
}

pub fn owner(outcome: Outcome) -> Call {
    Call::Owner { outcome }
}

pub fn held(holder: &str, revision: u64) -> Outcome {
    Outcome::Held {
        holder: holder.into(),
        revision,
    }
}

pub fn processed(holder: &str, fence: u64) -> Call {
    Call::Processed {
        holder: holder.into(),
        fence,
    }
}
