//! The four holder libraries and how to start each one's driver.

use std::path::PathBuf;

/// A holder library under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Library {
    Rust,
    Python,
    TypeScript,
    Go,
}

impl Library {
    pub const ALL: [Library; 4] = [
        Library::Rust,
        Library::Python,
        Library::TypeScript,
        Library::Go,
    ];

    /// Its name in `CONFORMANCE_LIBRARIES`, in test names and in keys.
    pub fn name(self) -> &'static str {
        match self {
            Library::Rust => "rust",
            Library::Python => "python",
            Library::TypeScript => "typescript",
            Library::Go => "go",
        }
    }

    /// The driver's program and arguments, as agreed with each library.
    pub fn driver_command(self) -> (PathBuf, Vec<PathBuf>) {
        let root = dagnats_leases_testkit::workspace_root();
        let repo = std::fs::canonicalize(&root).unwrap_or(root);
        match self {
            Library::Rust => (env!("CARGO_BIN_EXE_conformance-driver").into(), vec![]),
            Library::Python => (
                repo.join(".tools/clients/python/bin/python"),
                vec![repo.join("clients/python/tests/conformance_driver.py")],
            ),
            Library::TypeScript => (
                "node".into(),
                vec![repo.join("clients/typescript/test/conformance-driver.mjs")],
            ),
            Library::Go => (repo.join(".tools/clients/go/conformance-driver"), vec![]),
        }
    }

    /// The libraries `CONFORMANCE_LIBRARIES` names (comma-separated), or
    /// all four when it is unset or empty.
    pub fn selected() -> Vec<Library> {
        let names = std::env::var("CONFORMANCE_LIBRARIES").unwrap_or_default();
        if names.trim().is_empty() {
            return Library::ALL.to_vec();
        }
        names
            .split(',')
            .map(|name| {
                let name = name.trim();
                Library::ALL
                    .into_iter()
                    .find(|l| l.name() == name)
                    .unwrap_or_else(|| {
                        panic!("CONFORMANCE_LIBRARIES names {name:?}: not one of rust, python, typescript, go")
                    })
            })
            .collect()
    }
}
