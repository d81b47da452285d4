//! The virtual cluster's attributes decoded once into types: from a configuration, a
//! proposed or planned value, or a prior state alike. Validate, plan, the model and refresh
//! read a [`ClusterConfig`] instead of the raw value; where [`Spec`](super::model::Spec) is
//! the virtual cluster apply renders from a wholly known plan, any attribute here may still be
//! unknown or left out. The list resource's filters decode here too ([`ListFilter`]). Pure:
//! no I/O.

use std::collections::BTreeMap;

use super::{
    choices::Isolation,
    expose::{Expose, ServiceType},
    persistence::{DEFAULT_SIZE, Persistence},
    schema::{
        ADMIN_CREDENTIALS_IN_STATE, AFTER_INACTIVITY, DEFAULT_CPU, DEFAULT_MEMORY,
        DEFAULT_REQUEST_CPU, DEFAULT_REQUEST_MEMORY, EXPOSE, EXPOSE_HOST, EXPOSE_TYPE, ID,
        ISOLATION, KUBERNETES_VERSION, LABELS, LIMIT_RANGE, NAME, NAMESPACE, NETWORK_ISOLATION,
        PAUSED, PERSISTENCE, POD_SECURITY, QUOTA, QUOTA_CPU, QUOTA_GPUS, QUOTA_MEMORY, QUOTA_PODS,
        SIZE, SLEEP, STORAGE_CLASS, VALUES_OVERRIDE, VCLUSTER_VERSION,
    },
};
use crate::value::{
    Known, Value,
    known::{flag, object, text, whole},
};

/// `quota`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct QuotaConfig {
    pub(super) gpus: Known<i64>,
    pub(super) cpu: Known<String>,
    pub(super) memory: Known<String>,
    pub(super) pods: Known<i64>,
}

/// `limit_range`: the quantities as written, which validation compares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct LimitRangeConfig {
    pub(super) default_cpu: Known<String>,
    pub(super) default_memory: Known<String>,
    pub(super) default_request_cpu: Known<String>,
    pub(super) default_request_memory: Known<String>,
}

/// `expose`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ExposeConfig {
    /// Never null: a left-out type is the schema's default, ClusterIP.
    pub(super) service_type: Known<ServiceType>,
    pub(super) host: Known<String>,
}

impl ExposeConfig {
    /// How the control plane is reached, when every part of it is known.
    fn known(&self) -> Option<Expose> {
        let host = match &self.host {
            Known::Unknown => return None,
            Known::Null => None,
            Known::Value(h) => Some(h.clone()),
        };
        Some(Expose {
            service_type: *self.service_type.value()?,
            host,
        })
    }

    /// How the control plane is reached, with what is not known read as the defaults: a
    /// ClusterIP Service, no host.
    pub(super) fn or_defaults(&self) -> Expose {
        Expose {
            service_type: self.service_type.value().copied().unwrap_or_default(),
            host: self.host.value().cloned(),
        }
    }
}

/// `sleep`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct SleepConfig {
    pub(super) after_inactivity: Known<String>,
}

/// `persistence`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct PersistenceConfig {
    /// A quantity as written: `5Gi` and `5120Mi` differ here, not as a claim.
    pub(super) size: Known<String>,
    pub(super) storage_class: Known<String>,
}

impl PersistenceConfig {
    /// Whether no part is left for apply to decide.
    pub(super) fn is_known(&self) -> bool {
        !self.size.is_unknown() && !self.storage_class.is_unknown()
    }

    /// The claim, with what is not known read as the chart's size and the host's default
    /// StorageClass; [`Self::is_known`] says whether that reading is the claim apply makes.
    pub(super) fn claim(&self) -> Persistence {
        Persistence {
            size: self
                .size
                .value()
                .map_or(DEFAULT_SIZE, String::as_str)
                .to_owned(),
            storage_class: self.storage_class.value().cloned(),
        }
    }
}

/// A virtual cluster's attributes as far as a value gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ClusterConfig {
    pub(super) id: Known<String>,
    pub(super) name: Known<String>,
    pub(super) namespace: Known<String>,
    pub(super) kubernetes_version: Known<String>,
    pub(super) isolation: Known<Isolation>,
    pub(super) quota: Known<QuotaConfig>,
    pub(super) limit_range: Known<LimitRangeConfig>,
    pub(super) network_isolation: Known<bool>,
    pub(super) pod_security: Known<String>,
    /// gpufleet renders nothing of it (planning warns when it is set).
    pub(super) sleep: Known<SleepConfig>,
    pub(super) paused: Known<bool>,
    pub(super) persistence: Known<PersistenceConfig>,
    pub(super) expose: Known<ExposeConfig>,
    pub(super) labels: Known<BTreeMap<String, Known<String>>>,
    /// As written; [`super::model::parse_override`] reads it.
    pub(super) values_override: Known<String>,
    pub(super) admin_credentials_in_state: Known<bool>,
    /// The computed release of a state or plan.
    pub(super) vcluster_version: Known<String>,
}

