//! The pool's attributes decoded once into types: from a configuration, a proposed or
//! planned value, or a prior state alike. Validate and plan read a [`PoolConfig`] instead of
//! the raw value; where [`PoolSpec`](super::model::PoolSpec) is the pool apply builds from a
//! wholly known plan, any attribute here may still be unknown or left out. Pure: no I/O.

use std::collections::BTreeMap;

use super::{
    choices::{Source, Tier},
    schema::{
        AUTOSCALING, DRAIN_TIMEOUT, GPU_PRODUCT, GPUS_PER_NODE, ID, ISOLATION, KARPENTER,
        KARPENTER_NODE_CLASS, KARPENTER_PROVIDER, MAX_NODES, MIG_CONFIG, MIN_NODES, NAME,
        NODE_COUNT, NODE_LABELS, NODE_TAINTS, NODES, PLACEMENT, POLICY, REPLICAS, REQUIREMENT_KEY,
        REQUIREMENT_MIN_VALUES, REQUIREMENT_OPERATOR, REQUIREMENT_VALUES, REQUIREMENTS, SHARING,
        SOURCE, STRATEGY, TAINT_EFFECT, TAINT_KEY, TAINT_VALUE, TOPOLOGY_KEY, VIRTUAL_CLUSTER_ID,
    },
};
use crate::value::{
    BigDecimal, Known, Value,
    known::{object, text, whole},
};

/// `autoscaling`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Autoscaling {
    pub(super) min_nodes: Known<i64>,
    pub(super) max_nodes: Known<i64>,
}

/// `sharing.strategy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Strategy {
    /// Whole GPUs.
    None,
    /// `time-slicing`.
    TimeSlicing,
    /// `mig`.
    Mig,
    /// A name the schema refuses; kept so the checks across attributes still name it as
    /// written.
    Other(String),
}

impl Strategy {
    fn parse(s: &str) -> Strategy {
        match s {
            "none" => Strategy::None,
            "time-slicing" => Strategy::TimeSlicing,
            "mig" => Strategy::Mig,
            other => Strategy::Other(other.to_owned()),
        }
    }

    /// The attribute's text.
    pub(super) fn as_str(&self) -> &str {
        match self {
            Strategy::None => "none",
            Strategy::TimeSlicing => "time-slicing",
            Strategy::Mig => "mig",
            Strategy::Other(s) => s,
        }
    }
}

/// `sharing`, when set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SharingConfig {
    pub(super) strategy: Known<Strategy>,
    /// A number as written: validation names a fractional or out-of-range one.
    pub(super) replicas: Known<BigDecimal>,
    pub(super) mig_config: Known<String>,
}

/// One of `node_taints`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Taint {
    pub(super) key: Known<String>,
    pub(super) value: Known<String>,
    pub(super) effect: Known<String>,
}

/// `placement`, when set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PlacementConfig {
    pub(super) topology_key: Known<String>,
    /// As written: the schema holds it to `pack` or `spread`.
    pub(super) policy: Known<String>,
}

/// One node-selector requirement of the NodePool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// Label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`, `Gte` or `Lte`.
    pub operator: String,
    /// Values, none for `Exists` and `DoesNotExist`.
    pub values: Vec<String>,
    /// Karpenter's `minValues`: how many distinct values the launch choices must span.
    pub min_values: Option<u32>,
}

/// `karpenter`, when set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KarpenterConfig {
    /// As written; [`super::choices::Cloud::parse`] reads it.
    pub(super) provider: Known<String>,
    pub(super) gpus_per_node: Known<i64>,
    /// A requirement not wholly known (or missing its key or operator) stays
    /// [`Known::Unknown`] in its place, so checks still name it by its index.
    pub(super) requirements: Known<Vec<Known<Requirement>>>,
}

/// A pool's attributes as far as a value gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PoolConfig {
    pub(super) id: Known<String>,
    pub(super) name: Known<String>,
    pub(super) virtual_cluster_id: Known<String>,
    pub(super) isolation: Known<Tier>,
    pub(super) gpu_product: Known<String>,
    pub(super) node_count: Known<i64>,
    pub(super) autoscaling: Known<Autoscaling>,
    /// Never null: see [`PoolConfig::decode`].
    pub(super) source: Known<Source>,
    pub(super) sharing: Known<SharingConfig>,
    pub(super) node_labels: Known<BTreeMap<String, Known<String>>>,
    pub(super) node_taints: Known<Vec<Taint>>,
    pub(super) placement: Known<PlacementConfig>,
    /// As written: a duration such as `5m`.
    pub(super) drain_timeout: Known<String>,
    /// As written; [`super::model::parse_node_class`] reads it.
    pub(super) karpenter_node_class: Known<String>,
    pub(super) karpenter: Known<KarpenterConfig>,
    /// The computed `nodes` of a state.
    pub(super) nodes: Known<Vec<String>>,
}

fn requirement(v: &Value) -> Option<Requirement> {
    if !v.is_wholly_known() {
        return None;
    }
    Some(Requirement {
        key: v.get(REQUIREMENT_KEY).as_str()?.to_owned(),
        operator: v.get(REQUIREMENT_OPERATOR).as_str()?.to_owned(),
        values: v.get(REQUIREMENT_VALUES).strings(),
        min_values: v
            .get(REQUIREMENT_MIN_VALUES)
            .as_i64()
            .and_then(|n| u32::try_from(n).ok()),
    })
}

