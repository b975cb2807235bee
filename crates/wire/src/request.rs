//! Requests, validated as they are decoded: a request type can only hold values
//! inside the input bounds (docs/protocol.md, Input bounds), so nothing
//! downstream ever sees an unchecked key, holder, TTL or fence, and every front
//! (and the client, before it sends) applies the same rules.

use std::time::Duration;

use base64::Engine;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Longest key or holder id, in bytes.
pub const MAX_NAME_LEN: usize = 128;
/// Shortest lease: "ttl_ms is a whole number of seconds from 1000 (1s)".
pub const MIN_TTL_MS: u64 = 1_000;
/// Longest lease: "... to 600000 (10m)".
pub const MAX_TTL_MS: u64 = 600_000;

fn check_name(field: &str, value: &str) -> Result<(), String> {
    let valid_chars = value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if value.is_empty() || value.len() > MAX_NAME_LEN || !valid_chars {
        return Err(format!(
            "{field} must be 1 to {MAX_NAME_LEN} bytes of [A-Za-z0-9_-], got {value:?}"
        ));
    }
    Ok(())
}

/// A lease key: `[A-Za-z0-9_-]`, 1 to 128 bytes, exactly one subject token.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub struct LeaseKey(String);

impl TryFrom<String> for LeaseKey {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        check_name("key", &value).map(|()| LeaseKey(value))
    }
}

impl LeaseKey {
    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A holder id, under the same rule as a key; unique per process.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub struct HolderId(String);

impl TryFrom<String> for HolderId {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        check_name("holder", &value).map(|()| HolderId(value))
    }
}

impl HolderId {
    /// The holder id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The name of a policy's principal, under the same rule as a key
/// (docs/protocol.md, Authorization).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub struct PrincipalName(String);

impl TryFrom<String> for PrincipalName {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        check_name("principal", &value).map(|()| PrincipalName(value))
    }
}

