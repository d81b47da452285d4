//! Refresh and import: reading the node back from BCM.

use tokio::time::Instant;

use super::{
    DEFAULT_TIMEOUTS, TYPE_NAME,
    apply::StepError,
    config::NodeConfig,
    model::{gpu_facts, opt, power_word},
    schema::{
        CATEGORY, DEFAULT_WIPE_ON_DESTROY, GPU_COUNT, GPU_PRODUCT, HOSTNAME, ID, INSTALL_MODE, IP,
        MAC, POWER, RACK, SOFTWARE_IMAGE, STATUS, TENANT, WIPE_ON_DESTROY, node_schema,
    },
};
use crate::{
    apply::{bounded, read_outcome},
    backends::bcm::{BcmApi, Device, lifecycle::sysinfo_of},
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::ReadResponse,
    timeouts::{Operation, Timeouts},
    value::Value,
};

/// The install mode BCM uses when neither the node nor its category sets one.
const BCM_DEFAULT_INSTALL_MODE: &str = "AUTO";

/// The state of a held node as BCM shows it, normalised against `prior`.
pub(super) async fn observe(
    api: &dyn BcmApi,
    prior: &Value,
    d: &Device,
) -> Result<Value, StepError> {
    let mut s = prior.clone();
    s.set_attr(ID, Value::string(d.uuid.clone()));
    s.set_attr(HOSTNAME, Value::string(d.hostname.clone()));
    s.set_attr(TENANT, opt(d.tenant().or(d.releasing())));
    let (category, category_mode) = match d.category.as_deref().filter(|c| !c.is_empty()) {
        Some(uuid) => match api.category(uuid).await? {
            Some(c) => (Value::string(c.name), c.install_mode),
            None => (Value::string(uuid), None),
        },
        None => (Value::Null, None),
    };
    s.set_attr(CATEGORY, category);
    let image = match d.image() {
        Some(uuid) => match api.software_image(uuid).await? {
            Some(i) => Value::string(i.name),
            None => Value::string(uuid),
        },
        None => Value::Null,
    };
    s.set_attr(SOFTWARE_IMAGE, image);
    // A node without a mode of its own boots with its category's, and BCM's default is AUTO:
    // the mode it will really use, so that adopting a node set up by hand plans no change.
    let mode = d.install_mode.clone().or(category_mode);
    s.set_attr(
        INSTALL_MODE,
        Value::string(mode.as_deref().unwrap_or(BCM_DEFAULT_INSTALL_MODE)),
    );
    let status = api.status(&d.uuid).await?;
    if let Some(st) = &status {
        s.set_attr(STATUS, Value::string(st.status.clone()));
        s.set_attr(POWER, Value::string(power_word(st)));
    }
    if s.get(WIPE_ON_DESTROY).is_null() {
        s.set_attr(WIPE_ON_DESTROY, Value::Bool(DEFAULT_WIPE_ON_DESTROY));
    }
    for (name, value) in [
        (MAC, opt(d.mac_address())),
        (IP, opt(d.ip())),
        (RACK, opt(d.rack())),
    ] {
        s.set_attr(name, value);
    }
    // The GPUs are hardware: once known they are kept, so a refresh costs no extra call.
    let known = [GPU_PRODUCT, GPU_COUNT]
        .iter()
        .all(|a| !s.get(a).is_null() && !s.get(a).is_unknown());
    if !known {
        let info = sysinfo_of(api, &d.uuid).await?;
        for (name, value) in gpu_facts(info.as_ref()) {
            s.set_attr(name, value);
        }
    }
    Ok(s.with_unknowns_nulled())
}

pub(super) async fn read_node(api: &dyn BcmApi, ctx: &Context, state: &Value) -> ReadResponse {
    let recorded = NodeConfig::decode(state);
    let hostname = recorded.hostname.value().cloned().unwrap_or_default();
    let t = Timeouts::of_resource(state, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let result = bounded(ctx, Operation::Read, started, started + t.read, async {
        // Imports know only the hostname; the tenant then comes from the node.
        let found = match recorded.id.value() {
            Some(uuid) => api.device(uuid).await?,
            None => api.device_named(&hostname).await?,
        };
        let Some(d) = found else {
            return Ok(Value::Null);
        };
        // A node whose wipe was interrupted is still this tenant's until the wipe finishes.
        let holder = d.tenant().or(d.releasing());
        let ours = match recorded.tenant.value() {
            Some(t) => holder == Some(t.as_str()),
            None => holder.is_some(),
        };
        if !ours {
            return Ok(Value::Null);
        }
        observe(api, state, &d).await
    })
    .await;
    read_outcome(
        result,
        state,
        "BCM Node Read Failed",
        &hostname,
        "reading the node",
    )
}

/// The state skeleton for an import by hostname: every attribute null but `hostname`; read
/// fills the rest from the node, which must be held by some tenant.
pub(super) fn import_skeleton(id: &str) -> Result<Value, Diagnostics> {
    let hostname = id.trim();
    if hostname.is_empty() || hostname.contains(char::is_whitespace) {
        return Err(Diagnostic::error(
            "Invalid Import ID",
            format!(
                "import a {TYPE_NAME} by its hostname, e.g. `terraform import \
                 {TYPE_NAME}.a gpu-b3-001`."
            ),
        )
        .into());
    }
    Ok(node_schema()
        .block
        .complete(&Value::object([(HOSTNAME, Value::string(hostname))])))
}
