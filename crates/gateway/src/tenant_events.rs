//! Change events for tenant accounts (docs/operations.md, Tenants in
//! their own accounts): the server republishes every write on
//! `dagnats.lease.changed.<key>` in the gateways' account, where a plain
//! export would show every tenant every key. So each event is published
//! again, headers and body unchanged, on
//! `dagnats.tenant.<account>.lease.changed.<key>` for each account with a
//! principal that may read the key, which that account alone imports as
//! `dagnats.lease.changed.>`.
//!
//! The gateways share one queue-group subscription for this, so each event
//! is republished once whatever the number of gateways.

use std::sync::Arc;

use async_nats::{Client, Subscriber};
use tokio_util::sync::CancellationToken;

use crate::events::next_until;
use crate::policy::Policy;
use dagnats_leases_wire::ChangeEvent;
use dagnats_leases_wire::names::{
    CHANGED_PREFIX, TENANT_EVENTS_QUEUE_GROUP, tenant_changed_subject,
};

/// Joins the gateways' queue group on every change event; returns once
/// the server knows.
pub(crate) async fn subscribe(client: &Client) -> Result<Subscriber, async_nats::Error> {
    let sub = client
        .queue_subscribe(
            format!("{CHANGED_PREFIX}.>"),
            TENANT_EVENTS_QUEUE_GROUP.to_string(),
        )
        .await?;
    client.flush().await?;
    Ok(sub)
}

/// Republishes each event `sub` receives to the accounts that may read its
/// key, until `stop`.
pub(crate) async fn republish(
    client: Client,
    mut sub: Subscriber,
    policy: Arc<Policy>,
    stop: CancellationToken,
) {
    loop {
        let Some(msg) = next_until(&mut sub, &stop).await else {
            return;
        };
        let Some(key) = ChangeEvent::key_of(msg.subject.as_str()) else {
            continue;
        };
        for account in policy.accounts_reading(key) {
            let subject = tenant_changed_subject(account, key);
            let sent = match &msg.headers {
                Some(headers) => {
                    client
                        .publish_with_headers(subject, headers.clone(), msg.payload.clone())
                        .await
                }
                None => client.publish(subject, msg.payload.clone()).await,
            };
            if let Err(err) = sent {
                tracing::warn!(%err, key, account, "could not republish a change event");
            }
        }
    }
}