impl PoolConfig {
    /// Decodes `v`; a null `v` (no prior state, a destroy plan) has every attribute null.
    pub(super) fn decode(v: &Value) -> PoolConfig {
        PoolConfig {
            id: text(v.get(ID)),
            name: text(v.get(NAME)),
            virtual_cluster_id: text(v.get(VIRTUAL_CLUSTER_ID)),
            isolation: Known::decode(v.get(ISOLATION), |x| x.as_str().and_then(Tier::parse)),
            gpu_product: text(v.get(GPU_PRODUCT)),
            node_count: whole(v.get(NODE_COUNT)),
            autoscaling: object(v.get(AUTOSCALING), |a| Autoscaling {
                min_nodes: whole(a.get(MIN_NODES)),
                max_nodes: whole(a.get(MAX_NODES)),
            }),
            // A configuration leaves `source` null until plan fills in the schema's default,
            // and every check treats a pool without one as that default; decided here once.
            source: Known::decode(v.get(SOURCE), |x| x.as_str().and_then(Source::parse))
                .null_as(Source::DEFAULT),
            sharing: object(v.get(SHARING), |s| SharingConfig {
                // Null is the schema's default, whole GPUs.
                strategy: Known::decode(s.get(STRATEGY), |x| x.as_str().map(Strategy::parse))
                    .null_as(Strategy::None),
                replicas: Known::decode(s.get(REPLICAS), |x| x.as_number().cloned()),
                mig_config: text(s.get(MIG_CONFIG)),
            }),
            node_labels: Known::decode(v.get(NODE_LABELS), |m| {
                m.as_map()
                    .map(|m| m.iter().map(|(k, x)| (k.clone(), text(x))).collect())
            }),
            node_taints: Known::decode(v.get(NODE_TAINTS), |l| {
                l.as_seq().map(|ts| {
                    ts.iter()
                        .map(|t| Taint {
                            key: text(t.get(TAINT_KEY)),
                            value: text(t.get(TAINT_VALUE)),
                            effect: text(t.get(TAINT_EFFECT)),
                        })
                        .collect()
                })
            }),
            placement: object(v.get(PLACEMENT), |p| PlacementConfig {
                topology_key: text(p.get(TOPOLOGY_KEY)),
                policy: text(p.get(POLICY)),
            }),
            drain_timeout: text(v.get(DRAIN_TIMEOUT)),
            karpenter_node_class: text(v.get(KARPENTER_NODE_CLASS)),
            karpenter: object(v.get(KARPENTER), |k| KarpenterConfig {
                provider: text(k.get(KARPENTER_PROVIDER)),
                gpus_per_node: whole(k.get(GPUS_PER_NODE)),
                requirements: Known::decode(k.get(REQUIREMENTS), |l| {
                    l.as_seq()
                        .map(|rs| rs.iter().map(|r| Known::decode(r, requirement)).collect())
                }),
            }),
            nodes: Known::decode(v.get(NODES), |x| x.as_seq().map(|_| x.strings())),
        }
    }

    /// The sharing strategy, when `sharing` and its strategy are known.
    pub(super) fn strategy(&self) -> Option<&Strategy> {
        self.sharing.value()?.strategy.value()
    }

    /// Whether the pool's source is `s`.
    pub(super) fn source_is(&self, s: Source) -> bool {
        self.source == Known::Value(s)
    }
}

/// `n` as an `i64`, when it is a whole number in range.
pub(super) fn whole_number(n: &BigDecimal) -> Option<i64> {
    Value::Number(n.clone()).as_i64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_left_out_source_is_the_default_and_an_unknown_one_stays_unknown() {
        let pool = |source: Value| PoolConfig::decode(&Value::object([("source", source)]));
        assert_eq!(pool(Value::Null).source, Known::Value(Source::Host));
        assert_eq!(pool(Value::string("bcm")).source, Known::Value(Source::Bcm));
        assert_eq!(pool(Value::unknown()).source, Known::Unknown);
        // The schema refuses it; the checks across attributes skip it.
        assert_eq!(pool(Value::string("cloud")).source, Known::Unknown);
    }

    #[test]
    fn a_null_value_decodes_to_nulls() {
        let pool = PoolConfig::decode(&Value::Null);
        assert!(pool.node_count.is_null() && pool.autoscaling.is_null() && pool.sharing.is_null());
        assert!(pool.strategy().is_none());
    }

    #[test]
    fn sharing_keeps_what_validation_names() {
        let pool = PoolConfig::decode(&Value::object([(
            "sharing",
            Value::object([
                ("strategy", Value::Null),
                ("replicas", Value::Number("2.5".parse().expect("number"))),
                ("mig_config", Value::unknown()),
            ]),
        )]));
        let sharing = pool.sharing.value().expect("sharing");
        assert_eq!(pool.strategy(), Some(&Strategy::None));
        assert_eq!(sharing.replicas.value().and_then(whole_number), None);
        assert!(sharing.mig_config.is_unknown());
        assert_eq!(Strategy::parse("spread").as_str(), "spread");
    }

    #[test]
    fn labels_taints_and_nodes_keep_their_unknowns() {
        let pool = PoolConfig::decode(&Value::object([
            (
                "node_labels",
                Value::Map([("a".to_owned(), Value::unknown())].into()),
            ),
            (
                "node_taints",
                Value::List(vec![Value::unknown(), Value::object([("key", "k".into())])]),
            ),
            ("nodes", Value::List(vec!["n1".into(), Value::unknown()])),
        ]));
        let labels = pool.node_labels.value().expect("labels");
        assert!(labels["a"].is_unknown());
        let taints = pool.node_taints.value().expect("taints");
        assert!(taints[0].key.is_null());
        assert_eq!(taints[1].key, Known::Value("k".to_owned()));
        assert_eq!(pool.nodes, Known::Value(vec!["n1".to_owned()]));
    }
}
