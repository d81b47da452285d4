//! The closed sets of words a pool's attributes choose from, each with its one parse. A leaf:
//! the schema, the decoded configuration and the model all name these.

/// The isolation tier of a virtual cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Shared nodes: labels only.
    Shared,
    /// Dedicated nodes: tenant label and taint.
    Dedicated,
    /// Private nodes: as dedicated (only bcm and auto pools).
    Private,
}

impl Tier {
    /// Parses the namespace label value.
    pub fn parse(s: &str) -> Option<Tier> {
        match s {
            "shared" => Some(Tier::Shared),
            "dedicated" => Some(Tier::Dedicated),
            "private" => Some(Tier::Private),
            _ => None,
        }
    }

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Shared => "shared",
            Tier::Dedicated => "dedicated",
            Tier::Private => "private",
        }
    }
}

/// Where nodes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Claim existing host nodes.
    Host,
    /// Emit a Karpenter NodePool.
    Auto,
    /// Claim and provision bare-metal nodes through Base Command Manager, then claim their
    /// host-cluster nodes.
    Bcm,
}

impl Source {
    /// What a pool that leaves `source` out gets: the schema's default.
    pub const DEFAULT: Source = Source::Host;

    /// The source `source` names; the one parse of it.
    pub fn parse(s: &str) -> Option<Source> {
        match s {
            "host" => Some(Source::Host),
            "auto" => Some(Source::Auto),
            "bcm" => Some(Source::Bcm),
            _ => None,
        }
    }

    /// The attribute's text.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Host => "host",
            Source::Auto => "auto",
            Source::Bcm => "bcm",
        }
    }
}

/// Placement policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Fewest domains.
    Pack,
    /// Most domains.
    Spread,
}

/// A Karpenter cloud provider, whose instance labels describe an instance's GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cloud {
    /// `karpenter-provider-aws` (EC2NodeClass).
    Aws,
    /// `karpenter-provider-azure` (AKSNodeClass).
    Azure,
    /// Any other: only the user's requirements choose instances.
    Generic,
}

/// The names `karpenter.provider` accepts.
pub(super) const CLOUD_NAMES: &[&str] = &["aws", "azure", "generic"];

impl Cloud {
    pub(super) fn parse(s: &str) -> Option<Cloud> {
        match s {
            "aws" => Some(Cloud::Aws),
            "azure" => Some(Cloud::Azure),
            "generic" => Some(Cloud::Generic),
            _ => None,
        }
    }

    /// The provider whose node class API group this is, if one gpufleet knows.
    pub(super) fn of_group(group: &str) -> Option<Cloud> {
        match group {
            "karpenter.k8s.aws" => Some(Cloud::Aws),
            "karpenter.azure.com" => Some(Cloud::Azure),
            _ => None,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Cloud::Aws => "aws",
            Cloud::Azure => "azure",
            Cloud::Generic => "generic",
        }
    }

    pub(super) fn title(self) -> &'static str {
        match self {
            Cloud::Aws => "AWS",
            Cloud::Azure => "Azure",
            Cloud::Generic => "generic",
        }
    }
}
