//! A loopback TCP proxy that speaks enough of the NATS client protocol to
//! act at an exact point of a connection's traffic.
//!
//! Some rules only show in one interleaving: a forward whose first attempt
//! meets no responders while, before the gateway re-reads the lease, another
//! holder takes it over. A sleep cannot put the takeover there; this proxy
//! can. It relays bytes both ways, frames what the client sends (CONNECT,
//! PUB, HPUB, SUB, UNSUB, PING, PONG), records every subject the client
//! publishes to, and holds a publish to a chosen subject prefix until a
//! test's hook has run. A real server still answers everything.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// What a held publish waits for.
pub type Hook = Arc<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;

/// One proxy in front of one nats-server; stops accepting on drop.
pub struct Proxy {
    /// `nats://127.0.0.1:<port>`: give this to the client under test.
    pub url: String,
    state: Arc<State>,
    accept: JoinHandle<()>,
}

/// What the connections share with the test.
struct State {
    upstream: String,
    connections: AtomicUsize,
    published: Mutex<Vec<String>>,
    hold: Mutex<Option<(Vec<String>, Hook)>>,
}

impl Proxy {
    /// A proxy on a free loopback port, relaying to `server_url`
    /// (`nats://127.0.0.1:<port>`).
    pub async fn start(server_url: &str) -> Proxy {
        let (listener, upstream, url) = super::relay::listen_in_front_of(server_url).await;
        let state = Arc::new(State {
            upstream,
            connections: AtomicUsize::new(0),
            published: Mutex::new(Vec::new()),
            hold: Mutex::new(None),
        });
        let accept = tokio::spawn({
            let state = state.clone();
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    state.connections.fetch_add(1, Ordering::SeqCst);
                    tokio::spawn(relay(client, state.clone()));
                }
            }
        });
        Proxy { url, state, accept }
    }

    /// From now on, every publish whose subject starts with one of
    /// `prefixes` reaches the server only once `hook` has completed. The connection's later
    /// traffic overtakes the held publish, so the hook may itself call
    /// through the proxied client (a gateway serving the hook's requests)
    /// without a deadlock.
    pub fn hold_publishes(&self, prefixes: &[&str], hook: Hook) {
        let prefixes = prefixes.iter().map(|p| p.to_string()).collect();
        *self.state.hold.lock().unwrap() = Some((prefixes, hook));
    }

    /// From now on, publishes reach the server as they come; the ones
    /// already held still wait for their hook.
    pub fn stop_holding(&self) {
        *self.state.hold.lock().unwrap() = None;
    }

    /// Every subject the clients published to, in the order they sent them.
    pub fn published(&self) -> Vec<String> {
        self.state.published.lock().unwrap().clone()
    }

    /// How many connections the proxy accepted: a client that reconnected,
    /// or went around the proxy to a server it discovered, would not stay
    /// at one with all its publishes recorded.
    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Relays one client connection until either side closes.
async fn relay(client: TcpStream, state: Arc<State>) {
    let server = TcpStream::connect(&state.upstream)
        .await
        .expect("the proxy reaches nats-server");
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
    });
    // One writer to the server, so that a held publish can be sent later
    // while the ops read after it go on.
    let (to_server, mut outgoing) = mpsc::unbounded_channel::<Bytes>();
    tokio::spawn(async move {
        while let Some(op) = outgoing.recv().await {
            if server_write.write_all(&op).await.is_err() {
                return;
            }
        }
        let _ = server_write.shutdown().await;
    });
    let mut buf = BytesMut::new();
    loop {
        while let Some((op, subject)) = next_op(&mut buf) {
            let Some(subject) = subject else {
                let _ = to_server.send(op);
                continue;
            };
            state.published.lock().unwrap().push(subject.clone());
            let hook = match &*state.hold.lock().unwrap() {
                Some((prefixes, hook))
                    if prefixes.iter().any(|p| subject.starts_with(p.as_str())) =>
                {
                    Some(hook.clone())
                }
                _ => None,
            };
            match hook {
                Some(hook) => {
                    let to_server = to_server.clone();
                    tokio::spawn(async move {
                        hook().await;
                        let _ = to_server.send(op);
                    });
                }
                None => {
                    let _ = to_server.send(op);
                }
            }
        }
        match client_read.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Splits the first whole client op off `buf`: its bytes, and its subject
/// when it is a publish. `None` until the op has fully arrived.
fn next_op(buf: &mut BytesMut) -> Option<(Bytes, Option<String>)> {
    let line_end = buf.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&buf[..line_end]).expect("a client op line is UTF-8");
    let words: Vec<&str> = line.split_ascii_whitespace().collect();
    let (len, subject) = match words.first().map(|op| op.to_ascii_uppercase()).as_deref() {
        // PUB <subject> [reply] <size> and HPUB <subject> [reply]
        // <header size> <total size>: the last word counts the bytes that
        // follow the line, before their own CRLF.
        Some("PUB" | "HPUB") => {
            let size: usize = words
                .last()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("proxy: a publish without a size: {line:?}"));
            (line_end + 2 + size + 2, Some(words[1].to_string()))
        }
        Some("CONNECT" | "SUB" | "UNSUB" | "PING" | "PONG") => (line_end + 2, None),
        _ => panic!("proxy: not a NATS client op: {line:?}"),
    };
    if buf.len() < len {
        return None;
    }
    Some((buf.split_to(len).freeze(), subject))
}
