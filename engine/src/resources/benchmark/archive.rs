//! A run's archive: what a reviewer needs to audit it, downloadable as files.
//!
//! The archive is a set of ConfigMaps in the run's namespace, labelled
//! `gpufleet.dev/benchmark=<name>` and `gpufleet.dev/record`. A resource's archive is
//! `gfb-<name>-archive-<n>` (`n` from 0), labelled `record=archive`: its next run overwrites
//! it, so a run that an interrupted apply repeats leaves no second archive. A run on demand's
//! is `gfb-<name>-archive-<start>-<n>`, labelled `record=run-archive`, one per run.
//! Each key is one file; every part holds at most [`PART_MAX`] bytes (keys included), and an
//! archive at most [`MAX_PARTS`] parts, so that it stays well inside the 1 MiB the API server
//! keeps per ConfigMap. The files:
//!
//! - `archive.json`: when it was written, to the nanosecond (so that each archive's SHA-256 is
//!   its own);
//! - `index.json` (part 0): every file with the part that holds it, its size, its SHA-256 and
//!   how many bytes were cut from its start, the files left out for room, and the archive's
//!   SHA-256 (over the list of files as compact JSON);
//! - `record.json`: the run's record (status, failures, results, spread, repeat and node
//!   results, environment, node environments, environment hash, times);
//! - `parameters.json`: the definition it ran (suite, image, command, parameters, nodes, GPUs
//!   per node, repeats, thresholds);
//! - `objects.json`: the Job or MPIJob as gpufleet sent it (Secrets are referenced by name,
//!   never inlined);
//! - `repeat-<r>.<pod>.log`: every pod's log that is still there when the run ends (the MPI
//!   Operator removes its workers, which run only sshd, as the launcher ends): first the
//!   logs that hold results, of every repeat, then each prescreen pod's
//!   (`prescreen.<pod>.log`), then the others, so that room runs out on the others. A log
//!   larger than a part keeps its end, where the results are.
//!
//! Part 0, which holds the index, is written last: an archive whose part 0 is there is whole.
//! The state's `archive` names the parts and carries the SHA-256; destroy removes them while
//! part 0's index still carries that SHA-256.

use serde_json::{Value as Json, json};

use super::{
    environment::sha256_hex,
    render::BENCHMARK_LABEL,
    schema::{
        ALLOW_NODE_DIFFERENCES, ARCHIVE_CONFIGMAPS, ARCHIVE_SHA256, BASELINE, COMMAND, ENVIRONMENT,
        ENVIRONMENT_HASH, FAILURES, FINISHED_AT, GPUS_PER_NODE, ID, IMAGE, LAUNCHER, NAME,
        NAMESPACE, NODE_ENVIRONMENTS, NODE_POOL_ID, NODE_RESULTS, NODES, ON_FAILURE, PARAMETERS,
        PER, PRESCREEN, REPEAT_RESULTS, REPEATS, RESULTS, SPREAD, START_TIMEOUT, STARTED_AT,
        STATUS, SUITE, THRESHOLDS, UNIT_RESULTS, UNIT_TOLERANCE, VIRTUAL_CLUSTER_ID,
    },
};
use crate::{
    backends::kube::{MANAGED_BY, MANAGED_BY_VALUE},
    value::{Value, display_number},
};

/// The most data one part holds, keys and values (a ConfigMap's data may hold 1 MiB).
pub const PART_MAX: usize = 900 * 1024;
/// The most parts one archive has.
pub const MAX_PARTS: usize = 8;
/// Room kept in part 0 for `index.json`.
const INDEX_ROOM: usize = 64 * 1024;
/// Room within [`INDEX_ROOM`] for the index's head and its list of files left out.
const INDEX_HEAD_ROOM: usize = 16 * 1024;
/// The most files the index names as left out; it counts the rest.
const MAX_OMITTED_NAMED: usize = 32;
/// The label on every record and archive of a run, so that
/// `kubectl get configmaps -l gpufleet.dev/record=archive` finds every resource's archive.
pub const RECORD_LABEL: &str = "gpufleet.dev/record";

