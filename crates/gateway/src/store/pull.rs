//! A pull consumer's messages up to the end of its stream, where the end
//! is the one the server finds in its store: every pull asks `no_wait`
//! with an expiry, which the server ends with `404 No Messages` only when
//! it looks for the next message and finds none. The pending count each
//! message carries lags behind a key rewritten during the walk, so a reader
//! stopping at "0 pending" could miss it (docs/design.md, "Lists").

use std::time::Duration;

use async_nats::{Message, StatusCode};
use time::OffsetDateTime;

use super::jsapi::{Failure, JetStream, Pulls, TIMEOUT};
use dagnats_leases_wire::names::STREAM;

/// Messages asked for in one pull: a bucket of 10,000 keys arrives in one
/// request.
const BATCH: usize = 50_000;
/// How long a pull after a full one waits for a first message. Only a
/// stream that ended exactly at the full pull's last message leaves it
/// empty, and then it cannot tell that end from a consumer that stalled.
const FOLLOW_UP: Duration = Duration::from_millis(500);

/// What a pull gave next.
pub(super) enum Pulled {
    /// Boxed: a message is some 200 bytes, the other outcomes a word or two.
    Message(Box<Message>, Delivery),
    /// The server found no message past the last one delivered.
    End,
    /// Worth another consumer; why this one could not serve.
    Again(Stall),
}

/// Why a consumer's pulls could not reach the end of the stream, where
/// another consumer's may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stall {
    /// Its first pull found nobody listening yet: the consumer's interest
    /// had not crossed the routes.
    NotListening,
    /// A pull after a full one got nothing: the end, or a stall.
    NoEnd,
}

impl Stall {
    /// Its label on `dagnats_list_consumers_total`.
    pub(super) fn label(self) -> &'static str {
        match self {
            Stall::NotListening => "not_listening",
            Stall::NoEnd => "no_end",
        }
    }
}

impl std::fmt::Display for Stall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stall::NotListening => "had no responder for its pull request",
            Stall::NoEnd => "could not tell the end of the stream after a full pull",
        })
    }
}

/// Pulls from one consumer on one inbox.
pub(super) struct ToTheEnd {
    pulls: Pulls,
    /// Messages the current pull has delivered.
    in_pull: usize,
    /// Whether the current pull follows a full one.
    follow_up: bool,
}

impl ToTheEnd {
    /// Subscribes an inbox and sends the first pull to `consumer`.
    pub(super) async fn start(jetstream: &JetStream, consumer: &str) -> Result<Self, Failure> {
        let mut pull = ToTheEnd {
            pulls: jetstream.pulls(STREAM, consumer).await?,
            in_pull: 0,
            follow_up: false,
        };
        pull.request(TIMEOUT).await?;
        Ok(pull)
    }

    async fn request(&mut self, expires: Duration) -> Result<(), Failure> {
        let body = serde_json::json!({
            "batch": BATCH,
            "expires": u64::try_from(expires.as_nanos()).unwrap_or(u64::MAX),
            "no_wait": true,
        });
        self.pulls.request(&body).await?;
        self.in_pull = 0;
        Ok(())
    }

    /// The next message, the end, or why another consumer is worth making.
    pub(super) async fn next(&mut self) -> Result<Pulled, Failure> {
        let message = self.pulls.next().await?;
        match ended(message.status, self.in_pull, self.follow_up) {
            Some(Ok(pulled)) => return Ok(pulled),
            Some(Err(why)) => {
                let said = message.description.as_deref().unwrap_or_default();
                return Err(Failure::Failed(format!("the pull {why} ({said})")));
            }
            None => {}
        }
        self.in_pull += 1;
        if self.in_pull == BATCH {
            self.follow_up = true;
            self.request(FOLLOW_UP).await?;
        }
        let Some(delivery) = message.reply.as_deref().and_then(Delivery::parse) else {
            return Err(Failure::Unexpected(format!(
                "consumer message without a JetStream reply subject: {:?}",
                message.reply
            )));
        };
        Ok(Pulled::Message(Box::new(message), delivery))
    }
}

/// Where a consumer's message sits, as its reply subject says (ADR-15):
/// read here rather than through async-nats' `jetstream::Message`, which
/// costs a clone of a JetStream context per message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Delivery {
    /// The message's sequence in the stream.
    pub(crate) stream_seq: u64,
    /// Its number among the consumer's deliveries, from 1.
    pub(crate) consumer_seq: u64,
    /// When the stream stored it.
    pub(crate) stored_at: OffsetDateTime,
    /// Messages of the consumer still to deliver after it.
    pub(crate) pending: u64,
}

