//! The pool's key of the device plugin's time-slicing ConfigMap: where it goes, and writing
//! or removing it.

use crate::backends::kube::host::nodes::HostNodes;
use crate::provider_config::{KUBERNETES_BLOCK, ProviderSettings};
use crate::resources::gpu_node_pool::{
    device_plugin::{self, CONFIG_MAP, ConfigHome},
    error::StepError,
    model::{PoolSpec, Sharing},
};

/// The provider setting naming the device plugin's namespace, if set.
pub(crate) fn namespace_setting(settings: &ProviderSettings) -> Option<String> {
    settings
        .get(KUBERNETES_BLOCK, device_plugin::NAMESPACE_SETTING)
        .map(str::to_owned)
}

/// Where the pool's time-slicing config goes: prepared (the GPU Operator pointed at it) when
/// the pool time-slices, found when it stops doing so (to remove its key), `None` otherwise.
pub(super) async fn config_home(
    api: &dyn HostNodes,
    spec: &PoolSpec,
    had_time_slicing: bool,
    setting: Option<&str>,
) -> Result<Option<ConfigHome>, StepError> {
    if matches!(spec.sharing, Sharing::TimeSlicing(_)) {
        return Ok(Some(device_plugin::prepare(api, setting).await?));
    }
    Ok(if had_time_slicing {
        home_to_clean(api, setting).await
    } else {
        None
    })
}

/// Where a key being removed is; `None` when that cannot be found any more (the operator was
/// uninstalled, say): a key nothing reads is harmless, and must not block a destroy.
pub(super) async fn home_to_clean(
    api: &dyn HostNodes,
    setting: Option<&str>,
) -> Option<ConfigHome> {
    match device_plugin::locate(api, setting).await {
        Ok(home) => Some(home),
        Err(e) => {
            tracing::warn!(
                target: "gpufleet::gpu_node_pool",
                "left the pool's time-slicing config key in place: {e}"
            );
            None
        }
    }
}

/// Writes the pool's key of the device plugin's ConfigMap, or removes it when the pool no
/// longer time-slices.
pub(super) async fn write_sharing_config(
    api: &dyn HostNodes,
    spec: &PoolSpec,
    home: Option<&ConfigHome>,
) -> Result<(), StepError> {
    let Some(home) = home else {
        return Ok(());
    };
    let config = match spec.sharing {
        Sharing::TimeSlicing(r) => Some(device_plugin::time_slicing_config(r)),
        _ => None,
    };
    api.set_config_key(
        &home.namespace,
        CONFIG_MAP,
        &spec.pool_label(),
        config.as_deref(),
    )
    .await?;
    Ok(())
}