/// Whose archive it is, which decides its names and its label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keeper {
    /// A `gpufleet_benchmark`'s: fixed names, which its next run overwrites.
    Resource,
    /// A run on demand's: names that carry the run's start, one archive per run.
    OnDemand,
}

impl Keeper {
    /// The parts' prefix: `gfb-<name>-archive`, and for a run on demand its start after it
    /// (the same for a run taken over after a killed apply).
    pub fn prefix(self, name: &str, started_at: &str) -> String {
        match self {
            Keeper::Resource => format!("gfb-{name}-archive"),
            Keeper::OnDemand => format!("gfb-{name}-archive-{}", stamp(started_at)),
        }
    }

    /// The value of [`RECORD_LABEL`] on the parts.
    pub fn label(self) -> &'static str {
        match self {
            Keeper::Resource => "archive",
            Keeper::OnDemand => "run-archive",
        }
    }
}

/// The name of part `n` of the archive `prefix`.
pub fn part_name(prefix: &str, n: usize) -> String {
    format!("{prefix}-{n}")
}

/// One file of the archive.
#[derive(Debug, Clone, PartialEq)]
pub struct File {
    /// Its name, a ConfigMap key.
    pub name: String,
    /// Its text.
    pub text: String,
}

impl File {
    /// A file named `name` holding `text`.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> File {
        File {
            name: name.into(),
            text: text.into(),
        }
    }
}

/// The ConfigMaps of an archive, ready to apply, and what the state records of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Archive {
    /// The parts, in order.
    pub parts: Vec<Json>,
    /// The SHA-256 over the list of files and their digests.
    pub sha256: String,
}

impl Archive {
    /// The parts' names.
    pub fn names(&self) -> Vec<String> {
        self.parts
            .iter()
            .filter_map(|p| p.pointer("/metadata/name")?.as_str().map(str::to_owned))
            .collect()
    }
}

/// A run's start as a name part: its letters and digits, lower case
/// (`2026-11-28T10:15:00Z` → `20261128t101500z`), sortable.
pub fn stamp(started_at: &str) -> String {
    started_at
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase()
}

/// A ConfigMap key for a pod's log: `repeat-<r>.<pod>.log`.
pub fn log_name(repeat: usize, pod: &str) -> String {
    let pod: String = pod
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("repeat-{repeat}.{pod}.log")
}

/// A ConfigMap key for a prescreen pod's log: `prescreen.<pod>.log`.
pub fn prescreen_log_name(pod: &str) -> String {
    log_name(0, pod).replacen("repeat-0.", "prescreen.", 1)
}

