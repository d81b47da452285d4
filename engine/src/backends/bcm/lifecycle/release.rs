//! Releasing a node to the free pool, with or without a verified wipe.
//!
//! A wipe is one `updateDevice` that sets `blockDevicesClearedOnNextBoot` to every block
//! device of the node's disk setup and `nextBootInstallMode = FULL`, moves the node to the
//! free pool and the tenant to `extra_values.gpufleet_releasing`; then a reboot, a wait for
//! `UP`, and a check that the node-installer consumed both one-shot fields and that every
//! block device the node reports was among those cleared. Only then does the mark come off.

use super::{FREE_POOL, LifecycleError, POOL_KEY, Progress, sysinfo_of, wait_up};
use crate::backends::bcm::{
    BcmApi, Category, Device, PowerOp, SysInfo, disk_setup, same_block_device,
};

/// The block devices a wipe of `d` clears: every device of the node's own disk setup, or,
/// when it has none, of its category's and of the free pool's (the layouts the tenant's data
/// was laid out with, and the one the wiping install lays out).
pub async fn wipe_devices(
    api: &dyn BcmApi,
    d: &Device,
    pool: &Category,
) -> Result<Vec<String>, LifecycleError> {
    let mut layouts: Vec<(String, String)> = Vec::new();
    if let Some(xml) = d.disk_setup() {
        layouts.push((format!("node {}", d.hostname), xml.to_owned()));
    } else {
        let current = match d.category.as_deref() {
            Some(c) if c != pool.uuid => api.category(c).await?,
            _ => None,
        };
        for c in current.iter().chain(std::iter::once(pool)) {
            if let Some(xml) = c.disk_setup() {
                layouts.push((format!("category {}", c.name), xml.to_owned()));
            }
        }
    }
    let mut devices: Vec<String> = Vec::new();
    for (whose, xml) in &layouts {
        let named = disk_setup::block_devices(xml).map_err(|e| {
            LifecycleError::Conflict(format!(
                "cannot read the disk setup of {whose}: {e}. The node was not released; fix \
                 the disk setup and destroy again."
            ))
        })?;
        for dev in named {
            if !devices.iter().any(|x| same_block_device(x, &dev)) {
                devices.push(dev);
            }
        }
    }
    if devices.is_empty() {
        return Err(LifecycleError::Conflict(format!(
            "BCM has no disk setup naming a block device for node {} (neither the node nor \
             its category has one), so gpufleet cannot tell which disks hold the tenant's \
             data. The node was not released; give the node or its category a disk setup and \
             destroy again.",
            d.hostname
        )));
    }
    Ok(devices)
}

/// Checks that the wiping boot of `done` cleared `cleared` (see the module's docs): the
/// node-installer consumed the one-shot FULL install and device list, and every block device
/// the node reports was among those cleared.
pub fn check_wiped(
    done: &Device,
    cleared: &[String],
    info: Option<&SysInfo>,
    tenant: &str,
) -> Result<(), String> {
    let kept = format!(
        "The node stays out of the free pool (still marked as being wiped after tenant \
         {tenant:?}) and in state"
    );
    if done.next_boot_install_mode.is_some() || !done.block_devices_cleared_on_next_boot.is_empty()
    {
        return Err(format!(
            "node {} came back up, but BCM still has its one-shot FULL install and block \
             devices to clear pending (nextBootInstallMode {:?}, blockDevicesClearedOnNextBoot \
             {:?}): the node-installer did not run, so its disks were not cleared. {kept}; \
             destroy again to repeat the wipe.",
            done.hostname,
            done.next_boot_install_mode.as_deref().unwrap_or(""),
            done.block_devices_cleared_on_next_boot,
        ));
    }
    let Some(info) = info else {
        return Err(format!(
            "BCM has no system information for node {}, so gpufleet cannot check that the \
             wipe cleared all of its disks. {kept}; destroy again once the node reports its \
             hardware.",
            done.hostname
        ));
    };
    let missed: Vec<&str> = info
        .disks
        .iter()
        .map(|disk| disk.name.as_str())
        .filter(|disk| !cleared.iter().any(|c| same_block_device(c, disk)))
        .collect();
    if !missed.is_empty() {
        return Err(format!(
            "node {} has block devices that its disk setup does not name, so the wipe did not \
             clear them and they may still hold tenant {tenant:?}'s data: {}. {kept}; add them \
             to the disk setup (of the node or its category) and destroy again.",
            done.hostname,
            missed.join(", ")
        ));
    }
    Ok(())
}

