//! Comparing committed docs with freshly rendered ones, with a diff-like report.

use std::{collections::BTreeMap, path::PathBuf};

/// The first line of every stale-docs report.
pub const STALE_MESSAGE: &str =
    "docs are stale: run `cargo run -p gpufleet-engine --bin gpufleet-docs`";

/// Lines of context around each change.
const CONTEXT: usize = 2;

/// Most diff lines shown per file.
const MAX_DIFF_LINES: usize = 80;

/// Compares the committed generated pages with the rendered ones (both keyed by path relative
/// to `docs/`). `None` when they are identical; otherwise a report starting with
/// [`STALE_MESSAGE`] that lists changed, missing and no-longer-generated files, followed by a
/// unified-style diff of each changed file.
pub fn stale_report(
    committed: &BTreeMap<PathBuf, String>,
    generated: &BTreeMap<PathBuf, String>,
) -> Option<String> {
    let mut summary = Vec::new();
    let mut diffs = Vec::new();
    for (path, new) in generated {
        let shown = format!("docs/{}", path.display());
        match committed.get(path) {
            None => summary.push(format!("  missing: {shown}")),
            Some(old) if old != new => {
                summary.push(format!("  changed: {shown}"));
                diffs.push(format!(
                    "--- {shown} (committed)\n+++ {shown} (generated)\n{}",
                    line_diff(old, new)
                ));
            }
            Some(_) => {}
        }
    }
    for path in committed.keys().filter(|p| !generated.contains_key(*p)) {
        summary.push(format!(
            "  stale:   docs/{} (no longer generated)",
            path.display()
        ));
    }
    if summary.is_empty() {
        return None;
    }
    let mut report = format!("{STALE_MESSAGE}\n{}\n", summary.join("\n"));
    for d in diffs {
        report.push('\n');
        report.push_str(&d);
    }
    Some(report)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Same,
    Removed,
    Added,
}

/// A unified-style line diff (`-` committed, `+` generated) with a little context.
fn line_diff(old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    if a.len().saturating_mul(b.len()) > 4_000_000 {
        return "(files differ; too large to diff here)\n".to_owned();
    }
    // Longest common subsequence lengths of the suffixes a[i..] and b[j..].
    let width = b.len() + 1;
    let mut lcs = vec![0u32; (a.len() + 1) * width];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i * width + j] = if a[i] == b[j] {
                lcs[(i + 1) * width + j + 1] + 1
            } else {
                lcs[(i + 1) * width + j].max(lcs[i * width + j + 1])
            };
        }
    }
    let mut ops = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((Op::Same, a[i]));
            i += 1;
            j += 1;
        } else if i < a.len()
            && (j == b.len() || lcs[(i + 1) * width + j] >= lcs[i * width + j + 1])
        {
            ops.push((Op::Removed, a[i]));
            i += 1;
        } else {
            ops.push((Op::Added, b[j]));
            j += 1;
        }
    }

    let near_change = |k: usize| {
        let lo = k.saturating_sub(CONTEXT);
        let hi = (k + CONTEXT + 1).min(ops.len());
        ops[lo..hi].iter().any(|(op, _)| *op != Op::Same)
    };
    let mut out = Vec::new();
    let mut skipped = false;
    for (k, (op, line)) in ops.iter().enumerate() {
        if !near_change(k) {
            skipped = true;
            continue;
        }
        if skipped || out.is_empty() {
            out.push("@@".to_owned());
            skipped = false;
        }
        let mark = match op {
            Op::Same => ' ',
            Op::Removed => '-',
            Op::Added => '+',
        };
        out.push(format!("{mark}{line}"));
    }
    if out.len() > MAX_DIFF_LINES {
        let more = out.len() - MAX_DIFF_LINES;
        out.truncate(MAX_DIFF_LINES);
        out.push(format!("... ({more} more diff lines)"));
    }
    let mut text = out.join("\n");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pages(entries: &[(&str, &str)]) -> BTreeMap<PathBuf, String> {
        entries
            .iter()
            .map(|(p, t)| (PathBuf::from(p), (*t).to_owned()))
            .collect()
    }

    #[test]
    fn identical_is_none() {
        let p = pages(&[("index.md", "a\n")]);
        assert_eq!(stale_report(&p, &p), None);
    }

    #[test]
    fn reports_changed_missing_and_stale() {
        let committed = pages(&[("index.md", "a\nb\nc\n"), ("resources/old.md", "x\n")]);
        let generated = pages(&[("index.md", "a\nB\nc\n"), ("functions/f.md", "y\n")]);
        let r = stale_report(&committed, &generated).expect("stale");
        assert!(r.starts_with(STALE_MESSAGE), "{r}");
        assert!(r.contains("changed: docs/index.md"), "{r}");
        assert!(r.contains("missing: docs/functions/f.md"), "{r}");
        assert!(r.contains("stale:   docs/resources/old.md"), "{r}");
        assert!(r.contains("@@\n a\n-b\n+B\n c\n"), "{r}");
    }
}
