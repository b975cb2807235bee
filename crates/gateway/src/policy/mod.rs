//! Authorization (docs/protocol.md, Authorization): the principals of a
//! policy file, who a caller is, and what it may do to which keys.
//!
//! - [`access`]: one request's access, checked before the core runs it.
//! - [`file`]: the TOML file, checked line by line.
//! - [`request_info`]: the principal of a NATS request, from the
//!   `Nats-Request-Info` header the server writes on a service import.
//!
//! Without a policy none of this runs: the gateway behaves as it always
//! has.

pub(crate) mod access;
pub(crate) mod file;
pub(crate) mod request_info;

use std::path::Path;
use std::sync::Arc;

use foldhash::{HashMap, HashMapExt};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::metrics::Op;
pub(crate) use access::Access;
use dagnats_leases_wire::request::KeyPrefix;
pub(crate) use file::PolicyError;
use file::RESERVED_NAMES;
use request_info::RequestInfo;

/// A bearer token as it is kept and compared: its SHA-256 digest.
pub(crate) type TokenDigest = [u8; 32];

/// The digest a bearer token is known by.
pub(crate) fn digest(token: &str) -> TokenDigest {
    Sha256::digest(token.as_bytes()).into()
}

/// What a principal may do. Each right includes those before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Right {
    /// Owner, list, events, history and the dashboard's data.
    Read,
    /// Acquire, renew, release, transfer and forward.
    Hold,
    /// Revoke, and release or transfer a lease another principal holds.
    Admin,
}

impl Right {
    /// The right a policy file names `name`.
    pub(crate) fn parse(name: &str) -> Option<Right> {
        match name {
            "read" => Some(Right::Read),
            "hold" => Some(Right::Hold),
            "admin" => Some(Right::Admin),
            _ => None,
        }
    }

    /// The right `op` needs on its key.
    pub(crate) fn needed_by(op: Op) -> Right {
        match op {
            Op::Acquire | Op::Renew | Op::Release | Op::Transfer | Op::Forward => Right::Hold,
            Op::Revoke => Right::Admin,
            Op::Owner
            | Op::List
            | Op::History
            | Op::Events
            | Op::Recent
            | Op::Cluster
            | Op::Ops
            | Op::Unrouted => Right::Read,
        }
    }
}

/// A caller the policy knows: its name, the key prefixes it may touch
/// and the highest right it has on them. It holds no token: only the
/// policy's digests do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Principal {
    pub(crate) name: Arc<str>,
    pub(crate) prefixes: Vec<KeyPrefix>,
    pub(crate) right: Right,
}

impl Principal {
    /// Whether this principal has `right` on `key`.
    pub(crate) fn may(&self, right: Right, key: &str) -> bool {
        self.right >= right && self.touches(key)
    }

    /// Whether `key` is under one of this principal's prefixes.
    pub(crate) fn touches(&self, key: &str) -> bool {
        self.prefixes.iter().any(|prefix| prefix.matches(key))
    }
}

/// What identifies a principal's callers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Identity {
    /// NATS requests from this account (through its import), from this
    /// user only when one is named (the import must then say `share: true`).
    Nats {
        account: String,
        user: Option<String>,
    },
    /// HTTP requests with the bearer token of this digest.
    Token(TokenDigest),
    /// NATS requests with no `Nats-Request-Info`: the gateway's own account.
    Local,
}

/// The principals of one account.
enum AccountPrincipals {
    /// One principal for every user of the account.
    Whole(Arc<Principal>),
    /// One principal per named user; other users match none.
    Users(HashMap<String, Arc<Principal>>),
}

/// A loaded policy: every principal, indexed by what identifies it.
pub(crate) struct Policy {
    principals: Vec<Arc<Principal>>,
    local: Option<Arc<Principal>>,
    accounts: HashMap<String, AccountPrincipals>,
    /// Each principal's account, for the subjects its events and its
    /// holders' inboxes are routed under.
    account_of: HashMap<String, String>,
    tokens: Vec<(TokenDigest, Arc<Principal>)>,
}

/// The HTTP token settings, which become principals of their own under a
/// policy: the write token `admin` on every key, the read token `read`.
#[derive(Clone, Copy, Default)]
pub(crate) struct HttpTokens<'a> {
    pub(crate) write: Option<&'a str>,
    pub(crate) read: Option<&'a str>,
}

impl Policy {
    /// Reads the policy file at `path`, with the HTTP token settings as two
    /// more principals. The error names the file and the line.
    pub(crate) fn load(path: &Path, tokens: HttpTokens<'_>) -> Result<Policy, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|err| format!("DAGNATS_POLICY {}: {err}", path.display()))?;
        Policy::parse(&text, tokens)
            .map_err(|err| format!("DAGNATS_POLICY {}: {err}", path.display()))
    }

