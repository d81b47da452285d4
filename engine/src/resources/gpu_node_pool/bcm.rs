//! `source = "bcm"`: the Base Command Manager half of a pool.
//!
//! The pool's tenant is its virtual cluster's name. A BCM node belongs to the pool while its
//! device records that tenant (`extra_values.gpufleet_tenant`, as `gpufleet_bcm_node` does)
//! and the pool's label as `extra_values.gpufleet_pool`. Both are written in the one
//! revision-guarded update that claims the node, so an apply re-run after the provider was
//! killed finds the nodes it already claimed and adopts them instead of claiming more.
//!
//! A node is free when it records no tenant and no pending wipe, and the GPUs BCM's system
//! information reports for it are the pool's product (the driver's name as GPU feature
//! discovery labels it); the candidates' system information is read in one call. Which free
//! nodes are claimed is decided by [`super::placement`] over the racks (`rackPosition.rack`). Releasing goes through the same wipe
//! `gpufleet_bcm_node` uses on destroy: the pool's mark stays on the device until the wipe
//! has finished, so an interrupted release is resumed by the next destroy.

use std::collections::BTreeMap;

use super::{choices::Source, error::StepError, model::PoolSpec, placement};
use crate::backends::{
    bcm::{
        BcmApi, Device, POOL_KEY, SysInfo,
        lifecycle::{self, LifecycleError, Progress},
    },
    kube::host::nodes::HostNode,
};

/// The pool a device is marked for.
fn pool_of(d: &Device) -> Option<&str> {
    d.extra(POOL_KEY)
}

/// Whether the pool holds `d`: claimed for `tenant` and marked with `pool`.
fn held(d: &Device, tenant: &str, pool: &str) -> bool {
    d.tenant() == Some(tenant) && pool_of(d) == Some(pool)
}

/// Whether `d` is released by the pool but its wipe has not finished.
fn wiping(d: &Device, tenant: &str, pool: &str) -> bool {
    d.tenant().is_none() && d.releasing() == Some(tenant) && pool_of(d) == Some(pool)
}

/// Whether `d` is held by no tenant and not being wiped.
fn unclaimed(d: &Device) -> bool {
    d.tenant().is_none() && d.releasing().is_none()
}

/// Whether `d`, whose system information is `info`, may be claimed for a pool of `product`.
pub fn is_free(d: &Device, info: Option<&SysInfo>, product: &str) -> bool {
    unclaimed(d) && info.and_then(SysInfo::gpu_product).as_deref() == Some(product)
}

/// The unclaimed devices among `devices` whose GPUs are `product`, asking BCM for their
/// system information in one call.
async fn free_of<'a>(
    api: &dyn BcmApi,
    devices: &'a [Device],
    product: &str,
) -> Result<Vec<&'a Device>, StepError> {
    let candidates: Vec<String> = devices
        .iter()
        .filter(|d| unclaimed(d))
        .map(|d| d.uuid.clone())
        .collect();
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let infos = api
        .sysinfo(&candidates)
        .await
        .map_err(LifecycleError::from)?;
    Ok(devices
        .iter()
        .filter(|d| is_free(d, infos.iter().find(|i| i.device == d.uuid), product))
        .collect())
}

/// How many BCM nodes of `product` are free.
pub(super) async fn free_count(api: &dyn BcmApi, product: &str) -> Result<usize, StepError> {
    let devices = api.devices().await.map_err(LifecycleError::from)?;
    Ok(free_of(api, &devices, product).await?.len())
}

/// The pool's tenant: its virtual cluster's name.
fn tenant_of(spec: &PoolSpec) -> &str {
    &spec.vc.name
}

/// A device as placement sees a node: its hostname, in the domain of its rack.
fn as_host_node(d: &Device, key: &str) -> HostNode {
    let mut labels = BTreeMap::new();
    if let Some(rack) = d.rack() {
        labels.insert(key.to_owned(), rack.to_owned());
    }
    HostNode {
        name: d.hostname.clone(),
        labels,
        ..HostNode::default()
    }
}

