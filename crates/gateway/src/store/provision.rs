//! Creates the `leases` bucket, or brings an existing one to the settings
//! the gateway relies on (docs/protocol.md, "Storage: the leases bucket").
//!
//! It never deletes or recreates a stream: the fence is the stream sequence,
//! and a new stream would start it again. What cannot be updated in place is
//! a [`Refusal`]. A gateway scales an existing stream to its `--replicas`
//! only on the first pass that finds it, so gateways started with different
//! settings never rescale it back and forth: the last one started wins.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::jsapi::{JetStream, code};
use crate::settings::BucketSettings;
use dagnats_leases_wire::names::{
    BARRIER_SUBJECTS, BUCKET, CHANGED_PREFIX, KEY_SPACE_BARRIER_SUBJECTS, KEY_SUBJECTS, STREAM,
};

/// First server version with per-message TTL.
pub(crate) const MIN_SERVER_VERSION: (u64, u64) = (2, 11);

/// First server version with atomic batch publish (ADR-50).
const ATOMIC_BATCH_VERSION: (u64, u64) = (2, 12);

/// Where provisioning got to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Provisioned {
    /// The bucket exists with the settings leases need, at `replicas`;
    /// `batches` when it takes atomic batches.
    Ready { replicas: u64, batches: bool },
    /// The server is older than 2.11: no bucket is created.
    Unsupported { server_version: String },
    /// JetStream cannot be reached; try again later.
    Unavailable(String),
}

/// An existing bucket the gateway must not run on; the sentence says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refusing to use the existing {STREAM} stream: {0}")]
pub struct Refusal(pub String);

/// Where a bucket created now starts its sequence, so its first fence is
/// above every fence any earlier `KV_leases` handed out: above the highest
/// revision this gateway saw, and above the wall clock in microseconds,
/// which no earlier stream's sequence can have reached (docs/operations.md,
/// "Fences after the bucket is deleted").
pub(super) fn first_seq(highest_seen: u64) -> u64 {
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_micros() as u64);
    (highest_seen + 1).max(clock)
}

/// Parses `major.minor` from a server version such as `2.11.3-beta`.
pub(crate) fn parse_version(version: &str) -> Option<(u64, u64)> {
    let mut parts = version.trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts
        .next()?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    Some((major, minor))
}

/// The stream settings leases rely on, merged over `base` (an existing
/// config, or an empty object for a new bucket). An existing stream is
/// scaled to the configured replicas only when `scale` says so.
fn required_config(
    mut base: Value,
    settings: &BucketSettings,
    first_seq: u64,
    scale: bool,
    atomic: bool,
) -> Value {
    let creating = base.get("name").is_none();
    let fields = json!({
        "name": STREAM,
        "subjects": [KEY_SUBJECTS, BARRIER_SUBJECTS],
        "max_msgs_per_subject": 1,
        "max_age": 0,
        "allow_rollup_hdrs": true,
        "allow_direct": false,
        "allow_msg_ttl": true,
        "subject_delete_marker_ttl": settings.marker_ttl.as_nanos() as u64,
        "republish": {
            "src": format!("$KV.{BUCKET}.*"),
            "dest": format!("{CHANGED_PREFIX}.{{{{wildcard(1)}}}}"),
        },
    });
    let object = base.as_object_mut().expect("stream config is an object");
    for (name, value) in fields.as_object().expect("literal object") {
        object.insert(name.clone(), value.clone());
    }
    // Left alone on an older server, which knows no such setting.
    if atomic {
        object.insert("allow_atomic".into(), json!(true));
    }
    if let Some(replicas) = settings.replicas.filter(|_| scale) {
        object.insert("num_replicas".into(), json!(replicas));
    }
    if creating {
        object.insert("storage".into(), json!("file"));
        object.insert("discard".into(), json!("new"));
        object.insert("deny_delete".into(), json!(true));
        object.insert("num_replicas".into(), json!(settings.replicas.unwrap_or(1)));
        if first_seq > 1 {
            object.insert("first_seq".into(), json!(first_seq));
        }
    }
    base
}