    /// The policy `text` describes, with the HTTP token settings.
    pub(crate) fn parse(text: &str, tokens: HttpTokens<'_>) -> Result<Policy, PolicyError> {
        let mut parsed = file::parse(text)?;
        for (name, token, right) in [
            (RESERVED_NAMES[0], tokens.write, Right::Admin),
            (RESERVED_NAMES[1], tokens.read, Right::Read),
        ] {
            if let Some(token) = token {
                parsed.push(file::Parsed {
                    principal: Principal {
                        name: name.into(),
                        prefixes: vec![KeyPrefix::default()],
                        right,
                    },
                    identity: Identity::Token(digest(token)),
                    line: 0,
                });
            }
        }
        let mut policy = Policy {
            principals: Vec::with_capacity(parsed.len()),
            local: None,
            accounts: HashMap::new(),
            account_of: HashMap::new(),
            tokens: Vec::new(),
        };
        for (index, entry) in parsed.iter().enumerate() {
            if let Some(earlier) = parsed[..index]
                .iter()
                .find(|earlier| overlaps(&earlier.identity, &entry.identity))
            {
                return Err(ambiguous(earlier, entry));
            }
            policy.add(entry);
        }
        Ok(policy)
    }

    fn add(&mut self, entry: &file::Parsed) {
        let principal = Arc::new(entry.principal.clone());
        self.principals.push(principal.clone());
        match &entry.identity {
            Identity::Local => self.local = Some(principal),
            Identity::Token(digest) => self.tokens.push((*digest, principal)),
            Identity::Nats { account, user } => {
                self.account_of
                    .insert(principal.name.to_string(), account.clone());
                let slot = self.accounts.entry(account.clone());
                match user {
                    None => {
                        slot.or_insert(AccountPrincipals::Whole(principal));
                    }
                    Some(user) => {
                        let users =
                            slot.or_insert_with(|| AccountPrincipals::Users(HashMap::new()));
                        if let AccountPrincipals::Users(users) = users {
                            users.insert(user.clone(), principal);
                        }
                    }
                }
            }
        }
    }

    /// The principal of a NATS request whose `Nats-Request-Info` header is
    /// `header` (`None`: no header, the gateway's own account), or `None`
    /// when no principal matches.
    pub(crate) fn nats_caller(&self, header: Option<&str>) -> Option<Arc<Principal>> {
        let Some(header) = header else {
            return self.local.clone();
        };
        let info = RequestInfo::parse(header)?;
        match self.accounts.get(info.account.as_str())? {
            AccountPrincipals::Whole(principal) => Some(principal.clone()),
            AccountPrincipals::Users(users) => users.get(info.user.as_deref()?).cloned(),
        }
    }

    /// The principal whose token is `presented`, compared by digest in
    /// constant time against every token (timing tells nothing of which
    /// matched, nor of the token's length).
    pub(crate) fn token_caller(&self, presented: &str) -> Option<Arc<Principal>> {
        let presented = digest(presented);
        let mut found = None;
        for (digest, principal) in &self.tokens {
            if bool::from(presented.ct_eq(digest)) {
                found = Some(principal.clone());
            }
        }
        found
    }

    /// Whether any principal is a NATS account's: only then do tenant
    /// accounts need their change events republished.
    pub(crate) fn has_accounts(&self) -> bool {
        !self.accounts.is_empty()
    }

    /// The account of the principal named `name`, when it is a NATS
    /// account's.
    pub(crate) fn account_of(&self, name: &str) -> Option<&str> {
        self.account_of.get(name).map(String::as_str)
    }

    /// The accounts with a principal that may read `key`, each once.
    pub(crate) fn accounts_reading<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> {
        self.accounts
            .iter()
            .filter_map(move |(account, principals)| {
                let reads = match principals {
                    AccountPrincipals::Whole(principal) => principal.may(Right::Read, key),
                    AccountPrincipals::Users(users) => users
                        .values()
                        .any(|principal| principal.may(Right::Read, key)),
                };
                reads.then_some(account.as_str())
            })
    }

    /// The principal named `name`, if there is one.
    pub(crate) fn named(&self, name: &str) -> Option<&Principal> {
        self.principals
            .iter()
            .find(|p| *p.name == *name)
            .map(|p| &**p)
    }
}

/// Whether one caller could match both identities.
fn overlaps(a: &Identity, b: &Identity) -> bool {
    match (a, b) {
        (Identity::Local, Identity::Local) => true,
        (Identity::Token(a), Identity::Token(b)) => a == b,
        (
            Identity::Nats {
                account: a,
                user: user_a,
            },
            Identity::Nats {
                account: b,
                user: user_b,
            },
        ) => a == b && (user_a.is_none() || user_b.is_none() || user_a == user_b),
        _ => false,
    }
}

fn ambiguous(earlier: &file::Parsed, entry: &file::Parsed) -> PolicyError {
    let (first, second) = (&earlier.principal.name, &entry.principal.name);
    let what = match &entry.identity {
        Identity::Local => "local = true".to_string(),
        Identity::Token(_) => "one bearer token".to_string(),
        Identity::Nats { account, .. } => format!("a caller of NATS account {account:?}"),
    };
    // The HTTP token settings' principals come last and have no line.
    let (line, message) = match (earlier.line, entry.line) {
        (0, _) => (None, format!("{first} and {second} are the same token")),
        (_, 0) => (
            Some(earlier.line),
            format!(
                "{what} would match two principals: {first:?} and the one of the {second} setting"
            ),
        ),
        _ => (
            Some(entry.line),
            format!(
                "{what} would match two principals: {second:?} and {first:?} (line {})",
                earlier.line
            ),
        ),
    };
    PolicyError { line, message }
}

#[cfg(test)]
mod tests;
