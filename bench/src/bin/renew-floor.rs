//! The least any gateway built on async-nats does for a renew, for
//! `scripts/profile-renew --floor`: it takes the request from the queue
//! group, publishes the record with the gateway's three headers expecting
//! the key's last sequence, awaits the acknowledgement, receives the change
//! event the bucket republishes, and replies with the new revision. No JSON
//! decoding, no lease rules, no metrics: its instructions per renew are the
//! client library's share, and the gateway's minus these are its own.
//!
//! Serves one key, whose lease the gateway granted before this started
//! (the bucket is the gateway's too).

use async_nats::{Client, HeaderMap, Message};
use dagnats_leases_client::wire::names::{
    CHANGED_PREFIX, HEADER_EVENT, HEADER_EXPECTED_SEQ, HEADER_TTL, QUEUE_GROUP, SUBJECT_RENEW,
    key_subject,
};
use futures::StreamExt;

/// The same allocator as the gateway, so the two counts compare.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A record the size of the gateway's for a short holder.
const RECORD: &str = r#"{"v":1,"holder":"p","ttl_ms":60000,"acquired_at":"2026-12-01T20:19:37.841Z","written_at":"2026-12-01T20:19:37.843Z","prev":1796156376973889}"#;

/// One thread on the current-thread scheduler, as the gateway runs by
/// default.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), async_nats::Error> {
    let url = std::env::var("NATS_URL")?;
    let key = std::env::var("KEY")?;
    let client = async_nats::connect(url).await?;
    let mut events = client.subscribe(format!("{CHANGED_PREFIX}.>")).await?;
    tokio::spawn(async move { while events.next().await.is_some() {} });
    let mut requests = client
        .queue_subscribe(SUBJECT_RENEW, QUEUE_GROUP.into())
        .await?;
    let subject = key_subject(&key);
    while let Some(msg) = requests.next().await {
        let (client, subject) = (client.clone(), subject.clone());
        tokio::spawn(async move {
            if let Err(err) = renew(&client, subject, msg).await {
                eprintln!("renew-floor: {err}");
            }
        });
    }
    Ok(())
}

async fn renew(client: &Client, subject: String, msg: Message) -> Result<(), async_nats::Error> {
    let reply = msg.reply.ok_or("a request without a reply subject")?;
    let revision = number_after(&msg.payload, br#""revision":"#)?;
    let mut headers = HeaderMap::new();
    headers.insert(HEADER_EXPECTED_SEQ, revision.to_string().as_str());
    headers.insert(HEADER_TTL, "60s");
    headers.insert(HEADER_EVENT, "renewed");
    let ack = client
        .request_with_headers(subject, headers, RECORD.into())
        .await?;
    let seq = number_after(&ack.payload, br#""seq":"#)?;
    let answer = format!(r#"{{"granted":true,"revision":{seq}}}"#);
    client.publish(reply, answer.into()).await?;
    Ok(())
}

/// The whole number after `label` (and any spaces) in `body`.
fn number_after(body: &[u8], label: &[u8]) -> Result<u64, async_nats::Error> {
    let at = body
        .windows(label.len())
        .position(|w| w == label)
        .ok_or_else(|| {
            format!(
                "no {} in {}",
                String::from_utf8_lossy(label),
                String::from_utf8_lossy(body)
            )
        })?;
    let digits: String = body[at + label.len()..]
        .iter()
        .skip_while(|b| b.is_ascii_whitespace())
        .take_while(|b| b.is_ascii_digit())
        .map(|&b| b as char)
        .collect();
    Ok(digits.parse()?)
}
