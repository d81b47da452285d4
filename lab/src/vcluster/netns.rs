//! Network namespaces: bringing a new one's loopback up, and opening sockets in another
//! namespace than the caller's.
//!
//! A socket belongs to the namespace of the thread that created it, for its whole life.
//! So a socket for another namespace is opened on a short-lived thread that has joined
//! that namespace (`setns`), and then used from anywhere; the async runtime's own threads
//! never change namespace.

use std::fs::File;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};

use nix::sched::{CloneFlags, setns};
use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto, socket,
};
use std::os::fd::AsRawFd;

/// A network namespace, by the `/proc/<pid>/ns/net` of a process in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetNs {
    path: PathBuf,
}

impl NetNs {
    /// The network namespace process `pid` is in.
    #[must_use]
    pub fn of_pid(pid: i32) -> Self {
        Self {
            path: PathBuf::from(format!("/proc/{pid}/ns/net")),
        }
    }

    /// The `/proc` file naming it.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on a new thread that has joined this namespace; returns what it returns.
    fn run_inside<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> io::Result<T> + Send + 'static,
    ) -> io::Result<T> {
        let ns = File::open(&self.path)?;
        std::thread::Builder::new()
            .name("netns".into())
            .spawn(move || {
                setns(&ns, CloneFlags::CLONE_NEWNET).map_err(io::Error::from)?;
                f()
            })?
            .join()
            .map_err(|_| {
                io::Error::other("the thread opening a socket in a pod's namespace panicked")
            })?
    }

    /// A listening socket on `addr` inside this namespace.
    ///
    /// # Errors
    /// When the namespace is gone or the address cannot be bound there.
    pub fn listen(&self, addr: SocketAddr) -> io::Result<TcpListener> {
        self.run_inside(move || TcpListener::bind(addr))
    }

    /// A connection to `addr` made from inside this namespace.
    ///
    /// # Errors
    /// When the namespace is gone or nothing answers there.
    pub fn connect(&self, addr: SocketAddr) -> io::Result<TcpStream> {
        self.run_inside(move || TcpStream::connect(addr))
    }
}

/// Sets the loopback interface of the caller's network namespace up (a new namespace has
/// it down, without 127.0.0.1), with one `RTM_NEWLINK` request over rtnetlink.
///
/// # Errors
/// When the request fails or the kernel refuses it.
pub fn loopback_up() -> io::Result<()> {
    const RTM_NEWLINK: u16 = 16;
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_ACK: u16 = 4;
    const NLMSG_ERROR: u16 = 2;
    const IFF_UP: u32 = 1;
    // The loopback device is always interface 1 of a namespace.
    const LOOPBACK_INDEX: i32 = 1;

    // struct nlmsghdr (16 bytes), then struct ifinfomsg (16 bytes), in host byte order.
    let mut msg = Vec::with_capacity(32);
    msg.extend_from_slice(&32u32.to_ne_bytes());
    msg.extend_from_slice(&RTM_NEWLINK.to_ne_bytes());
    msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // sequence number
    msg.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
    msg.extend_from_slice(&[0, 0]); // ifi_family AF_UNSPEC, padding
    msg.extend_from_slice(&0u16.to_ne_bytes()); // ifi_type
    msg.extend_from_slice(&LOOPBACK_INDEX.to_ne_bytes());
    msg.extend_from_slice(&IFF_UP.to_ne_bytes()); // ifi_flags
    msg.extend_from_slice(&IFF_UP.to_ne_bytes()); // ifi_change

    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )?;
    sendto(
        fd.as_raw_fd(),
        &msg,
        &NetlinkAddr::new(0, 0),
        MsgFlags::empty(),
    )?;
    let mut reply = [0u8; 1024];
    let n = recv(fd.as_raw_fd(), &mut reply, MsgFlags::empty())?;
    // The acknowledgement is an NLMSG_ERROR whose error code (after the 16-byte header)
    // is 0 on success, or a negative errno.
    let kind = reply.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let code = reply
        .get(16..20)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    match (n >= 20, kind, code) {
        (true, Some(NLMSG_ERROR), Some(0)) => Ok(()),
        (true, Some(NLMSG_ERROR), Some(errno)) => Err(io::Error::from_raw_os_error(-errno)),
        _ => Err(io::Error::other(
            "unexpected rtnetlink reply to setting lo up",
        )),
    }
}
