//! The documents keep their shape: the README is a front door of at most
//! 250 lines, the performance page at most 300, every relative link and
//! anchor between them resolves, and the code cites the repository's own
//! specification (docs/protocol.md), never a file outside it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file git tracks, as paths from the root.
fn tracked() -> Vec<String> {
    let out = std::process::Command::new("git")
        .args(["ls-files"])
        .current_dir(root())
        .output()
        .expect("git ls-files");
    assert!(out.status.success(), "git ls-files");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn lines(path: &str) -> usize {
    std::fs::read_to_string(root().join(path))
        .unwrap()
        .lines()
        .count()
}

#[test]
fn the_readme_is_at_most_250_lines_and_the_performance_page_at_most_300() {
    assert!(
        lines("README.md") <= 250,
        "README.md: {} lines",
        lines("README.md")
    );
    let performance = lines("docs/performance.md");
    assert!(
        performance <= 300,
        "docs/performance.md: {performance} lines"
    );
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces
/// as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a markdown file's headings (outside code blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut found = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            found.insert(anchor(line.trim_start_matches('#')));
        }
    }
    found
}

/// The targets of a markdown file's inline links `](target)`.
fn links(text: &str) -> Vec<String> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn every_relative_link_and_anchor_in_the_documents_resolves() {
    let mut broken = Vec::new();
    for doc in tracked().iter().filter(|p| p.ends_with(".md")) {
        let text = std::fs::read_to_string(root().join(doc)).unwrap();
        let dir = Path::new(doc).parent().unwrap_or(Path::new(""));
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") || link.contains(' ') {
                continue;
            }
            let (file, fragment) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() {
                root().join(doc)
            } else {
                root().join(dir).join(file)
            };
            if !target.exists() {
                broken.push(format!("{doc}: {link} (no such file)"));
                continue;
            }
            if !fragment.is_empty() && target.extension().is_some_and(|e| e == "md") {
                let target_text = std::fs::read_to_string(&target).unwrap();
                if !anchors(&target_text).contains(fragment) {
                    broken.push(format!("{doc}: {link} (no such heading)"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn code_cites_docs_protocol_never_a_specification_outside_the_repository() {
    let code = [".rs", ".py", ".ts", ".go", ".js", ".mjs", ".sh"];
    let mut citing = Vec::new();
    for path in tracked()
        .iter()
        .filter(|p| code.iter().any(|ext| p.ends_with(ext)) || p.starts_with("scripts/"))
    {
        let Ok(text) = std::fs::read_to_string(root().join(path)) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if line.contains("contract.md") || line.contains("seed/leases.md") {
                citing.push(format!("{path}:{}: {line}", n + 1));
            }
        }
    }
    // This file names them to look for them.
    citing.retain(|hit| !hit.starts_with("crates/gateway/tests/it/docs.rs"));
    assert!(citing.is_empty(), "{}", citing.join("\n"));
}
