//! The gateway's integration tests, one module per area, against real
//! nats-server and gateway processes (`common/` is the harness). One test
//! binary, so the harness and the dependencies link once; the fault runs
//! and their checker are the other binary, `faults`.

#[path = "../common/mod.rs"]
mod common;

mod batched_writes;
mod bucket;
mod cli;
mod client;
mod cluster;
mod dashboard;
mod dashboard_history;
mod docs;
mod events;
mod forward;
mod gateway;
mod history;
mod http_cluster;
mod http_docs;
mod http_events;
mod http_forward;
mod http_leases;
mod http_ops;
mod http_schemathesis;
mod kv_clients;
mod leases;
mod list;
mod list_load;
mod openapi_client;
mod operations;
mod policy_file;
mod round_trips;
mod run;
mod service;
mod shards;
mod tenants;
mod tenants_http;
mod transfer;
mod validation;