/// Settings of an existing stream that cannot be changed in place.
fn check_immutable(config: &Value) -> Result<(), Refusal> {
    let field = |name: &str| config.get(name).cloned().unwrap_or(Value::Null);
    if field("storage") != json!("file") {
        return Err(Refusal(format!(
            "storage is {}, leases need file storage to survive a restart",
            field("storage")
        )));
    }
    // The KV's subjects alone (a bucket of an earlier gateway, which the
    // update gives the barriers' subjects) or with the barriers'.
    let subjects = field("subjects");
    let subjects: BTreeSet<&str> = subjects
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let known = |wanted: &[&str]| subjects == wanted.iter().copied().collect();
    if !known(&[KEY_SUBJECTS]) && !known(&[KEY_SUBJECTS, BARRIER_SUBJECTS]) {
        return Err(Refusal(format!(
            "subjects are {}, expected [\"{KEY_SUBJECTS}\", \"{BARRIER_SUBJECTS}\"]",
            field("subjects")
        )));
    }
    if !matches!(field("retention").as_str(), None | Some("limits")) {
        return Err(Refusal(format!(
            "retention is {}, expected limits",
            field("retention")
        )));
    }
    if field("sealed") == json!(true) {
        return Err(Refusal("the stream is sealed".into()));
    }
    if !field("mirror").is_null() {
        return Err(Refusal("the stream is a mirror".into()));
    }
    Ok(())
}

fn err_code(reply: &Value) -> Option<u64> {
    reply
        .get("error")
        .map(|e| e["err_code"].as_u64().unwrap_or(0))
}

fn describe(reply: &Value) -> String {
    reply["error"]["description"]
        .as_str()
        .unwrap_or("unknown error")
        .to_string()
}

/// One provisioning pass. `first_seq` is where a new bucket's sequence
/// starts, so fences keep growing if the bucket had to be created again;
/// `scale` lets it scale an existing stream to the configured replicas.
pub(super) async fn provision(
    jetstream: &JetStream,
    server_version: String,
    settings: &BucketSettings,
    first_seq: u64,
    scale: bool,
) -> Result<Provisioned, Refusal> {
    let atomic = match parse_version(&server_version) {
        Some(version) if version >= MIN_SERVER_VERSION => version >= ATOMIC_BATCH_VERSION,
        _ => return Ok(Provisioned::Unsupported { server_version }),
    };
    let unavailable = |reason: String| Ok(Provisioned::Unavailable(reason));
    // Two passes: a stream created by another gateway between our info and
    // create calls is read and checked on the second.
    for _ in 0..2 {
        // The state names the subjects of earlier gateways' barriers, if any.
        let info_request = json!({"subjects_filter": KEY_SPACE_BARRIER_SUBJECTS});
        let info = match jetstream
            .api(&format!("STREAM.INFO.{STREAM}"), &info_request)
            .await
        {
            Ok(info) => info,
            Err(reason) => return unavailable(reason),
        };
        match err_code(&info) {
            None => {
                let existing = info["config"].clone();
                let outcome = update(jetstream, settings, existing, scale, atomic).await?;
                let leftovers = info["state"]["subjects"].as_object();
                if matches!(outcome, Provisioned::Ready { .. })
                    && leftovers.is_some_and(|subjects| !subjects.is_empty())
                {
                    purge_key_space_barriers(jetstream).await;
                }
                return Ok(outcome);
            }
            Some(code::STREAM_NOT_FOUND) => {}
            Some(_) => return unavailable(describe(&info)),
        }
        let config = required_config(json!({}), settings, first_seq, true, atomic);
        let ready = ready(&config);
        let created = match jetstream
            .api(&format!("STREAM.CREATE.{STREAM}"), &config)
            .await
        {
            Ok(created) => created,
            Err(reason) => return unavailable(reason),
        };
        match err_code(&created) {
            None => {
                tracing::info!(stream = STREAM, "created the leases bucket");
                return Ok(ready);
            }
            Some(code::STREAM_NAME_IN_USE) => continue,
            Some(_) => return unavailable(format!("creating {STREAM}: {}", describe(&created))),
        }
    }
    unavailable(format!("{STREAM} keeps changing under provisioning"))
}

