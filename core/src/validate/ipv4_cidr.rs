//! A string must be an IPv4 network in CIDR notation (`10.20.0.0/24`), with its host bits
//! clear and its prefix length within bounds. [`Ipv4Net`] is the parsed form, with the address
//! arithmetic that cross-attribute checks need (first host, broadcast, containment).

use std::{fmt, net::Ipv4Addr, str::FromStr};

use crate::{diag::Diagnostics, path::AttrPath, schema::Validator, value::Value};

/// An IPv4 network: a network address and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Net {
    addr: Ipv4Addr,
    len: u8,
}

impl Ipv4Net {
    /// The network `addr/len`, or `None` when `len` > 32 or host bits are set.
    pub fn new(addr: Ipv4Addr, len: u8) -> Option<Ipv4Net> {
        let net = Ipv4Net { addr, len };
        (len <= 32 && net.network() == addr).then_some(net)
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    fn mask(&self) -> u32 {
        match self.len {
            0 => 0,
            n => u32::MAX << (32 - u32::from(n)),
        }
    }

    /// The network address.
    pub fn network(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) & self.mask())
    }

    /// The broadcast address (the last address of the network).
    pub fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) | !self.mask())
    }

    /// The first address after the network address: the conventional gateway.
    pub fn first_host(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network()).saturating_add(1))
    }

    /// Whether `ip` lies in the network (network and broadcast addresses included).
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.mask() == u32::from(self.network())
    }

    /// Whether the two networks share an address (one contains the other's network).
    pub fn overlaps(&self, other: &Ipv4Net) -> bool {
        self.contains(other.network()) || other.contains(self.network())
    }

    /// Whether `ip` is a usable host address: inside, and neither the network nor the
    /// broadcast address.
    pub fn is_host(&self, ip: Ipv4Addr) -> bool {
        self.contains(ip) && ip != self.network() && ip != self.broadcast()
    }
}

impl fmt::Display for Ipv4Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// Why a string is not an acceptable network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CidrProblem {
    /// Not `a.b.c.d/n` at all.
    Syntax,
    /// Host bits are set; carries the network the user probably meant.
    HostBits(Ipv4Net),
}

impl FromStr for Ipv4Net {
    type Err = CidrProblem;

    /// Parses `a.b.c.d/n`; host bits must be clear.
    fn from_str(s: &str) -> Result<Ipv4Net, CidrProblem> {
        let (addr, len) = s.split_once('/').ok_or(CidrProblem::Syntax)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| CidrProblem::Syntax)?;
        // `u8::from_str` accepts a leading `+`; prefix lengths are plain digits.
        if len.is_empty() || !len.bytes().all(|b| b.is_ascii_digit()) || len.len() > 2 {
            return Err(CidrProblem::Syntax);
        }
        let len: u8 = len.parse().map_err(|_| CidrProblem::Syntax)?;
        if len > 32 {
            return Err(CidrProblem::Syntax);
        }
        let net = Ipv4Net { addr, len };
        if net.network() != addr {
            return Err(CidrProblem::HostBits(Ipv4Net {
                addr: net.network(),
                len,
            }));
        }
        Ok(net)
    }
}

/// Accepts IPv4 networks in CIDR notation with a prefix length from `min_len` to `max_len`.
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Cidr {
    min_len: u8,
    max_len: u8,
}

impl Ipv4Cidr {
    /// Prefix lengths `min_len..=max_len`.
    pub fn new(min_len: u8, max_len: u8) -> Ipv4Cidr {
        Ipv4Cidr { min_len, max_len }
    }
}

impl Validator for Ipv4Cidr {
    fn description(&self) -> String {
        format!(
            "An IPv4 network in CIDR notation, such as `10.20.0.0/24`, with a prefix length from \
             {} to {}.",
            self.min_len, self.max_len
        )
    }

    fn validate(&self, path: &AttrPath, value: &Value, diags: &mut Diagnostics) {
        let Some(s) = value.as_str() else { return };
        let problem = match s.parse::<Ipv4Net>() {
            Ok(net) if (self.min_len..=self.max_len).contains(&net.prefix_len()) => return,
            Ok(net) => format!(
                "has prefix length /{}; it must be from /{} to /{}",
                net.prefix_len(),
                self.min_len,
                self.max_len
            ),
            Err(CidrProblem::Syntax) => {
                "is not an IPv4 network in CIDR notation, such as \"10.20.0.0/24\"".to_owned()
            }
            Err(CidrProblem::HostBits(net)) => {
                format!("has host bits set; the network is \"{net}\"")
            }
        };
        diags.error_at(
            path.clone(),
            "Invalid CIDR",
            format!("{path} is {s:?}; it {problem}."),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let v = Ipv4Cidr::new(8, 30);
        for (input, ok) in [
            ("10.20.0.0/24", true),
            ("10.0.0.0/8", true),
            ("192.168.1.4/30", true),
            ("10.20.0.1/24", false),
            ("10.20.0.0/31", false),
            ("10.0.0.0/7", false),
            ("10.20.0.0", false),
            ("10.20.0.0/", false),
            ("10.20.0.0/+4", false),
            ("10.20.0.0/33", false),
            ("fd00::/64", false),
            ("", false),
        ] {
            let mut d = Diagnostics::new();
            v.validate(&AttrPath::attr("cidr"), &Value::string(input), &mut d);
            assert_eq!(!d.has_error(), ok, "{input:?}: {d:?}");
        }
    }

    #[test]
    fn host_bits_suggest_the_network() {
        let mut d = Diagnostics::new();
        Ipv4Cidr::new(8, 30).validate(
            &AttrPath::attr("cidr"),
            &Value::string("10.20.0.1/24"),
            &mut d,
        );
        assert!(d.0[0].detail.contains("\"10.20.0.0/24\""), "{d:?}");
    }

    #[test]
    fn arithmetic() {
        let net: Ipv4Net = "10.20.0.0/24".parse().expect("network");
        assert_eq!(net.first_host(), Ipv4Addr::new(10, 20, 0, 1));
        assert_eq!(net.broadcast(), Ipv4Addr::new(10, 20, 0, 255));
        assert!(net.is_host(Ipv4Addr::new(10, 20, 0, 254)));
        assert!(!net.is_host(Ipv4Addr::new(10, 20, 0, 255)));
        assert!(!net.is_host(Ipv4Addr::new(10, 20, 0, 0)));
        assert!(!net.contains(Ipv4Addr::new(10, 20, 1, 0)));
        assert_eq!(Ipv4Net::new(Ipv4Addr::new(10, 0, 0, 1), 8), None);
    }
}
