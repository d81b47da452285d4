//! The routes the client calls, and what it looks up by name after a create.

use reqwest::Method;

/// The routes the client calls; each has its own request counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
    Login,
    Tenants,
    Sites,
    Vpcs,
    Servers,
    Ipam,
    CreateAllocation,
    DeleteAllocation,
    CreateSubnet,
    UpdateSubnet,
    DeleteSubnet,
    ListVNets,
    GetVNet,
    CreateVNet,
    UpdateVNet,
    DeleteVNet,
}

impl Route {
    pub(super) const ALL: [Route; 16] = [
        Route::Login,
        Route::Tenants,
        Route::Sites,
        Route::Vpcs,
        Route::Servers,
        Route::Ipam,
        Route::CreateAllocation,
        Route::DeleteAllocation,
        Route::CreateSubnet,
        Route::UpdateSubnet,
        Route::DeleteSubnet,
        Route::ListVNets,
        Route::GetVNet,
        Route::CreateVNet,
        Route::UpdateVNet,
        Route::DeleteVNet,
    ];

    /// `"METHOD /path"`, with `{id}` for ids.
    pub(super) fn label(self) -> &'static str {
        match self {
            Route::Login => "POST /api/auth",
            Route::Tenants => "GET /api/tenants",
            Route::Sites => "GET /api/v2/sites",
            Route::Vpcs => "GET /api/v2/vpc",
            Route::Servers => "GET /api/v2/hw/server",
            Route::Ipam => "GET /api/v2/ipam",
            Route::CreateAllocation => "POST /api/v2/ipam/allocation",
            Route::DeleteAllocation => "DELETE /api/v2/ipam/allocation/{id}",
            Route::CreateSubnet => "POST /api/v2/ipam/subnet",
            Route::UpdateSubnet => "PUT /api/v2/ipam/subnet/{id}",
            Route::DeleteSubnet => "DELETE /api/v2/ipam/subnet/{id}",
            Route::ListVNets => "GET /api/v2/vnet",
            Route::GetVNet => "GET /api/v2/vnet/{id}",
            Route::CreateVNet => "POST /api/v2/vnet",
            Route::UpdateVNet => "PUT /api/v2/vnet/{id}",
            Route::DeleteVNet => "DELETE /api/v2/vnet/{id}",
        }
    }

    pub(super) fn method(self) -> Method {
        match self.label().split_once(' ').map(|(m, _)| m) {
            Some("POST") => Method::POST,
            Some("PUT") => Method::PUT,
            Some("DELETE") => Method::DELETE,
            _ => Method::GET,
        }
    }

    /// Whether repeating the call cannot do harm.
    pub(super) fn idempotent(self) -> bool {
        self.method() != Method::POST
    }

    pub(super) fn index(self) -> usize {
        Route::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

/// What to look up by name after a create whose outcome is unknown.
#[derive(Debug, Clone, Copy)]
pub(super) enum Lookup {
    Allocation { vpc_id: i64 },
    Subnet { vpc_id: i64 },
    VNet { vpc_id: i64 },
}
