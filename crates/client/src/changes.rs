//! Change events as async-nats delivers them: the wire crate decodes, this
//! adapts a [`Message`] and says what it skipped.

use async_nats::Message;
use dagnats_leases_wire::change::{ChangeEvent, NotAChange};
use dagnats_leases_wire::record::LeaseRecord;

/// The change event `msg` carries; `None` (logged) for a message on the
/// change subjects that is not one.
pub fn from_message(msg: &Message) -> Option<ChangeEvent> {
    from_written_message(msg, None)
}

/// [`from_message`] for the writer of `msg`'s payload: `written` is the
/// lease record it serialized into those very bytes, taken instead of
/// parsing them again.
pub fn from_written_message(msg: &Message, written: Option<LeaseRecord>) -> Option<ChangeEvent> {
    // A scan of the few headers an event has, compared as bytes as
    // `HeaderMap::get` does, without its validating and hashing the name
    // on each lookup.
    let header = |name: &str| {
        let headers = msg.headers.as_ref()?;
        let (_, values) = headers
            .iter()
            .find(|(n, _)| AsRef::<[u8]>::as_ref(*n) == name.as_bytes())?;
        values.first().map(|v| v.as_str())
    };
    match ChangeEvent::decode_written(msg.subject.as_str(), header, &msg.payload, written) {
        Ok(change) => Some(change),
        Err(NotAChange::Subject) => None,
        Err(NotAChange::NoRevision) => {
            tracing::warn!(subject = %msg.subject, "change event without a revision ignored");
            None
        }
        Err(NotAChange::Corrupt(cause)) => {
            tracing::warn!(subject = %msg.subject, %cause, "change event that does not parse ignored");
            None
        }
    }
}
