//! The policy file (`--policy FILE`, TOML): an array of tables
//! `[[principal]]`, each checked as it is read. Anything wrong stops the
//! start with a message naming the line (docs/protocol.md, Authorization).
//!
//! A message never quotes a token field's value: whoever wrote a token
//! where its digest belongs must not find it in a log.

use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use super::{Identity, Principal, Right, TokenDigest};
use dagnats_leases_wire::request::{KeyPrefix, MAX_NAME_LEN};

/// Why a policy file cannot be used: the line it names, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PolicyError {
    /// 1-based; `None` when the fault is the file as a whole.
    pub(crate) line: Option<usize>,
    pub(crate) message: String,
}

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    #[serde(default)]
    principal: Vec<Spanned<Entry>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: Spanned<String>,
    nats_account: Option<Spanned<String>>,
    nats_user: Option<Spanned<String>>,
    http_token_sha256: Option<Spanned<String>>,
    local: Option<Spanned<bool>>,
    prefixes: Spanned<Vec<Spanned<String>>>,
    rights: Spanned<Vec<Spanned<String>>>,
}

/// A principal as read from the file, with the line it starts on.
pub(crate) struct Parsed {
    pub(crate) principal: Principal,
    pub(crate) identity: Identity,
    /// 1-based; 0 for the principals of the HTTP token settings, which no
    /// line of the file declares.
    pub(crate) line: usize,
}

/// Reads `text`, a whole policy file, into its principals, in file order.
/// Names are unique; identities are checked against each other by the
/// caller, which also knows the principals of the HTTP token settings.
pub(crate) fn parse(text: &str) -> Result<Vec<Parsed>, PolicyError> {
    let at = |span: Range<usize>| line_of(text, span.start);
    let document: Document = toml::from_str(text).map_err(|err| PolicyError {
        line: err.span().map(&at),
        // `message()`, not the error's Display: that quotes the line, which
        // may hold a token.
        message: err.message().to_string(),
    })?;
    if document.principal.is_empty() {
        return Err(PolicyError {
            line: None,
            message: "the policy names no [[principal]]: every request would be forbidden".into(),
        });
    }
    let mut parsed: Vec<Parsed> = Vec::with_capacity(document.principal.len());
    for entry in document.principal {
        let line = at(entry.span());
        let entry = entry.into_inner();
        let fail = |span: Range<usize>, message: String| PolicyError {
            line: Some(at(span)),
            message,
        };
        let name = check_name(&entry.name).map_err(|msg| fail(entry.name.span(), msg))?;
        if let Some(first) = parsed.iter().find(|p| *p.principal.name == *name) {
            return Err(fail(
                entry.name.span(),
                format!(
                    "principal name {name:?} is used twice (first on line {})",
                    first.line
                ),
            ));
        }
        let identity = identity(&entry, line).map_err(|(span, msg)| fail(span, msg))?;
        let prefixes = prefixes(&entry.prefixes).map_err(|(span, msg)| fail(span, msg))?;
        let right = rights(&entry.rights).map_err(|(span, msg)| fail(span, msg))?;
        parsed.push(Parsed {
            principal: Principal {
                name: name.into(),
                prefixes,
                right,
            },
            identity,
            line,
        });
    }
    Ok(parsed)
}

/// Names of the principals the HTTP token settings stand for: a policy
/// may not use them for a principal of its own.
pub(crate) const RESERVED_NAMES: [&str; 2] = ["DAGNATS_HTTP_TOKEN", "DAGNATS_HTTP_READ_TOKEN"];

fn check_name(name: &Spanned<String>) -> Result<String, String> {
    let name = name.get_ref();
    let valid = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid {
        return Err(format!(
            "principal name must be 1 to {MAX_NAME_LEN} bytes of [A-Za-z0-9_-], got {name:?}"
        ));
    }
    if RESERVED_NAMES.contains(&name.as_str()) {
        return Err(format!(
            "principal name {name:?} is reserved for the principal of that HTTP token setting"
        ));
    }
    Ok(name.clone())
}

