//! Reading the history stream: the tenures a query may want, each in its
//! latest record (docs/protocol.md, Tenure history).
//!
//! A key's records are its subject's messages, so a query for one key
//! reads that subject only; `since` starts the read at the first record
//! stored at or after it (a tenure that lasted until `since` ended, and so
//! was recorded, at or after it), plus the last record of each key that
//! is still open and may have started earlier. Without `since`, a page of
//! the newest tenures is read from windows back from now, as long as it
//! takes to hold the page. Direct gets (ADR-31) read a thousand records a
//! request, from any replica.

use std::collections::HashMap;
use std::time::Duration;

use async_nats::Message;
use serde_json::json;
use time::OffsetDateTime;

use super::stored::Stored;
use crate::store::jsapi::{Failure, JetStream, api_error, header_number};
use dagnats_leases_wire::history::{HistoryRequest, Tenure};
use dagnats_leases_wire::names::{HISTORY_PREFIX, HISTORY_STREAM, history_subject};
use dagnats_leases_wire::timefmt;

/// Records one direct get asks for.
const BATCH: u64 = 1_000;

/// Subjects one multi-subject direct get may name: the server answers at
/// most 1,024 messages.
const MULTI: usize = 1_000;

/// One record as read, with its place in the history stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Read {
    pub(crate) seq: u64,
    /// The server's time of the record.
    pub(crate) at: OffsetDateTime,
    pub(crate) stored: Stored,
}

/// The history stream's subject filter for `req`: its key's subject, or
/// every key's.
fn filter(req: &HistoryRequest) -> String {
    match &req.key {
        Some(key) => history_subject(key.as_str()),
        None => format!("{HISTORY_PREFIX}.*"),
    }
}

/// The tenures `req` may want, each as its latest record says: every one
/// that belongs on its page (and maybe more).
pub(crate) async fn candidates(
    js: &JetStream,
    req: &HistoryRequest,
) -> Result<Vec<Tenure>, String> {
    let filter = filter(req);
    let mut latest = Latest::default();
    let Some(since) = req.since else {
        return newest(js, req, &filter).await;
    };
    // Tenures still open may have started, and been recorded, earlier.
    for read in last_records(js, &filter).await? {
        if read.stored.is_open() {
            latest.keep(read);
        }
    }
    let start = json!({"start_time": timefmt::format(since.get())});
    scan(js, req, (&filter, start, u64::MAX), &mut latest).await?;
    Ok(latest.wanted(req, None))
}

/// How far a gateway's clock (which says when a tenure started) may be
/// from the server's (which stamps its records): the window a newest-first
/// read stops at is this much older than the tenures it answers.
const SKEW: Duration = Duration::from_secs(1);

/// The first window a newest-first read looks back over; each next one is
/// twice as long.
const FIRST_WINDOW: Duration = Duration::from_secs(2);

/// `req` without `since`: windows of the stream back from now, each twice
/// the last, until they hold a page of tenures whose every record they
/// hold. A tenure's records are all stored after it started, so every
/// tenure that started after the window began (less [`SKEW`]) is whole in
/// it, and so is every tenure above it in the page's order.
async fn newest(js: &JetStream, req: &HistoryRequest, filter: &str) -> Result<Vec<Tenure>, String> {
    let info = js
        .api(&format!("STREAM.INFO.{HISTORY_STREAM}"), &json!({}))
        .await?;
    if let Some(err) = api_error(&info) {
        return Err(format!("{HISTORY_STREAM}: {}", err.description));
    }
    let first = info["state"]["first_ts"]
        .as_str()
        .and_then(|at| timefmt::parse(at).ok());
    let mut latest = Latest::default();
    let now = OffsetDateTime::now_utc();
    let (mut window, mut upper) = (FIRST_WINDOW, u64::MAX);
    loop {
        let from = now - window;
        let all = first.is_none_or(|first| from <= first);
        let start = match all {
            true => json!({"seq": 1}),
            false => json!({"start_time": timefmt::format(from)}),
        };
        let lowest = scan(js, req, (filter, start, upper), &mut latest).await?;
        upper = lowest.unwrap_or(upper);
        let whole = (!all).then_some(from + SKEW);
        let wanted = latest.wanted(req, whole);
        if all || wanted.len() > req.page_size() {
            return Ok(wanted);
        }
        window *= 2;
    }
}

