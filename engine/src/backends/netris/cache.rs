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
//!   replaced under the same name deletes and then creates), so every delete made through
//!   this client drops them. A lookup after an ambiguous create bypasses them (the client
//!   lists afresh).
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

/// A list kept for the process, with the delete generation it was listed at.
type Kept<T> = Mutex<HashMap<Option<i64>, (u64, Arc<Vec<T>>)>>;

/// `inner` with the process's lists kept and one poller per VPC; see the module docs.
#[derive(Debug)]
pub struct Cached<A> {
    inner: Arc<A>,
    tenants: Mutex<Option<Arc<Vec<Tenant>>>>,
    vpcs: Mutex<Option<Arc<Vec<Vpc>>>>,
    sites: Mutex<Option<Arc<Vec<Site>>>>,
    servers: Mutex<Option<Arc<Vec<Server>>>>,
    ipam: Kept<IpamNode>,
    vnets: Kept<VNet>,
    /// Bumped by every delete; listings of an older generation are listed again.
    deletes: AtomicU64,
    pollers: StdMutex<HashMap<i64, Arc<Poller>>>,
}

impl<A: NetrisApi> Cached<A> {
    /// Wraps `inner`.
    pub fn new(inner: Arc<A>) -> Cached<A> {
        Cached {
            inner,
            tenants: Mutex::default(),
            vpcs: Mutex::default(),
            sites: Mutex::default(),
            servers: Mutex::default(),
            ipam: Mutex::default(),
            vnets: Mutex::default(),
            deletes: AtomicU64::new(0),
            pollers: StdMutex::default(),
        }
    }

    /// The client underneath.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    fn deleted(&self) {
        self.deletes.fetch_add(1, Ordering::SeqCst);
    }

    fn poller(&self, vpc_id: i64) -> Arc<Poller> {
        let mut pollers = self.pollers.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(pollers.entry(vpc_id).or_default())
    }
}

/// The kept answer, or the one `list` gives (kept when it succeeds). The lock is held while
/// listing, so concurrent callers share one request.
async fn once<T, F>(slot: &Mutex<Option<Arc<Vec<T>>>>, list: F) -> Result<Vec<T>, NetrisError>
where
    T: Clone,
    F: Future<Output = Result<Vec<T>, NetrisError>>,
{
    let mut kept = slot.lock().await;
    if let Some(items) = kept.as_ref() {
        return Ok(items.to_vec());
    }
    let items = Arc::new(list.await?);
    *kept = Some(Arc::clone(&items));
    Ok(items.to_vec())
}

/// Like [`once`], per VPC, for lists that a delete makes stale.
async fn per_vpc<T, F>(
    slot: &Kept<T>,
    deletes: &AtomicU64,
    vpc_id: Option<i64>,
    list: F,
) -> Result<Vec<T>, NetrisError>
where
    T: Clone,
    F: Future<Output = Result<Vec<T>, NetrisError>>,
{
    let mut kept = slot.lock().await;
    let generation = deletes.load(Ordering::SeqCst);
    if let Some((at, items)) = kept.get(&vpc_id)
        && *at == generation
    {
        return Ok(items.to_vec());
    }
    let items = Arc::new(list.await?);
    kept.insert(vpc_id, (generation, Arc::clone(&items)));
    Ok(items.to_vec())
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
                let Some(v) = l.vnets.get(&id) else {
                    return Ok(None);
                };
                *last = Some(v.clone());
                if !v.provisioning {
                    return Ok(Some(v.clone()));
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

    /// Lists the VPC's V-Nets when the pace allows, and publishes the answer.
    async fn tick(
        &self,
        api: &dyn NetrisApi,
        vpc_id: i64,
        pace: &mut Pace,
    ) -> Result<(), NetrisError> {
        // A quarter of the newest wait's age: a V-Net is seen at most 25 % later than it
        // settled (and within POLL_FIRST early on), and a long wait is not polled often.
        let newest = *self.newest.lock().unwrap_or_else(PoisonError::into_inner);
        let age = newest.map_or(Duration::ZERO, |t| t.elapsed());
        let delay = (age / 4).clamp(POLL_FIRST, POLL_MAX);
        if let Some(last) = pace.last {
            tokio::time::sleep_until(last + delay).await;
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
        once(&self.tenants, self.inner.tenants()).await
    }

    async fn sites(&self) -> Result<Vec<Site>, NetrisError> {
        once(&self.sites, self.inner.sites()).await
    }

    async fn vpcs(&self) -> Result<Vec<Vpc>, NetrisError> {
        once(&self.vpcs, self.inner.vpcs()).await
    }

    async fn servers(&self) -> Result<Vec<Server>, NetrisError> {
        once(&self.servers, self.inner.servers()).await
    }

    async fn ipam(&self, vpc_id: Option<i64>) -> Result<Vec<IpamNode>, NetrisError> {
        per_vpc(&self.ipam, &self.deletes, vpc_id, self.inner.ipam(vpc_id)).await
    }

    async fn create_allocation(&self, body: &AllocationWrite) -> Result<i64, NetrisError> {
        self.inner.create_allocation(body).await
    }

    async fn delete_allocation(&self, id: i64) -> Result<bool, NetrisError> {
        let r = self.inner.delete_allocation(id).await;
        self.deleted();
        r
    }

    async fn create_subnet(&self, body: &SubnetWrite) -> Result<i64, NetrisError> {
        self.inner.create_subnet(body).await
    }

    async fn update_subnet(&self, id: i64, body: &SubnetWrite) -> Result<(), NetrisError> {
        self.inner.update_subnet(id, body).await
    }

    async fn delete_subnet(&self, id: i64) -> Result<bool, NetrisError> {
        let r = self.inner.delete_subnet(id).await;
        self.deleted();
        r
    }

    async fn vnets(&self, vpc_id: Option<i64>) -> Result<Vec<VNet>, NetrisError> {
        per_vpc(&self.vnets, &self.deletes, vpc_id, self.inner.vnets(vpc_id)).await
    }

    async fn vnet(&self, id: i64) -> Result<Option<VNet>, NetrisError> {
        self.inner.vnet(id).await
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
        let r = self.inner.delete_vnet(id).await;
        self.deleted();
        r
    }

    fn stats(&self) -> CallStats {
        self.inner.stats()
    }
}
