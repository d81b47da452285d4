//! What plan asks the backends before it lets a change through: one row per refusal, which
//! the checks report under its `summary` on its `attribute`, the resource docs list, and the
//! acceptance suite plans against the lab. Apply checks each again, since the fleet can
//! change between plan and apply; a backend that cannot be asked at plan is no finding.

/// One refusal that needs what a backend knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendFact {
    /// The resource type it refuses.
    pub type_name: &'static str,
    /// The attribute the diagnostic points at.
    pub attribute: &'static str,
    /// The diagnostic's summary.
    pub summary: &'static str,
    /// When, in words, for the docs.
    pub refuses: &'static str,
}

const BCM_NODE: &str = "gpufleet_bcm_node";
const POOL: &str = "gpufleet_gpu_node_pool";
const SEGMENT: &str = "gpufleet_network_segment";
const BENCHMARK: &str = "gpufleet_benchmark";
const VIRTUAL_CLUSTER: &str = "gpufleet_virtual_cluster";

/// A row of [`BACKEND_FACTS`].
pub const UNKNOWN_BCM_NODE: BackendFact = BackendFact {
    type_name: BCM_NODE,
    attribute: "hostname",
    summary: "Unknown BCM Node",
    refuses: "a hostname Base Command Manager has no node for",
};
/// A row of [`BACKEND_FACTS`].
pub const BCM_NODE_HELD: BackendFact = BackendFact {
    type_name: BCM_NODE,
    attribute: "hostname",
    summary: "BCM Node Held By Another Tenant",
    refuses: "a node whose device records another tenant",
};
/// A row of [`BACKEND_FACTS`].
pub const UNKNOWN_BCM_CATEGORY: BackendFact = BackendFact {
    type_name: BCM_NODE,
    attribute: "category",
    summary: "Unknown BCM Category",
    refuses: "a category Base Command Manager does not have (the message lists those it has)",
};
/// A row of [`BACKEND_FACTS`].
pub const UNKNOWN_BCM_IMAGE: BackendFact = BackendFact {
    type_name: BCM_NODE,
    attribute: "software_image",
    summary: "Unknown BCM Software Image",
    refuses: "a software image Base Command Manager does not have (the message lists those it \
              has)",
};
/// A row of [`BACKEND_FACTS`].
pub const NOT_ENOUGH_HOST_NODES: BackendFact = BackendFact {
    type_name: POOL,
    attribute: "node_count",
    summary: "Not Enough Free Host Nodes",
    refuses: "a `host` pool that needs more nodes of its product than are free (Ready, not \
              cordoned, held by no pool); the nodes it holds count as its own",
};
/// A row of [`BACKEND_FACTS`].
pub const NOT_ENOUGH_BCM_NODES: BackendFact = BackendFact {
    type_name: POOL,
    attribute: "node_count",
    summary: "Not Enough Free BCM Nodes",
    refuses: "a `bcm` pool that needs more servers of its product than Base Command Manager has \
              free (held by no tenant, not being wiped)",
};
/// A row of [`BACKEND_FACTS`].
pub const UNKNOWN_NETRIS_TENANT: BackendFact = BackendFact {
    type_name: SEGMENT,
    attribute: "tenant",
    summary: "Unknown Netris Tenant",
    refuses: "a tenant the controller does not have (the message lists those it has)",
};
/// A row of [`BACKEND_FACTS`].
pub const UNKNOWN_NETRIS_VPC: BackendFact = BackendFact {
    type_name: SEGMENT,
    attribute: "vpc",
    summary: "Unknown Netris VPC",
    refuses: "a VPC the controller does not have",
};
/// A row of [`BACKEND_FACTS`].
pub const UNKNOWN_NETRIS_SITE: BackendFact = BackendFact {
    type_name: SEGMENT,
    attribute: "site",
    summary: "Unknown Netris Site",
    refuses: "a site the controller does not have",
};
/// A row of [`BACKEND_FACTS`].
pub const UNKNOWN_MEMBER_HOST: BackendFact = BackendFact {
    type_name: SEGMENT,
    attribute: "members",
    summary: "Unknown Member Host",
    refuses: "a `hostname` member missing from the controller's server inventory",
};
/// A row of [`BACKEND_FACTS`].
pub const CIDR_OVERLAP: BackendFact = BackendFact {
    type_name: SEGMENT,
    attribute: "cidr",
    summary: "CIDR Overlaps An Allocation",
    refuses: "a `cidr` that overlaps an IPAM allocation of the VPC other than the segment's own",
};
/// A row of [`BACKEND_FACTS`].
pub const MORE_NODES_THAN_POOL: BackendFact = BackendFact {
    type_name: BENCHMARK,
    attribute: "nodes",
    summary: "More Nodes Than The Pool Has",
    refuses: "more nodes than the pool holds, or than the same run plans for it (a pool that \
              grows on demand, or holds no node yet, is left to apply)",
};
/// A row of [`BACKEND_FACTS`].
pub const MORE_GPUS_THAN_NODES: BackendFact = BackendFact {
    type_name: BENCHMARK,
    attribute: "gpus_per_node",
    summary: "More GPUs Per Node Than The Pool Offers",
    refuses: "more GPUs per pod than each of the pool's nodes offers (its allocatable \
              `nvidia.com/gpu`)",
};
/// A row of [`BACKEND_FACTS`].
pub const POOL_NOT_IN_UNITS: BackendFact = BackendFact {
    type_name: BENCHMARK,
    attribute: "per",
    summary: "Pool Not Divisible Into Units",
    refuses: "a run `per` unit of a pool whose nodes do not all carry that unit's label, or \
              one of whose units holds fewer nodes than `nodes`",
};

