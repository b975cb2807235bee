//! The fault runs (long ones are `#[ignore]`d: run them by hand, see
//! CONTRIBUTING.md) and the history checker that judges them, with the
//! checker's own tests, against real nats-server and gateway processes.

#[path = "../common/mod.rs"]
mod common;

mod checker;
mod faults;
mod history_file;
mod made;
mod shard_faults;
