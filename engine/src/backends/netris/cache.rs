//! [`Cached`]: a [`NetrisApi`] that answers one provider process's repeated reads from one
//! request, and waits for every provisioning V-Net of a VPC with one poll.
//!
//! Terraform runs each plan and each apply in a provider process of its own, and a run with
//! many segments asks the controller the same questions once per segment: the tenants, VPCs
//! and sites to resolve names, the IPAM tree to find overlaps and leftovers of an interrupted
//! apply, the V-Nets of the VPC to find one of the same name. Their answers are kept for the
//! life of the process, under these rules:
//!
//! - **Tenants, VPCs, sites and servers** are never written by gpufleet; they are listed once.
//! - **The IPAM tree and the V-Net list of a VPC** are used to find objects *by the segment's
//!   own name*. An object of that name was made either before this process started (so the
//!   first listing has it) or by the same segment later in this process, which never looks
//!   itself up again. Only a delete can make a kept listing wrong for a lookup (a segment
//!   replaced under the same name deletes and then creates), so every delete request made
//!   through this client, when it ends or is cut short, and every read that finds a V-Net
//!   gone, drops them. A lookup after an ambiguous create bypasses them (the client lists
//!   afresh).
//! - **Per run:** the provider keeps one `Cached` per provider configuration
//!   ([`super::shared_client`]), so a provider that serves several runs (`-debug`) lists
//!   afresh for each.
//! - **Failures** are not kept. Callers of one list wait for one request; when it fails,
//!   those that waited ask on their own, as they would without the cache.
//! - **Refreshes** (`vnet`) are never cached: they are what tells drift.
//!
//! Waiting for provisioning goes through one poller per VPC: whichever waiter finds no list
//! in flight lists the VPC's V-Nets, and every waiter reads its own V-Net from that answer,
//! so the controller sees one list per tick however many segments wait. The first list is
//! sent at once; the next follows after a quarter of the age of the newest wait, within
//! [`POLL_FIRST`] and [`POLL_MAX`]: a V-Net is seen soon after it settles, and a controller
//! that is slow to provision is not flooded.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex as StdMutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use async_trait::async_trait;
use tokio::{
    sync::{Mutex, watch},
    time::Instant,
};

use super::{
    CallStats, NetrisApi, NetrisError,
    types::{AllocationWrite, IpamNode, Server, Site, SubnetWrite, Tenant, VNet, VNetWrite, Vpc},
};

/// The wait between two polls while new waiters keep arriving.
pub const POLL_FIRST: Duration = Duration::from_millis(100);

/// The longest wait between two polls.
pub const POLL_MAX: Duration = Duration::from_secs(5);

/// The wait after poll number `n` (0-based) of one V-Net polled on its own: from
/// [`POLL_FIRST`], doubling up to [`POLL_MAX`].
pub fn poll_delay(n: u32) -> Duration {
    POLL_FIRST
        .saturating_mul(2u32.saturating_pow(n.min(8)))
        .min(POLL_MAX)
}

/// `inner` with the process's lists kept and one poller per VPC; see the module docs.
#[derive(Debug)]
pub struct Cached<A> {
    inner: Arc<A>,
    tenants: Kept<Tenant>,
    vpcs: Kept<Vpc>,
    sites: Kept<Site>,
    servers: Kept<Server>,
    ipam: Kept<IpamNode>,
    vnets: Kept<VNet>,
    /// Bumped by every delete; lists of an older generation are listed again.
    deletes: AtomicU64,
    /// Orders callers' arrivals and failed lists.
    sequence: AtomicU64,
    pollers: StdMutex<HashMap<i64, Arc<Poller>>>,
}

impl<A: NetrisApi> Cached<A> {
    /// Wraps `inner`.
    pub fn new(inner: Arc<A>) -> Cached<A> {
        Cached {
            inner,
            tenants: Kept::default(),
            vpcs: Kept::default(),
            sites: Kept::default(),
            servers: Kept::default(),
            ipam: Kept::default(),
            vnets: Kept::default(),
            deletes: AtomicU64::new(0),
            sequence: AtomicU64::new(0),
            pollers: StdMutex::default(),
        }
    }

    /// The client underneath.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// Makes the kept IPAM trees and V-Net lists stale when dropped: after a delete request
    /// ends, also when it was cut short (the controller may have deleted all the same).
    fn deleting(&self) -> Deleting<'_> {
        Deleting(&self.deletes)
    }

    fn poller(&self, vpc_id: i64) -> Arc<Poller> {
        let mut pollers = self.pollers.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(pollers.entry(vpc_id).or_default())
    }
}

/// See [`Cached::deleting`].
struct Deleting<'a>(&'a AtomicU64);

impl Drop for Deleting<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// One kind of list, per VPC (`None`: not per VPC).
#[derive(Debug)]
struct Kept<T>(StdMutex<HashMap<Option<i64>, SharedSlot<T>>>);

