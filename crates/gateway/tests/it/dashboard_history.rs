//! The dashboard looks back (docs/protocol.md, Tenure history): the
//! timeline's window drawn from the history with the live changes joined
//! on, a key's past tenures, shard groups' hand-overs, the filter on the
//! timeline, in headless Chromium against real gateways and nats-server.

use std::time::Duration;

use crate::common::lease_ops::{acquire, release, renew, transfer};
use crate::common::tenants::{ADMIN_TOKEN, DASHBOARD_TOKEN, Tenants};
use crate::common::{Gateway, Http, NatsServer, call, client, eventually};
use crate::dashboard::{Member, Session, poll_until, shard_owners, started};
use fantoccini::Locator;
use serde_json::{Value, json};

const ESCAPE: &str = "\u{E00C}";
const ENTER: &str = "\u{E007}";

/// `Some` once `done` is, `None` to try again when the element it acted on
/// was being replaced: the timeline redraws its segments every second.
fn unless_stale(what: &str, done: Result<(), fantoccini::error::CmdError>) -> Option<()> {
    use fantoccini::error::{CmdError, ErrorStatus};
    match done {
        Ok(()) => Some(()),
        Err(CmdError::Standard(e))
            if matches!(
                e.error,
                ErrorStatus::StaleElementReference | ErrorStatus::ElementNotInteractable
            ) =>
        {
            None
        }
        Err(e) => panic!("{what}: {e}"),
    }
}

/// Presses `key` on the focused element, as a keyboard does (the focus
/// follows a redrawn segment).
async fn press(s: &Session, key: &str) {
    eventually("the key pressed", Duration::from_secs(3), || async {
        let focused = s.browser.active_element().await.expect("a focused element");
        unless_stale("pressing a key", focused.send_keys(key).await)
    })
    .await;
}

/// Clicks the element at `css`, as a mouse does.
async fn click(s: &Session, css: &str) {
    eventually("the click", Duration::from_secs(3), || async {
        let found = s
            .browser
            .find(Locator::Css(css))
            .await
            .expect("the element");
        unless_stale("clicking", found.click().await)
    })
    .await;
}

/// The holders of the dialog's tenure rows marked as the one opened.
const MARKED_JS: &str = "return [...document.querySelectorAll('#detail-tenures tr[aria-current=\"true\"]')].map(tr => tr.dataset.holder)";

/// `holder` acquires each of `keys` in turn.
async fn hold_all(
    nats: &async_nats::Client,
    keys: impl Iterator<Item = String>,
    holder: &str,
    ttl_ms: u64,
) {
    for key in keys {
        call(nats, "acquire", acquire(&key, holder, ttl_ms)).await;
    }
}

/// `key`'s tenures in the history, newest first, once `ended` of them
/// have ended and `open` have not.
async fn tenures(http: &Http, key: &str, ended: usize, open: usize) -> Vec<Value> {
    eventually(
        &format!("{ended} ended and {open} open tenures of {key}"),
        Duration::from_secs(30),
        || async {
            let reply = http.get(&format!("/v1/leases/{key}/history")).await;
            let all = reply.body["tenures"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let done = all.iter().filter(|t| !t["end"].is_null()).count();
            (done == ended && all.len() == ended + open).then_some(all)
        },
    )
    .await
}

/// Five tenures of `leader`, one of each end and the last still held:
/// node-a released after two renewals, node-b transferred to node-c,
/// node-c revoked, node-d expired, node-e holding. The history's record
/// of them, newest first.
async fn five_tenures(nats: &async_nats::Client, http: &Http) -> Vec<Value> {
    let a = call(nats, "acquire", acquire("leader", "node-a", 30_000)).await;
    let a1 = call(
        nats,
        "renew",
        renew("leader", "node-a", &a["revision"], 30_000),
    )
    .await;
    let a2 = call(
        nats,
        "renew",
        renew("leader", "node-a", &a1["revision"], 30_000),
    )
    .await;
    call(
        nats,
        "release",
        release("leader", "node-a", &a2["revision"]),
    )
    .await;
    let b = call(nats, "acquire", acquire("leader", "node-b", 30_000)).await;
    let moved = transfer("leader", "node-b", &b["revision"], "node-c", 30_000);
    assert_eq!(call(nats, "transfer", moved).await["holder"], "node-c");
    let revoked = http
        .request(reqwest::Method::DELETE, "/v1/leases/leader")
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 200);
    call(nats, "acquire", acquire("leader", "node-d", 1_000)).await;
    tenures(http, "leader", 4, 0).await;
    call(nats, "acquire", acquire("leader", "node-e", 60_000)).await;
    tenures(http, "leader", 4, 1).await
}