impl PrincipalName {
    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A JSON number with no fractional part, however it is written. The
/// OpenAPI document calls these fields integers, and JSON Schema counts
/// `15000.0` and `1.5e4` as the integer 15000, as do clients whose numbers
/// are all floats; `1000.5`, negatives and strings stay invalid.
pub struct WholeNumber(u64);

impl WholeNumber {
    /// The number read.
    pub(crate) fn get(self) -> u64 {
        self.0
    }
}

/// Beyond 2^53 a float no longer holds every whole number exactly.
const MAX_EXACT_FLOAT: f64 = 9_007_199_254_740_992.0;

impl<'de> Deserialize<'de> for WholeNumber {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = WholeNumber;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a whole number")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<WholeNumber, E> {
                Ok(WholeNumber(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<WholeNumber, E> {
                u64::try_from(v)
                    .map(WholeNumber)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &self))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<WholeNumber, E> {
                if v.fract() == 0.0 && (0.0..=MAX_EXACT_FLOAT).contains(&v) {
                    Ok(WholeNumber(v as u64))
                } else {
                    Err(E::invalid_value(serde::de::Unexpected::Float(v), &self))
                }
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// Wire numbers go through [`WholeNumber`], then the type's own bounds.
macro_rules! from_whole_number {
    ($($ty:ty),*) => {$(
        impl TryFrom<WholeNumber> for $ty {
            type Error = String;
            fn try_from(WholeNumber(n): WholeNumber) -> Result<Self, String> {
                <$ty>::try_from(n)
            }
        }
    )*};
}
from_whole_number!(Ttl, Revision, ForwardTimeout, ListLimit);

/// A lease TTL: whole seconds from 1 s to 10 min. The server truncates a
/// message TTL to whole seconds, so anything else is refused, not rounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "WholeNumber", into = "u64")]
pub struct Ttl(u64);

impl TryFrom<u64> for Ttl {
    type Error = String;
    fn try_from(ms: u64) -> Result<Self, String> {
        if !(MIN_TTL_MS..=MAX_TTL_MS).contains(&ms) || !ms.is_multiple_of(1_000) {
            return Err(format!(
                "ttl_ms must be a whole number of seconds from {MIN_TTL_MS} to {MAX_TTL_MS}, got {ms}"
            ));
        }
        Ok(Ttl(ms))
    }
}

impl From<Ttl> for u64 {
    fn from(ttl: Ttl) -> u64 {
        ttl.0
    }
}

impl Ttl {
    /// The TTL in milliseconds, as on the wire.
    pub fn as_millis(self) -> u64 {
        self.0
    }

    /// The TTL as a duration.
    pub fn duration(self) -> Duration {
        Duration::from_millis(self.0)
    }

    /// The `Nats-TTL` header value: whole seconds, e.g. `15s`.
    pub fn header_value(self) -> String {
        format!("{}s", self.0 / 1_000)
    }
}

/// A fence from an earlier reply: a KV revision, never 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "WholeNumber", into = "u64")]
pub struct Revision(u64);

impl TryFrom<u64> for Revision {
    type Error = String;
    fn try_from(value: u64) -> Result<Self, String> {
        if value == 0 {
            return Err("revision must be the fence from your last reply, not 0".into());
        }
        Ok(Revision(value))
    }
}

impl From<Revision> for u64 {
    fn from(rev: Revision) -> u64 {
        rev.0
    }
}

impl Revision {
    /// The fence as a number.
    pub fn get(self) -> u64 {
        self.0
    }
}

/// `api.leases.acquire`: take the key if nobody holds it.
///
/// Over HTTP the key is the path's and the body holds the other fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AcquireRequest {
    #[cfg_attr(feature = "openapi", schema(ignore))]
    pub key: LeaseKey,
    pub holder: HolderId,
    pub ttl_ms: Ttl,
}

/// `api.leases.renew`: extend the lease to `ttl_ms` from now.
///
/// Over HTTP the key is the path's and the body holds the other fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RenewRequest {
    #[cfg_attr(feature = "openapi", schema(ignore))]
    pub key: LeaseKey,
    pub holder: HolderId,
    pub revision: Revision,
    pub ttl_ms: Ttl,
}

/// `api.leases.release`: free the key under the fence check.
///
/// Over HTTP the key is the path's and the body holds the other fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReleaseRequest {
    #[cfg_attr(feature = "openapi", schema(ignore))]
    pub key: LeaseKey,
    pub holder: HolderId,
    pub revision: Revision,
}

/// Forward timeouts: "timeout_ms on forward is 100 to 30000".
pub const MIN_FORWARD_TIMEOUT_MS: u64 = 100;
/// See [`MIN_FORWARD_TIMEOUT_MS`].
pub const MAX_FORWARD_TIMEOUT_MS: u64 = 30_000;
/// `timeout_ms` when a forward leaves it out or sends null.
pub const DEFAULT_FORWARD_TIMEOUT_MS: u64 = 5_000;

/// How long a whole forward call may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "WholeNumber", into = "u64")]
pub struct ForwardTimeout(u64);

impl TryFrom<u64> for ForwardTimeout {
    type Error = String;
    fn try_from(ms: u64) -> Result<Self, String> {
        if !(MIN_FORWARD_TIMEOUT_MS..=MAX_FORWARD_TIMEOUT_MS).contains(&ms) {
            return Err(format!(
                "timeout_ms must be from {MIN_FORWARD_TIMEOUT_MS} to {MAX_FORWARD_TIMEOUT_MS}, got {ms}"
            ));
        }
        Ok(ForwardTimeout(ms))
    }
}

impl From<ForwardTimeout> for u64 {
    fn from(timeout: ForwardTimeout) -> u64 {
        timeout.0
    }
}

impl Default for ForwardTimeout {
    fn default() -> Self {
        ForwardTimeout(DEFAULT_FORWARD_TIMEOUT_MS)
    }
}

impl ForwardTimeout {
    /// The timeout as a duration.
    pub fn duration(self) -> Duration {
        Duration::from_millis(self.0)
    }
}

/// Bytes that travel base64-encoded in JSON.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Payload(pub bytes::Bytes);

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(&self.0))
    }
}

