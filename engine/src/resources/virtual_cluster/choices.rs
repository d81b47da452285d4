//! The isolation tier a virtual cluster chooses, with its one parse. A leaf: the decoded
//! configuration and the model both name it.

/// The tenancy tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Tenant pods share the host's shared nodes.
    Shared,
    /// Tenant pods run only on nodes dedicated to the tenant.
    Dedicated,
    /// Dedicated nodes that only pools holding whole servers for the tenant (BCM or
    /// Karpenter) may provide, never shared host nodes. Rendered like `Dedicated`: vCluster's
    /// own private-nodes mode is a vCluster Pro feature.
    Private,
}

impl Isolation {
    /// Parses the attribute's spelling.
    pub fn parse(s: &str) -> Option<Isolation> {
        match s {
            "shared" => Some(Isolation::Shared),
            "dedicated" => Some(Isolation::Dedicated),
            "private" => Some(Isolation::Private),
            _ => None,
        }
    }

    /// The attribute's (and the namespace label's) spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::Shared => "shared",
            Isolation::Dedicated => "dedicated",
            Isolation::Private => "private",
        }
    }
}