impl ClusterConfig {
    /// Decodes `v`; a null `v` (no prior state) has every attribute null.
    pub(super) fn decode(v: &Value) -> ClusterConfig {
        ClusterConfig {
            id: text(v.get(ID)),
            name: text(v.get(NAME)),
            namespace: text(v.get(NAMESPACE)),
            kubernetes_version: text(v.get(KUBERNETES_VERSION)),
            isolation: Known::decode(v.get(ISOLATION), |x| x.as_str().and_then(Isolation::parse)),
            quota: object(v.get(QUOTA), |q| QuotaConfig {
                gpus: whole(q.get(QUOTA_GPUS)),
                cpu: text(q.get(QUOTA_CPU)),
                memory: text(q.get(QUOTA_MEMORY)),
                pods: whole(q.get(QUOTA_PODS)),
            }),
            limit_range: object(v.get(LIMIT_RANGE), |l| LimitRangeConfig {
                default_cpu: text(l.get(DEFAULT_CPU)),
                default_memory: text(l.get(DEFAULT_MEMORY)),
                default_request_cpu: text(l.get(DEFAULT_REQUEST_CPU)),
                default_request_memory: text(l.get(DEFAULT_REQUEST_MEMORY)),
            }),
            network_isolation: flag(v.get(NETWORK_ISOLATION)),
            pod_security: text(v.get(POD_SECURITY)),
            sleep: object(v.get(SLEEP), |s| SleepConfig {
                after_inactivity: text(s.get(AFTER_INACTIVITY)),
            }),
            paused: flag(v.get(PAUSED)),
            persistence: object(v.get(PERSISTENCE), |p| PersistenceConfig {
                size: text(p.get(SIZE)),
                storage_class: text(p.get(STORAGE_CLASS)),
            }),
            expose: object(v.get(EXPOSE), |e| ExposeConfig {
                // As rendering reads it: a type the schema refuses (reported by its
                // validator) counts as the default, so the checks across attributes
                // still run.
                service_type: Known::decode(e.get(EXPOSE_TYPE), |t| {
                    t.as_str()
                        .map(|s| ServiceType::parse(s).unwrap_or_default())
                })
                .null_as(ServiceType::default()),
                host: text(e.get(EXPOSE_HOST)),
            }),
            labels: labels(v.get(LABELS)),
            values_override: text(v.get(VALUES_OVERRIDE)),
            admin_credentials_in_state: flag(v.get(ADMIN_CREDENTIALS_IN_STATE)),
            vcluster_version: text(v.get(VCLUSTER_VERSION)),
        }
    }

    /// How the control plane is reached, when known; a left-out `expose` (a state older
    /// than the attribute) is the default.
    pub(super) fn exposed(&self) -> Option<Expose> {
        match &self.expose {
            Known::Unknown => None,
            Known::Null => Some(Expose::default()),
            Known::Value(e) => e.known(),
        }
    }

    /// The Service type, when known; a left-out `expose` is the default.
    pub(super) fn service_type(&self) -> Option<ServiceType> {
        match &self.expose {
            Known::Unknown => None,
            Known::Null => Some(ServiceType::default()),
            Known::Value(e) => e.service_type.value().copied(),
        }
    }

    /// Whether the admin credentials go into state; left out (the default, and states from
    /// before the setting) means yes, `None` that it is unknown.
    pub(super) fn credentials_in_state(&self) -> Option<bool> {
        match self.admin_credentials_in_state {
            Known::Unknown => None,
            Known::Null => Some(true),
            Known::Value(b) => Some(b),
        }
    }
}

/// A map of labels, each value possibly unknown.
fn labels(v: &Value) -> Known<BTreeMap<String, Known<String>>> {
    Known::decode(v, |m| {
        m.as_map()
            .map(|m| m.iter().map(|(k, x)| (k.clone(), text(x))).collect())
    })
}

/// The filters of the list resource, which share the resource's names for what they match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ListFilter {
    /// Only the virtual cluster in this host namespace.
    pub(super) namespace: Known<String>,
    /// Only virtual clusters whose namespace carries all of these labels.
    pub(super) labels: Known<BTreeMap<String, Known<String>>>,
}

