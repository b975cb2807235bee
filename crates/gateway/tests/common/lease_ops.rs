//! The lease operations as one-line calls, so a test states the scenario
//! rather than the JSON: request bodies for NATS, and shorthands on
//! [`Setup`] (NATS) and [`Http`] (the HTTP front) that send them.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use super::{Http, HttpReply, Setup, eventually};

/// The body of `api.leases.acquire`.
pub fn acquire(key: &str, holder: &str, ttl_ms: u64) -> Value {
    json!({"key": key, "holder": holder, "ttl_ms": ttl_ms})
}

/// The body of `api.leases.renew`.
pub fn renew(key: &str, holder: &str, revision: impl Serialize, ttl_ms: u64) -> Value {
    json!({"key": key, "holder": holder, "revision": revision, "ttl_ms": ttl_ms})
}

/// The body of `api.leases.release`.
pub fn release(key: &str, holder: &str, revision: impl Serialize) -> Value {
    json!({"key": key, "holder": holder, "revision": revision})
}

/// The body of `api.leases.transfer`.
pub fn transfer(key: &str, holder: &str, revision: impl Serialize, to: &str, ttl_ms: u64) -> Value {
    json!({"key": key, "holder": holder, "revision": revision, "to": to, "ttl_ms": ttl_ms})
}

impl Setup {
    /// `api.leases.acquire`; the reply.
    pub async fn acquire(&self, key: &str, holder: &str, ttl_ms: u64) -> Value {
        self.call("acquire", acquire(key, holder, ttl_ms)).await
    }

    /// `api.leases.renew`; the reply.
    pub async fn renew(
        &self,
        key: &str,
        holder: &str,
        revision: impl Serialize,
        ttl_ms: u64,
    ) -> Value {
        self.call("renew", renew(key, holder, revision, ttl_ms))
            .await
    }

    /// `api.leases.release`; the reply.
    pub async fn release(&self, key: &str, holder: &str, revision: impl Serialize) -> Value {
        self.call("release", release(key, holder, revision)).await
    }

    /// `api.leases.transfer`; the reply.
    pub async fn transfer(
        &self,
        key: &str,
        holder: &str,
        revision: impl Serialize,
        to: &str,
        ttl_ms: u64,
    ) -> Value {
        self.call("transfer", transfer(key, holder, revision, to, ttl_ms))
            .await
    }

    /// `api.leases.list` with a JSON body; the reply.
    pub async fn list(&self, body: Value) -> Value {
        self.call("list", body).await
    }

    /// `api.leases.owner`; the reply.
    pub async fn owner(&self, key: &str) -> Value {
        self.call("owner", json!({"key": key})).await
    }

    /// Waits up to 5 s for `key` to be free (`owner` says `held: false`):
    /// how a test waits out a short TTL.
    pub async fn wait_free(&self, what: &str, key: &str) {
        eventually(what, Duration::from_secs(5), || async {
            (self.owner(key).await["held"] == false).then_some(())
        })
        .await
    }
}

impl Http {
    /// `POST /v1/leases/{key}/acquire`.
    pub async fn acquire(&self, key: &str, holder: &str, ttl_ms: u64) -> HttpReply {
        let body = json!({"holder": holder, "ttl_ms": ttl_ms});
        self.post(&format!("/v1/leases/{key}/acquire"), body).await
    }

    /// `POST /v1/leases/{key}/renew`.
    pub async fn renew(
        &self,
        key: &str,
        holder: &str,
        revision: impl Serialize,
        ttl_ms: u64,
    ) -> HttpReply {
        let body = json!({"holder": holder, "revision": revision, "ttl_ms": ttl_ms});
        self.post(&format!("/v1/leases/{key}/renew"), body).await
    }

    /// `POST /v1/leases/{key}/transfer`.
    pub async fn transfer(
        &self,
        key: &str,
        holder: &str,
        revision: impl Serialize,
        to: &str,
        ttl_ms: u64,
    ) -> HttpReply {
        let body = json!({"holder": holder, "revision": revision, "to": to, "ttl_ms": ttl_ms});
        self.post(&format!("/v1/leases/{key}/transfer"), body).await
    }

    /// `POST /v1/leases/{key}/release`.
    pub async fn release(&self, key: &str, holder: &str, revision: impl Serialize) -> HttpReply {
        let body = json!({"holder": holder, "revision": revision});
        self.post(&format!("/v1/leases/{key}/release"), body).await
    }
}
