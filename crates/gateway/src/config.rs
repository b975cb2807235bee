//! Every setting of `dagnats-leases`: a flag, an environment variable and a
//! default each. Invalid settings stop the start with a clear message.
//!
//! No `Debug` on purpose: the settings hold secrets and must never be logged.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderValue;
use clap::{Args, ValueEnum};

use crate::policy::{HttpTokens, Policy};
use crate::settings::{BucketSettings, Coalescing, HistorySettings, HttpSettings};

/// How long the server keeps the marker of an expired lease.
const MARKER_TTL: Duration = Duration::from_secs(5);

/// Settings of the gateway (`dagnats-leases serve`).
#[derive(Clone, Args)]
pub struct Config {
    #[command(flatten)]
    pub nats: NatsConfig,

    /// Replicas of the leases bucket (3 in a cluster). Applied when the
    /// bucket is created; when set, an existing bucket is scaled to it
    /// once, when the gateway starts (later checks only log a difference).
    #[arg(long = "replicas", env = "DAGNATS_BUCKET_REPLICAS", value_parser = clap::value_parser!(u8).range(1..=5))]
    pub replicas: Option<u8>,

    /// Address of the HTTP API (`127.0.0.1:0`: any free port, logged).
    #[arg(long, env = "DAGNATS_HTTP_ADDR", default_value = "127.0.0.1:8080")]
    pub http_addr: SocketAddr,

    /// Bearer token that acquire, renew, release and forward over HTTP
    /// require. Unset: no token needed, which is allowed only on a loopback
    /// address or with `--http-insecure`.
    #[arg(long, env = "DAGNATS_HTTP_TOKEN", hide_env_values = true)]
    pub http_token: Option<String>,

    /// Serve HTTP beyond loopback without a write token, on purpose: anyone
    /// who reaches the address can then acquire, release and revoke any
    /// lease. Without it such a start is refused, like Redis's protected mode.
    #[arg(
        long,
        env = "DAGNATS_HTTP_INSECURE",
        value_parser = clap::builder::BoolishValueParser::new(),
        action = clap::ArgAction::SetTrue
    )]
    pub http_insecure: bool,

    /// Bearer token that owner, list and events over HTTP require (the
    /// write token is accepted too). Unset: reads are open.
    #[arg(long, env = "DAGNATS_HTTP_READ_TOKEN", hide_env_values = true)]
    pub http_read_token: Option<String>,

    /// A policy file (TOML) of principals: who may touch which keys, over
    /// NATS and HTTP (docs/protocol.md, Authorization). The HTTP tokens
    /// become two principals of it. Unset: no authorization beyond the
    /// HTTP tokens.
    #[arg(long, env = "DAGNATS_POLICY")]
    pub policy: Option<PathBuf>,

    /// Browser origins allowed to call the HTTP API, comma-separated. Unset:
    /// no CORS headers at all.
    #[arg(
        long = "http-cors-origin",
        env = "DAGNATS_HTTP_CORS_ORIGINS",
        value_delimiter = ','
    )]
    pub http_cors_origins: Vec<String>,

    /// Milliseconds between heartbeat comments on an idle event stream.
    #[arg(long, env = "DAGNATS_SSE_HEARTBEAT_MS", default_value_t = 15_000, value_parser = clap::value_parser!(u64).range(100..=300_000))]
    pub sse_heartbeat_ms: u64,

    /// Changes buffered for each event-stream client; a client that falls
    /// further behind is disconnected.
    #[arg(long, env = "DAGNATS_SSE_BUFFER", default_value_t = 1_024, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub sse_buffer: u64,

    /// Milliseconds a call already delivered may still run once shutdown
    /// begins; one still running then answers `internal` ("the gateway is
    /// stopping") rather than silence. Below Kubernetes' 30 s default
    /// termination grace, with room for the NATS drain after it.
    #[arg(long, env = "DAGNATS_SHUTDOWN_GRACE_MS", default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub shutdown_grace_ms: u64,

    /// Writes and read barriers a gateway keeps awaiting JetStream's answer
    /// before it sends the next ones together as one atomic batch (on a
    /// replicated bucket, nats-server 2.12+). Lower batches more; 1 gave the
    /// most renews and owner reads per second on 3 fsyncing nodes, and a
    /// lone call still goes at once.
    #[arg(long, env = "DAGNATS_PUBLISHES_IN_FLIGHT", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1_000))]
    pub publishes_in_flight: u64,

    /// The most writes and read barriers one atomic batch carries (the
    /// server takes up to 1,000). Once this many wait, a batch leaves
    /// beside those in flight (up to 4 sends at once), so a gateway's
    /// writes per second are not capped at one batch per round trip.
    #[arg(long, env = "DAGNATS_BATCH_MAX", default_value_t = 128, value_parser = clap::value_parser!(u64).range(2..=1_000))]
    pub batch_max: u64,

    /// Threads running the gateway's tasks. The gateway waits on NATS far
    /// more than it computes, and every hand-off of a task between two
    /// threads wakes one: on 3 fsyncing nodes and 2 gateways sharing two
    /// cores, one thread cut the gateways' CPU per renew by a fifth and per
    /// owner read by a tenth to a third. Raise it only when one gateway
    /// keeps a core busy. One thread runs tokio's current-thread scheduler:
    /// the multi-thread one runs a task the moment another wakes it, so
    /// the NATS connection's writer sent each message as it was queued (1.6
    /// system calls per renew, against 0.6 when it runs after the callers
    /// ready to queue theirs).
    #[arg(long, env = "DAGNATS_WORKER_THREADS", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1_024))]
    pub worker_threads: u16,

    /// How long the tenure history keeps who held which key, from when to
    /// when: a whole number and a unit (`s`, `m`, `h`, `d`), such as `7d`,
    /// `12h` or `90s`. `0` turns the history off: nothing is written, and
    /// history reads answer an empty page.
    #[arg(long, env = "DAGNATS_HISTORY_MAX_AGE", default_value = "7d", value_parser = parse_duration)]
    pub history_max_age: Duration,

    /// Milliseconds between checks of a ready bucket. Internal: tests
    /// shorten it to watch several checks quickly.
    #[arg(long, env = "DAGNATS_BUCKET_RECHECK_MS", hide = true, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub bucket_recheck_ms: u64,

    /// Log filter, e.g. `info` or `dagnats_leases=debug`.
    #[arg(long, env = "DAGNATS_LOG", default_value = "info")]
    pub log: String,

    /// Log format.
    #[arg(long, env = "DAGNATS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// How to reach NATS: shared by the gateway and the client commands.
