//! What a scenario works with: its library, its parameters from
//! `scenarios.toml`, names of its own for keys and holders, the processes
//! it runs against, and the drivers it starts (whose transcripts and
//! stderr make up its failure report).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dagnats_leases_testkit::Log;

use crate::driver::{Driver, Start};
use crate::library::Library;
use crate::scenario_file::Spec;
use crate::timings::Timings;
use crate::transcript::Transcript;
use crate::world::{Bare, World};

/// The world every scenario may share: started on first use, stopped
/// when the run ends.
#[derive(Default)]
pub struct Shared {
    world: tokio::sync::Mutex<Option<Arc<World>>>,
}

impl Shared {
    async fn world(&self) -> Arc<World> {
        let mut world = self.world.lock().await;
        if world.is_none() {
            *world = Some(Arc::new(World::start().await));
        }
        world.clone().unwrap()
    }

    /// Stops the shared processes (once every scenario has ended).
    pub async fn stop(&self) {
        self.world.lock().await.take();
    }
}

/// What the report keeps of a driver.
struct Started {
    label: String,
    stderr: Log,
    strays: Arc<Mutex<Vec<String>>>,
}

pub struct Ctx {
    pub library: Library,
    pub spec: Spec,
    /// Makes this scenario's names its own across the run.
    prefix: String,
    shared: Arc<Shared>,
    timings: Arc<Timings>,
    pub transcript: Transcript,
    /// Each driver started: its label, stderr and stray stdout lines.
    drivers: Mutex<Vec<Started>>,
}

impl Ctx {
    pub fn new(
        library: Library,
        spec: Spec,
        index: usize,
        run: &str,
        shared: Arc<Shared>,
        timings: Arc<Timings>,
    ) -> Ctx {
        Ctx {
            timings,
            prefix: format!("{run}-{}-{index:02}", library.name()),
            library,
            spec,
            shared,
            transcript: Transcript::new(),
            drivers: Mutex::default(),
        }
    }

    /// A key (or holder, or inbox name) of this scenario's own.
    pub fn name(&self, tag: &str) -> String {
        format!("{}-{tag}", self.prefix)
    }

    /// The shared nats-server and gateway.
    pub async fn world(&self) -> Arc<World> {
        self.shared.world().await
    }

    /// A driver on the shared nats-server and gateway, and that world.
    pub async fn on_shared_world(&self) -> (Arc<World>, Driver) {
        let world = self.world().await;
        let driver = self.driver(&world.server.url).await;
        (world, driver)
    }

    /// A nats-server and gateway of this scenario's own.
    pub async fn own_world(&self) -> World {
        World::start().await
    }

    /// A nats-server with no gateway, of this scenario's own.
    pub async fn bare(&self) -> Bare {
        Bare::start().await
    }

    /// A driver of this scenario's library on `nats_url`.
    pub async fn driver(&self, nats_url: &str) -> Driver {
        self.driver_with(nats_url, None).await
    }

    /// [`driver`](Self::driver) with `DRIVER_CALL_TIMEOUT_MS` set.
    pub async fn driver_with(&self, nats_url: &str, call_timeout: Option<Duration>) -> Driver {
        let label = format!("d{}", self.drivers.lock().unwrap().len() + 1);
        let driver = Driver::start(Start {
            library: self.library,
            label: label.clone(),
            nats_url,
            call_timeout,
            transcript: self.transcript.clone(),
        })
        .await
        .unwrap_or_else(|why| panic!("{why}"));
        self.drivers.lock().unwrap().push(Started {
            label,
            stderr: driver.stderr.clone(),
            strays: driver.strays.clone(),
        });
        driver
    }

    /// A figure the scenario measured (`what` took `took`), printed with
    /// every library's at the end of the run.
    pub fn figure(&self, what: &str, took: Duration) {
        self.figure_ms(what, took.as_secs_f64() * 1000.0);
    }

    /// [`figure`](Self::figure) in milliseconds, which may be negative.
    pub fn figure_ms(&self, what: &str, ms: f64) {
        self.note(format!("{what}: {ms:.1} ms"));
        self.timings.figure(&self.spec.name, what, self.library, ms);
    }

    /// Notes what the runner does or saw, in the transcript.
    pub fn note(&self, what: impl AsRef<str>) {
        self.transcript.note("runner", what);
    }

    /// Lines a driver printed that are neither answers nor events: a
    /// breach of the protocol even when the scenario's checks passed.
    pub fn strays(&self) -> Option<String> {
        let drivers = self.drivers.lock().unwrap();
        let strays: Vec<String> = drivers
            .iter()
            .flat_map(|d| {
                d.strays
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|l| format!("{}: {l}", d.label))
                    .collect::<Vec<_>>()
            })
            .collect();
        (!strays.is_empty()).then(|| {
            format!(
                "lines on stdout that are neither an answer to a request nor an event:\n{}",
                strays.join("\n")
            )
        })
    }

    /// The failure report: why, the transcript, each driver's stderr.
    pub fn report(&self, why: &str) -> String {
        let mut report = format!(
            "{why}\n\nrule: {}\n\n--- transcript ---\n{}\n",
            self.spec.rule,
            self.transcript.text()
        );
        for driver in self.drivers.lock().unwrap().iter() {
            let (label, stderr) = (&driver.label, driver.stderr.text());
            report.push_str(&format!("\n--- {label} stderr ---\n{stderr}\n"));
        }
        report
    }
}