type Fault = (Range<usize>, String);

/// The one thing that identifies the entry's callers.
fn identity(entry: &Entry, line: usize) -> Result<Identity, Fault> {
    let local = entry.local.as_ref().filter(|local| *local.get_ref());
    let given = [
        entry
            .nats_account
            .as_ref()
            .map(|s| (s.span(), "nats_account")),
        entry
            .http_token_sha256
            .as_ref()
            .map(|s| (s.span(), "http_token_sha256")),
        local.map(|s| (s.span(), "local = true")),
    ];
    let mut given = given.into_iter().flatten();
    let first = given.next();
    if let Some((span, second)) = given.next() {
        let (_, first) = first.expect("a second implies a first");
        return Err((
            span,
            format!("a principal has one identity, not both {first} and {second}"),
        ));
    }
    if let Some(user) = &entry.nats_user
        && entry.nats_account.is_none()
    {
        return Err((
            user.span(),
            "nats_user needs the nats_account it belongs to".into(),
        ));
    }
    if let Some(account) = &entry.nats_account {
        let name = account.get_ref();
        if !is_subject_token(name) {
            return Err((
                account.span(),
                format!(
                    "nats_account {name:?} is not a NATS account name (one subject token: no spaces, dots or wildcards)"
                ),
            ));
        }
        let user = match &entry.nats_user {
            Some(user) if user.get_ref().is_empty() => {
                return Err((user.span(), "nats_user is empty".into()));
            }
            user => user.as_ref().map(|user| user.get_ref().clone()),
        };
        return Ok(Identity::Nats {
            account: name.clone(),
            user,
        });
    }
    if let Some(token) = &entry.http_token_sha256 {
        return token_digest(token.get_ref())
            .map(Identity::Token)
            .ok_or_else(|| {
                (
                    token.span(),
                    "http_token_sha256 must be 64 hex digits: the SHA-256 of the bearer token, never the token itself"
                        .into(),
                )
            });
    }
    if local.is_some() {
        return Ok(Identity::Local);
    }
    Err((
        entry.name.span(),
        format!(
            "the principal on line {line} has no identity: give it nats_account, http_token_sha256 or local = true"
        ),
    ))
}

/// Whether `name` can stand in a subject as one token (an account's
/// events and inbox are routed under its name).
fn is_subject_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'.' | b'*' | b'>'))
}

fn token_digest(hex: &str) -> Option<TokenDigest> {
    if hex.len() != 64 {
        return None;
    }
    let mut digest = [0u8; 32];
    for (byte, pair) in digest.iter_mut().zip(hex.as_bytes().chunks(2)) {
        let pair = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(digest)
}

fn prefixes(list: &Spanned<Vec<Spanned<String>>>) -> Result<Vec<KeyPrefix>, Fault> {
    if list.get_ref().is_empty() {
        return Err((
            list.span(),
            "prefixes is empty: the principal could touch no key (\"\" is every key)".into(),
        ));
    }
    list.get_ref()
        .iter()
        .map(|prefix| {
            KeyPrefix::try_from(prefix.get_ref().clone()).map_err(|msg| (prefix.span(), msg))
        })
        .collect()
}

/// The highest right listed: each includes those before it (read, hold,
/// admin).
fn rights(list: &Spanned<Vec<Spanned<String>>>) -> Result<Right, Fault> {
    let mut highest = None;
    for right in list.get_ref() {
        let parsed = Right::parse(right.get_ref()).ok_or_else(|| {
            (
                right.span(),
                format!(
                    "unknown right {:?}: the rights are \"read\", \"hold\" and \"admin\"",
                    right.get_ref()
                ),
            )
        })?;
        highest = highest.max(Some(parsed));
    }
    highest.ok_or_else(|| {
        (
            list.span(),
            "rights is empty: give the principal \"read\", \"hold\" or \"admin\"".into(),
        )
    })
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    1 + text.as_bytes()[..offset]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}
