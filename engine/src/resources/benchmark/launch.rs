//! How a multi-node `nccl-all-reduce` run becomes one MPI world across its gang. Pure.
//!
//! nccl-tests measure a collective across nodes only when every rank is one process of one
//! MPI world: `mpirun` starts `nodes × gpus_per_node` processes (one per GPU, `-g 1`) on the
//! workers over SSH. Two ways to get there, as GPU clouds do:
//!
//! - [`Launcher::MpiOperator`]: an `MPIJob` (`kubeflow.org/v2beta1`). The Kubeflow MPI
//!   Operator makes the SSH keys, the hostfile, one worker pod per node (running `sshd`) and a
//!   launcher Job whose pod runs `mpirun`; its log is the result.
//! - [`Launcher::Gpufleet`]: without the operator, gpufleet renders the same shape itself: an
//!   Indexed Job whose pods all run `sshd`, pod 0 also running `mpirun` over a hostfile of the
//!   pods' stable names (the headless Service), with a key pair in a Secret. The Job succeeds
//!   when pod 0 does (a success policy), which ends the other pods.
//!
//! Every other run is [`Launcher::Pods`]: one pod per node, each running the tool.

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Value as Json, json};

use super::{
    commands::mpirun,
    model::{BenchmarkSpec, LauncherSetting},
    render::{self, Placement},
};

/// The MPI Operator's label of the MPIJob a pod belongs to.
pub const MPI_JOB_NAME_LABEL: &str = "training.kubeflow.org/job-name";
/// The MPI Operator's label of a pod's role: `launcher` or `worker`.
pub const MPI_JOB_ROLE_LABEL: &str = "training.kubeflow.org/job-role";
/// The MPI Operator's label of a worker's index.
pub const MPI_REPLICA_INDEX_LABEL: &str = "training.kubeflow.org/replica-index";

/// Where the gpufleet launcher mounts its key pair.
const SSH_MOUNT: &str = "/etc/gpufleet/ssh";

/// How a run starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// One pod per node, each running the tool (an Indexed Job).
    Pods,
    /// An `MPIJob` for the Kubeflow MPI Operator.
    MpiOperator,
    /// gpufleet's own launcher: an Indexed Job whose pod 0 runs `mpirun`.
    Gpufleet,
}

/// Whether the run is one MPI world across nodes.
pub fn is_mpi(spec: &BenchmarkSpec) -> bool {
    spec.nodes > 1 && spec.suite.name() == "nccl-all-reduce"
}

/// The launcher of a run, given whether the host cluster serves `MPIJob`; `Err` says why
/// the configured one cannot run there.
pub fn choose(spec: &BenchmarkSpec, serves_mpijob: bool) -> Result<Launcher, String> {
    if !is_mpi(spec) {
        return Ok(Launcher::Pods);
    }
    match (spec.launcher, serves_mpijob) {
        (LauncherSetting::Gpufleet, _) | (LauncherSetting::Auto, false) => Ok(Launcher::Gpufleet),
        (LauncherSetting::MpiOperator | LauncherSetting::Auto, true) => Ok(Launcher::MpiOperator),
        (LauncherSetting::MpiOperator, false) => Err(
            "launcher = \"mpi-operator\", but the host cluster does not serve MPIJob \
             (kubeflow.org/v2beta1): install the Kubeflow MPI Operator, or set launcher = \
             \"auto\" to fall back to gpufleet's own launcher"
                .to_owned(),
        ),
    }
}

/// The command every worker runs: the SSH daemon in the foreground, with host keys made
/// first (images rarely ship them).
fn sshd() -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        "mkdir -p /run/sshd && ssh-keygen -A >/dev/null && exec /usr/sbin/sshd -De".into(),
    ]
}

fn gpu_resources(spec: &BenchmarkSpec) -> Json {
    let gpus = spec.gpus_per_node.to_string();
    json!({
        "limits": { "nvidia.com/gpu": gpus },
        "requests": { "nvidia.com/gpu": gpus },
    })
}

/// The pod template of one MPIJob replica type.
fn replica_template(
    spec: &BenchmarkSpec,
    placement: &Placement,
    container: &Json,
    spread: bool,
) -> Json {
    let mut pod = json!({
        "nodeSelector": placement.node_selector,
        "tolerations": render::tolerations(placement),
        "terminationGracePeriodSeconds": 10,
        "containers": [container],
    });
    if spread {
        pod["affinity"] = render::one_pod_per_node(spec, Some((MPI_JOB_ROLE_LABEL, "worker")));
    }
    render::pin(&mut pod, placement);
    json!({ "metadata": { "labels": render::labels(spec) }, "spec": pod })
}

/// The `MPIJob` of a run (without its spec-hash annotation). The launcher runs `mpirun` and
/// asks for no GPU; each worker asks for `gpus_per_node` on a node of its own. Workers are
/// removed when the launcher ends (`cleanPodPolicy: Running`), and `deadline_seconds` bounds
/// the whole job on the cluster side.
pub fn mpijob(spec: &BenchmarkSpec, placement: &Placement, deadline_seconds: u64) -> Json {
    let launcher = json!({
        "name": spec.suite.name(),
        "image": spec.image,
        "command": mpirun(spec, None),
        "env": render::env(spec),
        "terminationMessagePolicy": "FallbackToLogsOnError",
    });
    let worker = json!({
        "name": "worker",
        "image": spec.image,
        "command": sshd(),
        "env": render::env(spec),
        "resources": gpu_resources(spec),
    });
    json!({
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {
            "name": render::job_name(&spec.name),
            "namespace": spec.namespace,
            "labels": render::labels(spec),
        },
        "spec": {
            "slotsPerWorker": spec.gpus_per_node,
            "runLauncherAsWorker": false,
            "mpiImplementation": "OpenMPI",
            // mpirun fails on a worker whose sshd is not up yet.
            "launcherCreationPolicy": "WaitForWorkersReady",
            "runPolicy": {
                "cleanPodPolicy": "Running",
                "backoffLimit": 0,
                "activeDeadlineSeconds": deadline_seconds,
            },
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": replica_template(spec, placement, &launcher, false),
                },
                "Worker": {
                    "replicas": spec.nodes,
                    "restartPolicy": "Never",
                    "template": replica_template(spec, placement, &worker, true),
                },
            },
        },
    })
}