#[derive(Clone, Args)]
pub struct NatsConfig {
    /// NATS server URL, or a comma-separated list of cluster members.
    #[arg(
        long,
        env = "NATS_URL",
        default_value = "nats://127.0.0.1:4222",
        value_delimiter = ','
    )]
    pub nats_url: Vec<String>,

    /// Connect only to the servers NATS_URL lists, never to the others
    /// the cluster advertises. Given one node's URL, a gateway stays on
    /// that node (and waits for it when it is down): run one gateway per
    /// node this way, and no partition leaves a side of the cluster
    /// without a gateway because they all drifted onto one node.
    #[arg(
        long,
        env = "DAGNATS_NATS_LISTED_ONLY",
        value_parser = clap::builder::BoolishValueParser::new(),
        action = clap::ArgAction::SetTrue
    )]
    pub nats_listed_only: bool,

    /// NATS credentials file (JWT and nkey seed).
    #[arg(long, env = "NATS_CREDS", conflicts_with_all = ["nats_nkey", "nats_token", "nats_user"])]
    pub nats_creds: Option<PathBuf>,

    /// NATS nkey: a user seed (`SU...`) or the path of a file holding one.
    #[arg(long, env = "NATS_NKEY", hide_env_values = true, conflicts_with_all = ["nats_token", "nats_user"])]
    pub nats_nkey: Option<String>,

    /// NATS authentication token.
    #[arg(
        long,
        env = "NATS_TOKEN",
        hide_env_values = true,
        conflicts_with = "nats_user"
    )]
    pub nats_token: Option<String>,

    /// NATS user name; needs a password.
    #[arg(long, env = "NATS_USER", requires = "nats_password")]
    pub nats_user: Option<String>,

    /// NATS password; needs a user name.
    #[arg(
        long,
        env = "NATS_PASSWORD",
        hide_env_values = true,
        requires = "nats_user"
    )]
    pub nats_password: Option<String>,

    /// CA certificate (PEM) to verify the NATS server; implies TLS.
    #[arg(long, env = "NATS_TLS_CA")]
    pub nats_tls_ca: Option<PathBuf>,

    /// Client certificate (PEM) for mutual TLS; needs a key.
    #[arg(long, env = "NATS_TLS_CERT", requires = "nats_tls_key")]
    pub nats_tls_cert: Option<PathBuf>,

    /// Client private key (PEM) for mutual TLS; needs a certificate.
    #[arg(long, env = "NATS_TLS_KEY", requires = "nats_tls_cert")]
    pub nats_tls_key: Option<PathBuf>,
}

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    Text,
    /// One JSON object per line, for log pipelines.
    Json,
}