/// The segments of `key`'s lane, left to right: holder, fence, end.
async fn lane(s: &Session, key: &str) -> Value {
    s.js(&format!(
        "return [...document.querySelectorAll('#timeline g.segment[data-key=\"{key}\"]')] \
         .map(g => [Number(g.querySelector('rect').getAttribute('x')), g.dataset.holder, Number(g.dataset.fence), g.dataset.end]) \
         .sort((p, q) => p[0] - q[0]).map(p => p.slice(1))"
    ))
    .await
}

/// The lane `tenures` (newest first, as the history answers) should draw.
fn drawn(tenures: &[Value]) -> Value {
    let segments: Vec<Value> = tenures
        .iter()
        .rev()
        .map(|t| json!([t["holder"], t["tenure"], t["end"].as_str().unwrap_or("")]))
        .collect();
    json!(segments)
}

/// Clicks the window choice `value` (`live`, `600`, `3600`, `86400`,
/// `custom`) and answers the timeline's status right after the click.
async fn choose(s: &Session, value: &str) -> Value {
    s.js(&format!(
        "document.querySelector('input[name=\"window\"][value=\"{value}\"]').click(); \
         return [document.getElementById('timeline-status').textContent, document.getElementById('timeline').getAttribute('aria-busy')]"
    ))
    .await
}

/// The dashboard opened on `http`'s gateway, given `token` when it asks.
async fn open_with_token(http: &Http, token: &str) -> Session {
    let s = Session::start().await;
    s.browser.goto(&format!("{}/", http.base)).await.unwrap();
    poll_until("the token prompt", Duration::from_secs(10), || async {
        s.js("return document.getElementById('token-dialog').open")
            .await
            == true
    })
    .await;
    s.give_token(token).await;
    s.until_live("the stream with the token", Duration::from_secs(10))
        .await;
    s
}

/// The console's errors but the requests refused before the page had its
/// token, which the browser logs.
async fn errors_once_authorized(s: &Session) -> Vec<String> {
    let unauthorized = "the server responded with a status of 401 (Unauthorized)\"";
    let errors = s.console_errors().await.into_iter();
    errors.filter(|e| !e.ends_with(unauthorized)).collect()
}

/// Chooses the range `from` to `to` (`YYYY-MM-DDTHH:MM:SS`, UTC).
async fn choose_range(s: &Session, from: &str, to: &str) {
    choose(s, "custom").await;
    s.js(&format!(
        "document.getElementById('range-from').value = '{from}'; document.getElementById('range-to').value = '{to}'; \
         document.getElementById('range').requestSubmit(); return true"
    ))
    .await;
}

async fn status(s: &Session) -> String {
    let text = s.js("return document.getElementById('timeline-status').textContent");
    text.await.as_str().unwrap().to_string()
}

/// A gateway with no memory of the changes made through another: what
/// its page draws of them comes from the history.
async fn fresh_gateway(server: &NatsServer) -> (Gateway, Http) {
    let gateway = Gateway::start(&server.url).await;
    let http = Http::of(&gateway).await;
    let recent = http.get("/v1/events/recent").await.body;
    assert_eq!(recent["events"], json!([]), "a fresh gateway saw no change");
    (gateway, http)
}

/// The server and gateways a scene runs on, kept until it ends.
type Running = (NatsServer, Gateway, Gateway);

