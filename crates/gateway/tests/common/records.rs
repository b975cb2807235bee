//! Writing to the bucket behind the gateway's back, as another tool could:
//! how the tests put a record the gateway cannot parse in place.

use serde_json::Value;

/// Publishes `body` on `$KV.leases.<key>` as an acquire would, but with a
/// body that is no lease record; returns its revision.
pub async fn write_corrupt(client: &async_nats::Client, key: &str) -> u64 {
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Dagnats-Lease-Event", "acquired");
    headers.insert("Nats-TTL", "60s");
    let ack = client
        .request_with_headers(format!("$KV.leases.{key}"), headers, "not a record".into())
        .await
        .expect("JetStream acknowledges the publish");
    let ack: Value = serde_json::from_slice(&ack.payload).expect("a JSON ack");
    ack["seq"].as_u64().unwrap_or_else(|| panic!("no seq in {ack}"))
}