impl Config {
    /// What the bucket must look like.
    pub(crate) fn bucket(&self) -> BucketSettings {
        BucketSettings {
            replicas: self.replicas.map(usize::from),
            marker_ttl: MARKER_TTL,
            recheck: Duration::from_millis(self.bucket_recheck_ms),
            coalescing: Coalescing {
                in_flight: self.publishes_in_flight as usize,
                max_batch: self.batch_max as usize,
            },
        }
    }

    /// What the tenure history keeps.
    pub(crate) fn history(&self) -> HistorySettings {
        HistorySettings {
            max_age: self.history_max_age,
        }
    }

    /// The runtime the gateway runs on: [`Config::worker_threads`] threads.
    pub fn runtime(&self) -> std::io::Result<tokio::runtime::Runtime> {
        let mut builder = match self.worker_threads {
            1 => tokio::runtime::Builder::new_current_thread(),
            threads => {
                let mut builder = tokio::runtime::Builder::new_multi_thread();
                builder.worker_threads(usize::from(threads));
                builder
            }
        };
        builder.enable_all().build()
    }

    /// How long calls in flight may run once shutdown begins.
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_millis(self.shutdown_grace_ms)
    }

    /// What the HTTP front needs of these settings.
    pub(crate) fn http(&self) -> Result<HttpSettings, String> {
        let token = |name: &str, value: &Option<String>| match value.as_deref() {
            Some("") => Err(format!("{name} is empty; unset it to turn auth off")),
            other => Ok(other.map(str::to_string)),
        };
        let cors_origins = self
            .http_cors_origins
            .iter()
            .filter(|origin| !origin.is_empty())
            .map(|origin| {
                HeaderValue::from_str(origin)
                    .map_err(|_| format!("DAGNATS_HTTP_CORS_ORIGINS: {origin:?} is not an origin"))
            })
            .collect::<Result<_, _>>()?;
        let write_token = token("DAGNATS_HTTP_TOKEN", &self.http_token)?;
        // Under a policy every HTTP call needs a principal's token.
        let open = write_token.is_none() && self.policy.is_none();
        if open && !self.http_addr.ip().is_loopback() && !self.http_insecure {
            return Err(format!(
                "DAGNATS_HTTP_ADDR {} is not a loopback address and no write token is set, \
                 so anyone who reaches it could acquire, release and revoke any lease: \
                 set DAGNATS_HTTP_TOKEN (--http-token), or DAGNATS_HTTP_INSECURE=1 \
                 (--http-insecure) if an open API is meant",
                self.http_addr
            ));
        }
        Ok(HttpSettings {
            write_token,
            read_token: token("DAGNATS_HTTP_READ_TOKEN", &self.http_read_token)?,
            cors_origins,
            heartbeat: Duration::from_millis(self.sse_heartbeat_ms),
            sse_buffer: self.sse_buffer as usize,
        })
    }
}

impl Config {
    /// The policy file's principals, with the HTTP tokens as two more;
    /// `None` without a policy file.
    pub(crate) fn policy(&self) -> Result<Option<Arc<Policy>>, String> {
        let Some(path) = &self.policy else {
            return Ok(None);
        };
        let tokens = HttpTokens {
            write: self.http_token.as_deref(),
            read: self.http_read_token.as_deref(),
        };
        Policy::load(path, tokens).map(|policy| Some(Arc::new(policy)))
    }
}

impl NatsConfig {
    /// The servers, as async-nats takes them: a list, since async-nats
    /// parses a single string as one URL, so `a,b,c` would not connect.
    pub(crate) fn servers(&self) -> Vec<String> {
        self.nats_url
            .iter()
            .map(|url| url.trim().to_string())
            .collect()
    }

