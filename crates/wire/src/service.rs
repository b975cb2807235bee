//! The NATS services framework's discovery replies (ADR-32, schemas
//! `io.nats.micro.v1.*`): what a gateway answers on `$SRV.PING`, `$SRV.INFO`
//! and `$SRV.STATS`, and what tools such as `nats micro` read back.
//!
//! Field names are the ADR's; durations are nanoseconds, `started` is
//! RFC 3339 in UTC.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// The standard fields of every discovery reply: which service, which
/// instance, which version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceIdentity {
    /// The message type, e.g. `io.nats.micro.v1.ping_response`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The kind of service; every gateway says `dagnats-api`.
    pub name: String,
    /// Unique per process: tells the instances apart.
    pub id: String,
    /// The gateway's version (SemVer).
    pub version: String,
    /// Free-form, immutable metadata of the instance.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

/// `$SRV.PING`: "for clients to calculate RTT to a service and discover
/// services".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PingResponse {
    #[serde(flatten)]
    pub service: ServiceIdentity,
}

/// `$SRV.INFO`: the instance and every endpoint it serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InfoResponse {
    #[serde(flatten)]
    pub service: ServiceIdentity,
    /// What the service is for.
    pub description: String,
    pub endpoints: Vec<EndpointInfo>,
}

/// One endpoint of [`InfoResponse`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointInfo {
    /// The operation, e.g. `acquire`.
    pub name: String,
    /// Its request subject, e.g. `api.leases.acquire`.
    pub subject: String,
    /// `dagnats-leases`: one instance answers each request.
    pub queue_group: String,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

/// `$SRV.STATS`: how each endpoint of this instance has done since it
/// started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsResponse {
    #[serde(flatten)]
    pub service: ServiceIdentity,
    pub endpoints: Vec<EndpointStats>,
    /// When the instance started.
    #[serde(with = "crate::timefmt")]
    pub started: OffsetDateTime,
}

/// One endpoint of [`StatsResponse`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointStats {
    pub name: String,
    pub subject: String,
    pub queue_group: String,
    /// Requests answered.
    pub num_requests: u64,
    /// Requests answered with an error.
    pub num_errors: u64,
    /// The last error as `<code>:<sentence>` (the form the NATS clients
    /// write), empty if none yet.
    pub last_error: String,
    /// Time spent answering, in all (nanoseconds).
    pub processing_time: u64,
    /// `processing_time / num_requests` (nanoseconds).
    pub average_processing_time: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn identity(kind: &str) -> ServiceIdentity {
        ServiceIdentity {
            kind: kind.into(),
            name: "dagnats-api".into(),
            id: "abc".into(),
            version: "0.1.0".into(),
            metadata: BTreeMap::new(),
        }
    }

    #[test]
    fn a_ping_carries_the_standard_fields_at_the_top_level() {
        let ping = PingResponse {
            service: identity("io.nats.micro.v1.ping_response"),
        };
        assert_eq!(
            serde_json::to_value(&ping).unwrap(),
            json!({"type": "io.nats.micro.v1.ping_response", "name": "dagnats-api",
                   "id": "abc", "version": "0.1.0", "metadata": {}})
        );
    }

    #[test]
    fn stats_read_back_as_written_with_nanoseconds_and_started() {
        let stats = StatsResponse {
            service: identity("io.nats.micro.v1.stats_response"),
            endpoints: vec![EndpointStats {
                name: "acquire".into(),
                subject: "api.leases.acquire".into(),
                queue_group: "dagnats-leases".into(),
                num_requests: 2,
                num_errors: 1,
                last_error: "400:bad".into(),
                processing_time: 3_000,
                average_processing_time: 1_500,
            }],
            started: crate::timefmt::parse("2026-10-18T12:00:00.250Z").unwrap(),
        };
        let value = serde_json::to_value(&stats).unwrap();
        assert_eq!(value["started"], "2026-10-18T12:00:00.250Z");
        assert_eq!(value["endpoints"][0]["average_processing_time"], 1_500);
        assert_eq!(
            serde_json::from_value::<StatsResponse>(value).unwrap(),
            stats
        );
    }
}
