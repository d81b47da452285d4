//! Planning a `gpufleet_bcm_node`: what a change keeps of what BCM showed.

use crate::{
    diag::Diagnostics,
    kinds::{PlanRequest, PlanResponse},
};

/// The attributes whose change needs BCM to be told.
pub(super) const REMOTE_ATTRIBUTES: &[&str] =
    &["category", "software_image", "install_mode", "power"];

pub(super) fn plan_node(req: &PlanRequest) -> PlanResponse {
    let mut planned = req.proposed.clone();
    if !req.prior.is_null() {
        // A change BCM never sees (wipe_on_destroy, timeouts) keeps what was observed.
        if planned.same_attrs(&req.prior, REMOTE_ATTRIBUTES) {
            planned.keep_from(&req.prior, &["status", "ip"]);
        }
    }
    PlanResponse {
        planned,
        requires_replace: Vec::new(),
        diagnostics: Diagnostics::new(),
    }
}