    /// The NATS connection options (auth, TLS) these settings describe.
    pub(crate) async fn connect_options(&self) -> Result<async_nats::ConnectOptions, String> {
        let mut options = async_nats::ConnectOptions::new()
            .name("dagnats-leases")
            .ping_interval(PING_INTERVAL);
        if self.nats_listed_only {
            options = options.ignore_discovered_servers();
        }
        if let Some(path) = &self.nats_creds {
            options = options
                .credentials_file(path)
                .await
                .map_err(|err| format!("NATS_CREDS {}: {err}", path.display()))?;
        }
        if let Some(nkey) = &self.nats_nkey {
            options = options.nkey(read_nkey_seed(nkey)?);
        }
        if let Some(token) = &self.nats_token {
            options = options.token(token.clone());
        }
        if let (Some(user), Some(password)) = (&self.nats_user, &self.nats_password) {
            options = options.user_and_password(user.clone(), password.clone());
        }
        if let Some(ca) = &self.nats_tls_ca {
            require_file("NATS_TLS_CA", ca)?;
            options = options.add_root_certificates(ca.clone()).require_tls(true);
        }
        if let (Some(cert), Some(key)) = (&self.nats_tls_cert, &self.nats_tls_key) {
            require_file("NATS_TLS_CERT", cert)?;
            require_file("NATS_TLS_KEY", key)?;
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
        Ok(options)
    }
}

/// How often the gateway pings its server. A node cut off from the
/// gateway (a partition, a frozen host) leaves its connection open and
/// silent; after two unanswered pings the gateway reconnects to another
/// node of `NATS_URL`. With async-nats' default of 60 s it stayed on the
/// dead connection up to two minutes, serving nobody, and the fault run
/// saw requests answered by no gateway at all.
const PING_INTERVAL: std::time::Duration = std::time::Duration::from_secs(2);

/// The longest history a gateway keeps: the history stream's max age is
/// nanoseconds in 64 bits, and ten years is far past any need.
const HISTORY_MAX_AGE_LIMIT: Duration = Duration::from_secs(3_650 * 86_400);

/// Parses a duration such as `--history-max-age`'s: a whole number and a
/// unit (`s`, `m`, `h`, `d`), such as `7d`, `12h` or `90s`, or `0`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let unit_at = text.char_indices().last().map_or(0, |(at, _)| at);
    let (number, unit) = text.split_at(unit_at);
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => 0,
    };
    let count = match number.bytes().all(|b| b.is_ascii_digit()) {
        true => number.parse::<u64>().ok(),
        false => None,
    };
    let age = match (count, seconds) {
        (Some(count), 1..) => count.checked_mul(seconds).map(Duration::from_secs),
        _ => None,
    };
    match age {
        Some(age) if age <= HISTORY_MAX_AGE_LIMIT => Ok(age),
        Some(_) => Err(format!("{text:?} is longer than 3650d")),
        None => Err(format!(
            "{text:?} is not a duration: a whole number and a unit (s, m, h or d), such as 7d, 12h or 90s, or 0"
        )),
    }
}

fn require_file(name: &str, path: &std::path::Path) -> Result<(), String> {
    if path.is_file() {
        Ok(())
    } else {
        Err(format!("{name}: no file at {}", path.display()))
    }
}

fn read_nkey_seed(value: &str) -> Result<String, String> {
    let seed = if value.starts_with("SU") {
        value.to_string()
    } else {
        std::fs::read_to_string(value)
            .map_err(|err| format!("NATS_NKEY is neither a user seed nor a readable file: {err}"))?
            .trim()
            .to_string()
    };
    if !seed.starts_with("SU") {
        return Err("NATS_NKEY must be a user nkey seed (starting with SU)".into());
    }
    Ok(seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_is_a_whole_number_and_a_unit_or_0() {
        let day = Duration::from_secs(86_400);
        assert_eq!(parse_duration("7d"), Ok(day * 7));
        assert_eq!(parse_duration("12h"), Ok(Duration::from_secs(12 * 3_600)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1_800)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        for bad in [
            "",
            "7",
            "d",
            "1.5h",
            "-1d",
            "7w",
            "7 d",
            " 7d",
            "+7d",
            "0d7",
            "é",
            "99999999999999999999d",
        ] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
        let err = parse_duration("3651d").unwrap_err();
        assert!(err.contains("longer than 3650d"), "{err}");
    }
}
