//! `history`: who held a key (or every key, or a prefix's), from when to
//! when, and how each tenure ended, newest first (docs/protocol.md,
//! Tenure history). Every page, until the history ends or `--limit`.

use clap::Args;
use serde_json::Value;
use time::OffsetDateTime;

use super::{Exit, failed};
use crate::config::{NatsConfig, parse_duration};
use dagnats_leases_client::LeaseClient;
use dagnats_leases_client::wire::history::{Cursor, HistoryRequest, MAX_HISTORY_LIMIT, Tenure};
use dagnats_leases_client::wire::request::from_fields;
use dagnats_leases_client::wire::timefmt;

/// `dagnats-leases history`'s arguments.
#[derive(Args)]
pub struct HistoryArgs {
    #[command(flatten)]
    pub nats: NatsConfig,
    /// Only this key's tenures.
    pub key: Option<String>,
    /// Only tenures of keys starting with this prefix.
    #[arg(long)]
    pub prefix: Option<String>,
    /// Only tenures that lasted until then or later: an RFC 3339 time, or
    /// how long ago (`90s`, `30m`, `12h`, `7d`).
    #[arg(long)]
    pub since: Option<String>,
    /// Only tenures that started then or earlier, written as `--since`.
    #[arg(long)]
    pub until: Option<String>,
    /// Print at most this many tenures (default: all); 1 or more.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: Option<u64>,
    /// One JSON object per tenure and line, for scripts.
    #[arg(long)]
    pub json: bool,
}

impl HistoryArgs {
    /// The first page's request; `Err` says what is wrong with the input.
    pub(super) fn request(&self, now: OffsetDateTime) -> Result<HistoryRequest, String> {
        let instant = |text: &Option<String>| -> Result<Value, String> {
            let Some(text) = text else {
                return Ok(Value::Null);
            };
            match parse_duration(text) {
                Ok(ago) => Ok(Value::from(timefmt::format(now - ago))),
                Err(_) => Ok(Value::from(text.as_str())),
            }
        };
        let page = self
            .limit
            .map_or(MAX_HISTORY_LIMIT, |limit| limit.min(MAX_HISTORY_LIMIT));
        from_fields([
            ("key", self.key.clone().map_or(Value::Null, Value::from)),
            (
                "prefix",
                self.prefix.clone().map_or(Value::Null, Value::from),
            ),
            ("since", instant(&self.since)?),
            ("until", instant(&self.until)?),
            ("limit", Value::from(page)),
        ])
        .map_err(|invalid| invalid.to_string())
    }
}

/// Prints the tenures `req` asks for, page after page.
pub(super) async fn history(
    client: &LeaseClient,
    mut req: HistoryRequest,
    args: &HistoryArgs,
) -> Exit {
    let mut left = args.limit.map_or(usize::MAX, |limit| {
        usize::try_from(limit).unwrap_or(usize::MAX)
    });
    while left > 0 {
        let page = match client.history(&req).await {
            Ok(page) => page,
            Err(err) => return failed(err),
        };
        for tenure in page.tenures.iter().take(left) {
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string(tenure).expect("tenures serialize")
                );
            } else {
                println!("{}", line(tenure));
            }
        }
        left = left.saturating_sub(page.tenures.len());
        match page.next.map(Cursor::try_from) {
            Some(Ok(next)) => req.before = Some(next),
            Some(Err(why)) => {
                eprintln!("dagnats-leases: the gateway's next page: {why}");
                return Exit::Error;
            }
            None => break,
        }
    }
    Exit::Ok
}

/// One tenure as a line: key, holder, from, to, how it ended, its fence
/// and renewals.
fn line(t: &Tenure) -> String {
    let to = t.ended_at.map_or("now".to_string(), timefmt::format);
    let end = t.end.map_or("held", |end| end.as_str());
    format!(
        "{}  {}  {} -> {}  {end}  tenure {}  renewals {}",
        t.key,
        t.holder,
        timefmt::format(t.acquired_at),
        to,
        t.tenure,
        t.renewals
    )
}