/// Standard base64 that, like Go's and Python's decoders, ignores set bits
/// after the last whole byte (`CV0C4N==` is `CV0C4A==`): encoders differ
/// there, and the bytes meant are not in doubt.
const LENIENT_BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::general_purpose::PAD.with_decode_allow_trailing_bits(true),
);

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        LENIENT_BASE64
            .decode(text)
            .map(|bytes| Payload(bytes.into()))
            .map_err(|err| serde::de::Error::custom(format!("payload is not base64: {err}")))
    }
}

/// `api.leases.forward`: deliver `payload` to whoever holds `key`.
///
/// Over HTTP the key is the path's and the body holds the other fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ForwardRequest {
    #[cfg_attr(feature = "openapi", schema(ignore))]
    pub key: LeaseKey,
    pub payload: Payload,
    /// Bounds the whole call; absent or null means 5000.
    #[serde(default, deserialize_with = "null_as_default")]
    #[cfg_attr(feature = "openapi", schema(required = false))]
    pub timeout_ms: ForwardTimeout,
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// `api.leases.owner`: who holds the key, with no side effects.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OwnerRequest {
    pub key: LeaseKey,
}

/// A request that breaks the rules: the sentence names the field and why.
/// Every front answers it with kind `invalid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub String);

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Invalid {}

/// Decodes a request body. Only a JSON object is a request; unknown fields
/// are ignored, known fields of the wrong type or out of bounds are
/// `invalid`.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, Invalid> {
    // Straight into `T` when that works, skipping a `Value` on the hot
    // path. Anything that fails takes the
    // `Value` route, whose error sentences are the ones callers see; a
    // body that is not an object never tries (a struct reads from an
    // array too).
    if body.trim_ascii_start().starts_with(b"{")
        && let Ok(request) = serde_json::from_slice(body)
    {
        return Ok(request);
    }
    from_object(parse_object(body)?)
}

/// Decodes a request whose key travels outside the body (an HTTP path):
/// `key` replaces any `key` field, then the body is checked exactly as
/// [`decode`] checks it, so both fronts validate alike.
pub fn decode_keyed<T: DeserializeOwned>(key: &str, body: &[u8]) -> Result<T, Invalid> {
    let mut object = parse_object(body)?;
    object.insert("key".into(), key.into());
    from_object(object)
}

/// Builds a request from named fields (an HTTP path and query), under the
/// same checks as a JSON body.
pub fn from_fields<T: DeserializeOwned>(
    fields: impl IntoIterator<Item = (&'static str, serde_json::Value)>,
) -> Result<T, Invalid> {
    from_object(
        fields
            .into_iter()
            .map(|(name, value)| (name.to_string(), value))
            .collect(),
    )
}

fn parse_object(body: &[u8]) -> Result<serde_json::Map<String, serde_json::Value>, Invalid> {
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|err| Invalid(format!("request body is not JSON: {err}")))?;
    match value {
        serde_json::Value::Object(object) => Ok(object),
        _ => Err(Invalid("request body must be a JSON object".into())),
    }
}

fn from_object<T: DeserializeOwned>(
    object: serde_json::Map<String, serde_json::Value>,
) -> Result<T, Invalid> {
    T::deserialize(serde_json::Value::Object(object))
        .map_err(|err| Invalid(format!("invalid request: {err}")))
}

/// A key prefix for listing: up to 128 bytes of `[A-Za-z0-9_-]`, possibly
/// empty (every key).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub struct KeyPrefix(String);

impl TryFrom<String> for KeyPrefix {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        if value.is_empty() {
            return Ok(KeyPrefix(value));
        }
        check_name("prefix", &value).map(|()| KeyPrefix(value))
    }
}

impl KeyPrefix {
    /// Whether `key` starts with this prefix.
    pub fn matches(&self, key: &str) -> bool {
        key.starts_with(&self.0)
    }
}

/// The most leases one list reply may be asked for.
pub const MAX_LIST_LIMIT: u64 = 5_000;
/// How many leases `api.leases.list` answers when `limit` is absent.
pub const DEFAULT_LIST_LIMIT: u64 = 1_000;

/// How many leases one list reply may carry: 1 to 5000.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "WholeNumber", into = "u64")]
pub struct ListLimit(u64);