/// A [`Slot`] that callers of one list take turns at.
type SharedSlot<T> = Arc<Mutex<Slot<T>>>;

impl<T> Default for Kept<T> {
    fn default() -> Kept<T> {
        Kept(StdMutex::default())
    }
}

/// One list: its answer with the delete generation it was listed at, and when the last
/// attempt failed.
#[derive(Debug)]
struct Slot<T> {
    kept: Option<(u64, Arc<Vec<T>>)>,
    failed: u64,
}

impl<T> Default for Slot<T> {
    fn default() -> Slot<T> {
        Slot {
            kept: None,
            failed: 0,
        }
    }
}

impl<T: Clone> Kept<T> {
    /// The kept answer for `key`, or the one `list` gives (kept when it succeeds). One caller
    /// lists at a time, so concurrent callers share one request. `deletes`: the list goes
    /// stale when a delete was made since it was listed.
    ///
    /// When the shared attempt failed while a caller waited, that caller asks on its own, as
    /// without the cache, rather than after every other waiter in turn.
    async fn get<F>(
        &self,
        key: Option<i64>,
        deletes: Option<&AtomicU64>,
        sequence: &AtomicU64,
        list: F,
    ) -> Result<Vec<T>, NetrisError>
    where
        F: Future<Output = Result<Vec<T>, NetrisError>>,
    {
        let slot = {
            let mut slots = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(slots.entry(key).or_default())
        };
        let arrived = sequence.fetch_add(1, Ordering::SeqCst);
        let mut slot = slot.lock().await;
        let generation = deletes.map_or(0, |d| d.load(Ordering::SeqCst));
        if let Some((at, items)) = &slot.kept
            && *at == generation
        {
            return Ok(items.to_vec());
        }
        if slot.failed > arrived {
            drop(slot);
            return list.await;
        }
        match list.await {
            Ok(items) => {
                let items = Arc::new(items);
                slot.kept = Some((generation, Arc::clone(&items)));
                Ok(items.to_vec())
            }
            Err(e) => {
                slot.failed = sequence.fetch_add(1, Ordering::SeqCst);
                Err(e)
            }
        }
    }
}

/// One VPC's shared poll.
#[derive(Debug)]
struct Poller {
    /// Held by the waiter that lists; the pace of the polls.
    pace: Mutex<Pace>,
    /// The newest answer.
    latest: watch::Sender<Option<Arc<Listing>>>,
    /// When the newest wait began: the polls back off with its age.
    newest: StdMutex<Option<Instant>>,
    /// Orders the start of waits and the sending of lists (a clock may not tell them apart).
    sequence: AtomicU64,
}

impl Default for Poller {
    fn default() -> Poller {
        Poller {
            pace: Mutex::default(),
            latest: watch::Sender::new(None),
            newest: StdMutex::default(),
            sequence: AtomicU64::new(0),
        }
    }
}

#[derive(Debug, Default)]
struct Pace {
    /// When the last list was sent.
    last: Option<Instant>,
}

/// One answer of the poll: when its request was sent (in [`Poller::sequence`]), and the
/// V-Nets by id.
#[derive(Debug)]
struct Listing {
    sent: u64,
    vnets: HashMap<i64, VNet>,
}

impl Poller {
    /// Waits until V-Net `id` is no longer provisioning; see [`NetrisApi::settled_vnet`].
    async fn settled(
        &self,
        api: &dyn NetrisApi,
        vpc_id: i64,
        id: i64,
        last: &mut Option<VNet>,
    ) -> Result<Option<VNet>, NetrisError> {
        // Only an answer to a request sent after the wait began can tell: an earlier one may
        // predate the write being waited for.
        let began = self.sequence.fetch_add(1, Ordering::SeqCst);
        *self.newest.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        let mut rx = self.latest.subscribe();
        loop {
            let listing = rx.borrow_and_update().clone();
            if let Some(l) = listing.filter(|l| l.sent > began) {
                let seen = match l.vnets.get(&id) {
                    Some(v) => Some(v.clone()),
                    // Gone, or left out of the list (a controller that pages it): only a read
                    // of its own tells.
                    None => api.vnet(id).await?,
                };
                let Some(v) = seen else {
                    return Ok(None);
                };
                let done = !v.provisioning;
                *last = Some(v);
                if done {
                    return Ok(last.clone());
                }
            }
            tokio::select! {
                // Another waiter listed.
                _ = rx.changed() => {}
                mut pace = self.pace.lock() => {
                    if rx.has_changed().unwrap_or(false) {
                        continue;
                    }
                    self.tick(api, vpc_id, &mut pace).await?;
                }
            }
        }
    }