/// Releases a node `tenant` holds back to the free pool; with `wipe`, through a wiping FULL
/// reinstall that is then verified (see the module's docs). Resumes a wipe an earlier call
/// left unfinished.
pub async fn release_node(
    api: &dyn BcmApi,
    uuid: &str,
    tenant: &str,
    wipe: bool,
    p: &mut Progress,
) -> Result<(), LifecycleError> {
    let Some(d) = api.device(uuid).await? else {
        return Ok(());
    };
    let resuming = wipe && d.releasing() == Some(tenant);
    if d.tenant() != Some(tenant) && !resuming {
        // Released already (by an earlier, interrupted destroy or by someone else).
        return Ok(());
    }
    let what = format!("node {}", d.hostname);
    let pool = api.category_named(FREE_POOL).await?.ok_or_else(|| {
        LifecycleError::Conflict(format!(
            "BCM has no category {FREE_POOL:?} to return the node to."
        ))
    })?;
    // Known before anything changes, so a node whose disks cannot be told stays held.
    let devices = if wipe {
        wipe_devices(api, &d, &pool).await?
    } else {
        Vec::new()
    };
    let mut n = d.clone();
    if !resuming {
        n.category = Some(pool.uuid.clone());
        n.set_image(None);
        n.install_mode = None;
        n.set_tenant(None);
        if !wipe {
            n.extra_values.remove(POOL_KEY);
        }
    }
    if wipe {
        // Until the wiping boot has finished, the node carries the tenant whose data is on
        // it, so a failed or interrupted wipe never leaves it looking free.
        n.set_releasing(Some(tenant));
        n.block_devices_cleared_on_next_boot.clone_from(&devices);
        n.next_boot_install_mode = Some("FULL".to_owned());
    }
    if n != d {
        api.update_device(&n).await?;
    }
    p.device = Some(n.clone());
    if !wipe {
        return Ok(());
    }
    let Some(s) = api.status(uuid).await? else {
        return Err(LifecycleError::Conflict(format!(
            "node {} has no status in BCM.",
            d.hostname
        )));
    };
    let op = if s.is_on() {
        PowerOp::Reset
    } else {
        PowerOp::On
    };
    api.power(&[uuid.to_owned()], op, &what).await?;
    wait_up(api, uuid, &d.hostname, true, p).await?;
    // Re-read for what the boot consumed (and the revision it left behind), then check the
    // disks against what the node reports before it may count as free.
    let Some(mut done) = api.device(uuid).await? else {
        return Ok(());
    };
    let info = sysinfo_of(api, uuid).await?;
    check_wiped(&done, &devices, info.as_ref(), tenant).map_err(LifecycleError::Conflict)?;
    // Idle power goes back before the mark comes off: once unmarked the node is free and no
    // later destroy would touch it, so an interruption in between would leave it running.
    if d.idles_off() {
        api.power(&[uuid.to_owned()], PowerOp::Off, &what).await?;
    }
    done.set_releasing(None);
    // A node pool's mark stays until the wipe is done, so the pool can resume it.
    done.extra_values.remove(POOL_KEY);
    api.update_device(&done).await?;
    p.device = Some(done);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::bcm::DiskInfo;

    #[test]
    fn a_wipe_counts_only_when_the_installer_consumed_it_and_every_disk_was_cleared() {
        let cleared = vec!["/dev/sda".to_owned(), "/dev/nvme0n1".to_owned()];
        let info = SysInfo {
            disks: vec![
                DiskInfo { name: "sda".into() },
                DiskInfo {
                    name: "/dev/nvme0n1".into(),
                },
            ],
            ..SysInfo::default()
        };
        let done = Device {
            hostname: "gpu-001".into(),
            ..Device::default()
        };
        assert!(check_wiped(&done, &cleared, Some(&info), "t").is_ok());

        let mut pending = done.clone();
        pending.next_boot_install_mode = Some("FULL".into());
        pending
            .block_devices_cleared_on_next_boot
            .clone_from(&cleared);
        let Err(m) = check_wiped(&pending, &cleared, Some(&info), "t") else {
            panic!("a pending wipe is not a wipe");
        };
        assert!(m.contains("did not run"), "{m}");

        let Err(m) = check_wiped(&done, &cleared, None, "t") else {
            panic!("unknown disks are not verified");
        };
        assert!(m.contains("no system information"), "{m}");

        let mut more = info.clone();
        more.disks.push(DiskInfo {
            name: "/dev/nvme1n1".into(),
        });
        let Err(m) = check_wiped(&done, &cleared, Some(&more), "t") else {
            panic!("an uncleared disk fails the check");
        };
        assert!(
            m.contains("/dev/nvme1n1") && m.contains("stays out of the free pool"),
            "{m}"
        );
    }
}