impl Delivery {
    /// From `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer
    /// seq>.<nanos>.<pending>`, or the form with `<domain>.<account hash>`
    /// after `$JS.ACK` and any tokens after `<pending>`.
    pub(crate) fn parse(reply: &str) -> Option<Delivery> {
        // The first nine tokens after `$JS.ACK.` hold all of it in either
        // form; the count tells the forms apart.
        let (mut tokens, mut count) = ([""; 9], 0);
        for token in reply.strip_prefix("$JS.ACK.")?.split('.') {
            if let Some(slot) = tokens.get_mut(count) {
                *slot = token;
            }
            count += 1;
        }
        // From <delivered> on: 7 tokens in all, or 9 and more.
        let from = match count {
            7 => 2,
            n if n >= 9 => 4,
            _ => return None,
        };
        let number = |i: usize| tokens[from + i].parse::<u64>().ok();
        let nanos = tokens[from + 3].parse::<i128>().ok()?;
        Some(Delivery {
            stream_seq: number(1)?,
            consumer_seq: number(2)?,
            stored_at: OffsetDateTime::from_unix_timestamp_nanos(nanos).ok()?,
            pending: number(4)?,
        })
    }
}

/// What a status on the pull's inbox means, after the current pull
/// (`follow_up` or not) delivered `in_pull` messages: `None` for a message,
/// else what the pull came to or why it failed. Heartbeats are never asked
/// for.
fn ended(
    status: Option<StatusCode>,
    in_pull: usize,
    follow_up: bool,
) -> Option<Result<Pulled, &'static str>> {
    match status? {
        StatusCode::OK => None,
        // With an expiry, the server says so only once the pull delivered.
        StatusCode::NOT_FOUND if in_pull > 0 => Some(Ok(Pulled::End)),
        StatusCode::TIMEOUT if in_pull == 0 && follow_up => Some(Ok(Pulled::Again(Stall::NoEnd))),
        StatusCode::TIMEOUT => Some(Err("expired before the stream's end")),
        StatusCode::NO_RESPONDERS => Some(Ok(Pulled::Again(Stall::NotListening))),
        _ => Some(Err("was refused")),
    }
}

#[cfg(test)]
mod tests {
    use super::{Delivery, Pulled, Stall, ended};
    use async_nats::StatusCode;
    use time::macros::datetime;

    #[test]
    fn a_delivery_reads_from_either_form_of_the_reply_subject() {
        let at = datetime!(2026-12-03 08:00 UTC);
        let nanos = at.unix_timestamp_nanos();
        let expected = Some(Delivery {
            stream_seq: 100,
            consumer_seq: 7,
            stored_at: at,
            pending: 42,
        });
        let short = format!("$JS.ACK.KV_leases.list.1.100.7.{nanos}.42");
        assert_eq!(Delivery::parse(&short), expected);
        let long = format!("$JS.ACK.hub.szMpdrwD.KV_leases.list.1.100.7.{nanos}.42.x7");
        assert_eq!(Delivery::parse(&long), expected);
        let no_domain = format!("$JS.ACK._.szMpdrwD.KV_leases.list.1.100.7.{nanos}.42");
        assert_eq!(Delivery::parse(&no_domain), expected);
        for wrong in [
            "_INBOX.abc".to_string(),
            format!("$JS.ACK.KV_leases.list.1.100.{nanos}.42"),
            format!("$JS.ACK.KV_leases.list.1.x.7.{nanos}.42"),
        ] {
            assert_eq!(Delivery::parse(&wrong), None, "{wrong}");
        }
    }

    fn said(outcome: Option<Result<Pulled, &'static str>>) -> String {
        match outcome {
            None => "a message".into(),
            Some(Ok(Pulled::End)) => "the end".into(),
            Some(Ok(Pulled::Again(why))) => format!("again: {why}"),
            Some(Ok(Pulled::Message(..))) => unreachable!("statuses carry no message"),
            Some(Err(why)) => format!("failed: {why}"),
        }
    }

    #[test]
    fn only_a_no_messages_after_a_delivery_ends_the_stream() {
        assert_eq!(said(ended(None, 0, false)), "a message");
        assert_eq!(said(ended(Some(StatusCode::OK), 3, false)), "a message");
        assert_eq!(
            said(ended(Some(StatusCode::NOT_FOUND), 1, false)),
            "the end"
        );
        assert_eq!(
            said(ended(Some(StatusCode::NOT_FOUND), 0, false)),
            "failed: was refused",
            "a 404 before any delivery is not the server's end of the stream"
        );
    }

    #[test]
    fn an_expired_pull_fails_unless_it_followed_a_full_one_and_got_nothing() {
        let expired = Some(StatusCode::TIMEOUT);
        assert_eq!(
            said(ended(expired, 0, false)),
            "failed: expired before the stream's end"
        );
        assert_eq!(
            said(ended(expired, 2, true)),
            "failed: expired before the stream's end"
        );
        assert_eq!(
            said(ended(expired, 0, true)),
            format!("again: {}", Stall::NoEnd)
        );
    }

    #[test]
    fn a_pull_nobody_answers_is_worth_another_consumer() {
        assert_eq!(
            said(ended(Some(StatusCode::NO_RESPONDERS), 0, false)),
            format!("again: {}", Stall::NotListening)
        );
        for other in [
            StatusCode::IDLE_HEARTBEAT,
            StatusCode::from_u16(409).unwrap(),
        ] {
            assert_eq!(said(ended(Some(other), 5, false)), "failed: was refused");
        }
    }
}
