//! Plan-time checks of the parameters the single-node suites' default commands read
//! ([`super::commands`]), and of thresholds the configured run cannot produce. Pure.
//!
//! With a configured `command` the parameters are only environment variables for that
//! command, so nothing here applies. Values not yet known at plan are not checked.

use std::collections::BTreeMap;

use crate::{
    benchmark::{Suite, aiperf},
    diag::{Diagnostic, Diagnostics},
    path::AttrPath,
};

use super::{
    commands::{DEFAULT_ENDPOINT_TYPE, EMBEDDED_HOST_ENGINE},
    config::BenchmarkConfig,
    schema::{PARAMETERS, THRESHOLDS},
};

/// AIPerf endpoint types (`--endpoint-type` choices).
const ENDPOINT_TYPES: &[&str] = &[
    "chat",
    "cohere_rankings",
    "completions",
    "chat_embeddings",
    "embeddings",
    "hf_tei_rankings",
    "huggingface_generate",
    "image_generation",
    "video_generation",
    "nim_embeddings",
    "nim_rankings",
    "solido_rag",
    "template",
];

/// Endpoint types that answer in one piece: AIPerf turns streaming off for them.
const NON_STREAMING_ENDPOINTS: &[&str] = &[
    "cohere_rankings",
    "chat_embeddings",
    "embeddings",
    "hf_tei_rankings",
    "image_generation",
    "video_generation",
    "nim_embeddings",
    "nim_rankings",
];

/// The parameters of a configuration whose values are known (`None` when the map is not).
fn known_parameters(config: &BenchmarkConfig) -> Option<BTreeMap<&str, &str>> {
    let map = &config.parameters;
    if map.is_unknown() {
        return None;
    }
    Some(
        map.value()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.as_str(), v.value()?.as_str())))
            .collect(),
    )
}

fn parameter_path(key: &str) -> AttrPath {
    AttrPath::attr(PARAMETERS).push_key(key)
}

/// The parameters each suite's own command takes; plan refuses any other key (a typo would
/// otherwise run the tool with its default silently). The custom suite takes any: they are
/// only environment variables for its command.
pub const SUITE_PARAMETERS: &[(&str, &[&str])] = &[
    (
        "nccl-all-reduce",
        &["min_bytes", "max_bytes", "step_factor"],
    ),
    ("nvbandwidth", &["testcases", "buffer_size", "samples"]),
    ("dcgm-diag", &["level", "host_engine"]),
    (
        "aiperf",
        &["model", "url", "endpoint_type", "streaming", "concurrency"],
    ),
    (
        "gpu-burn",
        &["seconds", "doubles", "tensor_cores", "memory"],
    ),
];

/// Whether a parameter's name says it holds a credential (`api_key`, `hf_token`, …).
pub fn looks_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    const WORDS: &[&str] = &["key", "apikey", "token", "password", "passwd", "secret"];
    key.split(['_', '-', '.']).any(|w| WORDS.contains(&w))
}

/// The checks of `suite`'s parameters and of its thresholds against them.
pub(super) fn validate(suite: &dyn Suite, config: &BenchmarkConfig, d: &mut Diagnostics) {
    if !config.command.is_null() {
        return;
    }
    if let Some((_, accepted)) = SUITE_PARAMETERS.iter().find(|(s, _)| *s == suite.name()) {
        for key in config
            .parameters
            .value()
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
        {
            if !accepted.contains(&key.as_str()) {
                let path = parameter_path(key);
                let hint = if looks_secret(key) {
                    " An endpoint's key goes in endpoint_api_key_wo, which is never stored."
                } else {
                    ""
                };
                d.error_at(
                    path.clone(),
                    "Unknown Parameter",
                    format!(
                        "{path}: {key:?} is not a parameter of the {} suite; accepted: {}.{hint}",
                        suite.name(),
                        accepted.join(", ")
                    ),
                );
            }
        }
    }
    let Some(params) = known_parameters(config) else {
        return;
    };
    let declared = config.parameters.value();
    let has = |key: &str| declared.is_some_and(|m| m.contains_key(key));
    match suite.name() {
        "aiperf" => aiperf_checks(config, &params, &has, d),
        "dcgm-diag" => dcgm_checks(&params, d),
        "gpu-burn" => gpu_burn_checks(&params, d),
        "nvbandwidth" => nvbandwidth_checks(&params, d),
        "nccl-all-reduce" => nccl_checks(&params, d),
        _ => {}
    }
}

