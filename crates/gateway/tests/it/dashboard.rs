//! The owner dashboard in a real browser: Debian's Chromium driven through
//! chromedriver (WebDriver), against a real gateway and nats-server.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::lease_ops::acquire;
use crate::common::{Gateway, Http, NatsServer, call, client, command, eventually};
use dagnats_leases_testkit::chromium::Driver;
use dagnats_leases_testkit::free_port;
use fantoccini::{Client as Browser, ClientBuilder, Locator};
use futures::StreamExt;
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

/// A headless Chromium session through chromedriver, stopped on drop.
pub(crate) struct Session {
    pub(crate) browser: Browser,
    _driver: Driver,
}

impl Session {
    pub(crate) async fn start() -> Session {
        let driver = Driver::start().await;
        // chromedriver is plain HTTP on loopback: no TLS stack needed.
        let browser = ClientBuilder::new(HttpConnector::new())
            .capabilities(driver.capabilities())
            .connect(&driver.url)
            .await
            .expect("a Chromium session");
        Session {
            browser,
            _driver: driver,
        }
    }

    /// Opens the dashboard and waits for its event stream.
    pub(crate) async fn open(http: &Http) -> Session {
        let s = Session::start().await;
        s.browser.goto(&format!("{}/", http.base)).await.unwrap();
        s.until_live("the event stream to connect", Duration::from_secs(10))
            .await;
        s
    }

    /// Waits until the page says its event stream is live.
    pub(crate) async fn until_live(&self, what: &str, within: Duration) {
        poll_until(what, within, || async {
            self.js("return document.getElementById('status').textContent")
                .await
                == "live"
        })
        .await;
    }

    pub(crate) async fn js(&self, script: &str) -> Value {
        self.browser
            .execute(script, vec![])
            .await
            .expect("script runs")
    }

    /// Console messages at level SEVERE (errors) since the last call.
    pub(crate) async fn console_errors(&self) -> Vec<String> {
        let logs = self
            .browser
            .issue_cmd(BrowserLog)
            .await
            .expect("browser log");
        logs.as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].to_string())
            .collect()
    }

    pub(crate) async fn row_exists(&self, key: &str) -> bool {
        self.js(&format!(
            "return !!document.querySelector('#leases tr[data-key=\"{key}\"]')"
        ))
        .await
        .as_bool()
        .unwrap()
    }

    pub(crate) async fn log_has(&self, event: &str, key: &str) -> bool {
        let script = format!(
            "return [...document.querySelectorAll('#log li')].some(li => li.dataset.event === '{event}' && li.textContent.includes(' {key} '))"
        );
        self.js(&script).await.as_bool().unwrap()
    }

    /// Types `token` into the page's token prompt, open, and submits it.
    pub(crate) async fn give_token(&self, token: &str) {
        let input = self.browser.find(Locator::Id("token")).await.unwrap();
        input.send_keys(token).await.unwrap();
        self.js("document.getElementById('token-form').requestSubmit(); return true")
            .await;
    }

    /// Resolves once the page has laid out and painted its next frame.
    pub(crate) async fn painted(&self) {
        self.browser
            .execute_async(
                "const done = arguments[0]; requestAnimationFrame(() => requestAnimationFrame(() => done(true)))",
                vec![],
            )
            .await
            .expect("two frames");
    }

    /// Sets the control `id` to `value` and fires `event` on it, as a
    /// user's typing (`input`) or choosing (`change`) would.
    pub(crate) async fn set(&self, id: &str, value: &str, event: &str) {
        self.js(&format!(
            "const f = document.getElementById({}); f.value = {}; f.dispatchEvent(new Event({})); return true",
            json!(id),
            json!(value),
            json!(event)
        ))
        .await;
    }

    pub(crate) async fn screenshot(&self, name: &str) {
        self.painted().await;
        let png = self.browser.screenshot().await.expect("screenshot");
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-output");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), &png).unwrap();
        if std::env::var_os("UPDATE_SCREENSHOT").is_some() {
            let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
            std::fs::create_dir_all(&docs).unwrap();
            std::fs::write(docs.join(name), &png).unwrap();
        }
    }
}

/// chromedriver's browser log (`POST /session/{id}/se/log`).
#[derive(Debug)]
struct BrowserLog;

impl fantoccini::wd::WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(r#"{"type":"browser"}"#.into()))
    }
}