impl TryFrom<u64> for ListLimit {
    type Error = String;
    fn try_from(value: u64) -> Result<Self, String> {
        if !(1..=MAX_LIST_LIMIT).contains(&value) {
            return Err(format!(
                "limit must be a whole number from 1 to {MAX_LIST_LIMIT}, got {value}"
            ));
        }
        Ok(ListLimit(value))
    }
}

impl From<ListLimit> for u64 {
    fn from(limit: ListLimit) -> u64 {
        limit.0
    }
}

impl ListLimit {
    /// The NATS default, [`DEFAULT_LIST_LIMIT`].
    pub const DEFAULT: ListLimit = ListLimit(DEFAULT_LIST_LIMIT);

    /// The limit as a count.
    pub fn get(self) -> usize {
        self.0 as usize
    }
}

/// List the held leases, ordered by key: optionally only keys starting
/// with `prefix`, only keys after `after` (a previous reply's `next`), at
/// most `limit` of them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct ListRequest {
    /// Only keys starting with this prefix.
    #[serde(default, deserialize_with = "null_as_default")]
    pub prefix: KeyPrefix,
    /// Only keys sorting after this one: the `next` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<LeaseKey>,
    /// At most this many leases (1 to 5000). Over NATS the default is
    /// 1000; over HTTP, without it, every lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<ListLimit>,
}

/// `api.leases.transfer`: `holder`, holding the key at `revision`, hands it
/// to `to` for `ttl_ms` from now, in one compare-and-set write.
///
/// Over HTTP the key is the path's and the body holds the other fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(try_from = "TransferFields")]
pub struct TransferRequest {
    #[cfg_attr(feature = "openapi", schema(ignore))]
    pub key: LeaseKey,
    /// The current holder.
    pub holder: HolderId,
    /// The current holder's fence.
    pub revision: Revision,
    /// The new holder; not `holder` itself.
    pub to: HolderId,
    pub ttl_ms: Ttl,
    /// Under a policy, the principal the new tenure belongs to; only an
    /// admin may name another than itself. Absent: the caller's. Without a
    /// policy, ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_principal: Option<PrincipalName>,
}

/// A transfer's fields before the rule that spans two of them.
#[derive(Deserialize)]
struct TransferFields {
    key: LeaseKey,
    holder: HolderId,
    revision: Revision,
    to: HolderId,
    ttl_ms: Ttl,
    #[serde(default)]
    to_principal: Option<PrincipalName>,
}

impl TryFrom<TransferFields> for TransferRequest {
    type Error = String;
    fn try_from(f: TransferFields) -> Result<Self, String> {
        let transfer = TransferRequest::new(f.key, f.holder, f.revision, f.to, f.ttl_ms)?;
        Ok(TransferRequest {
            to_principal: f.to_principal,
            ..transfer
        })
    }
}