/// The end of `text`, at most `max` bytes, cut at a character boundary.
fn end_of(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// What one entry of `index.json` takes there, pretty-printed two levels deep.
fn index_cost(entry: &Json) -> usize {
    let text = serde_json::to_string_pretty(entry).unwrap_or_default();
    text.len() + 4 * text.lines().count() + 2
}

/// Packs `files` into the parts of the archive `prefix` in namespace `namespace` of benchmark
/// `benchmark`, kept by `keeper`, in order: a file goes into the current part if it fits,
/// else opens the next; a file larger than a part keeps its end; files that find no room, in
/// the parts or in the index, are left out and named (or counted) in the index.
pub fn pack(
    prefix: &str,
    keeper: Keeper,
    namespace: &str,
    benchmark: &str,
    files: &[File],
) -> Archive {
    let mut parts: Vec<Vec<(String, String)>> = vec![Vec::new()];
    let mut used = vec![INDEX_ROOM];
    let mut index_used = INDEX_HEAD_ROOM;
    let mut listed = Vec::new();
    let mut omitted = Vec::new();
    let mut omitted_more = 0usize;
    for f in files {
        // A part's limit counts keys as well as values.
        let kept = end_of(&f.text, PART_MAX - f.name.len());
        let size = f.name.len() + kept.len();
        let last = parts.len() - 1;
        let part = if used[last] + size <= PART_MAX {
            Some(last)
        } else if parts.len() < MAX_PARTS {
            Some(last + 1)
        } else {
            None
        };
        let entry = part.map(|part| {
            json!({
                "name": f.name,
                "part": part,
                "bytes": kept.len(),
                "cut_bytes": f.text.len() - kept.len(),
                "sha256": sha256_hex(kept.as_bytes()),
            })
        });
        match (part, entry) {
            (Some(part), Some(entry)) if index_used + index_cost(&entry) <= INDEX_ROOM => {
                if part == parts.len() {
                    parts.push(Vec::new());
                    used.push(0);
                }
                index_used += index_cost(&entry);
                used[part] += size;
                parts[part].push((f.name.clone(), kept.to_owned()));
                listed.push(entry);
            }
            _ if omitted.len() < MAX_OMITTED_NAMED => {
                omitted.push(json!({ "name": f.name, "bytes": f.text.len() }));
            }
            _ => omitted_more += 1,
        }
    }
    let sha256 = sha256_hex(json!(listed).to_string().as_bytes());
    let index = json!({
        "layout": 1,
        "sha256": sha256,
        "files": listed,
        "omitted": omitted,
        "omitted_more": omitted_more,
    });
    let index_text = serde_json::to_string_pretty(&index).unwrap_or_else(|_| index.to_string());
    parts[0].insert(0, ("index.json".to_owned(), index_text));
    let parts = parts
        .into_iter()
        .enumerate()
        .map(|(i, files)| {
            let data: serde_json::Map<String, Json> = files
                .into_iter()
                .map(|(k, v)| (k, Json::String(v)))
                .collect();
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": part_name(prefix, i),
                    "namespace": namespace,
                    "labels": {
                        MANAGED_BY: MANAGED_BY_VALUE,
                        BENCHMARK_LABEL: benchmark,
                        RECORD_LABEL: keeper.label(),
                    },
                },
                "data": data,
            })
        })
        .collect();
    Archive { parts, sha256 }
}

/// The SHA-256 the `index.json` of part 0 `part0` names; `None` when it names none.
pub fn index_sha256(part0: &Json) -> Option<String> {
    let text = part0.pointer("/data/index.json")?.as_str()?;
    let index: Json = serde_json::from_str(text).ok()?;
    index["sha256"].as_str().map(str::to_owned)
}

/// The attributes of the record a run keeps (`record.json`), here and in the records of
/// runs on demand.
pub const RECORD_FIELDS: &[&str] = &[
    ID,
    SUITE,
    STATUS,
    FAILURES,
    RESULTS,
    SPREAD,
    REPEAT_RESULTS,
    NODE_RESULTS,
    UNIT_RESULTS,
    ENVIRONMENT,
    NODE_ENVIRONMENTS,
    ENVIRONMENT_HASH,
    STARTED_AT,
    FINISHED_AT,
];

/// The definition a run ran (`parameters.json`): its arguments, none of them secret.
const DEFINITION_FIELDS: &[&str] = &[
    NAME,
    VIRTUAL_CLUSTER_ID,
    NAMESPACE,
    NODE_POOL_ID,
    SUITE,
    IMAGE,
    COMMAND,
    NODES,
    GPUS_PER_NODE,
    REPEATS,
    PER,
    UNIT_TOLERANCE,
    PRESCREEN,
    LAUNCHER,
    PARAMETERS,
    ALLOW_NODE_DIFFERENCES,
    THRESHOLDS,
    BASELINE,
    ON_FAILURE,
    START_TIMEOUT,
];

/// A state value as JSON: numbers stay numbers, the rest as the state holds it.
pub fn to_json(v: &Value) -> Json {
    match v {
        Value::Null | Value::Unknown(_) => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Number(n) => {
            let text = display_number(n);
            serde_json::from_str(&text).unwrap_or(Json::String(text))
        }
        Value::String(s) => Json::String(s.clone()),
        Value::List(xs) | Value::Set(xs) | Value::Tuple(xs) => {
            Json::Array(xs.iter().map(to_json).collect())
        }
        Value::Map(m) | Value::Object(m) => {
            Json::Object(m.iter().map(|(k, x)| (k.clone(), to_json(x))).collect())
        }
        Value::Dynamic(d) => to_json(&d.1),
    }
}

