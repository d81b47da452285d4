//! The controllers the virtual cluster's controller manager runs.
//!
//! vCluster copies every host node its pods use into the virtual cluster, taints included,
//! and the copy lags the host node by however long the syncer takes. Kubernetes' taint
//! eviction controller (`taint-eviction-controller`, on by default since 1.29) would then
//! delete a tenant's pod for a `NoExecute` taint the host node no longer has: Karpenter
//! launches nodes with `karpenter.sh/unregistered:NoExecute` and removes it before the host
//! schedules anything there, but a busy syncer can bind the tenant's pod to the virtual node
//! while the virtual node still carries it. The tenant's pod is then gone, and the syncer
//! deletes the host pod after it.
//!
//! Taints act on the host: its scheduler places the pods and its own taint eviction evicts
//! them, and the syncer passes that on to the virtual pod. So gpufleet turns the virtual
//! cluster's taint eviction off, and a taint a tenant puts on a virtual node does nothing,
//! as a `NoSchedule` one already did without vCluster's virtual scheduler.

use serde_json::{Value as Json, json};

/// The controllers vCluster runs when its virtual scheduler is off (`pkg/k8s/k8s.go`).
const WITHOUT_VIRTUAL_SCHEDULER: &str = "*,-nodeipam,-nodelifecycle,-persistentvolume-binder,\
     -attachdetach,-persistentvolume-expander,-cloud-node-lifecycle,-ttl";

/// The controllers vCluster runs when its virtual scheduler is on: node life cycle too.
const WITH_VIRTUAL_SCHEDULER: &str = "*,-nodeipam,-persistentvolume-binder,-attachdetach,\
     -persistentvolume-expander,-cloud-node-lifecycle,-ttl";

/// What decides the controllers, read from the merged user values.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Switches {
    /// `controlPlane.advanced.virtualScheduler.enabled`.
    pub(super) virtual_scheduler: bool,
    /// `sync.toHost.resourceClaimTemplates.enabled`.
    pub(super) resource_claim_templates: bool,
}

/// The controller manager's arguments: vCluster's own choice of controllers for `on`,
/// without taint eviction. vCluster lets these replace its own flags; `values_override`
/// cannot set them (`controlPlane.distro` is gpufleet's).
pub(super) fn extra_args(on: Switches) -> Json {
    let mut controllers = if on.virtual_scheduler {
        WITH_VIRTUAL_SCHEDULER.to_owned()
    } else {
        WITHOUT_VIRTUAL_SCHEDULER.to_owned()
    };
    // vCluster's own addition when it syncs ResourceClaimTemplates.
    if on.resource_claim_templates {
        controllers.push_str(",-resourceclaim-controller");
    }
    json!([format!(
        "--controllers={controllers},-taint-eviction-controller"
    )])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taint_eviction_is_off_and_the_rest_is_vclusters_choice() {
        assert_eq!(
            extra_args(Switches::default()),
            json!([format!(
                "--controllers={WITHOUT_VIRTUAL_SCHEDULER},-taint-eviction-controller"
            )])
        );
        let both = Switches {
            virtual_scheduler: true,
            resource_claim_templates: true,
        };
        assert_eq!(
            extra_args(both),
            json!([format!(
                "--controllers={WITH_VIRTUAL_SCHEDULER},-resourceclaim-controller,\
                 -taint-eviction-controller"
            )])
        );
    }
}