/// [`five_tenures`] made through one gateway, then the page opened on a
/// fresh one: what it draws of them comes from the history.
async fn five_tenures_then_a_fresh_page() -> (Running, async_nats::Client, Session, Vec<Value>) {
    let (server, gateway, http, nats) = started().await;
    let past = five_tenures(&nats, &http).await;
    let (fresh, fresh_http) = fresh_gateway(&server).await;
    let s = Session::open(&fresh_http).await;
    ((server, gateway, fresh), nats, s, past)
}

#[tokio::test]
async fn a_past_window_is_drawn_from_the_history_with_the_live_changes_joined_on() {
    let (_running, nats, s, past) = five_tenures_then_a_fresh_page().await;
    // Live, the page knows only the tenure held now.
    poll_until("the held tenure", Duration::from_secs(5), || async {
        lane(&s, "leader").await == drawn(&past[..1])
    })
    .await;

    // 10 minutes: loading at once, then every tenure as the history has it.
    let clicked = choose(&s, "600").await;
    assert!(
        clicked[0]
            .as_str()
            .unwrap()
            .starts_with("Loading the history of the last 10 minutes…"),
        "{clicked}"
    );
    assert_eq!(clicked[1], "true", "the timeline is busy while it loads");
    poll_until("the history drawn", Duration::from_secs(10), || async {
        lane(&s, "leader").await == drawn(&past)
    })
    .await;
    assert_eq!(status(&s).await, "");
    assert_eq!(
        s.js("return [document.getElementById('timeline-title').textContent, document.getElementById('timeline').getAttribute('aria-busy')]").await,
        json!(["Ownership, last 10 minutes", "false"])
    );
    let marks = s.js("return [...document.querySelectorAll('#timeline g.handover[data-key=\"leader\"]')].map(g => [g.dataset.from, g.dataset.to])").await;
    assert_eq!(
        marks,
        json!([["node-b", "node-c"]]),
        "the transfer is marked"
    );

    // Live changes join on: the held tenure ends, a new key appears.
    let held = &past[0];
    call(
        &nats,
        "release",
        release("leader", "node-e", &held["tenure"]),
    )
    .await;
    call(&nats, "acquire", acquire("fresh", "node-f", 60_000)).await;
    let mut ended = past.clone();
    ended[0]["end"] = json!("released");
    poll_until(
        "the live end and the new key",
        Duration::from_secs(5),
        || async {
            lane(&s, "leader").await == drawn(&ended)
                && lane(&s, "fresh")
                    .await
                    .as_array()
                    .is_some_and(|l| l.len() == 1)
        },
    )
    .await;

    // Back to live: the page's own window again, where the tenure it saw
    // end (but not begin) is drawn whole, from the lease it held.
    choose(&s, "live").await;
    assert_eq!(lane(&s, "leader").await, drawn(&ended[..1]));
    let title = s
        .js("return document.getElementById('timeline-title').textContent")
        .await;
    assert!(
        title.as_str().unwrap().starts_with("Ownership, last ")
            && title != "Ownership, last 10 minutes",
        "{title}"
    );
    s.screenshot("dashboard-history-window.png").await;
    assert_eq!(s.console_errors().await, Vec::<String>::new());
}

#[tokio::test]
async fn the_24_hour_window_draws_the_last_24_hours_from_the_history() {
    let (_running, _nats, s, past) = five_tenures_then_a_fresh_page().await;
    choose(&s, "86400").await;
    poll_until("the history drawn", Duration::from_secs(10), || async {
        lane(&s, "leader").await == drawn(&past)
    })
    .await;
    assert_eq!(status(&s).await, "");
    assert_eq!(
        s.js("return document.getElementById('timeline-title').textContent")
            .await,
        "Ownership, last 24 hours"
    );
    // Each read of the window: how far back its since is, and its until.
    let asked = s
        .js("return performance.getEntriesByType('resource').map(e => new URL(e.name)) \
             .filter(u => u.pathname === '/v1/history' && u.searchParams.has('since')) \
             .map(u => [Date.now() - Date.parse(u.searchParams.get('since')), u.searchParams.get('until')])")
        .await;
    let reads = asked.as_array().unwrap();
    assert_eq!(reads.len(), 1, "one page holds the window: {asked}");
    let back = reads[0][0].as_f64().unwrap();
    assert!(
        (86_400_000.0 - 60_000.0..=86_400_000.0 + 60_000.0).contains(&back),
        "since {back} ms back, not 24 h"
    );
    assert_eq!(reads[0][1], Value::Null, "no until: the window runs to now");
    assert_eq!(s.console_errors().await, Vec::<String>::new());
}