fn aiperf_checks(
    config: &BenchmarkConfig,
    params: &BTreeMap<&str, &str>,
    has: &dyn Fn(&str) -> bool,
    d: &mut Diagnostics,
) {
    let missing: Vec<String> = [
        ("model", "the model name the endpoint serves"),
        (
            "url",
            "the base URL of its OpenAI-compatible API, e.g. http://vllm.inference.svc:8000",
        ),
    ]
    .into_iter()
    .filter(|(k, _)| !has(k))
    .map(|(k, what)| format!("parameters.{k} ({what})"))
    .collect();
    if !missing.is_empty() {
        d.error_at(
            AttrPath::attr(PARAMETERS),
            "Missing Parameter",
            format!(
                "the aiperf suite profiles an inference endpoint: set {}.",
                missing.join(" and ")
            ),
        );
    }
    for key in ["model", "url"] {
        if params.get(key).is_some_and(|v| v.trim().is_empty()) {
            d.error_at(
                parameter_path(key),
                "Empty Parameter",
                format!("parameters.{key} is empty."),
            );
        }
    }
    let streaming = match params.get("streaming") {
        None => Some(true),
        Some(&"true") => Some(true),
        Some(&"false") => Some(false),
        Some(other) => {
            d.error_at(
                parameter_path("streaming"),
                "Invalid Parameter",
                format!(
                    "parameters.streaming is {other:?}; set \"true\" (aiperf --streaming, \
                     which measures time to first token and inter-token latency) or \"false\"."
                ),
            );
            None
        }
    };
    let endpoint = params
        .get("endpoint_type")
        .copied()
        .unwrap_or(DEFAULT_ENDPOINT_TYPE);
    if !ENDPOINT_TYPES.contains(&endpoint) {
        d.push(
            Diagnostic::warning(
                "Unknown Endpoint Type",
                format!(
                    "parameters.endpoint_type {endpoint:?} is not one of the endpoint types \
                     AIPerf documents ({}); the run fails if the image's AIPerf does not know \
                     it.",
                    ENDPOINT_TYPES.join(", ")
                ),
            )
            .with_path(parameter_path("endpoint_type")),
        );
    }
    if let Some(c) = params.get("concurrency") {
        positive_integer(c, "concurrency", d);
    }
    let streams = streaming.unwrap_or(true) && !NON_STREAMING_ENDPOINTS.contains(&endpoint);
    if streaming.is_none() || streams {
        return;
    }
    let Some(thresholds) = config.thresholds.value() else {
        return;
    };
    for metric in thresholds.keys().filter(|m| aiperf::is_streaming_only(m)) {
        let why = if streaming == Some(false) {
            "parameters.streaming is \"false\"".to_owned()
        } else {
            format!("endpoint type {endpoint:?} does not stream, so AIPerf turns streaming off")
        };
        d.error_at(
            AttrPath::attr(THRESHOLDS).push_key(metric),
            "Metric Needs Streaming",
            format!(
                "{metric} is measured only on streaming runs, and {why}: set \
                 parameters.streaming = \"true\" with a streaming endpoint type (chat or \
                 completions), or remove this threshold."
            ),
        );
    }
}

fn dcgm_checks(params: &BTreeMap<&str, &str>, d: &mut Diagnostics) {
    if let Some(level) = params.get("level")
        && !["1", "2", "3", "4"].contains(level)
    {
        d.error_at(
            parameter_path("level"),
            "Invalid Parameter",
            format!(
                "parameters.level is {level:?}; dcgmi diag -r takes level 1 (quick), 2 \
                 (medium), 3 (long) or 4 (extended)."
            ),
        );
    }
    if let Some(engine) = params.get("host_engine")
        && *engine != EMBEDDED_HOST_ENGINE
        && !is_host_and_port(engine)
    {
        d.error_at(
            parameter_path("host_engine"),
            "Invalid Parameter",
            format!(
                "parameters.host_engine is {engine:?}; set \"embedded\" (the container \
                 starts nv-hostengine itself) or the host engine to connect to as \
                 <host>[:<port>], e.g. \"nvidia-dcgm.gpu-operator.svc:5555\"."
            ),
        );
    }
}