/// The attributes `fields` of `state` as pretty JSON.
pub fn fields_json(state: &Value, fields: &[&str]) -> String {
    let picked: serde_json::Map<String, Json> = fields
        .iter()
        .map(|k| ((*k).to_owned(), to_json(state.get(k))))
        .collect();
    serde_json::to_string_pretty(&picked).unwrap_or_default()
}

/// The pods' logs of one repeat, by pod name.
#[derive(Debug, Default)]
pub struct RepeatLogs<'a> {
    /// The logs the results were read from.
    pub results: Vec<(&'a str, &'a str)>,
    /// The other pods' (an MPI world's workers, gpufleet's ranks after the first).
    pub others: Vec<(&'a str, &'a str)>,
    /// The prescreen pods' that ran before it, if any.
    pub prescreen: Vec<(&'a str, &'a str)>,
}

/// The files of the archive of the run recorded in `state`, which sent `main` and whose
/// repeats left `logs` (in order), written at `written_at`: the result logs of every repeat
/// before any other log.
pub fn files(state: &Value, main: &Json, logs: &[RepeatLogs<'_>], written_at: &str) -> Vec<File> {
    let mut out = vec![
        // When, to the nanosecond: it makes each archive's SHA-256 its own, even of a run
        // recorded twice, so that destroy tells a replacement's archive from its own.
        File::new(
            "archive.json",
            serde_json::to_string_pretty(&json!({ "written_at": written_at })).unwrap_or_default(),
        ),
        File::new("record.json", fields_json(state, RECORD_FIELDS)),
        File::new("parameters.json", fields_json(state, DEFINITION_FIELDS)),
        File::new(
            "objects.json",
            serde_json::to_string_pretty(main).unwrap_or_default(),
        ),
    ];
    let results = logs
        .iter()
        .enumerate()
        .flat_map(|(r, l)| l.results.iter().map(move |&(pod, log)| (r + 1, pod, log)));
    let others = logs
        .iter()
        .enumerate()
        .flat_map(|(r, l)| l.others.iter().map(move |&(pod, log)| (r + 1, pod, log)));
    let screens = logs.iter().flat_map(|l| l.prescreen.iter().copied());
    out.extend(
        results
            .map(|(r, pod, log)| File::new(log_name(r, pod), log))
            .chain(screens.map(|(pod, log)| File::new(prescreen_log_name(pod), log)))
            .chain(others.map(|(r, pod, log)| File::new(log_name(r, pod), log))),
    );
    out
}

impl Archive {
    /// What the state records of the archive: its parts and its SHA-256.
    pub fn to_value(&self) -> Value {
        Value::object([
            (
                ARCHIVE_CONFIGMAPS,
                Value::List(self.names().into_iter().map(Value::string).collect()),
            ),
            (ARCHIVE_SHA256, Value::string(self.sha256.clone())),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(archive: &Archive, part: usize) -> &serde_json::Map<String, Json> {
        archive.parts[part]["data"].as_object().expect("data")
    }

    #[test]
    fn every_file_is_kept_and_indexed_with_its_digest() {
        let files = vec![
            File::new("record.json", "{}"),
            File::new(log_name(1, "gfb-a-0"), "line\n"),
        ];
        let a = pack("gfb-a-archive", Keeper::Resource, "ns", "a", &files);
        assert_eq!(a.names(), ["gfb-a-archive-0"]);
        let part = data(&a, 0);
        assert_eq!(part["repeat-1.gfb-a-0.log"], "line\n");
        let index: Json = serde_json::from_str(part["index.json"].as_str().expect("index"))
            .expect("index is JSON");
        assert_eq!(index["sha256"], a.sha256);
        assert_eq!(index["files"][1]["sha256"], sha256_hex(b"line\n"));
        assert_eq!(index["files"][1]["part"], 0);
    }

    #[test]
    fn a_large_archive_spreads_over_parts_and_stays_bounded() {
        let big = "x".repeat(PART_MAX / 2 + 1);
        let files: Vec<File> = (0..2 * MAX_PARTS + 2)
            .map(|i| File::new(format!("f{i}"), big.clone()))
            .collect();
        let a = pack("p", Keeper::OnDemand, "ns", "a", &files);
        assert_eq!(a.parts.len(), MAX_PARTS);
        for p in &a.parts {
            let bytes: usize = p["data"]
                .as_object()
                .expect("data")
                .values()
                .filter_map(Json::as_str)
                .map(str::len)
                .sum();
            assert!(bytes <= PART_MAX + INDEX_ROOM, "{bytes}");
            // What the API server would be sent, metadata and JSON escapes included.
            let sent = p.to_string().len();
            assert!(sent < 1_000_000, "{sent}");
        }
        let index: Json =
            serde_json::from_str(data(&a, 0)["index.json"].as_str().expect("index")).expect("JSON");
        assert!(!index["omitted"].as_array().expect("omitted").is_empty());
    }

    #[test]
    fn a_log_larger_than_a_part_keeps_its_end() {
        let log = format!("{}RESULT 42\n", "noise\n".repeat(PART_MAX / 6 + 10));
        let a = pack(
            "p",
            Keeper::OnDemand,
            "ns",
            "a",
            &[File::new("l", log.clone())],
        );
        let kept = data(&a, a.parts.len() - 1)["l"].as_str().expect("kept");
        assert!(kept.ends_with("RESULT 42\n"));
        assert!(kept.len() <= PART_MAX);
    }

    #[test]
    fn an_index_of_many_files_stays_within_its_room() {
        let files: Vec<File> = (0..5000)
            .map(|i| File::new(log_name(1, &format!("gfb-a-worker-{i:05}")), "ok\n"))
            .collect();
        let a = pack("p", Keeper::Resource, "ns", "a", &files);
        let text = data(&a, 0)["index.json"].as_str().expect("index");
        assert!(text.len() <= INDEX_ROOM, "{}", text.len());
        let index: Json = serde_json::from_str(text).expect("JSON");
        let listed = index["files"].as_array().expect("files").len();
        let named = index["omitted"].as_array().expect("omitted").len();
        assert_eq!(named, MAX_OMITTED_NAMED);
        assert_eq!(
            listed + named + index["omitted_more"].as_u64().expect("count") as usize,
            5000
        );
        let part0: usize = data(&a, 0)
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum();
        assert!(part0 <= PART_MAX, "{part0}");
    }

    #[test]
    fn result_logs_of_every_repeat_come_before_the_prescreens_and_the_others() {
        let logs = [
            RepeatLogs {
                results: vec![("launcher", "r1")],
                others: vec![("worker", "w1")],
                prescreen: vec![("screen", "s1")],
            },
            RepeatLogs {
                results: vec![("launcher", "r2")],
                others: vec![("worker", "w2")],
                prescreen: Vec::new(),
            },
        ];
        let names: Vec<String> = files(&Value::Null, &json!({}), &logs, "t")
            .into_iter()
            .skip(4)
            .map(|f| f.name)
            .collect();
        assert_eq!(
            names,
            [
                "repeat-1.launcher.log",
                "repeat-2.launcher.log",
                "prescreen.screen.log",
                "repeat-1.worker.log",
                "repeat-2.worker.log"
            ]
        );
    }

    #[test]
    fn a_resource_archive_has_fixed_names_and_a_run_on_demand_one_its_start() {
        assert_eq!(
            Keeper::Resource.prefix("a", "2026-11-28T10:15:00Z"),
            "gfb-a-archive"
        );
        assert_eq!(
            Keeper::OnDemand.prefix("a", "2026-11-28T10:15:00Z"),
            "gfb-a-archive-20261128t101500z"
        );
        let a = pack("gfb-a-archive", Keeper::Resource, "ns", "a", &[]);
        assert_eq!(index_sha256(&a.parts[0]), Some(a.sha256.clone()));
        assert_eq!(a.parts[0]["metadata"]["labels"][RECORD_LABEL], "archive");
    }
}