/// `2026-12-05T08:10:03.123Z` to the second, rounded down or up, as a
/// datetime-local input takes it.
fn to_second(at: &str, up: bool) -> String {
    let t =
        time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).unwrap();
    let whole = t.replace_nanosecond(0).unwrap();
    let t = if up && whole != t {
        whole + time::Duration::SECOND
    } else {
        whole
    };
    let format = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");
    t.format(&format).unwrap()
}

#[tokio::test]
async fn a_custom_range_draws_the_tenures_that_overlap_it_and_no_other() {
    let (_server, _gateway, http, nats) = started().await;
    let early = call(&nats, "acquire", acquire("early", "node-a", 30_000)).await;
    call(
        &nats,
        "release",
        release("early", "node-a", &early["revision"]),
    )
    .await;
    let early = tenures(&http, "early", 1, 0).await;
    let (from, to) = (
        to_second(early[0]["acquired_at"].as_str().unwrap(), false),
        to_second(early[0]["ended_at"].as_str().unwrap(), true),
    );
    // `late` starts after the range ends.
    let end = time::PrimitiveDateTime::parse(
        &to,
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]"),
    )
    .unwrap()
    .assume_utc();
    poll_until("the range to be over", Duration::from_secs(3), || async {
        time::OffsetDateTime::now_utc() > end
    })
    .await;
    call(&nats, "acquire", acquire("late", "node-b", 30_000)).await;
    tenures(&http, "late", 0, 1).await;

    let s = Session::open(&http).await;
    choose_range(&s, &from, &to).await;
    poll_until("the range drawn", Duration::from_secs(10), || async {
        lane(&s, "early").await == drawn(&early) && status(&s).await.is_empty()
    })
    .await;
    assert_eq!(
        lane(&s, "late").await,
        json!([]),
        "a tenure after the range is not drawn"
    );
    assert_eq!(
        s.js("return document.getElementById('timeline-title').textContent")
            .await,
        json!(format!(
            "Ownership, {} to {} UTC",
            from.replace('T', " "),
            to.replace('T', " ")
        ))
    );
    // A range that ends before it starts is refused, and the window stays.
    choose_range(&s, &to, &from).await;
    assert_eq!(status(&s).await, "The range needs a start before its end.");
    assert_eq!(lane(&s, "early").await, drawn(&early));
    assert_eq!(s.console_errors().await, Vec::<String>::new());
}

/// The detail dialog's tenure rows: holder, from, to, ended, renewals,
/// fence.
const TENURE_ROWS_JS: &str = "return [...document.querySelectorAll('#detail-tenures tbody tr')].map(tr => [...tr.cells].slice(0, 6).map(c => c.textContent))";

/// The rows the dialog should show for `tenures` (newest first).
fn tenure_rows(tenures: &[Value]) -> Value {
    let stamp = |v: &Value| v.as_str().map(|t| t[..19].replace('T', " "));
    let rows: Vec<Value> = tenures
        .iter()
        .map(|t| {
            let open = t["end"].is_null();
            let fence = match t["end_revision"].as_u64() {
                Some(end) => format!("{} → {end}", t["tenure"]),
                None => t["tenure"].to_string(),
            };
            json!([
                t["holder"],
                stamp(&t["acquired_at"]).unwrap(),
                if open {
                    "now".to_string()
                } else {
                    stamp(&t["ended_at"]).unwrap()
                },
                t["end"].as_str().unwrap_or("still held"),
                t["renewals"].to_string(),
                fence,
            ])
        })
        .collect();
    json!(rows)
}

