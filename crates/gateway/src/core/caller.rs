//! Who a call comes from, as far as the core needs to know: the principal
//! a tenure it starts belongs to, and whether it may act on a tenure that
//! belongs to another (docs/protocol.md, Authorization). Which principal
//! sent a request, and whether it may touch the key at all, the fronts
//! decide before the core runs it.

use std::sync::Arc;

use super::error::LeaseError;
use dagnats_leases_wire::record::Entry;

/// The caller of one core operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Caller {
    /// No policy is loaded: tenures belong to nobody, as before policies.
    Anyone,
    /// A principal of the policy; `admin` when it is admin on the key.
    Principal { name: Arc<str>, admin: bool },
}

impl Caller {
    /// The principal a tenure this caller starts belongs to.
    pub(crate) fn name(&self) -> Option<&str> {
        match self {
            Caller::Anyone => None,
            Caller::Principal { name, .. } => Some(name),
        }
    }

    /// Whether a tenure of `owner` is this caller's own: the current
    /// holder asking again (an acquire) is granted only its own tenure.
    /// A tenure written without a principal is anyone's.
    pub(crate) fn owns(&self, owner: Option<&str>) -> bool {
        match self {
            Caller::Anyone => true,
            Caller::Principal { name, .. } => owner.is_none_or(|owner| owner == &**name),
        }
    }

    /// Whether this caller may renew, release or transfer a tenure of
    /// `owner`: its own, one written without a principal, or any as admin.
    pub(crate) fn may_act_on(&self, owner: Option<&str>) -> bool {
        match self {
            Caller::Principal { admin: true, .. } => true,
            other => other.owns(owner),
        }
    }

    /// `forbidden`, unless this caller may act on the tenure of `owner`
    /// on `key`.
    pub(crate) fn check_tenure(&self, key: &str, owner: Option<&str>) -> Result<(), LeaseError> {
        if self.may_act_on(owner) {
            return Ok(());
        }
        Err(LeaseError::Forbidden(format!(
            "the tenure on {key} belongs to principal {:?}: only it, or an admin, may renew, release or transfer it",
            owner.unwrap_or_default()
        )))
    }
}

/// The principal the tenure an entry shows belongs to: a held lease's, or
/// the one a release tombstone ended.
pub(crate) fn tenure_principal(entry: &Entry) -> Option<&str> {
    match entry {
        Entry::Held { record, .. } => record.principal.as_deref(),
        Entry::Free {
            released: Some(tombstone),
            ..
        } => tombstone.principal.as_deref(),
        Entry::Free { released: None, .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(name: &str, admin: bool) -> Caller {
        Caller::Principal {
            name: name.into(),
            admin,
        }
    }

    #[test]
    fn without_a_policy_every_tenure_is_anyones() {
        assert!(Caller::Anyone.owns(Some("team-a")));
        assert!(Caller::Anyone.may_act_on(Some("team-a")));
        assert_eq!(Caller::Anyone.name(), None);
    }

    #[test]
    fn a_principal_acts_on_its_own_tenures_and_on_those_without_a_principal() {
        let a = principal("team-a", false);
        assert!(a.may_act_on(Some("team-a")) && a.may_act_on(None));
        assert!(!a.may_act_on(Some("team-b")));
        assert!(!a.owns(Some("team-b")));
        let err = a.check_tenure("k", Some("team-b")).unwrap_err();
        assert_eq!(err.kind(), dagnats_leases_wire::Kind::Forbidden);
    }

    #[test]
    fn an_admin_acts_on_any_tenure_but_owns_only_its_own() {
        let ops = principal("ops", true);
        assert!(ops.may_act_on(Some("team-b")));
        assert!(!ops.owns(Some("team-b")));
        assert!(ops.owns(Some("ops")));
    }
}
