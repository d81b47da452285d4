//! What a launched run looks like on the cluster, by [`Launcher`]: the object that carries
//! its outcome, the pods that form the gang, the pod whose log is the result, and whose exit
//! codes count. Pure.

use serde_json::Value as Json;

use crate::backends::kube::{
    host::ObjectKind,
    json::{annotation, label, str_at},
};

use super::{
    launch::{Launcher, MPI_JOB_NAME_LABEL, MPI_JOB_ROLE_LABEL, MPI_REPLICA_INDEX_LABEL},
    render::{self, COMPLETION_INDEX_ANNOTATION, JOB_NAME_LABEL},
};

/// The cluster-side shape of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// How it was launched.
    pub launcher: Launcher,
    /// `gfb-<name>`: the Job or the MPIJob.
    pub name: String,
}

fn true_conditions(o: &Json) -> impl Iterator<Item = &str> {
    o.pointer("/status/conditions")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter(|c| str_at(c, "/status") == Some("True"))
        .filter_map(|c| str_at(c, "/type"))
}

impl Shape {
    /// The shape of the run of benchmark `name`.
    pub fn new(launcher: Launcher, name: &str) -> Shape {
        Shape {
            launcher,
            name: render::job_name(name),
        }
    }

    /// The kind of the object whose conditions end the run.
    pub fn main_kind(&self) -> ObjectKind {
        match self.launcher {
            Launcher::MpiOperator => ObjectKind::MpiJob,
            Launcher::Pods | Launcher::Gpufleet => ObjectKind::Job,
        }
    }

    /// The run's final condition on its main object: `Some(true)` when it succeeded,
    /// `Some(false)` when it failed.
    pub fn outcome(&self, main: &Json) -> Option<bool> {
        let (ok, failed) = match self.launcher {
            Launcher::MpiOperator => ("Succeeded", "Failed"),
            Launcher::Pods | Launcher::Gpufleet => ("Complete", "Failed"),
        };
        true_conditions(main).find_map(|t| {
            if t == ok {
                Some(true)
            } else if t == failed {
                Some(false)
            } else {
                None
            }
        })
    }

    /// The label selector of the gang: one pod per node.
    pub fn gang_selector(&self) -> String {
        match self.launcher {
            Launcher::MpiOperator => {
                format!(
                    "{MPI_JOB_NAME_LABEL}={},{MPI_JOB_ROLE_LABEL}=worker",
                    self.name
                )
            }
            Launcher::Pods | Launcher::Gpufleet => format!("{JOB_NAME_LABEL}={}", self.name),
        }
    }

    /// The label selector of the pod whose log is the result: the MPI launcher, or every
    /// pod of the Job (the result is pod 0's).
    pub fn log_selector(&self) -> String {
        match self.launcher {
            Launcher::MpiOperator => {
                format!(
                    "{MPI_JOB_NAME_LABEL}={},{MPI_JOB_ROLE_LABEL}=launcher",
                    self.name
                )
            }
            Launcher::Pods | Launcher::Gpufleet => format!("{JOB_NAME_LABEL}={}", self.name),
        }
    }

    /// Whether a pod's exit code speaks for the run: every pod's when each runs the tool;
    /// only the launcher's under MPI (workers' `sshd` is ended when the launcher is done).
    pub fn exit_code_counts(&self, pod: &Json) -> bool {
        match self.launcher {
            Launcher::Pods => true,
            Launcher::Gpufleet => index_of(pod) == 0,
            Launcher::MpiOperator => label(pod, MPI_JOB_ROLE_LABEL) == Some("launcher"),
        }
    }
}

/// A pod's index in its gang: the Indexed Job's completion index, or the MPI worker's
/// replica index; pods without one sort last.
pub fn index_of(pod: &Json) -> i64 {
    annotation(pod, COMPLETION_INDEX_ANNOTATION)
        .or_else(|| label(pod, MPI_REPLICA_INDEX_LABEL))
        .and_then(|s| s.parse().ok())
        .unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_mpijob_ends_on_its_own_conditions() {
        let s = Shape::new(Launcher::MpiOperator, "x");
        let cond = |t: &str| {
            json!({ "status": { "conditions": [
            { "type": "Created", "status": "True" },
            { "type": "Running", "status": "False" },
            { "type": t, "status": "True" },
        ] } })
        };
        assert_eq!(s.outcome(&cond("Succeeded")), Some(true));
        assert_eq!(s.outcome(&cond("Failed")), Some(false));
        assert_eq!(s.outcome(&cond("Complete")), None);
        assert_eq!(
            s.gang_selector(),
            "training.kubeflow.org/job-name=gfb-x,training.kubeflow.org/job-role=worker"
        );
        let job = Shape::new(Launcher::Pods, "x");
        assert_eq!(job.outcome(&cond("Complete")), Some(true));
        assert_eq!(job.main_kind(), ObjectKind::Job);
    }

    #[test]
    fn workers_sort_by_their_replica_index() {
        let worker = json!({ "metadata": { "labels": { MPI_REPLICA_INDEX_LABEL: "1" } } });
        assert_eq!(index_of(&worker), 1);
        let indexed =
            json!({ "metadata": { "annotations": { COMPLETION_INDEX_ANNOTATION: "0" } } });
        assert_eq!(index_of(&indexed), 0);
        assert_eq!(index_of(&json!({})), i64::MAX);
    }
}
