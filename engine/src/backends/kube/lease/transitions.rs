//! What a look at the Lease decides, and the Lease each step writes: pure, so the rules of
//! taking over, renewing and releasing are tested without an API server.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};

use super::{
    Holder, LeaseRef, MANAGED_BY, MANAGED_BY_VALUE,
    history::{Turn, history, set_history, with_release, with_turn},
    status_code,
};

/// What a waiter does on seeing the Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Decision {
    /// Write ourselves in as holder; `took_over` names a stale holder we replace.
    Take { took_over: Option<String> },
    /// Someone else holds a live turn.
    Wait(Holder),
}

/// Whether to take the Lease, given how long this waiter has seen it unchanged.
/// `default_duration` stands in for a Lease that states no duration.
pub(super) fn decide(
    spec: Option<&LeaseSpec>,
    me: &str,
    unchanged_for: Duration,
    default_duration: Duration,
) -> Decision {
    let holder = spec
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty());
    let Some(holder) = holder else {
        return Decision::Take { took_over: None };
    };
    if holder == me {
        return Decision::Take { took_over: None };
    }
    let duration = spec
        .and_then(|s| s.lease_duration_seconds)
        .and_then(|s| u64::try_from(s).ok())
        .filter(|s| *s > 0)
        .map_or(default_duration, Duration::from_secs);
    if unchanged_for >= duration {
        return Decision::Take {
            took_over: Some(holder.to_owned()),
        };
    }
    Decision::Wait(Holder {
        identity: holder.to_owned(),
        acquired: spec.and_then(|s| s.acquire_time.as_ref()).map(|t| t.0),
        renewed: spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0),
    })
}

/// Whole seconds, at least one, rounded up: a Lease states its duration in seconds.
pub(super) fn duration_seconds(d: Duration) -> i32 {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    i32::try_from(secs.max(1)).unwrap_or(i32::MAX)
}

/// `current` (or a new Lease at `lease` when there is none) held by `me` from `now`.
pub(super) fn taken(
    lease: &LeaseRef,
    current: Option<&Lease>,
    me: &str,
    duration: Duration,
    now: Timestamp,
    took_over: Option<String>,
) -> Lease {
    let mut next = current.cloned().unwrap_or_else(|| Lease {
        metadata: ObjectMeta {
            name: Some(lease.name.clone()),
            namespace: Some(lease.namespace.clone()),
            labels: Some(BTreeMap::from([(
                MANAGED_BY.to_owned(),
                MANAGED_BY_VALUE.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }),
    });
    let history = with_turn(
        history(&next),
        Turn {
            holder: me.to_owned(),
            acquired: now,
            released: None,
            took_over,
        },
    );
    set_history(&mut next, &history);
    let spec = next.spec.get_or_insert_with(LeaseSpec::default);
    // Taking back a turn we still hold (the same holder) continues it.
    let continues = spec.holder_identity.as_deref() == Some(me);
    if !continues || spec.acquire_time.is_none() {
        spec.acquire_time = Some(MicroTime(now));
    }
    if current.is_some() && !continues {
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
    }
    spec.holder_identity = Some(me.to_owned());
    spec.renew_time = Some(MicroTime(now));
    spec.lease_duration_seconds = Some(duration_seconds(duration));
    next
}

/// `current` renewed at `now`.
pub(super) fn renewed(current: &Lease, now: Timestamp) -> Lease {
    let mut next = current.clone();
    next.spec.get_or_insert_with(LeaseSpec::default).renew_time = Some(MicroTime(now));
    next
}

/// `current` given up by `me` at `now`: no holder, and the turn closed in the history.
pub(super) fn released(current: &Lease, me: &str, now: Timestamp) -> Lease {
    let mut next = current.clone();
    let history = with_release(history(&next), me, now);
    set_history(&mut next, &history);
    let spec = next.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = None;
    spec.renew_time = Some(MicroTime(now));
    next
}

pub(super) fn holder_of(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

/// The wall clock at microsecond precision, as a Lease records times.
pub(super) fn wall_now() -> Timestamp {
    let now = Timestamp::now();
    Timestamp::from_microsecond(now.as_microsecond()).unwrap_or(now)
}

/// A conflict: somebody else wrote between our read and our write.
pub(super) fn conflict(e: &kube::Error) -> bool {
    status_code(e) == Some(409)
}

/// A failure worth riding out: the server overloaded or restarting, or the connection lost.
pub(super) fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}
