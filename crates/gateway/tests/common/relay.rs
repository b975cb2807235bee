//! A TCP relay in front of one nats-server whose connections the test can
//! cut: a member connected through it loses its NATS connection (and
//! cannot reconnect) until the relay is restored.

use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub struct Relay {
    /// `nats://127.0.0.1:<port>`: give this to the client under test.
    pub url: String,
    state: Arc<Mutex<State>>,
    accept: JoinHandle<()>,
}

#[derive(Default)]
struct State {
    cut: bool,
    links: Vec<JoinHandle<()>>,
}

/// A listener on a free loopback port in front of `server_url`
/// (`nats://127.0.0.1:<port>`): the listener, the server's address, and the
/// URL to give the client under test.
pub async fn listen_in_front_of(server_url: &str) -> (TcpListener, String, String) {
    let upstream = server_url
        .strip_prefix("nats://")
        .expect("a nats:// URL")
        .to_string();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("nats://{}", listener.local_addr().unwrap());
    (listener, upstream, url)
}

impl Relay {
    pub async fn start(server_url: &str) -> Relay {
        let (listener, upstream, url) = listen_in_front_of(server_url).await;
        let state = Arc::new(Mutex::new(State::default()));
        let accept = tokio::spawn({
            let state = state.clone();
            async move {
                while let Ok((mut client, _)) = listener.accept().await {
                    let mut s = state.lock().unwrap();
                    if s.cut {
                        continue; // dropped: the connection is refused
                    }
                    let upstream = upstream.clone();
                    s.links.push(tokio::spawn(async move {
                        if let Ok(mut server) = TcpStream::connect(&upstream).await {
                            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                        }
                    }));
                }
            }
        });
        Relay { url, state, accept }
    }

    /// Closes every relayed connection and refuses new ones.
    pub fn cut(&self) {
        let mut s = self.state.lock().unwrap();
        s.cut = true;
        for link in s.links.drain(..) {
            link.abort();
        }
    }

    /// Accepts connections again.
    pub fn restore(&self) {
        self.state.lock().unwrap().cut = false;
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}
