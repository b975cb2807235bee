//! The history stream beside the bucket, and the one durable consumer of
//! the bucket that every gateway's history writer shares
//! (docs/protocol.md, Tenure history).
//!
//! The stream keeps its records for the history's max age, at the bucket's
//! replicas; a gateway brings both to its own settings when it provisions
//! them (the last one started wins, as for the bucket's replicas). Like
//! the bucket it is never deleted or recreated.
//!
//! The consumer is a pull consumer with a pinned-client priority group
//! (ADR-42): the server hands every change to one gateway at a time, and
//! to another when that one stops pulling, so the changes of a key are
//! written in order by one writer, and the others stand by.

use std::time::Duration;

use serde_json::{Value, json};

use crate::store::jsapi::{JetStream, api_error, code};
use dagnats_leases_wire::names::{
    BUCKET, HISTORY_CONSUMER, HISTORY_GROUP, HISTORY_STREAM, HISTORY_SUBJECTS, STREAM,
};

/// How long the pinned writer may go without pulling before the server
/// pins another: a gateway that died is replaced after this (and after
/// [`ACK_WAIT`] for a change it had taken).
pub(crate) const PIN_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a change handed to a writer may go unacknowledged before the
/// server hands it out again.
pub(crate) const ACK_WAIT: Duration = Duration::from_secs(10);

/// Changes handed out and not yet acknowledged, at most: room for the
/// writer to hold a burst's tenures back for their ends (the writer's
/// `OPEN_DELAY`) at thousands of changes a second.
const MAX_ACK_PENDING: u64 = 10_000;

/// What the history's storage is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Provisioned {
    /// The bucket's replicas, which the history stream follows.
    pub(crate) replicas: u64,
}

/// Creates the history stream and the bucket's history consumer, or brings
/// them to `max_age` and the bucket's replicas. `Err` says why not (to
/// try again later).
pub(crate) async fn provision(js: &JetStream, max_age: Duration) -> Result<Provisioned, String> {
    let bucket = js.api(&format!("STREAM.INFO.{STREAM}"), &json!({})).await?;
    if let Some(err) = api_error(&bucket) {
        return Err(format!("the {BUCKET} bucket: {}", err.description));
    }
    let replicas = bucket["config"]["num_replicas"].as_u64().unwrap_or(1);
    stream(js, max_age, replicas).await?;
    consumer(js).await?;
    Ok(Provisioned { replicas })
}

/// The history stream's settings, over `base` (an existing config, or an
/// empty object for a new stream).
fn stream_config(mut base: Value, max_age: Duration, replicas: u64) -> Value {
    let creating = base.get("name").is_none();
    let object = base.as_object_mut().expect("stream config is an object");
    let fields = json!({
        "name": HISTORY_STREAM,
        "subjects": [HISTORY_SUBJECTS],
        "max_age": max_age.as_nanos() as u64,
        "num_replicas": replicas,
        "allow_direct": true,
    });
    for (name, value) in fields.as_object().expect("literal object") {
        object.insert(name.clone(), value.clone());
    }
    if creating {
        object.insert("storage".into(), json!("file"));
        object.insert("retention".into(), json!("limits"));
        object.insert("discard".into(), json!("old"));
        object.insert("description".into(), json!(DESCRIPTION));
    }
    base
}

const DESCRIPTION: &str = "dagnats-leases: the tenure history of the leases bucket";