    /// A quarter of the newest wait's age, within [`POLL_FIRST`] and [`POLL_MAX`]: a V-Net is
    /// seen at most about 25 % later than it settled, and a long wait is not polled often.
    fn delay(&self) -> Duration {
        let newest = *self.newest.lock().unwrap_or_else(PoisonError::into_inner);
        let age = newest.map_or(Duration::ZERO, |t| t.elapsed());
        (age / 4).clamp(POLL_FIRST, POLL_MAX)
    }

    /// Lists the VPC's V-Nets when the pace allows, and publishes the answer.
    async fn tick(
        &self,
        api: &dyn NetrisApi,
        vpc_id: i64,
        pace: &mut Pace,
    ) -> Result<(), NetrisError> {
        // Sleeps in steps of POLL_FIRST, so a wait that begins meanwhile shortens the delay.
        if let Some(last) = pace.last {
            loop {
                let due = last + self.delay();
                let now = Instant::now();
                if now >= due {
                    break;
                }
                tokio::time::sleep((due - now).min(POLL_FIRST)).await;
            }
        }
        pace.last = Some(Instant::now());
        let sent = self.sequence.fetch_add(1, Ordering::SeqCst);
        let vnets = api.vnets(Some(vpc_id)).await?;
        let vnets = vnets.into_iter().map(|v| (v.id, v)).collect();
        self.latest
            .send_replace(Some(Arc::new(Listing { sent, vnets })));
        Ok(())
    }
}

#[async_trait]
impl<A: NetrisApi> NetrisApi for Cached<A> {
    async fn tenants(&self) -> Result<Vec<Tenant>, NetrisError> {
        let list = self.inner.tenants();
        self.tenants.get(None, None, &self.sequence, list).await
    }

    async fn sites(&self) -> Result<Vec<Site>, NetrisError> {
        let list = self.inner.sites();
        self.sites.get(None, None, &self.sequence, list).await
    }

    async fn vpcs(&self) -> Result<Vec<Vpc>, NetrisError> {
        let list = self.inner.vpcs();
        self.vpcs.get(None, None, &self.sequence, list).await
    }

    async fn servers(&self) -> Result<Vec<Server>, NetrisError> {
        let list = self.inner.servers();
        self.servers.get(None, None, &self.sequence, list).await
    }

    async fn ipam(&self, vpc_id: Option<i64>) -> Result<Vec<IpamNode>, NetrisError> {
        let list = self.inner.ipam(vpc_id);
        self.ipam
            .get(vpc_id, Some(&self.deletes), &self.sequence, list)
            .await
    }

    async fn create_allocation(&self, body: &AllocationWrite) -> Result<i64, NetrisError> {
        self.inner.create_allocation(body).await
    }

    async fn delete_allocation(&self, id: i64) -> Result<bool, NetrisError> {
        let _stale = self.deleting();
        self.inner.delete_allocation(id).await
    }

    async fn create_subnet(&self, body: &SubnetWrite) -> Result<i64, NetrisError> {
        self.inner.create_subnet(body).await
    }

    async fn update_subnet(&self, id: i64, body: &SubnetWrite) -> Result<(), NetrisError> {
        self.inner.update_subnet(id, body).await
    }

    async fn delete_subnet(&self, id: i64) -> Result<bool, NetrisError> {
        let _stale = self.deleting();
        self.inner.delete_subnet(id).await
    }

    async fn vnets(&self, vpc_id: Option<i64>) -> Result<Vec<VNet>, NetrisError> {
        let list = self.inner.vnets(vpc_id);
        self.vnets
            .get(vpc_id, Some(&self.deletes), &self.sequence, list)
            .await
    }

    async fn vnet(&self, id: i64) -> Result<Option<VNet>, NetrisError> {
        let v = self.inner.vnet(id).await?;
        if v.is_none() {
            // Gone since a V-Net list may have been kept (a delete's last poll, say).
            self.deletes.fetch_add(1, Ordering::SeqCst);
        }
        Ok(v)
    }

    async fn settled_vnet(
        &self,
        vpc_id: i64,
        id: i64,
        last: &mut Option<VNet>,
    ) -> Result<Option<VNet>, NetrisError> {
        // The poll lists afresh: a kept list would never change.
        self.poller(vpc_id)
            .settled(&*self.inner, vpc_id, id, last)
            .await
    }

    async fn create_vnet(&self, body: &VNetWrite) -> Result<i64, NetrisError> {
        self.inner.create_vnet(body).await
    }

    async fn update_vnet(&self, id: i64, body: &VNetWrite) -> Result<(), NetrisError> {
        self.inner.update_vnet(id, body).await
    }

    async fn delete_vnet(&self, id: i64) -> Result<bool, NetrisError> {
        let _stale = self.deleting();
        self.inner.delete_vnet(id).await
    }

    fn stats(&self) -> CallStats {
        self.inner.stats()
    }
}
