//! `keeper.*` ops: one `LeaseKeeper` per name, and an `ownership` event
//! line each time its `watch()` shows another fence or tenure.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use dagnats_leases_client::{ClientError, KeeperOptions, LeaseKeeper, Ownership};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::Driver;
use crate::calls::grant;
use crate::protocol::{Failure, KeeperStart};

#[derive(Default)]
pub struct Keepers(Mutex<HashMap<String, Kept>>);

struct Kept {
    key: String,
    keeper: LeaseKeeper,
}

fn unknown(name: &str) -> Failure {
    Failure::driver("not_found", format!("no keeper {name:?}"))
}

impl Keepers {
    /// Starts a keeper in the background; answers at once.
    pub fn start(&self, driver: &Driver, start: KeeperStart) -> Result<Value, Failure> {
        let mut keepers = self.0.lock().unwrap();
        if keepers.contains_key(&start.keeper) {
            let message = format!("keeper {:?} exists", start.keeper);
            return Err(Failure::driver("bad_request", message));
        }
        let keeper = LeaseKeeper::start(
            driver.client.clone(),
            KeeperOptions {
                key: start.key.clone(),
                holder: start.holder,
                ttl: Duration::from_millis(start.ttl_ms),
                wait: start.wait,
            },
        );
        tokio::spawn(print_changes(
            driver.out,
            start.keeper.clone(),
            keeper.watch(),
        ));
        let kept = Kept {
            key: start.key,
            keeper,
        };
        keepers.insert(start.keeper, kept);
        Ok(json!({}))
    }

    /// `fence()` and `tenure()` now.
    pub fn state(&self, name: &str) -> Result<Value, Failure> {
        let ownership = self.watch(name)?.1.borrow().clone();
        Ok(json!({"fence": ownership.fence(), "tenure": ownership.tenure()}))
    }

    /// The keeper's key and ownership as it changes.
    pub fn watch(&self, name: &str) -> Result<(String, watch::Receiver<Ownership>), Failure> {
        let keepers = self.0.lock().unwrap();
        let kept = keepers.get(name).ok_or_else(|| unknown(name))?;
        Ok((kept.key.clone(), kept.keeper.watch()))
    }

    /// The fence once the keeper owns the key; `timeout` if that takes
    /// longer than `timeout_ms`.
    pub async fn wait_owner(&self, name: &str, timeout_ms: Option<u64>) -> Result<Value, Failure> {
        let mut watch = self.watch(name)?.1;
        let owner = async {
            let owner = watch.wait_for(|o| o.fence().is_some()).await;
            owner.ok().and_then(|o| o.fence())
        };
        let fence = match timeout_ms {
            Some(ms) => tokio::time::timeout(Duration::from_millis(ms), owner)
                .await
                .map_err(|_| Failure::driver("timeout", "not the owner in time"))?,
            None => owner.await,
        };
        let fence = fence.ok_or_else(|| Failure::driver("lost", "the keeper stopped"))?;
        Ok(json!({"fence": fence}))
    }

    /// `hand_off(to)`: the grant the transfer returned.
    pub async fn hand_off(&self, name: &str, to: &str) -> Result<Value, Failure> {
        let mut kept = self.take(name)?;
        let handed = kept.keeper.hand_off(to).await;
        if matches!(handed, Err(ClientError::Invalid(_))) {
            // Refused before anything happened: the keeper keeps the lease.
            self.put_back(name, kept);
        }
        Ok(grant(handed?))
    }

    /// Stops the keeper (releasing the lease) and forgets it.
    pub async fn stop(&self, name: &str) -> Result<Value, Failure> {
        self.take(name)?.keeper.shutdown().await;
        Ok(json!({}))
    }

    /// Stops every keeper, as `exit` and the end of stdin do.
    pub async fn stop_all(&self) {
        let all: Vec<Kept> = self.0.lock().unwrap().drain().map(|(_, k)| k).collect();
        for kept in all {
            kept.keeper.shutdown().await;
        }
    }

    fn put_back(&self, name: &str, kept: Kept) {
        self.0.lock().unwrap().insert(name.to_string(), kept);
    }

    fn take(&self, name: &str) -> Result<Kept, Failure> {
        self.0
            .lock()
            .unwrap()
            .remove(name)
            .ok_or_else(|| unknown(name))
    }
}

/// Prints an `ownership` event each time the fence or tenure that
/// `fence()` and `tenure()` report changes, until the keeper is gone.
async fn print_changes(
    out: crate::output::Output,
    name: String,
    mut ownership: watch::Receiver<Ownership>,
) {
    let mut shown = (None, None);
    while ownership.changed().await.is_ok() {
        let now = ownership.borrow_and_update().clone();
        let state = (now.fence(), now.tenure());
        if state != shown {
            shown = state;
            out.line(
                &json!({"event": "ownership", "keeper": name, "owner": state.0.is_some(),
                             "fence": state.0, "tenure": state.1}),
            );
        }
    }
}