async fn update(
    jetstream: &JetStream,
    settings: &BucketSettings,
    existing: Value,
    scale: bool,
    atomic: bool,
) -> Result<Provisioned, Refusal> {
    check_immutable(&existing)?;
    let kept = required_config(existing.clone(), settings, 0, false, atomic);
    let wanted = required_config(existing.clone(), settings, 0, scale, atomic);
    if wanted != kept {
        match send_update(jetstream, &wanted).await {
            Ok(()) => {
                tracing::info!(
                    stream = STREAM,
                    from = replicas(&existing),
                    to = replicas(&wanted),
                    "scaled the leases bucket"
                );
                return Ok(ready(&wanted));
            }
            Err(UpdateFailed::Unreachable(reason)) => return Ok(Provisioned::Unavailable(reason)),
            // Serving at the replicas it has beats not serving.
            Err(UpdateFailed::Refused { reason, .. }) => tracing::warn!(
                stream = STREAM,
                from = replicas(&existing),
                to = replicas(&wanted),
                "could not scale the leases bucket, it serves at its replicas: {reason}"
            ),
        }
    }
    let ready = ready(&kept);
    if kept == existing {
        return Ok(ready);
    }
    match send_update(jetstream, &kept).await {
        Ok(()) => {
            tracing::info!(
                stream = STREAM,
                "updated the leases bucket to the settings leases need"
            );
            Ok(ready)
        }
        Err(UpdateFailed::Unreachable(reason)) => Ok(Provisioned::Unavailable(reason)),
        Err(UpdateFailed::Refused { reason, passing }) => {
            let reason = format!("updating {STREAM}: {reason}");
            if passing {
                Ok(Provisioned::Unavailable(reason))
            } else {
                Err(Refusal(format!(
                    "it lacks settings leases need and the server would not update it: {reason}"
                )))
            }
        }
    }
}

/// Purges the barriers earlier gateways left among the KV's keys, where KV
/// clients list them as keys. A purge by subject leaves the stream's
/// sequence, hence every fence, as it is; a failed one is logged, and the
/// next pass tries again.
async fn purge_key_space_barriers(jetstream: &JetStream) {
    let request = json!({"filter": KEY_SPACE_BARRIER_SUBJECTS});
    let why = match jetstream
        .api(&format!("STREAM.PURGE.{STREAM}"), &request)
        .await
    {
        Ok(reply) if err_code(&reply).is_none() => {
            tracing::info!(
                stream = STREAM,
                purged = reply["purged"].as_u64(),
                "purged the barriers earlier gateways left among the bucket's keys"
            );
            return;
        }
        Ok(reply) => describe(&reply),
        Err(reason) => reason,
    };
    tracing::warn!(
        stream = STREAM,
        "could not purge the barriers earlier gateways left among the bucket's keys: {why}"
    );
}

/// Why a `STREAM.UPDATE` did not take.
enum UpdateFailed {
    /// No answer (JetStream unreachable, timed out).
    Unreachable(String),
    /// The server answered with an error; `passing` when its status is
    /// 503 (no leader, temporarily unavailable, insufficient resources
    /// while a node is down), which may clear by itself.
    Refused { reason: String, passing: bool },
}

async fn send_update(jetstream: &JetStream, config: &Value) -> Result<(), UpdateFailed> {
    let reply = jetstream
        .api(&format!("STREAM.UPDATE.{STREAM}"), config)
        .await
        .map_err(UpdateFailed::Unreachable)?;
    match err_code(&reply) {
        None => Ok(()),
        Some(_) => Err(UpdateFailed::Refused {
            reason: describe(&reply),
            passing: reply["error"]["code"].as_u64() == Some(503),
        }),
    }
}

/// What a bucket with `config` serves as.
fn ready(config: &Value) -> Provisioned {
    Provisioned::Ready {
        replicas: replicas(config),
        batches: config["allow_atomic"] == json!(true),
    }
}