/// Makes the pool hold at least `target` BCM nodes, each provisioned and `UP`. Returns the
/// hostnames held (possibly more than `target`: the caller releases the surplus). `held_out`
/// is kept up to date with how many BCM nodes the pool holds, also when this fails.
pub(super) async fn provision(
    api: &dyn BcmApi,
    spec: &PoolSpec,
    target: usize,
    held_out: &mut usize,
) -> Result<Vec<String>, StepError> {
    debug_assert_eq!(spec.source, Source::Bcm);
    let tenant = tenant_of(spec);
    let pool = spec.pool_label();
    let product = spec.model.product;
    let devices = api.devices().await.map_err(LifecycleError::from)?;
    let mut mine: Vec<Device> = devices
        .iter()
        .filter(|d| held(d, tenant, &pool))
        .cloned()
        .collect();
    *held_out = mine.len();
    let mut claimed: Vec<String> = Vec::new();
    if mine.len() < target {
        let need = target - mine.len();
        let free = free_of(api, &devices, product).await?;
        if free.len() < need {
            return Err(not_enough(product, need, free.len()));
        }
        // BCM knows each node's rack (`rackPosition`); that is the domain, whatever the key.
        let key = spec.topology_key.as_deref().unwrap_or("rack");
        let free_nodes: Vec<HostNode> = free.iter().map(|d| as_host_node(d, key)).collect();
        let held_nodes: Vec<HostNode> = mine.iter().map(|d| as_host_node(d, key)).collect();
        let chosen = placement::choose(
            &free_nodes.iter().collect::<Vec<_>>(),
            &held_nodes.iter().collect::<Vec<_>>(),
            need,
            key,
            spec.policy,
        );
        for name in chosen {
            let Some(d) = free.iter().find(|d| d.hostname == name) else {
                continue;
            };
            let mut n = (*d).clone();
            n.set_tenant(Some(tenant));
            n.extra_values
                .insert(POOL_KEY.to_owned(), serde_json::Value::String(pool.clone()));
            // Guarded by the revision read above: a node someone else claimed meanwhile is
            // refused, not taken twice.
            api.update_device(&n).await.map_err(LifecycleError::from)?;
            tracing::info!(hostname = %n.hostname, %tenant, %pool, "claimed a BCM node");
            claimed.push(n.hostname.clone());
            mine.push(n);
            *held_out = mine.len();
        }
    }
    // Boot every node first, then wait for all of them: the installs run side by side.
    let mut booting = Vec::with_capacity(mine.len());
    for d in &mine {
        let Some(s) = api.status(&d.uuid).await.map_err(LifecycleError::from)? else {
            return Err(LifecycleError::Conflict(format!(
                "node {} has no status in BCM.",
                d.hostname
            ))
            .into());
        };
        let fresh = claimed.contains(&d.hostname) || s.is_failed();
        booting.push(lifecycle::boot(api, d, &s, fresh).await?);
    }
    for (d, booting) in mine.iter().zip(booting) {
        let mut p = Progress::default();
        lifecycle::wait_up(api, &d.uuid, &d.hostname, booting, &mut p).await?;
    }
    Ok(mine.into_iter().map(|d| d.hostname).collect())
}

fn not_enough(product: &str, need: usize, free: usize) -> StepError {
    StepError::Conflict(format!(
        "not enough free BCM nodes of {product}: the pool needs {need} more, but only {free} \
         {are} free in Base Command Manager (held by no tenant and not being wiped). Lower \
         node_count, or release nodes held by other tenants.",
        are = if free == 1 { "is" } else { "are" }
    ))
}

/// Wipes and releases the pool's BCM nodes named in `hostnames` (every one of them when
/// `None`), and finishes every wipe of the pool an earlier release left unfinished.
pub(super) async fn release(
    api: &dyn BcmApi,
    spec: &PoolSpec,
    hostnames: Option<&[String]>,
) -> Result<(), StepError> {
    let tenant = tenant_of(spec);
    let pool = spec.pool_label();
    let devices = api.devices().await.map_err(LifecycleError::from)?;
    for d in devices {
        let named = hostnames.is_none_or(|h| h.contains(&d.hostname));
        if !(wiping(&d, tenant, &pool) || (named && held(&d, tenant, &pool))) {
            continue;
        }
        let mut p = Progress::default();
        lifecycle::release_node(api, &d.uuid, tenant, true, &mut p).await?;
        tracing::info!(hostname = %d.hostname, %tenant, %pool, "wiped and released a BCM node");
    }
    Ok(())
}

/// How many BCM nodes the pool holds, and how many it released whose wipe has not finished.
pub(super) async fn census(api: &dyn BcmApi, spec: &PoolSpec) -> Result<(usize, usize), StepError> {
    let tenant = tenant_of(spec);
    let pool = spec.pool_label();
    let devices = api.devices().await.map_err(LifecycleError::from)?;
    let held = devices.iter().filter(|d| held(d, tenant, &pool)).count();
    let wiping = devices.iter().filter(|d| wiping(d, tenant, &pool)).count();
    Ok((held, wiping))
}
