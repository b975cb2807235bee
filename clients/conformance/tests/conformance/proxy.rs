//! A loopback TCP proxy in front of one nats-server that can hold every
//! byte the server sends a client for a set delay: replies then reach the
//! client late while its requests reach the server at once, which shows
//! whether a holder counts its deadline from a request's start or from its
//! reply.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};

pub struct DelayProxy {
    /// `nats://127.0.0.1:<port>`: give this to the driver.
    pub url: String,
    delay_ms: Arc<AtomicU64>,
    accept: JoinHandle<()>,
}

impl DelayProxy {
    /// A proxy to the server on loopback port `server_port`, relaying at
    /// once until [`delay`](Self::delay) says otherwise.
    pub async fn start(server_port: u16) -> DelayProxy {
        let upstream = format!("127.0.0.1:{server_port}");
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("nats://{}", listener.local_addr().unwrap());
        let delay_ms = Arc::new(AtomicU64::new(0));
        let accept = tokio::spawn({
            let delay_ms = delay_ms.clone();
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    tokio::spawn(relay(client, upstream.clone(), delay_ms.clone()));
                }
            }
        });
        DelayProxy {
            url,
            delay_ms,
            accept,
        }
    }

    /// From now on, what the server sends reaches the client `delay` after
    /// the proxy read it.
    pub fn delay(&self, delay: Duration) {
        self.delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Relays one connection: client to server at once, server to client
/// each chunk at the delay in force when it was read.
async fn relay(client: TcpStream, upstream: String, delay_ms: Arc<AtomicU64>) {
    let Ok(server) = TcpStream::connect(&upstream).await else {
        return;
    };
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let (chunks, mut due) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let upward = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
    });
    let downward = tokio::spawn(async move {
        while let Some((at, chunk)) = due.recv().await {
            sleep_until(at).await;
            if client_write.write_all(&chunk).await.is_err() {
                return;
            }
        }
    });
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n @ 1..) = server_read.read(&mut buf).await {
        let at = Instant::now() + Duration::from_millis(delay_ms.load(Ordering::SeqCst));
        if chunks.send((at, buf[..n].to_vec())).is_err() {
            break;
        }
    }
    drop(chunks);
    let _ = downward.await;
    upward.abort();
}
