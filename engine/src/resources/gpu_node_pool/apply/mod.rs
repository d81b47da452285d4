//! Create, update and destroy: bringing the pool's nodes (and, for a `bcm` pool, its BCM
//! servers) in line with its configuration, within the operation's timeout.
//!
//! `converge` brings a pool to its spec, `drain` lets nodes go, `sharing_config` keeps the
//! pool's time-slicing key of the device plugin's ConfigMap, and `held_nodes` lists the nodes
//! a pool holds.

mod converge;
mod drain;
mod held_nodes;
mod sharing_config;

use std::time::Duration;

use tokio::time::Instant;

use converge::{Progress, converge};
use drain::drain_and_release;
use held_nodes::held_now;
pub(super) use held_nodes::{list_held, list_product};
pub(super) use sharing_config::namespace_setting;
use sharing_config::{config_home, home_to_clean};

use super::{
    DEFAULT_TIMEOUTS, TYPE_NAME, bcm as bcm_pool,
    choices::{Source, Tier},
    config::{PoolConfig, Strategy},
    device_plugin::{CONFIG_MAP, ConfigHome},
    error::StepError,
    mig,
    model::{PoolSpec, Sharing, state_of, status_for},
    schema,
};
use crate::{
    apply::{bounded, failed},
    backends::{
        bcm::BcmApi,
        kube::{
            POOL,
            host::nodes::{HostNode, HostNodes},
        },
    },
    context::Context,
    diag::Diagnostic,
    kinds::ApplyResponse,
    timeouts::{Operation, Timeouts},
    value::Value,
};

/// How often a deleted `auto` pool's NodeClaims are counted while Karpenter removes them.
const LAUNCHED_POLL: Duration = Duration::from_secs(1);

/// Waits until the instances Karpenter launched for a deleted NodePool are gone: once the
/// NodePool is deleted, Karpenter drains each node, has the cloud terminate the instance, and
/// only then lets its NodeClaim go. A destroy that returned earlier would leave GPUs running
/// (and billed) with no pool in the state. The operation's deadline bounds the wait (a
/// Karpenter that is not running never lets them go); an apply after a timeout deletes
/// nothing new and waits again.
async fn await_instances_gone(api: &dyn HostNodes, node_pool: &str) -> Result<(), StepError> {
    loop {
        let left = api.node_claims(node_pool).await?;
        if left.is_empty() {
            return Ok(());
        }
        tracing::debug!(
            target: "gpufleet::gpu_node_pool",
            node_pool,
            claims = left.len(),
            "waiting for Karpenter to terminate the NodePool's instances"
        );
        tokio::time::sleep(LAUNCHED_POLL).await;
    }
}

/// A state with the tier its nodes were configured for, which the next plan compares.
fn with_tier(mut state: Value, tier: Option<Tier>) -> Value {
    if let Some(t) = tier {
        state.set_attr(schema::ISOLATION, Value::string(t.as_str()));
    }
    state
}

fn spec_or_fail(v: &Value, state: &Value) -> Result<PoolSpec, ApplyResponse> {
    PoolSpec::from_value(v)
        .map_err(|diagnostics| ApplyResponse::refused(state.clone(), diagnostics))
}

/// The MIG config the pool's released nodes get back; a setting that cannot be one refuses
/// the operation (before anything changes) for a product that has MIG.
fn release_or_fail(
    ctx: &Context,
    spec: &PoolSpec,
    state: &Value,
) -> Result<mig::Release, ApplyResponse> {
    match mig::release_config(&ctx.settings) {
        Ok(config) => Ok(mig::Release::to(config)),
        Err(_) if !spec.model.mig_capable() => Ok(mig::Release::default()),
        Err(why) => Err(ApplyResponse::refused(
            state.clone(),
            Diagnostic::error("Invalid Default MIG Config", why).into(),
        )),
    }
}