/// A stream config's replicas (the server's default, 1, when absent).
fn replicas(config: &Value) -> u64 {
    config["num_replicas"].as_u64().unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::settings::Coalescing;

    /// Settings' coalescing in the tests of this module.
    pub(super) const COALESCING: Coalescing = Coalescing {
        in_flight: 4,
        max_batch: 128,
    };

    #[test]
    fn parses_server_versions() {
        assert_eq!(parse_version("2.9.10"), Some((2, 9)));
        assert_eq!(parse_version("2.11.0-RC.1"), Some((2, 11)));
        assert_eq!(parse_version("v2.15.1"), Some((2, 15)));
        assert_eq!(parse_version("junk"), None);
    }

    #[test]
    fn a_new_bucket_starts_above_what_was_seen_and_above_the_clock() {
        let clock = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros() as u64;
        assert!(first_seq(0) >= clock);
        assert!(first_seq(0) < 1 << 53, "exact in JSON");
        let far = clock * 2;
        assert_eq!(first_seq(far), far + 1);
    }

    #[test]
    fn a_bucket_of_an_earlier_gateway_is_given_the_barrier_subjects() {
        let earlier = json!({"name": STREAM, "storage": "file", "subjects": [KEY_SUBJECTS]});
        assert_eq!(check_immutable(&earlier), Ok(()));
        let settings = BucketSettings {
            replicas: None,
            marker_ttl: Duration::from_secs(5),
            recheck: Duration::from_secs(10),
            coalescing: COALESCING,
        };
        let updated = required_config(earlier, &settings, 0, false, true);
        assert_eq!(
            updated["subjects"],
            json!(["$KV.leases.>", "dagnats.leases.barrier.*"])
        );
        assert_eq!(check_immutable(&updated), Ok(()));
    }

    #[test]
    fn a_stream_with_subjects_of_its_own_is_refused() {
        for subjects in [
            json!(["$KV.leases.>", "other.>"]),
            json!(["dagnats.leases.barrier.*"]),
            json!(["$KV.leases.a"]),
        ] {
            let config = json!({"storage": "file", "subjects": subjects});
            let err = check_immutable(&config).unwrap_err();
            assert!(err.to_string().contains("subjects are"), "{err}");
        }
    }

    #[test]
    fn a_memory_stream_is_refused() {
        let config = json!({"storage": "memory", "subjects": [KEY_SUBJECTS]});
        let err = check_immutable(&config).unwrap_err();
        assert!(err.to_string().contains("file storage"), "{err}");
    }

    #[test]
    fn an_up_to_date_config_needs_no_update() {
        let settings = BucketSettings {
            replicas: None,
            marker_ttl: Duration::from_secs(5),
            recheck: Duration::from_secs(10),
            coalescing: COALESCING,
        };
        let created = required_config(json!({}), &settings, 0, true, true);
        assert_eq!(
            required_config(created.clone(), &settings, 0, true, true),
            created
        );
        assert_eq!(created["allow_atomic"], json!(true));
        assert_eq!(created["num_replicas"], json!(1));
        assert_eq!(
            created["republish"]["dest"],
            json!("dagnats.lease.changed.{{wildcard(1)}}")
        );
    }
}

#[cfg(test)]
mod replicas_tests {
    use std::time::Duration;

    use super::tests::COALESCING;
    use super::*;

    fn settings(replicas: usize) -> BucketSettings {
        BucketSettings {
            replicas: Some(replicas),
            marker_ttl: Duration::from_secs(5),
            recheck: Duration::from_secs(10),
            coalescing: COALESCING,
        }
    }

    #[test]
    fn an_existing_stream_is_scaled_only_on_the_pass_that_may_scale() {
        let existing = required_config(json!({}), &settings(3), 0, true, true);
        assert_eq!(existing["num_replicas"], json!(3));
        let later = required_config(existing.clone(), &settings(1), 0, false, true);
        assert_eq!(
            later, existing,
            "a later check leaves the replicas as they are"
        );
        let starting = required_config(existing, &settings(1), 0, true, true);
        assert_eq!(starting["num_replicas"], json!(1));
    }

    #[test]
    fn atomic_batches_are_enabled_only_where_the_server_has_them() {
        let older = required_config(json!({}), &settings(3), 0, true, false);
        assert_eq!(older.get("allow_atomic"), None);
        assert_eq!(
            ready(&older),
            Provisioned::Ready {
                replicas: 3,
                batches: false
            }
        );
        let newer = required_config(older, &settings(3), 0, false, true);
        assert_eq!(
            ready(&newer),
            Provisioned::Ready {
                replicas: 3,
                batches: true
            }
        );
    }
}