#[tokio::test]
async fn a_key_opens_its_past_tenures_from_its_row_and_from_a_timeline_segment() {
    let (_server, _gateway, http, nats) = started().await;
    let past = five_tenures(&nats, &http).await;
    assert_eq!(past[4]["renewals"], 2);
    let s = Session::open(&http).await;
    poll_until("the row", Duration::from_secs(5), || s.row_exists("leader")).await;

    // From the row, by keyboard: Enter opens, Escape closes, focus returns.
    s.js("document.querySelector('#leases tr[data-key=\"leader\"]').focus(); return true")
        .await;
    press(&s, ENTER).await;
    poll_until("the tenures", Duration::from_secs(10), || async {
        s.js(TENURE_ROWS_JS).await == tenure_rows(&past)
    })
    .await;
    assert_eq!(
        s.js("return [document.getElementById('detail').open, document.getElementById('detail-title').textContent]")
            .await,
        json!([true, "leader"])
    );
    s.screenshot("dashboard-tenures.png").await;
    press(&s, ESCAPE).await;
    poll_until("the dialog to close", Duration::from_secs(2), || async {
        s.js("return document.getElementById('detail').open").await == false
    })
    .await;
    assert_eq!(
        s.js(
            "return document.activeElement.closest('#leases') && document.activeElement.dataset.key"
        )
        .await,
        "leader",
        "the focus is back on the row"
    );

    // From a segment: node-a's tenure opens the same view, that tenure marked.
    choose(&s, "600").await;
    let segment = format!(
        "document.querySelector('#timeline g.segment[data-key=\"leader\"][data-fence=\"{}\"]')",
        past[4]["tenure"]
    );
    poll_until("node-a's segment", Duration::from_secs(10), || async {
        s.js(&format!("return !!{segment}")).await == true
    })
    .await;
    s.js(&format!("{segment}.focus(); return true")).await;
    press(&s, ENTER).await;
    poll_until(
        "node-a's tenure marked",
        Duration::from_secs(10),
        || async { s.js(MARKED_JS).await == json!(["node-a"]) },
    )
    .await;
    assert!(s.js("return document.getElementById('detail').open").await == true);
    press(&s, ESCAPE).await;
    poll_until(
        "the focus back on the segment",
        Duration::from_secs(3),
        || async {
            s.js(&format!(
            "return !document.getElementById('detail').open && document.activeElement === {segment}"
        ))
        .await
            == true
        },
    )
    .await;
    // A click opens it too.
    let rect = format!(
        "#timeline g.segment[data-key=\"leader\"][data-fence=\"{}\"] rect",
        past[0]["tenure"]
    );
    click(&s, &rect).await;
    poll_until("node-e's tenure marked", Duration::from_secs(5), || async {
        s.js(MARKED_JS).await == json!(["node-e"])
    })
    .await;
    assert_eq!(s.console_errors().await, Vec::<String>::new());
}

/// The tenures of shard `shard` of group `jobs`, newest first.
async fn shard_tenures(http: &Http, shard: usize) -> Vec<Value> {
    let mut reply = http
        .get(&format!("/v1/leases/jobs-{shard}/history"))
        .await
        .body;
    std::mem::take(reply["tenures"].as_array_mut().unwrap())
}

/// The hand-overs of group `jobs` the history shows, newest first: shard,
/// from, to, how the earlier tenure ended, the later one's fence.
async fn handovers(http: &Http) -> Vec<Value> {
    let mut all = Vec::new();
    for shard in 0..6 {
        let list = shard_tenures(http, shard).await;
        for pair in list.windows(2) {
            let (later, earlier) = (&pair[0], &pair[1]);
            if later["holder"] != earlier["holder"] {
                all.push((
                    later["tenure"].as_u64().unwrap(),
                    json!([
                        shard.to_string(),
                        earlier["holder"],
                        later["holder"],
                        earlier["end"],
                        later["tenure"].to_string()
                    ]),
                ));
            }
        }
    }
    all.sort_by_key(|(fence, _)| std::cmp::Reverse(*fence));
    all.into_iter().map(|(_, h)| h).collect()
}