/// A row of [`BACKEND_FACTS`].
pub const VIRTUAL_CLUSTER_NAME_TAKEN: BackendFact = BackendFact {
    type_name: VIRTUAL_CLUSTER,
    attribute: "name",
    summary: "Virtual Cluster Name Taken",
    refuses: "a new virtual cluster whose name a virtual cluster in another namespace already \
              has: node pools label and taint their nodes with the name, so the two tenants \
              would share nodes",
};

/// Every row.
pub const BACKEND_FACTS: &[BackendFact] = &[
    UNKNOWN_BCM_NODE,
    BCM_NODE_HELD,
    UNKNOWN_BCM_CATEGORY,
    UNKNOWN_BCM_IMAGE,
    NOT_ENOUGH_HOST_NODES,
    NOT_ENOUGH_BCM_NODES,
    UNKNOWN_NETRIS_TENANT,
    UNKNOWN_NETRIS_VPC,
    UNKNOWN_NETRIS_SITE,
    UNKNOWN_MEMBER_HOST,
    CIDR_OVERLAP,
    MORE_NODES_THAN_POOL,
    MORE_GPUS_THAN_NODES,
    POOL_NOT_IN_UNITS,
    VIRTUAL_CLUSTER_NAME_TAKEN,
];

impl BackendFact {
    /// The refusal, with the backend's facts in `detail`, on the row's attribute.
    pub fn refuse(&self, detail: impl Into<String>) -> crate::diag::Diagnostic {
        crate::diag::Diagnostic::error(self.summary, detail)
            .with_path(crate::path::AttrPath::attr(self.attribute))
    }
}

/// The docs section of `type_name`: what its plan asks the backend; `None` when nothing.
pub fn docs_section(type_name: &str) -> Option<String> {
    let rows: Vec<String> = BACKEND_FACTS
        .iter()
        .filter(|f| f.type_name == type_name)
        .map(|f| format!("- `{}`: {} (\"{}\").", f.attribute, f.refuses, f.summary))
        .collect();
    (!rows.is_empty()).then(|| {
        format!(
            "Besides the rules of the configuration itself, plan asks the backend and refuses, \
             on the attribute named:\n\n{}\n\nApply checks each again, since the fleet can \
             change between plan and apply. A backend that cannot be asked at plan (not \
             configured, unreachable, slower than 30 seconds) leaves the check to apply.\n",
            rows.join("\n")
        )
    })
}

/// How long a plan waits for a backend's facts before it leaves the checks to apply.
pub const PLAN_CHECK_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// `checks`, or nothing when the backend does not answer within [`PLAN_CHECK_LIMIT`].
pub async fn bounded(
    checks: impl std::future::Future<Output = crate::diag::Diagnostics>,
) -> crate::diag::Diagnostics {
    tokio::time::timeout(PLAN_CHECK_LIMIT, checks)
        .await
        .unwrap_or_default()
}
