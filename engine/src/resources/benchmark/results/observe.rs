//! What step 5 reads from a run's pods: the result logs (or termination messages), the image
//! they ran and the exit codes that count.

use serde_json::Value as Json;

use crate::{
    backends::kube::{host::HostObjects, json::str_at},
    resources::benchmark::{
        archive::RepeatLogs,
        error::{RunError, StepError},
        launch::Launcher,
        model::BenchmarkSpec,
        schema::RAW_OUTPUT_MAX,
        shape::Shape,
        wait::{nodes_of, run_pods},
    },
};

/// What step 5 read from the pods.
#[derive(Debug, Default)]
pub(in crate::resources::benchmark) struct Observed {
    /// The result logs, each with the node its pod ran on: every pod's when each node runs the
    /// tool on its own, else the one result pod's. A pod whose log cannot be read gives its
    /// termination message.
    pub(in crate::resources::benchmark) logs: Vec<(String, String)>,
    /// The nodes the gang ran on, in index order.
    pub(in crate::resources::benchmark) nodes: Vec<String>,
    /// The image the pods ran, by digest.
    pub(in crate::resources::benchmark) image_digest: String,
    /// The exit codes that count, by pod.
    pub(in crate::resources::benchmark) exit_codes: Vec<(String, i64)>,
    /// The pods of `logs`, in the same order.
    pub(in crate::resources::benchmark) log_pods: Vec<String>,
    /// The logs of the run's other pods still there (gpufleet's ranks after the first), by
    /// pod name: for the archive only.
    pub(in crate::resources::benchmark) other_logs: Vec<(String, String)>,
}

impl Observed {
    /// Every pod's log read, by pod name, for the archive.
    pub(in crate::resources::benchmark) fn archive_logs(&self) -> RepeatLogs<'_> {
        RepeatLogs {
            results: self
                .log_pods
                .iter()
                .zip(&self.logs)
                .map(|(pod, (_, log))| (pod.as_str(), log.as_str()))
                .collect(),
            others: self
                .other_logs
                .iter()
                .map(|(pod, log)| (pod.as_str(), log.as_str()))
                .collect(),
            prescreen: Vec::new(),
        }
    }

    /// Replaces `secret` in every log with `(redacted)`: a tool may print the key it was
    /// given (its command line, its configuration), and logs reach `raw_output`, failures
    /// and the archive.
    pub(in crate::resources::benchmark) fn redact(&mut self, secret: &str) {
        // As given, without the line end a file may have carried, and as a JSON string
        // holds it (a tool's JSON export).
        let trimmed = secret.trim();
        let escaped = serde_json::to_string(trimmed).unwrap_or_default();
        let escaped = escaped.trim_matches('"');
        let mut forms = vec![secret, trimmed, escaped];
        forms.retain(|f| !f.is_empty());
        forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
        forms.dedup();
        for (_, log) in self.logs.iter_mut().chain(self.other_logs.iter_mut()) {
            for form in &forms {
                if log.contains(form) {
                    *log = log.replace(form, "(redacted)");
                }
            }
        }
    }

    /// The output `raw_output` keeps the end of: the one log, or each node's under a line
    /// naming it.
    pub(super) fn output(&self) -> String {
        match &self.logs[..] {
            [(_, log)] => log.clone(),
            logs => logs
                .iter()
                .map(|(node, log)| headed(&format!("node {node}"), log))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// Step 5: the result pods' logs, the image they ran and the exit codes that count; `gang`
/// are the nodes seen at gang start (the pods may be gone by now).
pub(in crate::resources::benchmark) async fn observe(
    cluster: &dyn HostObjects,
    spec: &BenchmarkSpec,
    shape: &Shape,
    gang: &[String],
) -> Result<Observed, StepError> {
    let pods = run_pods(cluster, spec, &shape.log_selector()).await?;
    let mut o = Observed {
        nodes: gang.to_vec(),
        ..Observed::default()
    };
    if o.nodes.is_empty() {
        o.nodes = nodes_of(&run_pods(cluster, spec, &shape.gang_selector()).await?);
    }
    for p in &pods {
        let status = p
            .pointer("/status/containerStatuses/0")
            .cloned()
            .unwrap_or_default();
        if o.image_digest.is_empty() {
            o.image_digest = str_at(&status, "/imageID").unwrap_or_default().to_owned();
        }
        if !shape.exit_code_counts(p) {
            continue;
        }
        if let Some(code) = status
            .pointer("/state/terminated/exitCode")
            .and_then(Json::as_i64)
        {
            o.exit_codes.push((
                str_at(p, "/metadata/name").unwrap_or_default().to_owned(),
                code,
            ));
        }
    }
    if pods.is_empty() {
        return Err(RunError::Setup(format!(
            "{} {} finished without a pod to read.",
            shape.main_kind().kind(),
            shape.name
        ))
        .into());
    }
    // Each node's pod runs the tool on its own under the Pods launcher; otherwise the first
    // pod (the MPI launcher, or pod 0 of gpufleet's) holds the world's one result.
    let readers = if shape.launcher == Launcher::Pods {
        &pods[..]
    } else {
        &pods[..1]
    };
    for pod in readers {
        let node = str_at(pod, "/spec/nodeName").unwrap_or_default().to_owned();
        o.logs.push((node, pod_log(cluster, spec, pod).await?));
        let name = str_at(pod, "/metadata/name").unwrap_or_default();
        o.log_pods.push(name.to_owned());
    }
    // The other pods' logs (gpufleet's ranks after the first) go only to the archive: one
    // that cannot be read says so there, and the verdict does not depend on it. The MPI
    // Operator's workers are gone by now (`cleanPodPolicy: Running`); every rank prints
    // through the launcher's log.
    for pod in &pods[readers.len()..] {
        let name = str_at(pod, "/metadata/name").unwrap_or_default().to_owned();
        let container = str_at(pod, "/spec/containers/0/name").unwrap_or_default();
        let log = match cluster.logs(&spec.namespace, &name, container).await {
            Ok(log) => log,
            Err(e) => format!("(gpufleet could not read this pod's log: {e})\n"),
        };
        o.other_logs.push((name, log));
    }
    Ok(o)
}

/// A result pod's log, or its termination message when the log is empty or unreadable.
async fn pod_log(
    cluster: &dyn HostObjects,
    spec: &BenchmarkSpec,
    pod: &Json,
) -> Result<String, StepError> {
    let name = str_at(pod, "/metadata/name").unwrap_or_default();
    let message = str_at(pod, "/status/containerStatuses/0/state/terminated/message")
        .unwrap_or_default()
        .to_owned();
    Ok(
        match cluster.logs(&spec.namespace, name, spec.suite.name()).await {
            Ok(log) if !log.trim().is_empty() => log,
            Ok(_) if !message.is_empty() => message,
            Err(e) if !message.is_empty() => {
                tracing::info!(target: "gpufleet::benchmark", "{e}; using the termination message");
                message
            }
            Ok(log) => log,
            Err(e) => return Err(e.into()),
        },
    )
}

/// `text` under a `==> <label> <==` line, as `tail -v` heads each file it shows.
pub(super) fn headed(label: &str, text: &str) -> String {
    format!("==> {label} <==\n{text}")
}

/// The end of `log`, at most [`RAW_OUTPUT_MAX`] bytes, cut at a character boundary.
pub(super) fn tail(log: &str) -> String {
    if log.len() <= RAW_OUTPUT_MAX {
        return log.to_owned();
    }
    let mut start = log.len() - RAW_OUTPUT_MAX;
    while !log.is_char_boundary(start) {
        start += 1;
    }
    log[start..].to_owned()
}