/// Reads the records `filter` names from `start` (a direct get's
/// position), up to the sequence `upper`, into `latest`; the sequence of
/// the first record read.
async fn scan(
    js: &JetStream,
    req: &HistoryRequest,
    (filter, mut body, upper): (&str, serde_json::Value, u64),
    latest: &mut Latest,
) -> Result<Option<u64>, String> {
    let mut lowest = None;
    loop {
        body["next_by_subj"] = json!(filter);
        body["batch"] = json!(BATCH);
        let batch = js
            .direct_batch(HISTORY_STREAM, &body)
            .await
            .map_err(failed)?;
        let mut last_seq = None;
        for message in &batch.messages {
            let read = read(message)?;
            if read.seq >= upper {
                return Ok(lowest);
            }
            lowest.get_or_insert(read.seq);
            last_seq = Some(read.seq);
            if req.wants_key(&read.stored.tenure.key) {
                latest.keep(read);
            }
        }
        match last_seq {
            Some(seq) if batch.more > 0 => body = json!({"seq": seq + 1}),
            _ => return Ok(lowest),
        }
    }
}

/// Each tenure's latest record read so far.
#[derive(Default)]
struct Latest(HashMap<(String, u64), Read>);

impl Latest {
    fn keep(&mut self, read: Read) {
        let id = (read.stored.tenure.key.clone(), read.stored.tenure.tenure);
        match self.0.get(&id) {
            Some(held) if held.seq >= read.seq => {}
            _ => {
                self.0.insert(id, read);
            }
        }
    }

    /// The tenures `req` wants, of those that started at `whole` or later
    /// (`None`: of all).
    fn wanted(&self, req: &HistoryRequest, whole: Option<OffsetDateTime>) -> Vec<Tenure> {
        self.0
            .values()
            .map(|read| &read.stored.tenure)
            .filter(|tenure| whole.is_none_or(|from| tenure.acquired_at >= from))
            .filter(|tenure| req.wants(tenure))
            .cloned()
            .collect()
    }
}

/// The last record of every key the subject `filter` names.
pub(crate) async fn last_records(js: &JetStream, filter: &str) -> Result<Vec<Read>, String> {
    let subjects = subjects(js, filter).await?;
    let mut reads = Vec::with_capacity(subjects.len());
    for chunk in subjects.chunks(MULTI) {
        let body = json!({"multi_last": chunk, "batch": chunk.len()});
        let batch = js
            .direct_batch(HISTORY_STREAM, &body)
            .await
            .map_err(failed)?;
        for message in &batch.messages {
            reads.push(read(message)?);
        }
    }
    Ok(reads)
}

/// The subjects of the history stream that `filter` matches.
async fn subjects(js: &JetStream, filter: &str) -> Result<Vec<String>, String> {
    let mut subjects = Vec::new();
    loop {
        let asked = json!({"subjects_filter": filter, "offset": subjects.len()});
        let info = js
            .api(&format!("STREAM.INFO.{HISTORY_STREAM}"), &asked)
            .await?;
        if let Some(err) = api_error(&info) {
            return Err(format!("{HISTORY_STREAM}: {}", err.description));
        }
        let page: Vec<String> = match info["state"]["subjects"].as_object() {
            Some(page) => page.keys().cloned().collect(),
            None => Vec::new(),
        };
        let total = info["total"].as_u64().unwrap_or(0) as usize;
        let empty = page.is_empty();
        subjects.extend(page);
        if empty || subjects.len() >= total {
            return Ok(subjects);
        }
    }
}

/// One record of the history stream, from a direct get's answer.
fn read(message: &Message) -> Result<Read, String> {
    let seq = header_number(message, "Nats-Sequence");
    let at = message
        .headers
        .as_ref()
        .and_then(|headers| headers.get("Nats-Time-Stamp"))
        .and_then(|at| timefmt::parse(at.as_str()).ok())
        .ok_or_else(|| format!("history record {seq} has no timestamp"))?;
    let stored = Stored::parse(seq, &message.payload)?;
    Ok(Read { seq, at, stored })
}

/// A failure of the history stream's JetStream, as a sentence.
pub(super) fn failed(failure: Failure) -> String {
    match failure {
        Failure::NoResponders => format!("the {HISTORY_STREAM} stream is not there yet"),
        Failure::Failed(reason) | Failure::Unexpected(reason) => reason,
        Failure::TooLate => "not sent in time".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dagnats_leases_wire::request::decode;

    #[test]
    fn a_key_query_reads_its_key_subject_only() {
        let req: HistoryRequest = decode(br#"{"key":"notify-leader"}"#).unwrap();
        assert_eq!(filter(&req), "dagnats.history.notify-leader");
        let req: HistoryRequest = decode(br#"{"prefix":"notify"}"#).unwrap();
        assert_eq!(filter(&req), "dagnats.history.*");
    }
}
