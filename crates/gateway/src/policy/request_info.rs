//! The principal of a NATS request: the `Nats-Request-Info` header.
//!
//! When a request crosses from a tenant's account into the gateway's
//! through a service import, the server writes this header, replacing any
//! the client sent: `acc`, the requester's account, always; `user` (and
//! the connection's details) when the import says `share: true`. So a
//! client in a tenant account cannot claim to be anyone else. A request
//! published in the gateway's own account arrives as its client sent it:
//! without the header it is `local`; with one, the header is taken at its
//! word, since a client of that account can also write the bucket through
//! JetStream. The gateway's account is the trust boundary
//! (docs/protocol.md, Authorization).

use serde::Deserialize;

/// What the gateway reads of the header: who sent the request.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct RequestInfo {
    /// The requester's account.
    #[serde(rename = "acc")]
    pub(crate) account: String,
    /// The requester's user (a name, or an nkey or JWT user's public key),
    /// present when the import shares it.
    #[serde(default)]
    pub(crate) user: Option<String>,
}

impl RequestInfo {
    /// The header's JSON, or `None` when it does not name an account.
    pub(crate) fn parse(header: &str) -> Option<RequestInfo> {
        serde_json::from_str::<RequestInfo>(header)
            .ok()
            .filter(|info| !info.account.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_import_names_the_account_and_the_user() {
        let header = r#"{"start":"2026-10-18T12:00:00Z","host":"127.0.0.1","id":9,"acc":"TEAM_A","user":"alice","name":"keeper","lang":"rust","ver":"0.51.0","rtt":120000,"server":"NABC","kind":"Client","client_type":"nats"}"#;
        assert_eq!(
            RequestInfo::parse(header),
            Some(RequestInfo {
                account: "TEAM_A".into(),
                user: Some("alice".into()),
            })
        );
    }

    #[test]
    fn an_unshared_import_names_the_account_only() {
        assert_eq!(
            RequestInfo::parse(r#"{"acc":"TEAM_B","rtt":90000}"#),
            Some(RequestInfo {
                account: "TEAM_B".into(),
                user: None,
            })
        );
    }

    #[test]
    fn a_header_that_names_no_account_names_nobody() {
        for header in ["", "{}", r#"{"acc":""}"#, "not json", r#"{"acc":7}"#] {
            assert_eq!(RequestInfo::parse(header), None, "{header}");
        }
    }
}
