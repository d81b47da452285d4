//! IPv4 CIDR values and the containment math IPAM and V-Net gateways need.
//!
//! Only IPv4: the lab's fleet is IPv4, and the emulator refuses IPv6 prefixes with a
//! 400 instead of half-supporting them.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An IPv4 address with a prefix length: a network (`10.0.0.0/24`) or an interface
/// address inside one (`10.0.0.1/24`, a V-Net gateway).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cidr {
    addr: Ipv4Addr,
    len: u8,
}

/// Why a string is not an IPv4 CIDR.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    /// No `/` between address and length.
    #[error("{0:?} is not in address/length form")]
    NoSlash(String),
    /// The address part is not a dotted-quad IPv4 address (IPv6 lands here too).
    #[error("{0:?} is not an IPv4 address")]
    Address(String),
    /// The length is not a number from 0 to 32.
    #[error("{0:?} is not a prefix length from 0 to 32")]
    Length(String),
}

impl Cidr {
    /// A CIDR from its parts; `None` when `len` is over 32.
    #[must_use]
    pub fn new(addr: Ipv4Addr, len: u8) -> Option<Self> {
        (len <= 32).then_some(Self { addr, len })
    }

    /// The address as written (for a gateway, the gateway's own address).
    #[must_use]
    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    /// The prefix length.
    #[must_use]
    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    /// The netmask as a number (`/24` is `0xffff_ff00`).
    #[must_use]
    pub fn mask(&self) -> u32 {
        // A shift by 32 overflows, so /0 is special-cased through checked_shl.
        u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0)
    }

    /// The network this address is in (`10.0.0.1/24` → `10.0.0.0/24`).
    #[must_use]
    pub fn network(&self) -> Self {
        Self {
            addr: Ipv4Addr::from(u32::from(self.addr) & self.mask()),
            len: self.len,
        }
    }

    /// Whether the host bits are all zero (`10.0.0.0/24` yes, `10.0.0.1/24` no).
    #[must_use]
    pub fn is_network(&self) -> bool {
        self.network() == *self
    }

    /// The last address of the network.
    #[must_use]
    pub fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) | !self.mask())
    }

    /// Whether `ip` is inside this network.
    #[must_use]
    pub fn contains_addr(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.mask() == u32::from(self.network().addr)
    }

    /// Whether the network of `inner` lies entirely inside this network.
    #[must_use]
    pub fn contains(&self, inner: &Cidr) -> bool {
        inner.len >= self.len && self.contains_addr(inner.addr)
    }

    /// Whether the two networks share any address.
    #[must_use]
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.contains(other) || other.contains(self)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, len) = s
            .trim()
            .split_once('/')
            .ok_or_else(|| CidrError::NoSlash(s.to_owned()))?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| CidrError::Address(s.to_owned()))?;
        let len: u8 = len.parse().map_err(|_| CidrError::Length(s.to_owned()))?;
        Self::new(addr, len).ok_or_else(|| CidrError::Length(s.to_owned()))
    }
}

impl Serialize for Cidr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Cidr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Cidr {
        s.parse().expect(s)
    }

    #[test]
    fn parses_and_prints() {
        assert_eq!(c("10.0.0.0/8").to_string(), "10.0.0.0/8");
        assert_eq!(c(" 10.1.2.3/32 ").prefix_len(), 32);
        for bad in [
            "10.0.0.0",
            "10.0.0/8",
            "10.0.0.0/33",
            "fd00::/8",
            "x/1",
            "10.0.0.0/-1",
        ] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn masks_at_the_edges() {
        assert_eq!(c("1.2.3.4/0").mask(), 0);
        assert_eq!(c("1.2.3.4/0").network(), c("0.0.0.0/0"));
        assert_eq!(c("1.2.3.4/32").mask(), u32::MAX);
        assert_eq!(c("10.0.0.1/24").network(), c("10.0.0.0/24"));
        assert_eq!(c("10.0.0.0/24").broadcast(), Ipv4Addr::new(10, 0, 0, 255));
        assert!(c("10.0.0.0/24").is_network());
        assert!(!c("10.0.0.1/24").is_network());
    }

    #[test]
    fn containment_and_overlap() {
        assert!(c("10.0.0.0/8").contains(&c("10.1.0.0/16")));
        assert!(c("10.0.0.0/8").contains(&c("10.0.0.0/8")));
        assert!(!c("10.1.0.0/16").contains(&c("10.0.0.0/8")));
        assert!(!c("10.0.0.0/8").contains(&c("11.0.0.0/16")));
        assert!(c("0.0.0.0/0").contains(&c("192.168.1.0/24")));
        assert!(c("10.0.0.0/24").contains(&c("10.0.0.1/24").network()));
        assert!(c("10.0.0.0/8").overlaps(&c("10.2.0.0/16")));
        assert!(c("10.2.0.0/16").overlaps(&c("10.0.0.0/8")));
        assert!(!c("10.0.0.0/16").overlaps(&c("10.1.0.0/16")));
    }

    #[test]
    fn serde_is_the_string_form() {
        let v = serde_json::to_string(&c("10.0.0.0/8")).expect("ser");
        assert_eq!(v, "\"10.0.0.0/8\"");
        let back: Cidr = serde_json::from_str(&v).expect("de");
        assert_eq!(back, c("10.0.0.0/8"));
        assert!(serde_json::from_str::<Cidr>("\"nope\"").is_err());
    }
}
