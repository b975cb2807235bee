//! The conformance suite: every scenario of `scenarios.toml` against every
//! holder library's driver, each (library, scenario) pair a test of its
//! own named `<library>::<scenario>`, against real nats-server and gateway
//! processes.
//!
//! `CONFORMANCE_LIBRARIES=rust,python` narrows the run to those libraries;
//! otherwise all four run, and a driver that cannot start fails each of its
//! library's tests. The usual test filter and `--test-threads` apply.
//!
//! # Layout
//!
//! - `scenario_file`: reads `scenarios.toml`.
//! - `scenarios`: one function per scenario, named as in the file.
//! - `ctx`: what a scenario works with; `world`: the processes;
//!   `driver`: a driver process; `taps`: the runner's own subscriptions;
//!   `proxy`: a proxy that delays what the server sends a driver.
//! - `recorder`, `transcript`: what was seen, and when.
//! - `library`: the four libraries and their driver commands.
//! - `timings`: each library's share of the run, and measured figures.

mod ctx;
mod driver;
mod library;
mod proxy;
mod recorder;
mod scenario_file;
mod scenarios;
mod taps;
mod timings;
mod transcript;
mod world;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use libtest_mimic::{Arguments, Failed, Trial};
use tokio::runtime::Runtime;

use ctx::{Ctx, Shared};
use library::Library;
use scenario_file::Spec;
use timings::Timings;

/// Scenarios run at once unless `--test-threads` says otherwise: most of a
/// scenario's time is spent waiting on a TTL, and each uses its own keys.
const DEFAULT_THREADS: usize = 8;

/// No scenario takes longer: past it, it fails with its transcript.
const SCENARIO_LIMIT: Duration = Duration::from_secs(90);

fn main() {
    let mut args = Arguments::from_args();
    args.test_threads = args.test_threads.or(Some(DEFAULT_THREADS));
    let runtime = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .expect("a tokio runtime"),
    );
    let shared = Arc::new(Shared::default());
    let timings = Arc::new(Timings::default());
    let run = format!("c{:06x}", std::process::id() & 0xff_ffff);
    let specs = scenario_file::read();
    let mut trials = vec![Trial::test(
        "scenarios_toml_and_the_implementations_name_the_same_scenarios",
        || same_scenarios(&scenario_file::read()),
    )];
    for (index, spec) in specs.iter().enumerate() {
        for library in Library::selected() {
            let job = Job {
                library,
                spec: spec.clone(),
                index,
                run: run.clone(),
                runtime: runtime.clone(),
                shared: shared.clone(),
                timings: timings.clone(),
            };
            let name = format!("{}::{}", library.name(), spec.name);
            trials.push(Trial::test(name, move || job.run()));
        }
    }
    let conclusion = libtest_mimic::run(&args, trials);
    runtime.block_on(shared.stop());
    timings.print();
    conclusion.exit()
}

/// One (library, scenario) pair, ready to run on its own thread.
struct Job {
    library: Library,
    spec: Spec,
    index: usize,
    run: String,
    runtime: Arc<Runtime>,
    shared: Arc<Shared>,
    timings: Arc<Timings>,
}

impl Job {
    fn run(self) -> Result<(), Failed> {
        let Some(scenario) = scenarios::find(&self.spec.name) else {
            let name = &self.spec.name;
            return Err(format!("{name} is in scenarios.toml but has no implementation").into());
        };
        let timings = self.timings.clone();
        let ctx = Ctx::new(
            self.library,
            self.spec,
            self.index,
            &self.run,
            self.shared,
            timings,
        );
        let ctx = Arc::new(ctx);
        let started = tokio::time::Instant::now();
        let outcome = self.runtime.block_on(async {
            let mut task = tokio::spawn((scenario.run)(ctx.clone()));
            match tokio::time::timeout(SCENARIO_LIMIT, &mut task).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(err)) => Err(panic_message(err)),
                Err(_) => {
                    task.abort();
                    let _ = task.await;
                    Err(format!(
                        "the scenario did not end within {SCENARIO_LIMIT:?}"
                    ))
                }
            }
        });
        self.timings.add(self.library, started);
        outcome
            .and_then(|()| ctx.strays().map_or(Ok(()), Err))
            .map_err(|why| ctx.report(&why).into())
    }
}

fn panic_message(err: tokio::task::JoinError) -> String {
    match err.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "the scenario panicked".into()),
        Err(err) => format!("the scenario was cancelled: {err}"),
    }
}

/// Every scenario of the file has an implementation, every implementation
/// a scenario in the file, each named once, each with a rule.
fn same_scenarios(specs: &[Spec]) -> Result<(), Failed> {
    let mut problems = Vec::new();
    let mut in_file = BTreeSet::new();
    for spec in specs {
        if !in_file.insert(spec.name.as_str()) {
            problems.push(format!("{} is in scenarios.toml twice", spec.name));
        }
        if spec.rule.trim().is_empty() {
            problems.push(format!("{} has no rule", spec.name));
        }
    }
    let implemented: BTreeSet<&str> = scenarios::ALL.iter().map(|s| s.name).collect();
    for missing in in_file.difference(&implemented) {
        problems.push(format!(
            "{missing} is in scenarios.toml but has no implementation"
        ));
    }
    for extra in implemented.difference(&in_file) {
        problems.push(format!("{extra} is implemented but not in scenarios.toml"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n").into())
    }
}