/// Whether the history of every shard of `jobs` ends with an open tenure
/// of `holder`, every earlier tenure ended.
async fn history_settled_on(http: &Http, holder: &str) -> bool {
    for shard in 0..6 {
        let tenures = shard_tenures(http, shard).await;
        let Some((newest, earlier)) = tenures.split_first() else {
            return false;
        };
        if newest["holder"] != holder
            || !newest["end"].is_null()
            || earlier.iter().any(|t| t["end"].is_null())
        {
            return false;
        }
    }
    true
}

#[tokio::test]
async fn shard_groups_show_their_hand_overs_over_the_window_from_the_history() {
    let (server, _gateway, http, _) = started().await;
    let alpha = Member::start(&server.url, "jobs", 6, "alpha");
    let _beta = Member::start(&server.url, "jobs", 6, "beta");
    eventually("3 shards each", Duration::from_secs(20), || async {
        let owners = shard_owners(&http, "jobs").await;
        (owners.len() == 2 && owners.values().all(|s| s.len() == 3)).then_some(())
    })
    .await;
    alpha.stop();
    eventually("beta to own all 6", Duration::from_secs(20), || async {
        let owners = shard_owners(&http, "jobs").await;
        (owners.len() == 1 && owners.get("beta").is_some_and(|s| s.len() == 6)).then_some(())
    })
    .await;
    // Every hand-over is in the history once each shard's newest tenure
    // is beta's and every earlier one has its end: the writer may lag.
    let expected = eventually(
        "the hand-overs recorded",
        Duration::from_secs(20),
        || async {
            let recorded = history_settled_on(&http, "beta").await;
            let all = handovers(&http).await;
            let to_beta = all
                .iter()
                .filter(|h| h[1] == "alpha" && h[2] == "beta" && h[3] == "transferred")
                .count();
            (recorded && to_beta >= 3).then_some(all)
        },
    )
    .await;

    let (_fresh, fresh_http) = fresh_gateway(&server).await;
    let s = Session::open(&fresh_http).await;
    let shown = "return [...document.querySelectorAll('#groups .group[data-group=\"jobs\"] .handovers li')].map(li => [li.dataset.shard, li.dataset.from, li.dataset.to, li.dataset.how, li.dataset.fence])";
    let title = "return document.querySelector('#groups .group[data-group=\"jobs\"] .handovers p')?.textContent";
    choose(&s, "600").await;
    poll_until(
        "the hand-overs from the history",
        Duration::from_secs(10),
        || async { s.js(shown).await == json!(expected) },
    )
    .await;
    let n = expected.len();
    assert_eq!(
        s.js(title).await,
        json!(format!(
            "{n} hand-over{} in the last 10 minutes:",
            if n == 1 { "" } else { "s" }
        ))
    );
    // The group's life as a range, the README's picture.
    let first = http.get("/v1/history?prefix=jobs-").await.body["tenures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["acquired_at"].as_str().unwrap().to_string())
        .min()
        .unwrap();
    let now = time::OffsetDateTime::now_utc() + time::Duration::SECOND;
    let rfc3339 = &time::format_description::well_known::Rfc3339;
    choose_range(
        &s,
        &to_second(&first, false),
        &to_second(&now.format(rfc3339).unwrap(), true),
    )
    .await;
    poll_until("the range drawn", Duration::from_secs(10), || async {
        s.js(shown).await == json!(expected) && status(&s).await.is_empty()
    })
    .await;
    s.screenshot("dashboard.png").await;
    // Live, this page saw none of them.
    choose(&s, "live").await;
    poll_until("no hand-over live", Duration::from_secs(5), || async {
        s.js(shown).await == json!([])
    })
    .await;
    assert_eq!(s.console_errors().await, Vec::<String>::new());
}

/// The keys of the timeline's lanes, top to bottom.
const LANES_JS: &str =
    "return [...document.querySelectorAll('#timeline text.lane')].map(t => t.textContent)";

#[tokio::test]
async fn the_filter_picks_the_timelines_lanes() {
    let (_server, _gateway, http, nats) = started().await;
    hold_all(
        &nats,
        (0..40).map(|i| format!("a-{i:02}")),
        "worker-a",
        60_000,
    )
    .await;
    hold_all(&nats, (0..3).map(|i| format!("b-{i}")), "worker-b", 60_000).await;
    let s = Session::open(&http).await;
    poll_until("30 lanes of 43", Duration::from_secs(5), || async {
        s.js(LANES_JS).await.as_array().unwrap().len() == 30
    })
    .await;
    assert_eq!(
        s.js("return document.getElementById('timeline-lanes').textContent")
            .await,
        "30 of 43 keys drawn (the most recently active); the filter narrows them."
    );
    let filter = |text: &'static str| {
        let s = &s;
        async move {
            s.set("filter", text, "input").await;
            s.js(LANES_JS).await
        }
    };
    assert_eq!(
        filter("b-").await,
        json!(["b-0", "b-1", "b-2"]),
        "by key prefix"
    );
    assert_eq!(
        s.js("return document.getElementById('timeline-lanes').textContent")
            .await,
        ""
    );
    assert_eq!(
        filter("worker-b").await,
        json!(["b-0", "b-1", "b-2"]),
        "by holder"
    );
    assert_eq!(
        filter("a-3").await,
        json!((30..40).map(|i| format!("a-{i}")).collect::<Vec<_>>())
    );
    assert_eq!(filter("nobody").await, json!([]));
    assert_eq!(
        s.js("return document.querySelector('#timeline p').textContent")
            .await,
        "No key matching the filter changed in this window."
    );
    assert_eq!(filter("").await.as_array().unwrap().len(), 30);
    assert_eq!(s.console_errors().await, Vec::<String>::new());
}

