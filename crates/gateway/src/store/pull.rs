//! A pull consumer's messages up to the end of its stream, where the end
//! is the one the server finds in its store.
//!
//! Each message a consumer delivers carries how many are still pending,
//! but that count lags: a write that replaces a key's message ahead of the
//! consumer takes the old message out of the count at once and puts the
//! new one in only when the stream's signal loop gets to it
//! (`decStreamPending` against `processStreamSignal` in nats-server's
//! `consumer.go`). A reader that stopped at "0 pending" missed a key
//! renewed while it read: the old message gone, the new one still to come.
//!
//! So every pull asks `no_wait` with an expiry: the server then ends it
//! with `404 No Messages` only when its delivery loop, having delivered at
//! least one message, looks in the store for the next one and finds none.
//! Every message stored before that moment has then been delivered, or
//! was replaced by a later one that has.

use std::time::Duration;

use async_nats::jetstream::Context;
use async_nats::{Message, StatusCode, Subject, Subscriber};
use futures::StreamExt;
use time::OffsetDateTime;

use super::jsapi::{TIMEOUT, api_subject};
use super::snapshot::Unserved;
use crate::core::ports::StoreError;
use dagnats_leases_wire::names::STREAM;

/// Messages asked for in one pull: a bucket of 10,000 keys arrives in one
/// request (the ordered consumer's 500 took 20 round trips).
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
    Again(Unserved),
}

/// Pulls from one consumer on one inbox.
pub(super) struct ToTheEnd {
    context: Context,
    next: Subject,
    inbox: Subject,
    messages: Subscriber,
    /// Messages the current pull has delivered.
    in_pull: usize,
    /// Whether the current pull follows a full one.
    follow_up: bool,
}

impl ToTheEnd {
    /// Subscribes an inbox and sends the first pull to `consumer`.
    pub(super) async fn start(context: &Context, consumer: &str) -> Result<Self, StoreError> {
        let client = context.client();
        let inbox = Subject::from(client.new_inbox());
        let messages = client
            .subscribe(inbox.clone())
            .await
            .map_err(|err| unavailable(&err))?;
        let mut pull = ToTheEnd {
            context: context.clone(),
            next: api_subject(&format!("CONSUMER.MSG.NEXT.{STREAM}.{consumer}")),
            inbox,
            messages,
            in_pull: 0,
            follow_up: false,
        };
        pull.request(TIMEOUT).await?;
        Ok(pull)
    }

    async fn request(&mut self, expires: Duration) -> Result<(), StoreError> {
        let body = serde_json::json!({
            "batch": BATCH,
            "expires": u64::try_from(expires.as_nanos()).unwrap_or(u64::MAX),
            "no_wait": true,
        });
        self.context
            .client()
            .publish_with_reply(
                self.next.clone(),
                self.inbox.clone(),
                body.to_string().into(),
            )
            .await
            .map_err(|err| unavailable(&err))?;
        self.in_pull = 0;
        Ok(())
    }

    /// The next message, the end, or why another consumer is worth making.
    pub(super) async fn next(&mut self) -> Result<Pulled, StoreError> {
        // The server answers a pull by its expiry; this only bounds a pull
        // whose answers were lost with the connection.
        let message = match tokio::time::timeout(TIMEOUT * 2, self.messages.next()).await {
            Err(_) => {
                return Err(StoreError::Unavailable(format!(
                    "listing the bucket: JetStream did not end a pull within {} ms",
                    (TIMEOUT * 2).as_millis()
                )));
            }
            Ok(None) => {
                return Err(StoreError::Unavailable(
                    "listing the bucket: the pull's subscription ended".into(),
                ));
            }
            Ok(Some(message)) => message,
        };
        match ended(message.status, self.in_pull, self.follow_up) {
            Some(Ok(pulled)) => return Ok(pulled),
            Some(Err(why)) => {
                let said = message.description.as_deref().unwrap_or_default();
                return Err(StoreError::Unavailable(format!(
                    "listing the bucket: the pull {why} ({said})"
                )));
            }
            None => {}
        }
        self.in_pull += 1;
        if self.in_pull == BATCH {
            self.follow_up = true;
            self.request(FOLLOW_UP).await?;
        }
        let Some(delivery) = message.reply.as_deref().and_then(Delivery::parse) else {
            return Err(StoreError::Unexpected(format!(
                "consumer message without a JetStream reply subject: {:?}",
                message.reply
            )));
        };
        Ok(Pulled::Message(Box::new(message), delivery))
    }
}

/// Where a consumer's message sits, as its reply subject says (ADR-15).
/// Read here rather than through async-nats' `jetstream::Message`, which
/// needs a clone of the JetStream context per message: dropping them alone
/// took 4 % of the gateway's CPU in a list of 10,000 leases (perf).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Delivery {
    /// The message's sequence in the stream.
    pub(super) stream_seq: u64,
    /// Its number among the consumer's deliveries, from 1.
    pub(super) consumer_seq: u64,
    /// When the stream stored it.
    pub(super) stored_at: OffsetDateTime,
}

impl Delivery {
    /// From `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer
    /// seq>.<nanos>.<pending>`, or the form with `<domain>.<account hash>`
    /// after `$JS.ACK` and any tokens after `<pending>`.
    fn parse(reply: &str) -> Option<Delivery> {
        // The first eight tokens after `$JS.ACK.` hold all of it in either
        // form; the count tells the forms apart.
        let (mut tokens, mut count) = ([""; 8], 0);
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
        StatusCode::TIMEOUT if in_pull == 0 && follow_up => {
            Some(Ok(Pulled::Again(Unserved::NoEnd)))
        }
        StatusCode::TIMEOUT => Some(Err("expired before the stream's end")),
        StatusCode::NO_RESPONDERS => Some(Ok(Pulled::Again(Unserved::NotListening))),
        _ => Some(Err("was refused")),
    }
}

fn unavailable(err: &dyn std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!(
        "listing the bucket: pulling from the consumer: {err}"
    ))
}

#[cfg(test)]
mod tests {
    use super::{Delivery, Pulled, Unserved, ended};
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
            format!("again: {}", Unserved::NoEnd)
        );
    }

    #[test]
    fn a_pull_nobody_answers_is_worth_another_consumer() {
        assert_eq!(
            said(ended(Some(StatusCode::NO_RESPONDERS), 0, false)),
            format!("again: {}", Unserved::NotListening)
        );
        for other in [
            StatusCode::IDLE_HEARTBEAT,
            StatusCode::from_u16(409).unwrap(),
        ] {
            assert_eq!(said(ended(Some(other), 5, false)), "failed: was refused");
        }
    }
}
