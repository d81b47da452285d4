//! Planning a `gpufleet_network_segment`: what a change keeps of what the controller showed.

use super::model::Addressing;
use crate::{
    diag::Diagnostics,
    kinds::{PlanRequest, PlanResponse},
    value::Value,
};

/// The attributes whose change needs the controller to be told.
pub(super) const REMOTE_ATTRIBUTES: &[&str] = &[
    "gateway", "vlan_id", "vni", "dhcp", "members", "mtu", "state",
];

pub(super) fn plan_segment(req: &PlanRequest) -> PlanResponse {
    let mut planned = req.proposed.clone();
    // The gateway defaults to the first host address, whatever state says: it is a function
    // of the configuration, known as soon as cidr is.
    if req.config.get("gateway").is_null() {
        let gateway = Addressing::of(&planned)
            .cidr
            .map_or_else(Value::unknown, |net| {
                Value::string(net.first_host().to_string())
            });
        planned.set_attr("gateway", gateway);
    }
    if !req.prior.is_null() {
        // Unchanged members keep their resolved ports: apply resolves hostnames only when
        // members change.
        let prior_ports = req.prior.get("attached_ports");
        if planned.get("members") == req.prior.get("members")
            && prior_ports.is_wholly_known()
            && !prior_ports.is_null()
        {
            planned.set_attr("attached_ports", prior_ports.clone());
        }
        // A change the controller never sees (only timeouts) keeps the status.
        if planned.same_attrs(&req.prior, REMOTE_ATTRIBUTES) {
            planned.keep_from(&req.prior, &["status"]);
        }
        if req.prior.get("id").is_null() {
            // A partial state: the V-Net is gone (or was never made). Apply finishes the
            // create, so what it will record is not known yet.
            for attr in [
                "id",
                "status",
                "allocation_id",
                "subnet_id",
                "attached_ports",
            ] {
                planned.set_attr(attr, Value::unknown());
            }
            for attr in ["vlan_id", "vni"] {
                if req.config.get(attr).is_null() {
                    planned.set_attr(attr, Value::unknown());
                }
            }
        }
    }
    PlanResponse {
        planned,
        requires_replace: Vec::new(),
        diagnostics: Diagnostics::new(),
    }
}
