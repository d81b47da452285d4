//! The node's attributes decoded once into types: from a configuration, a proposed or
//! planned value, or a prior state alike. Validate, plan, apply and refresh read a
//! [`NodeConfig`] instead of the raw value; [`Desired`](super::model::Desired) is the node
//! apply builds from a wholly known plan. Pure: no I/O.

use super::schema::{
    CATEGORY, HOSTNAME, ID, INSTALL_MODE, POWER, POWER_OFF, SOFTWARE_IMAGE, TENANT, WIPE_ON_DESTROY,
};
use crate::value::{
    Known, Value,
    known::{flag, text},
};

/// A node's attributes as far as a value gives them. The computed hardware facts are not
/// decoded: apply and refresh copy or fill them whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NodeConfig {
    /// The node's BCM uuid, once held.
    pub(super) id: Known<String>,
    pub(super) hostname: Known<String>,
    pub(super) category: Known<String>,
    pub(super) software_image: Known<String>,
    pub(super) install_mode: Known<String>,
    pub(super) power: Known<String>,
    pub(super) tenant: Known<String>,
    pub(super) wipe_on_destroy: Known<bool>,
}

impl NodeConfig {
    /// Decodes `v`; a null `v` (no prior state, a destroy plan) has every attribute null.
    pub(super) fn decode(v: &Value) -> NodeConfig {
        NodeConfig {
            id: text(v.get(ID)),
            hostname: text(v.get(HOSTNAME)),
            category: text(v.get(CATEGORY)),
            software_image: text(v.get(SOFTWARE_IMAGE)),
            install_mode: text(v.get(INSTALL_MODE)),
            power: text(v.get(POWER)),
            tenant: text(v.get(TENANT)),
            wipe_on_destroy: flag(v.get(WIPE_ON_DESTROY)),
        }
    }

    /// The attributes that name something in BCM, with their names: validation holds them to
    /// one rule.
    pub(super) fn names(&self) -> [(&'static str, &Known<String>); 4] {
        [
            (HOSTNAME, &self.hostname),
            (CATEGORY, &self.category),
            (SOFTWARE_IMAGE, &self.software_image),
            (TENANT, &self.tenant),
        ]
    }

    /// Whether the node is to be powered on: anything but an explicit `off`, as the schema's
    /// default is `on`.
    pub(super) fn powered_on(&self) -> bool {
        self.power.value().map(String::as_str) != Some(POWER_OFF)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_null_value_decodes_to_nulls_and_power_on() {
        let node = NodeConfig::decode(&Value::Null);
        assert!(node.id.is_null() && node.hostname.is_null() && node.wipe_on_destroy.is_null());
        assert!(node.powered_on());
    }

    #[test]
    fn only_an_explicit_off_powers_the_node_off() {
        let node = |power: Value| NodeConfig::decode(&Value::object([("power", power)]));
        assert!(!node(Value::string("off")).powered_on());
        assert!(node(Value::string("on")).powered_on());
        assert!(node(Value::unknown()).powered_on());
        assert_eq!(node(Value::unknown()).power, Known::Unknown);
    }

    #[test]
    fn a_value_of_the_wrong_type_reads_as_unknown() {
        let node = NodeConfig::decode(&Value::object([("wipe_on_destroy", Value::string("no"))]));
        assert_eq!(node.wipe_on_destroy, Known::Unknown);
    }
}