/// `host`, `host:port` with a host name or IPv4 address and a port 1–65535.
fn is_host_and_port(text: &str) -> bool {
    let (host, port) = match text.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (text, None),
    };
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        && !host.starts_with(['-', '.']);
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|n| n > 0));
    host_ok && port_ok
}

fn gpu_burn_checks(params: &BTreeMap<&str, &str>, d: &mut Diagnostics) {
    if let Some(s) = params.get("seconds") {
        positive_integer(s, "seconds", d);
    }
    for key in ["doubles", "tensor_cores"] {
        if let Some(v) = params.get(key)
            && !matches!(*v, "true" | "false")
        {
            d.error_at(
                parameter_path(key),
                "Invalid Parameter",
                format!("parameters.{key} is {v:?}; set \"true\" or \"false\"."),
            );
        }
    }
    if let Some(m) = params.get("memory") {
        let ok = match m.strip_suffix('%') {
            Some(pct) => pct.parse::<u8>().is_ok_and(|n| (1..=100).contains(&n)),
            None => m.parse::<u64>().is_ok_and(|n| n > 0),
        };
        if !ok {
            d.error_at(
                parameter_path("memory"),
                "Invalid Parameter",
                format!(
                    "parameters.memory is {m:?}; gpu_burn -m takes megabytes (\"8192\") or a \
                     share of the free memory (\"90%\")."
                ),
            );
        }
    }
}

fn nvbandwidth_checks(params: &BTreeMap<&str, &str>, d: &mut Diagnostics) {
    if let Some(list) = params.get("testcases") {
        let names: Vec<&str> = list
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|n| !n.is_empty())
            .collect();
        let bad = names
            .iter()
            .find(|n| !n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
        if names.is_empty() || bad.is_some() {
            d.error_at(
                parameter_path("testcases"),
                "Invalid Parameter",
                format!(
                    "parameters.testcases is {list:?}; list testcase names or indexes \
                     (`nvbandwidth -l`), separated by commas, e.g. \
                     \"host_to_device_memcpy_ce,device_to_device_memcpy_read_ce\"."
                ),
            );
        }
    }
    for key in ["buffer_size", "samples"] {
        if let Some(v) = params.get(key) {
            positive_integer(v, key, d);
        }
    }
}

/// all_reduce_perf's `-b`/`-e` take a byte count with an optional K, M or G suffix, and `-f`
/// a whole factor.
fn nccl_checks(params: &BTreeMap<&str, &str>, d: &mut Diagnostics) {
    for key in ["min_bytes", "max_bytes"] {
        if let Some(v) = params.get(key) {
            let digits = v.strip_suffix(['K', 'M', 'G']).unwrap_or(v);
            if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
                let path = parameter_path(key);
                d.error_at(
                    path.clone(),
                    "Invalid Parameter",
                    format!(
                        "{path}: {v:?} is not a byte count; accepted: a whole number of bytes, \
                         optionally with the suffix K, M or G (all_reduce_perf -b/-e), e.g. \"8\" \
                         or \"8G\"."
                    ),
                );
            }
        }
    }
    if let Some(v) = params.get("step_factor") {
        positive_integer(v, "step_factor", d);
    }
}

fn positive_integer(value: &str, key: &str, d: &mut Diagnostics) {
    if !value.parse::<u64>().is_ok_and(|n| n > 0) {
        d.error_at(
            parameter_path(key),
            "Invalid Parameter",
            format!("parameters.{key} is {value:?}; it must be a whole number above 0."),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_engines_are_host_and_optional_port() {
        for ok in [
            "nvidia-dcgm.gpu-operator.svc:5555",
            "10.0.0.7",
            "10.0.0.7:5555",
            "localhost",
        ] {
            assert!(is_host_and_port(ok), "{ok}");
        }
        for bad in [
            "",
            ":5555",
            "host:0",
            "host:70000",
            "host:port",
            "a b",
            "$(reboot)",
            "-x",
        ] {
            assert!(!is_host_and_port(bad), "{bad}");
        }
    }
}