pub(crate) async fn poll_until<F, Fut>(what: &str, within: Duration, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut check = check;
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "{what} within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A shard-group member run by the CLI, killed on drop if still running.
pub(crate) struct Member(Child);

impl Member {
    pub(crate) fn start(nats_url: &str, group: &str, count: u32, holder: &str) -> Member {
        let count = count.to_string();
        let args = [
            "shards", group, "--count", &count, "--holder", holder, "--ttl-ms", "3000",
        ];
        let child = command(nats_url, &args)
            .stdout(Stdio::null())
            .spawn()
            .expect("a CLI member");
        Member(child)
    }

    /// SIGTERM: the member leaves gracefully, handing its shards over.
    pub(crate) fn stop(mut self) {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let exit = self.0.wait().unwrap();
        assert!(exit.success(), "{exit:?}");
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Who holds which shards of `group` (keys `group-<i>`), as `GET
/// /v1/leases` says: holder to shard numbers, ascending.
pub(crate) async fn shard_owners(http: &Http, group: &str) -> BTreeMap<String, Vec<u32>> {
    let prefix = format!("{group}-");
    let list = http.get(&format!("/v1/leases?prefix={prefix}")).await.body;
    let mut owners: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for lease in list["leases"].as_array().expect("a listing") {
        let shard = lease["key"]
            .as_str()
            .and_then(|key| key.strip_prefix(&prefix))
            .and_then(|n| n.parse::<u32>().ok());
        if let Some(shard) = shard {
            let holder = lease["holder"].as_str().unwrap().to_string();
            owners.entry(holder).or_default().push(shard);
        }
    }
    owners.values_mut().for_each(|shards| shards.sort());
    owners
}

/// The rows the shard-groups panel shows for `owners`: member, count, which.
fn panel_rows(owners: &BTreeMap<String, Vec<u32>>) -> Value {
    let rows: Vec<Value> = owners
        .iter()
        .map(|(holder, shards)| {
            let which: Vec<String> = shards.iter().map(u32::to_string).collect();
            json!([holder, shards.len().to_string(), which.join(", ")])
        })
        .collect();
    json!(rows)
}

/// The shard-groups panel's rows for group `jobs`, as text.
const PANEL_JS: &str = "return [...document.querySelectorAll('#groups .group[data-group=\"jobs\"] tbody tr')].map(tr => [...tr.cells].map(c => c.textContent))";

#[tokio::test]
async fn the_dashboard_shows_who_holds_what_live() {
    let server = NatsServer::start().await;
    let gateway = Gateway::start(&server.url).await;
    let http = Http::of(&gateway).await;
    let nats = client(&server.url).await;
    let s = Session::open(&http).await;

    // A lease acquired through the API appears within a second.
    let lease = call(&nats, "acquire", acquire("shard-1", "worker-a", 15_000)).await;
    poll_until("the row", Duration::from_secs(1), || {
        s.row_exists("shard-1")
    })
    .await;
    let cells = s
        .js("return [...document.querySelector('#leases tr[data-key=\"shard-1\"]').cells].slice(0, 3).map(c => c.textContent)")
        .await;
    assert_eq!(
        cells,
        json!(["shard-1", "worker-a", lease["revision"].to_string()])
    );

    // Its bar counts down.
    let scale = "const m = new DOMMatrix(getComputedStyle(document.querySelector('#leases tr[data-key=\"shard-1\"] .bar > span')).transform); return m.a";
    let first = s.js(scale).await.as_f64().unwrap();
    poll_until("the bar to count down", Duration::from_secs(2), || async {
        let later = s.js(scale).await.as_f64().unwrap();
        later < first && later > 0.0
    })
    .await;

    // A renewal flashes the row and moves the fence.
    let renewed = call(
        &nats,
        "renew",
        json!({"key": "shard-1", "holder": "worker-a", "revision": lease["revision"], "ttl_ms": 15000}),
    )
    .await;
    poll_until("the flash", Duration::from_secs(1), || async {
        s.js("return document.querySelector('#leases tr[data-key=\"shard-1\"]').classList.contains('flash')")
            .await
            == true
    })
    .await;
    let fence = s
        .js("return document.querySelector('#leases tr[data-key=\"shard-1\"] td.fence').textContent")
        .await;
    assert_eq!(fence, json!(renewed["revision"].to_string()));

    // Release removes it and logs `released`.
    call(
        &nats,
        "release",
        json!({"key": "shard-1", "holder": "worker-a", "revision": renewed["revision"]}),
    )
    .await;
    poll_until("the row to go", Duration::from_secs(2), || async {
        !s.row_exists("shard-1").await
    })
    .await;
    poll_until("a released line", Duration::from_secs(2), || {
        s.log_has("released", "shard-1")
    })
    .await;

    // An expiry logs `expired`.
    call(&nats, "acquire", acquire("short", "worker-b", 1_000)).await;
    poll_until("an expired line", Duration::from_secs(6), || {
        s.log_has("expired", "short")
    })
    .await;

    // The timeline shows two holders of one key, in order, with fences.
    let a = call(&nats, "acquire", acquire("leader", "node-a", 15_000)).await;
    call(
        &nats,
        "release",
        json!({"key": "leader", "holder": "node-a", "revision": a["revision"]}),
    )
    .await;
    let b = call(&nats, "acquire", acquire("leader", "node-b", 15_000)).await;
    let segments_js = "return [...document.querySelectorAll('#timeline g.segment[data-key=\"leader\"]')].map(g => [g.dataset.holder, Number(g.dataset.fence), Number(g.querySelector('rect').getAttribute('x'))]).sort((p, q) => p[2] - q[2]).map(p => [p[0], p[1]])";
    poll_until("two segments", Duration::from_secs(3), || async {
        s.js(segments_js).await.as_array().unwrap().len() == 2
    })
    .await;
    assert_eq!(
        s.js(segments_js).await,
        json!([["node-a", a["revision"]], ["node-b", b["revision"]]])
    );

    for i in 0..8 {
        call(
            &nats,
            "acquire",
            acquire(&format!("shard-{i}"), &format!("worker-{}", i % 3), 30_000),
        )
        .await;
    }
    poll_until("the rows", Duration::from_secs(2), || {
        s.row_exists("shard-7")
    })
    .await;
    s.screenshot("dashboard-live.png").await;
    assert_eq!(
        s.console_errors().await,
        Vec::<String>::new(),
        "no console errors"
    );
}

#[tokio::test]
async fn the_dashboard_reconnects_after_the_gateway_restarts_and_reads_its_window_again() {
    let server = NatsServer::start().await;
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let start = || async {
        let g = Gateway::spawn(&server.url, &[], &[("DAGNATS_HTTP_ADDR", addr.as_str())]);
        g.log
            .wait_for("leases bucket ready", Duration::from_secs(15))
            .await
            .expect("ready");
        g.wait_serving().await;
        g.http_url().await;
        g
    };
    let gateway = start().await;
    let nats = client(&server.url).await;
    let gone = call(&nats, "acquire", acquire("gone", "w", 60_000)).await;
    let s = Session::start().await;
    s.browser.goto(&format!("http://{addr}/")).await.unwrap();
    poll_until("the row", Duration::from_secs(10), || s.row_exists("gone")).await;
    // The last 10 minutes, read from the history once.
    let history_reads = "return performance.getEntriesByType('resource').filter(e => new URL(e.name).pathname === '/v1/history').length";
    s.js("document.querySelector('input[name=\"window\"][value=\"600\"]').click(); return true")
        .await;
    poll_until("the window read", Duration::from_secs(10), || async {
        s.js(history_reads).await == 1
            && s.js("return document.getElementById('timeline').getAttribute('aria-busy')")
                .await
                == "false"
    })
    .await;

    drop(gateway);
    poll_until(
        "the indicator to show the drop",
        Duration::from_secs(10),
        || async {
            s.js("return document.getElementById('status').classList.contains('down')")
                .await
                == true
        },
    )
    .await;
    let _gateway = start().await;
    // While it was down, one lease ended and another began.
    call(
        &nats,
        "release",
        json!({"key": "gone", "holder": "w", "revision": gone["revision"]}),
    )
    .await;
    call(&nats, "acquire", acquire("new", "w", 60_000)).await;
    s.until_live("the stream to come back", Duration::from_secs(15))
        .await;
    poll_until(
        "the table to be right again",
        Duration::from_secs(5),
        || async { s.row_exists("new").await && !s.row_exists("gone").await },
    )
    .await;
    // What the page may have missed while away, the window reads again.
    poll_until("the window read again", Duration::from_secs(10), || async {
        s.js(history_reads).await == 2
    })
    .await;
    // gone's tenure has ended, as the history says or as the listing shows.
    let gone = "return document.querySelector('#timeline g.segment[data-key=\"gone\"]')?.getAttribute('aria-label') ?? null";
    poll_until("gone's tenure ended", Duration::from_secs(10), || async {
        s.js(gone)
            .await
            .as_str()
            .is_some_and(|l| !l.contains(" to now"))
    })
    .await;
}

#[tokio::test]
async fn revoke_needs_the_write_token_and_frees_the_key_with_a_higher_fence() {
    let server = NatsServer::start().await;
    let gateway = Gateway::spawn(&server.url, &[], &[("DAGNATS_HTTP_TOKEN", "s3cret")]);
    gateway
        .log
        .wait_for("leases bucket ready", Duration::from_secs(15))
        .await
        .expect("ready");
    let http = Http::of(&gateway).await;
    let nats = client(&server.url).await;
    let held = call(&nats, "acquire", acquire("stuck", "zombie", 60_000)).await;
    let s = Session::start().await;
    s.browser.goto(&format!("{}/", http.base)).await.unwrap();
    poll_until("the row", Duration::from_secs(10), || s.row_exists("stuck")).await;
    s.browser
        .find(Locator::Css("#leases tr[data-key=\"stuck\"]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    s.js("window.confirm = () => true; return true").await;
    s.browser
        .find(Locator::Id("revoke"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // Refused without the token: the page asks for it, the lease stands.
    poll_until("the token prompt", Duration::from_secs(5), || async {
        s.js("return document.getElementById('token-dialog').open")
            .await
            == true
    })
    .await;
    assert_eq!(
        call(&nats, "owner", json!({"key": "stuck"})).await["holder"],
        "zombie"
    );
    s.give_token("s3cret").await;
    poll_until("the revoke to land", Duration::from_secs(5), || async {
        s.js("return document.getElementById('revoke-result').textContent")
            .await
            .as_str()
            .unwrap()
            .starts_with("Revoked")
    })
    .await;
    assert_eq!(
        call(&nats, "owner", json!({"key": "stuck"})).await,
        json!({"held": false, "key": "stuck"})
    );
    let renew =
        json!({"key": "stuck", "holder": "zombie", "revision": held["revision"], "ttl_ms": 60000});
    assert_eq!(
        call(&nats, "renew", renew).await["kind"],
        "lost",
        "the old fence is stale"
    );
    let token_in_urls = s
        .js("return performance.getEntriesByType('resource').some(e => e.name.includes('s3cret'))")
        .await;
    assert_eq!(token_in_urls, false, "the token never goes in a URL");
}

/// A nats-server, a gateway on it, its HTTP API and a NATS client.
pub(crate) async fn started() -> (NatsServer, Gateway, Http, async_nats::Client) {
    let server = NatsServer::start().await;
    let gateway = Gateway::start(&server.url).await;
    let http = Http::of(&gateway).await;
    let nats = client(&server.url).await;
    (server, gateway, http, nats)
}

/// Milliseconds from opening the page to the mark `name` it set.
async fn mark(s: &Session, name: &str) -> f64 {
    let script = format!("return performance.getEntriesByName('{name}')[0]?.startTime ?? null");
    s.js(&script)
        .await
        .as_f64()
        .unwrap_or_else(|| panic!("no mark {name}"))
}

/// Every key the table puts on the page while it is scrolled from top to
/// bottom, a screenful at a time.
const SCROLL_THROUGH_JS: &str = "const done = arguments[0]; \
    const wrap = document.querySelector('.table-wrap'); const keys = new Set(); \
    const step = () => { \
      for (const tr of document.querySelectorAll('#leases tr[data-key]')) keys.add(tr.dataset.key); \
      if (wrap.scrollTop + wrap.clientHeight >= wrap.scrollHeight - 1) { wrap.scrollTop = 0; done([...keys].sort()); return; } \
      wrap.scrollTop += wrap.clientHeight - 40; \
      requestAnimationFrame(() => requestAnimationFrame(step)); }; \
    wrap.scrollTop = 0; requestAnimationFrame(() => requestAnimationFrame(step));";

/// Types `text` into the filter and answers, once the page has painted
/// the result: the milliseconds it took and the keys of the rows shown.
const FILTER_JS: &str = "const [text, done] = arguments; const t0 = performance.now(); \
    const f = document.getElementById('filter'); f.value = text; f.dispatchEvent(new Event('input')); \
    requestAnimationFrame(() => requestAnimationFrame(() => done([performance.now() - t0, \
      [...document.querySelectorAll('#leases tr[data-key]')].map(tr => tr.dataset.key)])));";

/// Checks what is shown; the times it prints are figures for
/// docs/feature-costs.md, not asserted (a loaded machine is no stopwatch).
#[tokio::test]
async fn ten_thousand_held_leases_are_all_shown_filtered_and_kept_live() {
    let server = NatsServer::start().await;
    let gateway = Gateway::start(&server.url).await;
    let http = Http::of(&gateway).await;
    let nats = client(&server.url).await;
    const N: usize = 10_000;
    let key = |i: usize| format!("k{i:05}");
    let acquires = (0..N).map(|i| {
        let nats = nats.clone();
        let body = acquire(&key(i), &format!("h-{}", i % 10), 120_000);
        async move { call(&nats, "acquire", body).await }
    });
    // 64 at a time: the page is under test here, not the gateway's burst.
    let leases: Vec<Value> = futures::stream::iter(acquires).buffered(64).collect().await;
    let s = Session::start().await;
    s.browser.set_window_size(1400, 2000).await.unwrap();
    s.browser
        .update_timeouts(fantoccini::wd::TimeoutConfiguration::new(
            Some(Duration::from_secs(60)),
            None,
            None,
        ))
        .await
        .unwrap();
    let started = Instant::now();
    s.browser.goto(&format!("{}/", http.base)).await.unwrap();
    poll_until("every lease listed", Duration::from_secs(30), || async {
        s.js("return performance.getEntriesByName('dagnats:leases-shown').length")
            .await
            == json!(1)
    })
    .await;
    let waited = started.elapsed();
    let (read, shown) = (
        mark(&s, "dagnats:leases").await,
        mark(&s, "dagnats:leases-shown").await,
    );
    assert_eq!(
        s.js("return [document.getElementById('count').textContent, document.getElementById('leases').getAttribute('aria-rowcount')]").await,
        json!([format!("{N} held"), (N + 1).to_string()])
    );
    let seen = s
        .browser
        .execute_async(SCROLL_THROUGH_JS, vec![])
        .await
        .unwrap();
    let seen: BTreeSet<&str> = seen
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    let missing: Vec<String> = (0..N)
        .map(key)
        .filter(|k| !seen.contains(k.as_str()))
        .collect();
    assert_eq!(
        (seen.len(), &missing[..missing.len().min(5)]),
        (N, &[][..]),
        "every lease is on the page once scrolled to"
    );

    // A key prefix, then a holder: the rows shown are exactly the matches.
    let by_key = s
        .browser
        .execute_async(FILTER_JS, vec![json!("k0999")])
        .await
        .unwrap();
    let expected: Vec<String> = (9_990..10_000).map(key).collect();
    assert_eq!(by_key[1], json!(expected));
    let by_holder = s
        .browser
        .execute_async(FILTER_JS, vec![json!("h-3")])
        .await
        .unwrap();
    assert_eq!(
        s.js("return document.getElementById('count').textContent")
            .await,
        json!(format!("{N} held, {} shown", N / 10))
    );
    let first_rows: Vec<String> = (0..N).filter(|i| i % 10 == 3).map(key).take(5).collect();
    assert_eq!(
        by_holder[1].as_array().unwrap()[..5],
        json!(first_rows).as_array().unwrap()[..]
    );
    let cleared = s
        .browser
        .execute_async(FILTER_JS, vec![json!("")])
        .await
        .unwrap();
    // What the timeline's redraw, once a second, costs at this size.
    let redraw = s
        .browser
        .execute_async(
            "const done = arguments[0]; import('/timeline.js').then(m => { const t0 = performance.now(); m.draw(); done(performance.now() - t0); })",
            vec![],
        )
        .await
        .unwrap();
    // Renew them all while the page measures its longest frame gap.
    s.js("window.__gap = 0; let last = performance.now(); (function f(t) { window.__gap = Math.max(window.__gap, t - last); last = t; if (!window.__stop) requestAnimationFrame(f); })(performance.now()); return true")
        .await;
    let renews = leases.iter().map(|l| {
        let nats = nats.clone();
        let body = json!({"key": l["key"], "holder": l["holder"], "revision": l["revision"], "ttl_ms": 120000});
        async move { call(&nats, "renew", body).await }
    });
    let renewed: Vec<Value> = futures::stream::iter(renews).buffered(64).collect().await;
    let first = &renewed[0];
    poll_until("the renewal of the first row to show", Duration::from_secs(30), || async {
        s.js("return document.querySelector('#leases tr[data-key=\"k00000\"] td.fence').textContent")
            .await
            == json!(first["revision"].to_string())
    })
    .await;
    let gap = s
        .js("window.__stop = true; return window.__gap")
        .await
        .as_f64()
        .unwrap();
    println!(
        "{N} leases: listing read {read:.0} ms and every lease shown {shown:.0} ms after opening \
         (test's wall clock {waited:?}); filter by key {:.0} ms, by holder {:.0} ms, cleared {:.0} ms; \
         timeline redraw {:.0} ms; longest frame gap while {N} renewals streamed in: {gap:.0} ms",
        by_key[0].as_f64().unwrap(),
        by_holder[0].as_f64().unwrap(),
        cleared[0].as_f64().unwrap(),
        redraw.as_f64().unwrap()
    );
    assert_eq!(s.console_errors().await, Vec::<String>::new());
}

#[tokio::test]
async fn the_dashboard_shows_the_stream_leader_and_every_live_gateway() {
    let server = NatsServer::start().await;
    let gateway = Gateway::start(&server.url).await;
    let _other = Gateway::start(&server.url).await;
    let http = Http::of(&gateway).await;
    let view = http.get("/v1/cluster").await.body;
    let leader = view["stream"]["leader"].as_str().unwrap().to_string();
    let own = view["gateway"]["id"].as_str().unwrap().to_string();
    let s = Session::start().await;
    s.browser.goto(&format!("{}/", http.base)).await.unwrap();
    let column = |table: &str| {
        format!(
            "return [...document.querySelectorAll('#{table} tbody tr')].map(tr => tr.cells[0].textContent)"
        )
    };
    poll_until("both gateways listed", Duration::from_secs(10), || async {
        s.js(&column("cluster-gateways"))
            .await
            .as_array()
            .unwrap()
            .len()
            == 2
    })
    .await;
    let gateways = s.js(&column("cluster-gateways")).await;
    let mut expected: Vec<String> = view["gateways"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let id = g["id"].as_str().unwrap();
            if id == own {
                format!("{id} (this one)")
            } else {
                id.to_string()
            }
        })
        .collect();
    expected.sort();
    assert_eq!(gateways, json!(expected));
    assert_eq!(s.js(&column("cluster-replicas")).await, json!([leader]));
    assert_eq!(
        s.js("return document.getElementById('cluster-leader').textContent")
            .await,
        json!(format!("KV_leases leader: {leader}"))
    );
    let nodes = s.js(&column("cluster-nodes")).await;
    assert_eq!(
        nodes,
        json!([format!(
            "{} (connected)",
            server.url.trim_start_matches("nats://")
        )])
    );
}

#[tokio::test]
async fn the_dashboard_shows_shard_groups_by_owner_and_transfers_in_the_log() {
    let server = NatsServer::start().await;
    let gateway = Gateway::start(&server.url).await;
    let http = Http::of(&gateway).await;
    let s = Session::open(&http).await;
    assert_eq!(
        s.js("return document.getElementById('no-groups').hidden")
            .await,
        false,
        "no group before any member runs"
    );
    let alpha = Member::start(&server.url, "jobs", 6, "alpha");
    let _beta = Member::start(&server.url, "jobs", 6, "beta");
    let split = eventually("3 shards each", Duration::from_secs(20), || async {
        let owners = shard_owners(&http, "jobs").await;
        let even = owners.len() == 2 && owners.values().all(|shards| shards.len() == 3);
        even.then_some(owners)
    })
    .await;
    assert_eq!(split.keys().collect::<Vec<_>>(), ["alpha", "beta"]);
    poll_until(
        "the panel to show what the leases say",
        Duration::from_secs(5),
        || async { s.js(PANEL_JS).await == panel_rows(&split) },
    )
    .await;
    assert_eq!(
        s.js("return document.querySelector('#groups .group[data-group=\"jobs\"] h3').textContent")
            .await,
        "jobs: 2 members, 6 shards owned"
    );

    // alpha leaves gracefully: beta is given its shards by transfer.
    alpha.stop();
    let all = eventually("beta to own all 6", Duration::from_secs(20), || async {
        let owners = shard_owners(&http, "jobs").await;
        let alone = owners.len() == 1 && owners.get("beta").is_some_and(|s| s.len() == 6);
        alone.then_some(owners)
    })
    .await;
    poll_until(
        "the panel to show beta with all 6",
        Duration::from_secs(5),
        || async { s.js(PANEL_JS).await == panel_rows(&all) },
    )
    .await;
    assert_eq!(all["beta"], [0, 1, 2, 3, 4, 5]);

    // Each of alpha's shards moved by a transfer at a fence the gateway's
    // recent changes name; the log says so and the timeline marks it.
    let recent = http.get("/v1/events/recent").await.body;
    for shard in &split["alpha"] {
        let key = format!("jobs-{shard}");
        let transfer = recent["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["key"] == key.as_str() && e["previous_holder"] == "alpha")
            .unwrap_or_else(|| panic!("a transfer of {key} in {recent}"));
        assert_eq!(transfer["holder"], "beta");
        let line = format!("{key}: alpha → beta at fence {}", transfer["revision"]);
        poll_until("the transfer in the log", Duration::from_secs(2), || async {
            let script = format!(
                "return [...document.querySelectorAll('#log li')].some(li => li.dataset.event === 'transferred' && li.textContent.endsWith({}))",
                json!(line)
            );
            s.js(&script).await == true
        })
        .await;
        let lane = format!(
            "const lane = '#timeline [data-key=\"{key}\"]'; \
             const segs = [...document.querySelectorAll(lane + '.segment')].map(g => g.querySelector('rect')).map(r => [r.parentNode.dataset.holder, Number(r.parentNode.dataset.fence), Number(r.getAttribute('x')), Number(r.getAttribute('width'))]).sort((p, q) => p[2] - q[2]); \
             const marks = [...document.querySelectorAll(lane + '.handover')].map(g => [g.dataset.from, g.dataset.to]); \
             return {{ segs, marks }}"
        );
        // The timeline redraws every second. alpha may have had the shard
        // by a transfer from beta when it joined: the lane's last tenure is
        // the one that matters.
        let view = eventually("the hand-over drawn", Duration::from_secs(3), || async {
            let view = s.js(&lane).await;
            let last = view["segs"]
                .as_array()
                .and_then(|segs| segs.last().cloned());
            last.is_some_and(|seg| seg[1] == transfer["revision"])
                .then_some(view)
        })
        .await;
        let segs = view["segs"].as_array().unwrap();
        let [.., a, b] = segs.as_slice() else {
            panic!("two segments in the lane of {key}: {view}")
        };
        assert_eq!((&a[0], &b[0]), (&json!("alpha"), &json!("beta")), "{view}");
        assert_eq!(
            b[1], transfer["revision"],
            "beta's tenure begins at the transfer"
        );
        let (a_end, b_start) = (
            a[2].as_f64().unwrap() + a[3].as_f64().unwrap(),
            b[2].as_f64().unwrap(),
        );
        assert!((a_end - b_start).abs() < 0.01, "adjacent: {view}");
        let marks = view["marks"].as_array().unwrap();
        assert_eq!(marks.last(), Some(&json!(["alpha", "beta"])), "{view}");
    }
    s.screenshot("dashboard-shards.png").await;
    assert_eq!(s.console_errors().await, Vec::<String>::new());
}

/// Seconds since midnight of a `HH:MM:SS` label.
fn seconds_of_day(label: &str) -> i64 {
    let parts: Vec<i64> = label
        .split(':')
        .map(|p| p.parse().unwrap_or_else(|_| panic!("{label} is HH:MM:SS")))
        .collect();
    assert_eq!(parts.len(), 3, "{label} is HH:MM:SS");
    assert!(parts[0] < 24 && parts[1] < 60 && parts[2] < 60, "{label}");
    parts[0] * 3600 + parts[1] * 60 + parts[2]
}

fn seconds_of_day_now() -> i64 {
    let now = time::OffsetDateTime::now_utc();
    i64::from(now.hour()) * 3600 + i64::from(now.minute()) * 60 + i64::from(now.second())
}

#[tokio::test]
async fn the_timeline_has_a_time_axis_and_labelled_segments_with_detail_on_focus() {
    let server = NatsServer::start().await;
    let gateway = Gateway::start(&server.url).await;
    let http = Http::of(&gateway).await;
    let nats = client(&server.url).await;
    let opened = seconds_of_day_now();
    let s = Session::open(&http).await;
    let lease = call(&nats, "acquire", acquire("leader", "node-a", 60_000)).await;
    let fence = lease["revision"].as_u64().unwrap();
    let segment = "document.querySelector('#timeline g.segment[data-key=\"leader\"]')";
    poll_until("the segment", Duration::from_secs(3), || async {
        s.js(&format!("return !!{segment}")).await == true
    })
    .await;
    // A fresh tenure is no sliver.
    let width = s
        .js(&format!(
            "return Number({segment}.querySelector('rect').getAttribute('width'))"
        ))
        .await;
    assert!(width.as_f64().unwrap() >= 10.0, "width {width}");

    // The axis: wall-clock (UTC) labels, in order, within the window.
    let labels = s
        .js("return [...document.querySelectorAll('#timeline text.tick')].map(t => t.textContent)")
        .await;
    let now = seconds_of_day_now();
    let ticks: Vec<i64> = labels
        .as_array()
        .unwrap()
        .iter()
        .map(|l| seconds_of_day(l.as_str().unwrap()))
        .collect();
    assert!(ticks.len() >= 2, "{labels}");
    assert!(
        ticks
            .windows(2)
            .all(|w| (w[1] - w[0]).rem_euclid(86_400) > 0),
        "{labels}"
    );
    // The page has seen only this test's changes: a window of 10 s.
    for tick in &ticks {
        let age = (now - tick).rem_euclid(86_400);
        assert!(
            age <= (now - opened).rem_euclid(86_400) + 11,
            "{labels} at {now}"
        );
    }

    // The segment names its holder and fence once the text fits.
    poll_until("the label", Duration::from_secs(15), || async {
        s.js(&format!(
            "return {segment}.querySelector('text.seg-label')?.textContent ?? null"
        ))
        .await
            == format!("node-a @ {fence}")
    })
    .await;

    // Focus shows the detail, and it follows the focused segment as the
    // timeline redraws.
    s.js(&format!("{segment}.focus(); return true")).await;
    let detail = || async {
        s.js("return document.getElementById('timeline-detail').textContent")
            .await
            .as_str()
            .unwrap()
            .to_string()
    };
    let first = detail().await;
    let expected = format!("leader: node-a @ fence {fence}, from ");
    assert!(
        first.starts_with(&expected) && first.contains(" to now, held "),
        "{first}"
    );
    poll_until(
        "the detail to follow the redraw",
        Duration::from_secs(5),
        || async {
            let now = detail().await;
            now != first
                && now.starts_with(&expected)
                && s.js(&format!("return document.activeElement === {segment}"))
                    .await
                    == true
        },
    )
    .await;
    assert_eq!(
        s.js(&format!(
            "return {segment}.querySelector('title').textContent"
        ))
        .await,
        json!(detail().await),
        "the same detail on hover"
    );

    // Hovering another segment shows its detail; its end once it ended.
    let other = call(&nats, "acquire", acquire("follower", "node-b", 60_000)).await;
    call(
        &nats,
        "release",
        json!({"key": "follower", "holder": "node-b", "revision": other["revision"]}),
    )
    .await;
    let follower = "document.querySelector('#timeline g.segment[data-key=\"follower\"] rect')";
    poll_until("the ended segment", Duration::from_secs(3), || async {
        let label = s
            .js(&format!(
                "return {follower}?.parentNode.getAttribute('aria-label') ?? null"
            ))
            .await;
        label.as_str().is_some_and(|l| !l.contains(" to now"))
    })
    .await;
    s.js(&format!(
        "{follower}.dispatchEvent(new MouseEvent('mouseover', {{ bubbles: true }})); return true"
    ))
    .await;
    let hovered = detail().await;
    let expected = format!("follower: node-b @ fence {}, from ", other["revision"]);
    assert!(hovered.starts_with(&expected), "{hovered}");
    assert!(
        !hovered.contains(" to now"),
        "an ended tenure has an end: {hovered}"
    );
    s.screenshot("dashboard-timeline.png").await;
    assert_eq!(s.console_errors().await, Vec::<String>::new());
}

/// The keys of the table's rows on the page, top to bottom.
const ROWS_JS: &str =
    "return [...document.querySelectorAll('#leases tr[data-key]')].map(tr => tr.dataset.key)";

#[tokio::test]
async fn the_table_sorts_every_lease_and_the_arrows_move_past_the_rows_on_the_page() {
    let (_server, _gateway, http, nats) = started().await;
    // k000 has the longest TTL, k199 the shortest; holders h-0, h-1, h-2.
    let key = |i: usize| format!("k{i:03}");
    for i in 0..200 {
        let ttl = 300_000 - 1_000 * i as u64;
        call(
            &nats,
            "acquire",
            acquire(&key(i), &format!("h-{}", i % 3), ttl),
        )
        .await;
    }
    let s = Session::open(&http).await;
    poll_until("200 held", Duration::from_secs(5), || async {
        s.js("return document.getElementById('count').textContent")
            .await
            == "200 held"
    })
    .await;
    let sort = |by: &'static str| {
        let s = &s;
        async move {
            s.set("sort", by, "change").await;
            s.painted().await;
            s.js(ROWS_JS).await
        }
    };
    let first = |keys: Value| keys.as_array().unwrap()[..5].to_vec();
    assert_eq!(
        first(sort("key").await),
        json!([key(0), key(1), key(2), key(3), key(4)])
            .as_array()
            .unwrap()
            .clone()
    );
    let by_holder = [0, 3, 6, 9, 12].map(key);
    assert_eq!(
        first(sort("holder").await),
        json!(by_holder).as_array().unwrap().clone()
    );
    let by_left = [199, 198, 197, 196, 195].map(key);
    assert_eq!(
        first(sort("left").await),
        json!(by_left).as_array().unwrap().clone()
    );
    sort("key").await;

    // From the last row on the page, ArrowDown brings the next one in.
    let rows = s.js(ROWS_JS).await;
    let last = rows.as_array().unwrap().len() - 1;
    assert!(last < 199, "only part of the table is on the page: {last}");
    s.js(&format!(
        "document.querySelector('#leases tr[data-key=\"{}\"]').focus(); return true",
        key(last)
    ))
    .await;
    for _ in 0..3 {
        let focused = s.browser.active_element().await.unwrap();
        focused.send_keys("\u{E015}").await.unwrap();
    }
    assert_eq!(
        s.js("return document.activeElement.dataset.key").await,
        json!(key(last + 3))
    );
    assert_eq!(s.console_errors().await, Vec::<String>::new());
}
