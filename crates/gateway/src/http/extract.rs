//! Extractors whose every rejection is an [`ApiError`], so a bad path,
//! query, content type or body gets the same `{"error", "kind"}` body as
//! any other failure, and requests decode exactly as on NATS.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;

use super::error::ApiError;
use crate::core::LeaseError;
use dagnats_leases_wire::kind::Kind;
use dagnats_leases_wire::request::decode_keyed;

/// The `{key}` segment of the path, unchecked (the request type checks it,
/// with the same sentence as on NATS).
pub(crate) struct KeyPath(pub(crate) String);

impl<S: Send + Sync> FromRequestParts<S> for KeyPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(key) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|err| LeaseError::Invalid(format!("invalid key in the path: {err}")))?;
        Ok(KeyPath(key))
    }
}

/// The query string decoded into `T`.
pub(crate) struct QueryOf<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryOf<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(query) = Query::<T>::from_request_parts(parts, state)
            .await
            .map_err(|err| LeaseError::Invalid(format!("invalid query: {}", err.body_text())))?;
        Ok(QueryOf(query))
    }
}

/// A query parameter as a request field: the query is text, so a whole
/// number in it is read as a number; anything else stays text, for the
/// request type to refuse with its own sentence.
pub fn query_field(value: Option<serde_json::Value>) -> serde_json::Value {
    match value {
        Some(serde_json::Value::String(text)) => text
            .parse::<u64>()
            .map_or(serde_json::Value::String(text), serde_json::Value::from),
        Some(other) => other,
        None => serde_json::Value::Null,
    }
}

/// The header `name` as a whole number of milliseconds, if sent; any other
/// value is `invalid`, as on NATS.
pub(crate) fn header_ms(headers: &HeaderMap, name: &str) -> Result<Option<Duration>, ApiError> {
    let Some(value) = headers.get(name) else {
        return Ok(None);
    };
    let text = value.to_str().map_err(|_| {
        LeaseError::Invalid(format!(
            "{name} must be a whole number of milliseconds, not {value:?}"
        ))
    })?;
    Ok(Some(crate::core::header_millis(name, text)?))
}

/// The whole request body, within the body limit.
pub(crate) struct Body(pub(crate) Bytes);

/// Raw bytes in the OpenAPI document (forward's raw mode).
impl utoipa::PartialSchema for Body {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                utoipa::openapi::KnownFormat::Binary,
            )))
            .description(Some("Raw bytes, forwarded as they are."))
            .into()
    }
}

impl utoipa::ToSchema for Body {
    fn name() -> std::borrow::Cow<'static, str> {
        "RawBytes".into()
    }
}

impl<S: Send + Sync> FromRequest<S> for Body {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|err: BytesRejection| {
                if err.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::front(
                        Kind::BodyTooLarge,
                        format!(
                            "the request body is over the gateway's limit: {}",
                            err.body_text()
                        ),
                    )
                } else {
                    LeaseError::Invalid(format!("could not read the body: {}", err.body_text()))
                        .into()
                }
            })?;
        Ok(Body(bytes))
    }
}

/// Whether the request says its body is JSON (`application/json` or a
/// `+json` type).
pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or_default().trim();
    let essence = essence.to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// A lease request: the key from the path, the other fields from a JSON
/// body, decoded exactly as the NATS front decodes its requests.
pub(crate) struct LeaseJson<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for LeaseJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let (mut parts, body) = req.into_parts();
        let KeyPath(key) = KeyPath::from_request_parts(&mut parts, state).await?;
        if !is_json(&parts.headers) {
            return Err(LeaseError::Invalid(
                "the body must be JSON, sent with Content-Type: application/json".into(),
            )
            .into());
        }
        let Body(body) = Body::from_request(Request::from_parts(parts, body), state).await?;
        Ok(LeaseJson(decode_keyed(&key, &body)?))
    }
}
