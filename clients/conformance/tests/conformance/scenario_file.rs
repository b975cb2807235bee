//! `scenarios.toml`: the one list of scenarios, each a rule with its
//! parameters. The file names them; `scenarios/` implements them.

use std::time::Duration;

use serde::Deserialize;

/// The file's path in the repository.
pub fn path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios.toml")
}

#[derive(Deserialize)]
struct File {
    scenario: Vec<Spec>,
}

/// One `[[scenario]]`: its name, its rule, and its parameters (every other
/// field of the table).
#[derive(Debug, Clone, Deserialize)]
pub struct Spec {
    pub name: String,
    pub rule: String,
    #[serde(flatten)]
    params: toml::Table,
}

/// Every scenario of the file, in its order.
pub fn read() -> Vec<Spec> {
    let path = path();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    let file: File = toml::from_str(&text)
        .unwrap_or_else(|err| panic!("{} does not parse: {err}", path.display()));
    file.scenario
}

impl Spec {
    fn param(&self, name: &str) -> &toml::Value {
        self.params
            .get(name)
            .unwrap_or_else(|| panic!("scenarios.toml: {} has no parameter {name}", self.name))
    }

    /// A whole-number parameter.
    pub fn u64(&self, name: &str) -> u64 {
        self.param(name)
            .as_integer()
            .and_then(|n| u64::try_from(n).ok())
            .unwrap_or_else(|| panic!("scenarios.toml: {}.{name} is not a whole number", self.name))
    }

    /// A parameter in milliseconds (named `*_ms`), as a duration.
    pub fn ms(&self, name: &str) -> Duration {
        assert!(name.ends_with("_ms"), "{name}: durations are named *_ms");
        Duration::from_millis(self.u64(name))
    }

    /// A list of whole numbers.
    pub fn u64s(&self, name: &str) -> Vec<u64> {
        self.list(name, |v| v.as_integer().and_then(|n| u64::try_from(n).ok()))
    }

    /// A list of booleans.
    pub fn bools(&self, name: &str) -> Vec<bool> {
        self.list(name, toml::Value::as_bool)
    }

    /// A list of strings.
    pub fn strings(&self, name: &str) -> Vec<String> {
        self.list(name, |v| v.as_str().map(str::to_string))
    }

    fn list<T>(&self, name: &str, item: impl Fn(&toml::Value) -> Option<T>) -> Vec<T> {
        let items = self
            .param(name)
            .as_array()
            .and_then(|list| list.iter().map(item).collect());
        items.unwrap_or_else(|| {
            panic!(
                "scenarios.toml: {}.{name} is not a list of that type",
                self.name
            )
        })
    }
}