#[tokio::test]
async fn with_a_read_token_the_dashboard_reads_the_history() {
    let server = NatsServer::start().await;
    let env = [
        ("DAGNATS_HTTP_TOKEN", "wr1te"),
        ("DAGNATS_HTTP_READ_TOKEN", "r3ad"),
    ];
    let gateway = Gateway::start_with(&server.url, &[], &env).await;
    let http = Http::of(&gateway).await.with_token("wr1te");
    let nats = client(&server.url).await;
    let past = five_tenures(&nats, &http).await;
    let s = open_with_token(&http, "r3ad").await;
    choose(&s, "3600").await;
    poll_until("the history drawn", Duration::from_secs(10), || async {
        lane(&s, "leader").await == drawn(&past)
    })
    .await;
    assert_eq!(status(&s).await, "");
    assert_eq!(errors_once_authorized(&s).await, Vec::<String>::new());
}

#[tokio::test]
async fn a_window_with_more_tenures_than_the_page_fetches_says_so() {
    let (_server, _gateway, http, nats) = started().await;
    hold_all(&nats, (0..60).map(|i| format!("c-{i:02}")), "bulk", 120_000).await;
    eventually(
        "every tenure in the history",
        Duration::from_secs(30),
        || async {
            let page = http.get("/v1/history?limit=100").await.body;
            (page["tenures"].as_array().map(Vec::len) == Some(60)).then_some(())
        },
    )
    .await;
    // The page fetches at most 50 tenures per window here.
    let s = Session::start().await;
    s.browser
        .goto(&format!("{}/?history-cap=50", http.base))
        .await
        .unwrap();
    s.until_live("the event stream", Duration::from_secs(10))
        .await;
    choose(&s, "3600").await;
    poll_until("the capped window", Duration::from_secs(10), || async {
        status(&s).await
            == "Showing the newest 50 tenures of this window: older ones are not drawn."
    })
    .await;
    let asked = s
        .js("return performance.getEntriesByType('resource').map(e => new URL(e.name)).filter(u => u.pathname === '/v1/history').map(u => u.searchParams.get('limit'))")
        .await;
    assert_eq!(asked, json!(["50"]), "one page, no more than the cap");
    assert_eq!(s.console_errors().await, Vec::<String>::new());
}

