//! One request's access under the policy: who sent it, and whether it may
//! run an operation on a key, checked before the core runs it, from the
//! policy in memory (no JetStream round trip). A refusal is `forbidden`,
//! logged (principal, operation and key; never a token) and counted by
//! principal and operation, here, once.

use std::sync::Arc;

use super::{Policy, Principal, Right};
use crate::core::{Caller, LeaseError};
use crate::metrics::{self, Op};
use dagnats_leases_wire::request::TransferRequest;

/// The `principal` label and log field of a request no principal matches:
/// parentheses are not allowed in a principal's name.
const NOBODY: &str = "(none)";

/// What the policy lets one request's caller do.
#[derive(Clone, Default)]
pub(crate) enum Access {
    /// No policy is loaded: everything, as before policies.
    #[default]
    Open,
    /// A principal of the policy.
    Principal {
        principal: Arc<Principal>,
        policy: Arc<Policy>,
    },
    /// A NATS request no principal matches: nothing.
    Nobody,
}

impl Access {
    /// The access of a NATS request whose `Nats-Request-Info` header is
    /// `header`, under `policy`.
    pub(crate) fn of_nats(policy: &Arc<Policy>, header: Option<&str>) -> Access {
        match policy.nats_caller(header) {
            Some(principal) => Access::Principal {
                principal,
                policy: policy.clone(),
            },
            None => Access::Nobody,
        }
    }

    /// The caller of `op` on `key`, or `forbidden` when it has no right
    /// for it there.
    pub(crate) fn admit(&self, op: Op, key: &str) -> Result<Caller, LeaseError> {
        match self {
            Access::Open => Ok(Caller::Anyone),
            Access::Principal { principal, .. } if principal.may(Right::needed_by(op), key) => {
                Ok(Caller::Principal {
                    name: principal.name.clone(),
                    admin: principal.may(Right::Admin, key),
                })
            }
            _ => Err(self.refuse(op, Some(key))),
        }
    }

    /// Whether the caller may run `op`, which names no key (list, events):
    /// any principal may, and sees only what it may read.
    pub(crate) fn admit_any_key(&self, op: Op) -> Result<(), LeaseError> {
        match self {
            Access::Nobody => Err(self.refuse(op, None)),
            _ => Ok(()),
        }
    }

    /// Whether the caller may run `op`, a read of `key` if it names one
    /// ([`Access::admit`]), else of every key ([`Access::admit_any_key`]).
    pub(crate) fn admit_read(&self, op: Op, key: Option<&str>) -> Result<(), LeaseError> {
        match key {
            Some(key) => self.admit(op, key).map(drop),
            None => self.admit_any_key(op),
        }
    }

    /// The caller of a transfer: [`Access::admit`], and, when the request
    /// names the principal of the new tenure, a principal that exists and
    /// may hold the key, named by the caller itself or by an admin on it.
    /// Without a policy the name is ignored, as the field was before.
    pub(crate) fn admit_transfer(&self, req: &TransferRequest) -> Result<Caller, LeaseError> {
        let key = req.key.as_str();
        let caller = self.admit(Op::Transfer, key)?;
        let Some(to) = &req.to_principal else {
            return Ok(caller);
        };
        match self {
            Access::Principal { principal, policy } => {
                if *principal.name != *to.as_str() && !principal.may(Right::Admin, key) {
                    return Err(self.refuse(Op::Transfer, Some(key)));
                }
                let Some(named) = policy.named(to.as_str()) else {
                    return Err(LeaseError::Invalid(format!(
                        "to_principal {:?} is no principal of the gateway's policy",
                        to.as_str()
                    )));
                };
                if !named.may(Right::Hold, key) {
                    return Err(LeaseError::Invalid(format!(
                        "to_principal {:?} may not hold {key}",
                        to.as_str()
                    )));
                }
                Ok(caller)
            }
            // Without a policy tenures belong to nobody: nothing to name (a
            // caller no principal matches was refused above).
            Access::Open | Access::Nobody => Ok(caller),
        }
    }

    /// Whether the caller may read `key` (what a list or an event stream
    /// shows it).
    pub(crate) fn reads(&self, key: &str) -> bool {
        match self {
            Access::Open => true,
            Access::Principal { principal, .. } => principal.may(Right::Read, key),
            Access::Nobody => false,
        }
    }

