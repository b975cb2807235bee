//! A holder built on `dagnats-leases-client` alone (it does not compile the
//! gateway): keep a lease with a [`LeaseKeeper`], start and stop work as
//! ownership comes and goes, fence every downstream write, and answer
//! forwarded requests only while entitled to.
//!
//! ```sh
//! ./scripts/dev                                            # in one terminal
//! cargo run -p dagnats-leases-client --example holder      # in two others: one owns, one waits
//! ```
//! Stop the owner with Ctrl-C and watch the other take over at a higher fence.

use std::time::Duration;

use dagnats_leases_client::{
    FenceGate, KeeperOptions, LeaseClient, LeaseKeeper, Ownership, serve_inbox,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let nats = async_nats::connect(url).await?;
    let holder = format!("holder-{}", std::process::id());
    let keeper = LeaseKeeper::start(
        LeaseClient::new(nats.clone()),
        KeeperOptions {
            key: "example-leader".into(),
            holder: holder.clone(),
            ttl: Duration::from_secs(6),
            wait: true,
        },
    );

    // Forwards reach this process only while it owns the key at their fence.
    let ownership = keeper.watch();
    let tenure = move |key: &str| {
        (key == "example-leader")
            .then(|| ownership.borrow().tenure())
            .flatten()
    };
    let inbox_holder = holder.clone();
    tokio::spawn(async move {
        serve_inbox(nats, &inbox_holder, tenure, |req| async move {
            format!("handled by the owner at fence {}", req.fence).into()
        })
        .await
    });

    // The downstream store: refuses any write below the highest fence seen.
    let store = FenceGate::default();
    let mut changes = keeper.watch();
    println!("{holder}: waiting for example-leader");
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            changed = changes.changed() => {
                if changed.is_err() {
                    break;
                }
                match changes.borrow_and_update().clone() {
                    Ownership::Owner { fence, tenure, .. } => {
                        let write = store.admit(fence);
                        println!("{holder}: owner since {tenure}, fence {fence}, write {write:?}");
                    }
                    Ownership::NotOwner => println!("{holder}: not the owner"),
                }
            }
        }
    }
    keeper.shutdown().await;
    println!("{holder}: released");
    Ok(())
}