#[tokio::test]
async fn under_a_policy_a_read_only_token_looks_back_at_its_own_keys_only() {
    let t = Tenants::start().await;
    let a = t.hold("alice", "team-a-leader", "a1").await;
    let (released, _) = t
        .call(
            "alice",
            "release",
            release("team-a-leader", "a1", &a["revision"]),
        )
        .await;
    assert_eq!(released["released"], true, "{released}");
    t.hold("alice", "team-a-leader", "a2").await;
    t.hold("bob", "team-b-leader", "b1").await;
    let http = Http::of(&t.gateways[0]).await;
    let admin = http.with_token(ADMIN_TOKEN);
    let past = tenures(&admin, "team-a-leader", 1, 1).await;
    tenures(&admin, "team-b-leader", 0, 1).await;

    let s = open_with_token(&http, DASHBOARD_TOKEN).await;
    choose(&s, "600").await;
    poll_until(
        "team A's history drawn",
        Duration::from_secs(10),
        || async { lane(&s, "team-a-leader").await == drawn(&past) && status(&s).await.is_empty() },
    )
    .await;
    assert_eq!(
        s.js(LANES_JS).await,
        json!(["team-a-leader"]),
        "no other team's key"
    );
    s.js("document.querySelector('#leases tr[data-key=\"team-a-leader\"]').click(); return true")
        .await;
    poll_until("its tenures", Duration::from_secs(10), || async {
        s.js(TENURE_ROWS_JS).await == tenure_rows(&past)
    })
    .await;
    assert_eq!(errors_once_authorized(&s).await, Vec::<String>::new());
}

/// The timeline's flapping lanes (key and the holder changes it counts)
/// and its line naming them.
async fn flagged(s: &Session) -> (Value, Value) {
    let lanes = "return [...document.querySelectorAll('#timeline g.flapping')].map(g => [g.dataset.key, Number(g.dataset.changes)])";
    let line = "return document.getElementById('timeline-flapping').textContent";
    (s.js(lanes).await, s.js(line).await)
}

#[tokio::test]
async fn a_key_whose_holder_changed_more_than_five_times_in_the_window_is_marked_flapping() {
    let (server, _gateway, http, nats) = started().await;
    // flappy: a, b, a, b, a, b, a (6 changes); calm: a three times (none).
    for (key, holders) in [
        ("flappy", ["a", "b", "a", "b", "a", "b", "a"].as_slice()),
        ("calm", &["a", "a", "a"]),
    ] {
        for holder in holders {
            let got = call(&nats, "acquire", acquire(key, holder, 30_000)).await;
            call(&nats, "release", release(key, holder, &got["revision"])).await;
        }
    }
    tenures(&http, "flappy", 7, 0).await;
    tenures(&http, "calm", 3, 0).await;
    let summary = "Flapping (holder changed more than 5 times in this window): flappy (6).";
    // From the history, on a page that saw none of it.
    let (_fresh, fresh_http) = fresh_gateway(&server).await;
    let s = Session::open(&fresh_http).await;
    choose(&s, "600").await;
    poll_until("flappy marked", Duration::from_secs(10), || async {
        flagged(&s).await == (json!([["flappy", 6]]), json!(summary))
    })
    .await;
    assert_eq!(
        s.js("return document.querySelector('#timeline g.flapping title').textContent")
            .await,
        "flappy: its holder changed 6 times in this window"
    );
    // Live, the page saw no change: nothing flaps.
    choose(&s, "live").await;
    poll_until("nothing flapping live", Duration::from_secs(5), || async {
        flagged(&s).await == (json!([]), json!(""))
    })
    .await;
    assert_eq!(s.console_errors().await, Vec::<String>::new());
}
