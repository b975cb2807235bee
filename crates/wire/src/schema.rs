//! utoipa schemas of the validated wire types (feature `openapi`): the
//! bounds the decoders enforce, stated once more for the OpenAPI document;
//! and the error responses of an operation, from the kind table.

use std::collections::BTreeMap;

use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Response, ResponseBuilder, Schema};
use utoipa::{PartialSchema, ToSchema};

use crate::kind::Kind;

use crate::request::{
    ForwardTimeout, HolderId, KeyPrefix, LeaseKey, ListLimit, MAX_FORWARD_TIMEOUT_MS,
    MAX_LIST_LIMIT, MAX_NAME_LEN, MAX_TTL_MS, MIN_FORWARD_TIMEOUT_MS, MIN_TTL_MS, Payload,
    PrincipalName, Revision, Ttl,
};

/// The OpenAPI schema of a key or holder id (same rule as the decoders).
fn name_schema(description: &str, min_length: usize) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some("^[A-Za-z0-9_-]*$"))
        .min_length(Some(min_length))
        .max_length(Some(MAX_NAME_LEN))
        .description(Some(description))
        .into()
}

/// The OpenAPI schema of a bounded whole number of milliseconds.
fn millis_schema(description: &str, min: u64, max: u64, step: Option<u64>) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        .minimum(Some(min as f64))
        .maximum(Some(max as f64))
        .multiple_of(step.map(|s| s as f64))
        .description(Some(description))
        .into()
}

impl PartialSchema for LeaseKey {
    fn schema() -> RefOr<Schema> {
        name_schema("A lease key: 1 to 128 bytes of [A-Za-z0-9_-].", 1)
    }
}
impl ToSchema for LeaseKey {}

impl PartialSchema for HolderId {
    fn schema() -> RefOr<Schema> {
        name_schema(
            "A holder id, unique per process: 1 to 128 bytes of [A-Za-z0-9_-].",
            1,
        )
    }
}
impl ToSchema for HolderId {}

impl PartialSchema for PrincipalName {
    fn schema() -> RefOr<Schema> {
        name_schema(
            "The name of a principal of the gateway's policy: 1 to 128 bytes of [A-Za-z0-9_-].",
            1,
        )
    }
}
impl ToSchema for PrincipalName {}

impl PartialSchema for KeyPrefix {
    fn schema() -> RefOr<Schema> {
        name_schema("A key prefix: 0 to 128 bytes of [A-Za-z0-9_-].", 0)
    }
}
impl ToSchema for KeyPrefix {}

impl PartialSchema for Ttl {
    fn schema() -> RefOr<Schema> {
        millis_schema(
            "Lease TTL in milliseconds: whole seconds from 1000 to 600000.",
            MIN_TTL_MS,
            MAX_TTL_MS,
            Some(1_000),
        )
    }
}
impl ToSchema for Ttl {}

impl PartialSchema for Revision {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
            .minimum(Some(1f64))
            .description(Some(
                "The fence from your last reply (a KV revision), never 0.",
            ))
            .into()
    }
}
impl ToSchema for Revision {}

impl PartialSchema for ForwardTimeout {
    fn schema() -> RefOr<Schema> {
        millis_schema(
            "How long the whole forward may take, in milliseconds (100 to 30000; default 5000).",
            MIN_FORWARD_TIMEOUT_MS,
            MAX_FORWARD_TIMEOUT_MS,
            None,
        )
    }
}
impl ToSchema for ForwardTimeout {}

impl PartialSchema for ListLimit {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
            .minimum(Some(1f64))
            .maximum(Some(MAX_LIST_LIMIT as f64))
            .description(Some(
                "At most this many leases (1 to 5000); over HTTP without it, every lease.",
            ))
            .into()
    }
}
impl ToSchema for ListLimit {}

impl PartialSchema for Payload {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .content_encoding("base64")
            .pattern(Some(
                "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$",
            ))
            .description(Some("Bytes, base64-encoded (standard alphabet, padded)."))
            .into()
    }
}
impl ToSchema for Payload {}

/// The OpenAPI responses of an operation that fails with `kinds`: one per
/// HTTP status ([`Kind::http_status`]), its description naming the kinds
/// that share it, its body the `ErrorBody` schema. The document cannot name
/// a status the replies do not send.
pub fn error_responses(kinds: &[Kind]) -> BTreeMap<String, RefOr<Response>> {
    let mut by_status: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    for kind in kinds {
        by_status
            .entry(kind.http_status())
            .or_default()
            .push(format!("`{kind}`"));
    }
    by_status
        .into_iter()
        .map(|(status, names)| {
            let body = ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build();
            let response = ResponseBuilder::new()
                .description(names.join(" or "))
                .content("application/json", body)
                .build();
            (status.to_string(), response.into())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_responses_give_each_status_once_with_every_kind_that_shares_it() {
        let responses = error_responses(&[Kind::PayloadTooLarge, Kind::Lost, Kind::BodyTooLarge]);
        let described: Vec<(String, String)> = responses
            .into_iter()
            .map(|(status, response)| match response {
                RefOr::T(r) => (status, r.description),
                RefOr::Ref(_) => panic!("{status} is a reference"),
            })
            .collect();
        assert_eq!(
            described,
            [
                ("409".to_string(), "`lost`".to_string()),
                (
                    "413".to_string(),
                    "`payload_too_large` or `body_too_large`".to_string()
                ),
            ]
        );
    }
}