/// The name of the Secret holding gpufleet's launcher key pair.
pub fn ssh_secret_name(benchmark: &str) -> String {
    // Not `-ssh`: that is the name the MPI Operator gives its own.
    format!("{}-keys", render::job_name(benchmark))
}

/// The Secret of gpufleet's launcher key pair, in the form of `kubernetes.io/ssh-auth`.
pub fn ssh_secret(spec: &BenchmarkSpec, keys: &super::ssh_keys::SshKeys) -> Json {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/ssh-auth",
        "metadata": {
            "name": ssh_secret_name(&spec.name),
            "namespace": spec.namespace,
            "labels": render::labels(spec),
        },
        // `data`, not `stringData`: a server-side apply of the latter is not read back.
        "data": {
            "ssh-privatekey": STANDARD.encode(&keys.private_pem),
            "ssh-publickey": STANDARD.encode(&keys.public_line),
        },
    })
}

/// The script every pod of gpufleet's launcher runs: all start `sshd` with the shared key;
/// pod 0 then writes the hostfile of every pod's stable name, waits until each answers over
/// SSH, and runs `mpirun`.
fn gpufleet_script(spec: &BenchmarkSpec) -> String {
    let job = render::job_name(&spec.name);
    let hosts: Vec<String> = (0..spec.nodes)
        .map(|i| format!("{job}-{i}.{job}"))
        .collect();
    let hostfile: String = hosts
        .iter()
        .map(|h| format!("{h} slots={}\\n", spec.gpus_per_node))
        .collect();
    let quoted: Vec<String> = mpirun(spec, Some("/tmp/gpufleet-hostfile"))
        .iter()
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect();
    format!(
        "set -e\n\
         mkdir -p /root/.ssh /run/sshd\n\
         cp {SSH_MOUNT}/ssh-privatekey /root/.ssh/id_ecdsa\n\
         cp {SSH_MOUNT}/ssh-publickey /root/.ssh/authorized_keys\n\
         chmod 700 /root/.ssh && chmod 600 /root/.ssh/id_ecdsa /root/.ssh/authorized_keys\n\
         printf 'StrictHostKeyChecking no\\nUserKnownHostsFile /dev/null\\nLogLevel ERROR\\n' > /root/.ssh/config\n\
         ssh-keygen -A >/dev/null\n\
         if [ \"$JOB_COMPLETION_INDEX\" != 0 ]; then exec /usr/sbin/sshd -De; fi\n\
         /usr/sbin/sshd -e\n\
         printf '{hostfile}' > /tmp/gpufleet-hostfile\n\
         for h in {hosts}; do until ssh -o ConnectTimeout=2 \"$h\" true; do sleep 1; done; done\n\
         exec {argv}\n",
        hosts = hosts.join(" "),
        argv = quoted.join(" "),
    )
}

/// gpufleet's own launcher: the run's Indexed Job with every pod running `gpufleet_script`,
/// the key pair mounted, and a success policy that completes the Job when pod 0 (the
/// launcher) succeeds.
pub fn gpufleet_job(spec: &BenchmarkSpec, placement: &Placement, deadline_seconds: u64) -> Json {
    let mut job = render::job(spec, placement, deadline_seconds);
    let pod = &mut job["spec"]["template"]["spec"];
    pod["containers"][0]["command"] = json!(["sh", "-c", gpufleet_script(spec)]);
    pod["containers"][0]["volumeMounts"] =
        json!([{ "name": "ssh", "mountPath": SSH_MOUNT, "readOnly": true }]);
    pod["volumes"] = json!([{
        "name": "ssh",
        "secret": { "secretName": ssh_secret_name(&spec.name), "defaultMode": 0o400 },
    }]);
    job["spec"]["successPolicy"] = json!({ "rules": [{ "succeededIndexes": "0" }] });
    job
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mpirun_of_two_eight_gpu_nodes_has_sixteen_ranks_eight_per_node() {
        let spec = super::super::model::tests::nccl_spec(2, 8);
        let argv = mpirun(&spec, None).join(" ");
        assert!(argv.starts_with("mpirun --allow-run-as-root -np 16 --map-by ppr:8:node"));
        assert!(
            argv.contains("all_reduce_perf_mpi -b 8 -e 8G -f 2 -g 1"),
            "{argv}"
        );
        assert_eq!(choose(&spec, true), Ok(Launcher::MpiOperator));
        assert_eq!(choose(&spec, false), Ok(Launcher::Gpufleet));
        let one = super::super::model::tests::nccl_spec(1, 8);
        assert_eq!(choose(&one, true), Ok(Launcher::Pods));
    }

    #[test]
    fn the_gpufleet_launcher_writes_every_pod_into_the_hostfile() {
        let spec = super::super::model::tests::nccl_spec(3, 4);
        let script = gpufleet_script(&spec);
        assert!(
            script.contains("gfb-allreduce-0.gfb-allreduce slots=4\\ngfb-allreduce-1.gfb-allreduce slots=4\\ngfb-allreduce-2.gfb-allreduce slots=4\\n"),
            "{script}"
        );
        assert!(script.contains("'-np' '12'"), "{script}");
    }
}