async fn stream(js: &JetStream, max_age: Duration, replicas: u64) -> Result<(), String> {
    for _ in 0..2 {
        let info = js
            .api(&format!("STREAM.INFO.{HISTORY_STREAM}"), &json!({}))
            .await?;
        match api_error(&info) {
            None => {
                let existing = info["config"].clone();
                let wanted = stream_config(existing.clone(), max_age, replicas);
                if wanted == existing {
                    return Ok(());
                }
                let updated = js
                    .api(&format!("STREAM.UPDATE.{HISTORY_STREAM}"), &wanted)
                    .await?;
                if let Some(err) = api_error(&updated) {
                    return Err(format!("updating {HISTORY_STREAM}: {}", err.description));
                }
                tracing::info!(
                    stream = HISTORY_STREAM,
                    max_age_s = max_age.as_secs(),
                    replicas,
                    "updated the history stream"
                );
                return Ok(());
            }
            Some(err) if err.err_code == code::STREAM_NOT_FOUND => {}
            Some(err) => return Err(format!("{HISTORY_STREAM}: {}", err.description)),
        }
        let config = stream_config(json!({}), max_age, replicas);
        let created = js
            .api(&format!("STREAM.CREATE.{HISTORY_STREAM}"), &config)
            .await?;
        match api_error(&created) {
            None => {
                tracing::info!(stream = HISTORY_STREAM, "created the history stream");
                return Ok(());
            }
            Some(err) if err.err_code == code::STREAM_NAME_IN_USE => continue,
            Some(err) => return Err(format!("creating {HISTORY_STREAM}: {}", err.description)),
        }
    }
    Err(format!(
        "{HISTORY_STREAM} keeps changing under provisioning"
    ))
}

/// The durable consumer's settings.
fn consumer_config() -> Value {
    json!({
        "durable_name": HISTORY_CONSUMER,
        "name": HISTORY_CONSUMER,
        "description": "dagnats-leases: every change of the bucket, for the tenure history",
        "filter_subject": format!("$KV.{BUCKET}.*"),
        "deliver_policy": "all",
        "ack_policy": "explicit",
        "ack_wait": ACK_WAIT.as_nanos() as u64,
        "max_ack_pending": MAX_ACK_PENDING,
        "replay_policy": "instant",
        "priority_groups": [HISTORY_GROUP],
        "priority_policy": "pinned_client",
        "priority_timeout": PIN_TIMEOUT.as_nanos() as u64,
    })
}

async fn consumer(js: &JetStream) -> Result<(), String> {
    let info = js
        .api(
            &format!("CONSUMER.INFO.{STREAM}.{HISTORY_CONSUMER}"),
            &json!({}),
        )
        .await?;
    match api_error(&info) {
        None => return Ok(()),
        Some(err) if err.err_code == code::CONSUMER_NOT_FOUND => {}
        Some(err) => return Err(format!("the history consumer: {}", err.description)),
    }
    let create = json!({"stream_name": STREAM, "config": consumer_config()});
    let created = js
        .api(
            &format!("CONSUMER.CREATE.{STREAM}.{HISTORY_CONSUMER}"),
            &create,
        )
        .await?;
    match api_error(&created) {
        None => {
            tracing::info!(
                consumer = HISTORY_CONSUMER,
                "created the bucket's history consumer"
            );
            Ok(())
        }
        Some(err) => Err(format!(
            "creating the history consumer: {}",
            err.description
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provisioned_stream_needs_no_update_until_its_max_age_or_replicas_change() {
        let week = Duration::from_secs(7 * 86_400);
        let created = stream_config(json!({}), week, 1);
        assert_eq!(created["storage"], "file");
        assert_eq!(created["max_age"], json!(week.as_nanos() as u64));
        assert_eq!(created["subjects"], json!(["dagnats.history.>"]));
        assert_eq!(stream_config(created.clone(), week, 1), created);
        let shorter = stream_config(created.clone(), Duration::from_secs(90), 1);
        assert_eq!(shorter["max_age"], json!(90_000_000_000u64));
        assert_eq!(stream_config(created, week, 3)["num_replicas"], json!(3));
    }

    #[test]
    fn the_consumer_reads_every_key_of_the_bucket_through_one_pinned_group() {
        let config = consumer_config();
        assert_eq!(config["filter_subject"], "$KV.leases.*");
        assert_eq!(config["priority_policy"], "pinned_client");
        assert_eq!(config["priority_groups"], json!(["history"]));
        assert_eq!(config["ack_policy"], "explicit");
    }
}