    /// `forbidden` for `op` (on `key`), logged and counted.
    fn refuse(&self, op: Op, key: Option<&str>) -> LeaseError {
        let (principal, sentence) = match self {
            Access::Principal { principal, .. } => (
                &*principal.name,
                format!(
                    "principal {:?} may not {} {}",
                    &*principal.name,
                    op.label(),
                    key.unwrap_or("leases")
                ),
            ),
            _ => (
                NOBODY,
                "no principal of the gateway's policy matches this request".to_string(),
            ),
        };
        tracing::warn!(principal, op = op.label(), key, "forbidden");
        metrics::forbidden(principal, op);
        LeaseError::Forbidden(sentence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::HttpTokens;
    use dagnats_leases_wire::Kind;
    use serde_json::json;

    fn policy() -> Arc<Policy> {
        let text = crate::policy::tests::TWO_TENANTS;
        Arc::new(Policy::parse(text, HttpTokens::default()).unwrap())
    }

    fn team_a() -> Access {
        Access::of_nats(&policy(), Some(r#"{"acc":"TEAM_A"}"#))
    }

    fn transfer(extra: serde_json::Value) -> TransferRequest {
        let mut body =
            json!({"key": "a-1", "holder": "h", "revision": 3, "to": "g", "ttl_ms": 5000});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        dagnats_leases_wire::request::decode(body.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn without_a_policy_every_request_is_admitted_as_anyone() {
        assert_eq!(Access::Open.admit(Op::Renew, "k").unwrap(), Caller::Anyone);
        assert!(Access::Open.reads("k"));
        assert!(Access::Open.admit_any_key(Op::List).is_ok());
    }

    #[test]
    fn a_principal_is_admitted_on_its_keys_with_the_right_the_operation_needs() {
        let caller = team_a().admit(Op::Acquire, "a-1").unwrap();
        assert_eq!(
            caller,
            Caller::Principal {
                name: "team-a".into(),
                admin: false
            }
        );
        let err = team_a().admit(Op::Acquire, "b-1").unwrap_err();
        assert_eq!(err.kind(), Kind::Forbidden);
        assert_eq!(err.to_string(), "principal \"team-a\" may not acquire b-1");
        let revoke = team_a().admit(Op::Revoke, "a-1").unwrap_err();
        assert_eq!(revoke.kind(), Kind::Forbidden, "revoke needs admin");
    }

    #[test]
    fn a_request_no_principal_matches_is_refused_everything() {
        let nobody = Access::of_nats(&policy(), Some(r#"{"acc":"TEAM_Z"}"#));
        assert_eq!(
            nobody.admit(Op::Owner, "a-1").unwrap_err().kind(),
            Kind::Forbidden
        );
        assert_eq!(
            nobody.admit_any_key(Op::List).unwrap_err().kind(),
            Kind::Forbidden
        );
        assert!(!nobody.reads("a-1"));
    }

    #[test]
    fn only_an_admin_names_another_principal_for_a_transfers_new_tenure() {
        let named = transfer(json!({"to_principal": "ops"}));
        assert_eq!(
            team_a().admit_transfer(&named).unwrap_err().kind(),
            Kind::Forbidden
        );
        let itself = transfer(json!({"to_principal": "team-a"}));
        assert!(team_a().admit_transfer(&itself).is_ok());
        let ops = Access::of_nats(&policy(), None);
        let to_team_a = transfer(json!({"to_principal": "team-a"}));
        assert!(ops.admit_transfer(&to_team_a).is_ok());
        let unknown = transfer(json!({"to_principal": "team-q"}));
        assert_eq!(
            ops.admit_transfer(&unknown).unwrap_err().kind(),
            Kind::Invalid
        );
        let reader = transfer(json!({"to_principal": "dashboard"}));
        let err = ops.admit_transfer(&reader).unwrap_err();
        assert_eq!(err.kind(), Kind::Invalid, "it only reads: {err}");
        assert_eq!(
            Access::Open.admit_transfer(&to_team_a),
            Ok(Caller::Anyone),
            "without a policy it names nobody and is ignored"
        );
    }
}
