//! The API description: `/openapi.json` is the committed
//! `openapi/leases.json`, and `/docs` renders it with nothing from the
//! network.
//!
//! After changing the API, regenerate the committed copy with
//! `DAGNATS_UPDATE_OPENAPI=1 cargo test -p dagnats-leases --test it http_docs`.

use crate::common::{Http, Setup};
use serde_json::Value;

const COMMITTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../openapi/leases.json");

/// Every path of docs/protocol.md, HTTP front, that the document describes.
const PATHS: &[&str] = &[
    "/v1/leases/{key}/acquire",
    "/v1/leases/{key}/renew",
    "/v1/leases/{key}/release",
    "/v1/leases/{key}/transfer",
    "/v1/leases/{key}",
    "/v1/leases",
    "/v1/leases/{key}/forward",
    "/v1/events",
    "/v1/cluster",
    "/healthz",
    "/readyz",
    "/metrics",
];

async fn served(http: &Http, path: &str) -> (String, String) {
    let resp = http
        .request(reqwest::Method::GET, path)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_string();
    (content_type, resp.text().await.unwrap())
}

#[tokio::test]
async fn the_served_openapi_document_is_the_committed_one() {
    let s = Setup::start().await;
    let http = Http::of(&s.gateway).await;
    let (content_type, text) = served(&http, "/openapi.json").await;
    assert_eq!(content_type, "application/json");
    if std::env::var_os("DAGNATS_UPDATE_OPENAPI").is_some() {
        std::fs::write(COMMITTED, &text).unwrap();
    }
    let committed = std::fs::read_to_string(COMMITTED).unwrap_or_default();
    assert!(
        committed == text,
        "openapi/leases.json is not the served document; regenerate it with \
         DAGNATS_UPDATE_OPENAPI=1 cargo test -p dagnats-leases --test it http_docs"
    );
}

#[tokio::test]
async fn the_openapi_document_is_3_1_and_describes_every_endpoint() {
    let s = Setup::start().await;
    let http = Http::of(&s.gateway).await;
    let doc: Value = serde_json::from_str(&served(&http, "/openapi.json").await.1).unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    for path in PATHS {
        assert!(doc["paths"].get(path).is_some(), "{path} missing");
    }
    for schema in [
        "Grant",
        "Lease",
        "Owner",
        "Released",
        "Forwarded",
        "LeaseList",
        "ErrorBody",
    ] {
        assert!(
            doc["components"]["schemas"].get(schema).is_some(),
            "{schema} missing"
        );
    }
    // The body over HTTP has no key: it is the path's.
    let acquire = &doc["components"]["schemas"]["AcquireRequest"];
    assert!(acquire["properties"].get("key").is_none(), "{acquire}");
    assert_eq!(acquire["required"], serde_json::json!(["holder", "ttl_ms"]));
    let transfer = &doc["components"]["schemas"]["TransferRequest"];
    assert!(transfer["properties"].get("key").is_none(), "{transfer}");
    assert_eq!(
        transfer["required"],
        serde_json::json!(["holder", "revision", "to", "ttl_ms"])
    );
    // A page of the list names where the next one starts.
    let list = &doc["components"]["schemas"]["LeaseList"];
    assert_eq!(list["required"], serde_json::json!(["leases", "next"]));
    let params: Vec<&str> = doc["paths"]["/v1/leases"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(params, ["prefix", "after", "limit"]);
}

#[tokio::test]
async fn the_docs_page_lists_every_endpoint_and_loads_nothing_from_the_network() {
    let s = Setup::start().await;
    let http = Http::of(&s.gateway).await;
    let (content_type, page) = served(&http, "/docs").await;
    assert!(content_type.starts_with("text/html"), "{content_type}");
    for path in PATHS {
        assert!(
            page.contains(&format!("<code>{path}</code>")),
            "{path} missing"
        );
    }
    for remote in ["http://", "https://", "<script", "<link", "@import"] {
        assert!(!page.contains(remote), "the page refers to {remote}");
    }
}