impl ListFilter {
    /// Decodes the list resource's configuration `v`.
    pub(super) fn decode(v: &Value) -> ListFilter {
        ListFilter {
            namespace: text(v.get(NAMESPACE)),
            labels: labels(v.get(LABELS)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(attrs: Vec<(&str, Value)>) -> ClusterConfig {
        ClusterConfig::decode(&Value::object(attrs))
    }

    #[test]
    fn a_null_value_decodes_to_nulls() {
        let c = ClusterConfig::decode(&Value::Null);
        assert!(c.name.is_null() && c.isolation.is_null() && c.persistence.is_null());
        // A state older than `expose` and `admin_credentials_in_state` reads as their defaults.
        assert_eq!(c.exposed(), Some(Expose::default()));
        assert_eq!(c.service_type(), Some(ServiceType::ClusterIp));
        assert_eq!(c.credentials_in_state(), Some(true));
    }

    #[test]
    fn unknown_null_and_value_stay_apart() {
        let c = cluster(vec![
            ("name", Value::string("a")),
            ("namespace", Value::unknown()),
            ("paused", Value::Null),
            ("admin_credentials_in_state", Value::unknown()),
            (
                "sleep",
                Value::object([("after_inactivity", Value::unknown())]),
            ),
        ]);
        assert_eq!(c.name, Known::Value("a".to_owned()));
        assert!(c.namespace.is_unknown() && c.paused.is_null());
        assert_eq!(c.credentials_in_state(), None);
        assert_eq!(
            c.sleep,
            Known::Value(SleepConfig {
                after_inactivity: Known::Unknown
            })
        );
    }

    #[test]
    fn an_isolation_the_parse_refuses_reads_as_unknown() {
        let tier = |v: Value| cluster(vec![("isolation", v)]).isolation;
        assert_eq!(
            tier(Value::string("private")),
            Known::Value(Isolation::Private)
        );
        assert_eq!(tier(Value::string("public")), Known::Unknown);
        assert_eq!(tier(Value::Null), Known::Null);
    }

    #[test]
    fn expose_is_known_only_when_all_of_it_is() {
        let expose = |t: Value, host: Value| {
            cluster(vec![(
                "expose",
                Value::object([("type", t), ("host", host)]),
            )])
        };
        let c = expose(Value::string("NodePort"), Value::Null);
        assert_eq!(
            c.exposed(),
            Some(Expose {
                service_type: ServiceType::NodePort,
                host: None,
            })
        );
        let c = expose(Value::Null, Value::unknown());
        assert_eq!(c.exposed(), None);
        assert_eq!(c.service_type(), Some(ServiceType::ClusterIp));
        let c = expose(Value::unknown(), Value::string("vc.example.com"));
        assert_eq!((c.exposed(), c.service_type()), (None, None));
        assert_eq!(cluster(vec![("expose", Value::unknown())]).exposed(), None);
    }

    #[test]
    fn persistence_reads_what_is_not_known_as_the_default_claim() {
        let c = cluster(vec![(
            "persistence",
            Value::object([("size", Value::unknown()), ("storage_class", Value::Null)]),
        )]);
        let p = c.persistence.value().expect("persistence");
        assert!(!p.is_known());
        assert_eq!(p.claim(), Persistence::default());
    }

    #[test]
    fn quota_counts_are_whole_numbers_and_quantities_stay_as_written() {
        let c = cluster(vec![(
            "quota",
            Value::object([
                ("gpus", Value::int(8)),
                ("cpu", Value::string("64")),
                ("memory", Value::unknown()),
                ("pods", Value::Null),
            ]),
        )]);
        let q = c.quota.value().expect("quota");
        assert_eq!(q.gpus, Known::Value(8));
        assert_eq!(q.cpu, Known::Value("64".to_owned()));
        assert!(q.memory.is_unknown() && q.pods.is_null());
    }

    #[test]
    fn the_list_filters_read_the_namespace_and_labels() {
        let f = ListFilter::decode(&Value::object([
            ("namespace", Value::string("vc-a")),
            (
                "labels",
                Value::Map([("team".to_owned(), Value::string("ml"))].into()),
            ),
        ]));
        assert_eq!(f.namespace, Known::Value("vc-a".to_owned()));
        assert_eq!(
            f.labels.value().expect("labels")["team"],
            Known::Value("ml".to_owned())
        );
        assert_eq!(ListFilter::decode(&Value::Null), ListFilter::default());
    }

    #[test]
    fn labels_keep_their_unknowns() {
        let c = cluster(vec![(
            "labels",
            Value::Map([("team".to_owned(), Value::unknown())].into()),
        )]);
        assert!(c.labels.value().expect("labels")["team"].is_unknown());
    }
}