/// Create or update.
pub(super) async fn apply_upsert(
    api: &dyn HostNodes,
    bcm: Option<&dyn BcmApi>,
    ctx: &Context,
    prior: &Value,
    planned: &Value,
) -> ApplyResponse {
    let spec = match spec_or_fail(planned, prior) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let mut release = match release_or_fail(ctx, &spec, prior) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let creating = prior.is_null();
    let op = if creating {
        Operation::Create
    } else {
        Operation::Update
    };
    let t = Timeouts::of_resource(planned, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let held_before = PoolConfig::decode(prior);
    let had_ts = held_before.strategy() == Some(&Strategy::TimeSlicing);
    let prefer = held_before.nodes.into_value().unwrap_or_default();
    let setting = namespace_setting(&ctx.settings);
    let mut held_at_failure: Vec<HostNode> = Vec::new();
    let mut progress = Progress::default();
    let mut warning = None;
    let mut mig_waiting: Vec<(String, Option<String>)> = Vec::new();
    let result = bounded(ctx, op, started, started + t.get(op), async {
        // Before any node is claimed: a cluster not set up for time-slicing changes nothing.
        let home = match config_home(api, &spec, had_ts, setting.as_deref()).await {
            Ok(home) => home,
            Err(e) => {
                held_at_failure = held_now(api, &spec.pool_label()).await;
                return Err(e);
            }
        };
        warning = home.as_ref().and_then(ConfigHome::warning);
        let held = match converge(
            api,
            bcm,
            &spec,
            &prefer,
            home.as_ref(),
            &mut progress,
            &mut release,
        )
        .await
        {
            Ok(held) => held,
            Err((held, e)) => {
                held_at_failure = held;
                return Err(e);
            }
        };
        // Karpenter's nodes come and go; only claimed nodes are waited for.
        let Sharing::Mig(config) = &spec.sharing else {
            return Ok(held);
        };
        if spec.source == Source::Auto {
            return Ok(held);
        }
        held_at_failure = held.clone();
        let selector = format!("{POOL}={}", spec.pool_label());
        match mig::wait_applied(api, &selector, config, &held, &mut mig_waiting).await {
            Ok(nodes) => Ok(nodes),
            Err(mig::WaitError::Host(e)) => Err(e.into()),
            Err(mig::WaitError::Mig(e)) => Err(StepError::Conflict(e.to_string())),
        }
    })
    .await;
    let summary = if creating {
        "GPU Node Pool Create Failed"
    } else {
        "GPU Node Pool Update Failed"
    };
    let warning = warning.map(|w| {
        Diagnostic::warning(
            "Device Plugin Not Configured By gpufleet",
            format!("{TYPE_NAME} {:?}: {w}", spec.name),
        )
    });
    let Progress {
        bcm_held,
        tier_seen,
    } = progress;
    let mut response = match result {
        Ok(held) => {
            let status = status_for(&spec, held.len());
            ApplyResponse::done(with_tier(
                state_of(planned, &spec, &held, status),
                tier_seen,
            ))
        }
        Err(e) => {
            // A create that holds nothing, in the cluster or in BCM, leaves no state.
            let holds_nothing = held_at_failure.is_empty()
                && (spec.source == Source::Host || (spec.source == Source::Bcm && bcm_held == 0));
            let state = if creating && holds_nothing {
                Value::Null
            } else if creating {
                with_tier(
                    state_of(planned, &spec, &held_at_failure, "degraded"),
                    tier_seen,
                )
            } else {
                // Keep the prior configuration, with what is held now.
                match PoolSpec::from_value(prior) {
                    Ok(p) => state_of(prior, &p, &held_at_failure, "degraded"),
                    Err(_) => prior.clone(),
                }
            };
            let doing = if let Some(doing) = release.doing() {
                doing
            } else if mig_waiting.is_empty() {
                "bringing the pool's nodes in line".to_owned()
            } else {
                format!(
                    "waiting for the MIG manager to repartition {}",
                    mig::describe_waiting(&mig_waiting)
                )
            };
            failed(summary, &spec.name, &doing, &e, state)
        }
    };
    if let Some(w) = warning {
        response.diagnostics.push(w);
    }
    response
}

/// Destroy.
pub(super) async fn apply_delete(
    api: &dyn HostNodes,
    bcm: Option<&dyn BcmApi>,
    ctx: &Context,
    prior: &Value,
) -> ApplyResponse {
    let spec = match spec_or_fail(prior, prior) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let mut release = match release_or_fail(ctx, &spec, prior) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let t = Timeouts::of_resource(prior, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let pool = spec.pool_label();
    let setting = namespace_setting(&ctx.settings);
    let mut still: Vec<HostNode> = Vec::new();
    let result = bounded(ctx, Operation::Delete, started, started + t.delete, async {
        if spec.source == Source::Auto {
            api.delete_node_pool(&spec.node_pool_name()).await?;
            await_instances_gone(api, &spec.node_pool_name()).await?;
        } else {
            let held = list_held(api, &pool).await?;
            if let Err((left, e)) =
                drain_and_release(api, &pool, held, spec.drain_timeout, &mut release).await
            {
                still = left;
                return Err(e);
            }
            if spec.source == Source::Bcm {
                let bcm = bcm.ok_or_else(|| {
                    StepError::Conflict("a bcm pool needs the provider's bcm settings.".to_owned())
                })?;
                bcm_pool::release(bcm, &spec, None).await?;
            }
        }
        if matches!(spec.sharing, Sharing::TimeSlicing(_))
            && let Some(home) = home_to_clean(api, setting.as_deref()).await
        {
            api.set_config_key(&home.namespace, CONFIG_MAP, &pool, None)
                .await?;
        }
        Ok(())
    })
    .await;
    match result {
        Ok(()) => ApplyResponse::done(Value::Null),
        Err(e) => {
            let state = if still.is_empty() {
                prior.clone()
            } else {
                state_of(prior, &spec, &still, "degraded")
            };
            let doing = release
                .doing()
                .unwrap_or_else(|| "draining and releasing the pool's nodes".to_owned());
            failed("GPU Node Pool Delete Failed", &spec.name, &doing, &e, state)
        }
    }
}
