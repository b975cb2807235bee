//! Writing to the bucket behind the gateway's back, as another tool could:
//! how the tests put a record the gateway cannot parse in place.

use serde_json::Value;

/// Publishes on `$KV.leases.<key>` as an acquire would, but a body that is
/// no lease record; returns its revision.
pub async fn write_corrupt(client: &async_nats::Client, key: &str) -> u64 {
    publish_acquired(client, key, 60, "not a record".into()).await
}

/// Writes a lease record of `holder` straight to `$KV.leases.<key>`, as a
/// gateway would, but with the gateway's clock at the write (`written_at`)
/// and the server's TTL (`server_ttl_secs`) chosen apart: how a test puts a
/// lease in the window between its `expires_at` and the server's expiry.
/// Returns its revision.
pub async fn write_lease(
    client: &async_nats::Client,
    key: &str,
    holder: &str,
    ttl_ms: u64,
    written_at: time::OffsetDateTime,
    server_ttl_secs: u64,
) -> u64 {
    let at = written_at
        .format(&time::format_description::well_known::Rfc3339)
        .expect("a timestamp formats");
    let record = serde_json::json!({"v": 1, "holder": holder, "ttl_ms": ttl_ms,
        "acquired_at": at, "written_at": at, "prev": 0});
    publish_acquired(client, key, server_ttl_secs, record.to_string().into()).await
}

/// Publishes `body` on `$KV.leases.<key>` with an acquire's headers and the
/// server's TTL `ttl_secs`; returns its revision.
async fn publish_acquired(
    client: &async_nats::Client,
    key: &str,
    ttl_secs: u64,
    body: bytes::Bytes,
) -> u64 {
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Dagnats-Lease-Event", "acquired");
    headers.insert("Nats-TTL", format!("{ttl_secs}s").as_str());
    let ack = client
        .request_with_headers(format!("$KV.leases.{key}"), headers, body)
        .await
        .expect("JetStream acknowledges the publish");
    let ack: Value = serde_json::from_slice(&ack.payload).expect("a JSON ack");
    ack["seq"]
        .as_u64()
        .unwrap_or_else(|| panic!("no seq in {ack}"))
}