impl TransferRequest {
    /// A transfer from `holder` to `to`, which must be another holder.
    pub fn new(
        key: LeaseKey,
        holder: HolderId,
        revision: Revision,
        to: HolderId,
        ttl_ms: Ttl,
    ) -> Result<Self, String> {
        if to == holder {
            return Err(format!(
                "to must name another holder than holder, got {:?} for both",
                to.as_str()
            ));
        }
        Ok(TransferRequest {
            key,
            holder,
            revision,
            to,
            ttl_ms,
            to_principal: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid<T: DeserializeOwned + std::fmt::Debug>(body: &str) -> String {
        match decode::<T>(body.as_bytes()) {
            Err(Invalid(msg)) => msg,
            other => panic!("expected invalid for {body}, got {other:?}"),
        }
    }

    #[test]
    fn ttl_must_be_whole_seconds_in_bounds() {
        for ms in [0, 999, 1_500, 600_001, 601_000] {
            assert!(Ttl::try_from(ms).is_err(), "{ms}");
        }
        for ms in [1_000, 15_000, 600_000] {
            assert_eq!(Ttl::try_from(ms).unwrap().as_millis(), ms);
        }
        assert_eq!(Ttl::try_from(15_000).unwrap().header_value(), "15s");
    }

    #[test]
    fn names_are_one_subject_token_of_at_most_128_bytes() {
        for bad in ["", "a.b", "*", ">", "a b", "ключ", &"k".repeat(129)] {
            assert!(LeaseKey::try_from(bad.to_string()).is_err(), "{bad}");
            assert!(HolderId::try_from(bad.to_string()).is_err(), "{bad}");
        }
        assert!(LeaseKey::try_from("A-z_09".repeat(21) + "ab").is_ok());
    }

    #[test]
    fn decode_names_the_bad_field() {
        let msg = invalid::<AcquireRequest>(r#"{"key":"k","holder":"h","ttl_ms":1500}"#);
        assert!(
            msg.contains("ttl_ms must be a whole number of seconds"),
            "{msg}"
        );
        let msg = invalid::<RenewRequest>(r#"{"key":"k","holder":"h","ttl_ms":1000}"#);
        assert!(msg.contains("missing field `revision`"), "{msg}");
        let msg = invalid::<AcquireRequest>(r#"["k","h",1000]"#);
        assert!(msg.contains("JSON object"), "{msg}");
        let msg = invalid::<AcquireRequest>("nope");
        assert!(msg.contains("not JSON"), "{msg}");
    }

    #[test]
    fn forward_timeout_defaults_to_5000_when_absent_or_null() {
        for body in [
            r#"{"key":"k","payload":""}"#,
            r#"{"key":"k","payload":"","timeout_ms":null}"#,
        ] {
            let req: ForwardRequest = decode(body.as_bytes()).unwrap();
            assert_eq!(req.timeout_ms, ForwardTimeout(5_000));
        }
        let msg = invalid::<ForwardRequest>(r#"{"key":"k","payload":"","timeout_ms":99}"#);
        assert!(
            msg.contains("timeout_ms must be from 100 to 30000"),
            "{msg}"
        );
        let msg = invalid::<ForwardRequest>(r#"{"key":"k","payload":"%%%"}"#);
        assert!(msg.contains("not base64"), "{msg}");
    }

    #[test]
    fn list_limit_is_a_whole_number_from_1_to_5000() {
        for bad in ["0", "5001"] {
            let msg = invalid::<ListRequest>(&format!(r#"{{"limit":{bad}}}"#));
            assert!(
                msg.contains("limit must be a whole number from 1 to 5000"),
                "{msg}"
            );
        }
        for bad in ["1.5", "\"x\"", "-1", "[]"] {
            invalid::<ListRequest>(&format!(r#"{{"limit":{bad}}}"#));
        }
        for (body, limit) in [
            ("{}", None),
            (r#"{"limit":null}"#, None),
            (r#"{"limit":5000}"#, Some(5_000)),
        ] {
            let req: ListRequest = decode(body.as_bytes()).unwrap();
            assert_eq!(req.limit.map(ListLimit::get), limit, "{body}");
        }
    }

    #[test]
    fn list_after_follows_the_key_rules() {
        for bad in [r#""""#, r#""a.b""#, "7"] {
            invalid::<ListRequest>(&format!(r#"{{"after":{bad}}}"#));
        }
        let req: ListRequest = decode(br#"{"after":"k-1"}"#).unwrap();
        assert_eq!(req.after.unwrap().as_str(), "k-1");
    }

    #[test]
    fn transfer_to_the_holder_itself_is_invalid() {
        let msg = invalid::<TransferRequest>(
            r#"{"key":"k","holder":"a","revision":3,"to":"a","ttl_ms":1000}"#,
        );
        assert!(msg.contains("to must name another holder"), "{msg}");
        let msg = invalid::<TransferRequest>(
            r#"{"key":"k","holder":"a","revision":0,"to":"b","ttl_ms":1000}"#,
        );
        assert!(msg.contains("revision"), "{msg}");
        let req: TransferRequest =
            decode(br#"{"key":"k","holder":"a","revision":3,"to":"b","ttl_ms":1000}"#).unwrap();
        assert_eq!((req.to.as_str(), req.revision.get()), ("b", 3));
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let req: ReleaseRequest =
            decode(br#"{"key":"k","holder":"h","revision":3,"ttl_ms":1500,"x":[1]}"#).unwrap();
        assert_eq!(req.revision.get(), 3);
    }
}
