//! Booting a node and waiting for it to be `UP`.

use std::time::Duration;

use super::{LifecycleError, Progress};
use crate::backends::bcm::{BcmApi, Device, DeviceStatus, PowerOp};

/// The first wait between status polls; it grows to [`POLL_MAX`].
pub const POLL_FIRST: Duration = Duration::from_millis(200);

/// The longest wait between status polls.
pub const POLL_MAX: Duration = Duration::from_secs(3);

/// After a boot was started, this many `UP` answers in a row count as up even without
/// seeing the node go down first (the boot may have finished between two polls).
pub const UP_CONFIRMATIONS: u32 = 3;

/// The wait after poll number `n` (0-based): ×1.5 each time, capped.
pub fn poll_delay(n: u32) -> Duration {
    let grown = POLL_FIRST.as_secs_f64() * 1.5f64.powi(i32::try_from(n.min(20)).unwrap_or(20));
    Duration::from_secs_f64(grown).min(POLL_MAX)
}

/// Polls the node's status until it is `UP`. After a boot was started (`booting`), an `UP`
/// counts only once the node was seen down, or after [`UP_CONFIRMATIONS`] in a row.
pub async fn wait_up(
    api: &dyn BcmApi,
    uuid: &str,
    hostname: &str,
    booting: bool,
    p: &mut Progress,
) -> Result<(), LifecycleError> {
    let mut seen_down = !booting;
    let mut ups = 0;
    for n in 0.. {
        let Some(s) = api.status(uuid).await? else {
            return Err(LifecycleError::Conflict(format!(
                "node {hostname} ({uuid}) has no status in BCM: was it removed?"
            )));
        };
        let (up, failed) = (s.is_up(), s.is_failed());
        p.status = Some(s.clone());
        if failed {
            return Err(LifecycleError::InstallFailed {
                hostname: hostname.to_owned(),
                status: s,
            });
        }
        if up {
            ups += 1;
            if seen_down || ups >= UP_CONFIRMATIONS {
                return Ok(());
            }
        } else {
            seen_down = true;
            ups = 0;
        }
        tokio::time::sleep(poll_delay(n)).await;
    }
    Ok(())
}

/// Switches the node on (or resets it when it already runs) so it boots; returns whether a
/// boot was started. A node already on its way up is left alone. BCM's status is the power
/// state it publishes synchronously (see [`DeviceStatus::is_on`]).
pub async fn boot(
    api: &dyn BcmApi,
    device: &Device,
    status: &DeviceStatus,
    fresh: bool,
) -> Result<bool, LifecycleError> {
    let uuids = [device.uuid.clone()];
    let what = format!("node {}", device.hostname);
    let op = if !status.is_on() {
        PowerOp::On
    } else if status.is_booting() {
        return Ok(true);
    } else if status.is_up() && !fresh {
        return Ok(false);
    } else {
        PowerOp::Reset
    };
    let r = api.power(&uuids, op, &what).await?;
    Ok(r.count > 0 || op == PowerOp::Reset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_grow_and_are_capped() {
        assert_eq!(poll_delay(0), POLL_FIRST);
        assert!(poll_delay(1) > poll_delay(0));
        assert_eq!(poll_delay(40), POLL_MAX);
    }
}
