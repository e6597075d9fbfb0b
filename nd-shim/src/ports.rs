//! The shim's ND port space: who holds which local ip:port in this process, the ephemeral
//! allocator, and the kernel as the arbiter across processes.
//!
//! Rules from `docs/nd-semantics.md` ("Ports"):
//! - `Bind` with port 0 picks from the ND ephemeral range 49152-65535; none free is
//!   ND_TOO_MANY_ADDRESSES. The range can be narrowed with `ND_SHIM_PORT_RANGE=lo-hi`.
//! - Exclusive users (a listener, an NDK connector, an ND2 connector that connected without
//!   Bind) meeting any other user of the same address: ND_SHARING_VIOLATION.
//! - Shared users: NDK shared endpoints, and ND2 connectors that used Bind (Windows providers
//!   let connectors share a local port). They share an ip:port with each other, and their
//!   outgoing connections may use it as long as their destinations differ; the same 4-tuple
//!   twice is ND_ADDRESS_ALREADY_EXISTS. The kernel does not check that once REUSEADDR is set
//!   (`cma_check_port`), so this table must. Every shared user's id sets REUSEADDR, which is all
//!   the kernel can tell apart across processes, so the table draws no finer line either.
//! - An address stays busy until the listener or shared endpoint and all of its connectors are
//!   closed: every guard here is a holder, and the address is free when the last one drops.
//!
//! The table sees this process only. Every reservation is therefore confirmed by the kernel:
//! the caller passes the `rdma_bind_addr` of its id as a closure (`FnMut(SocketAddr) ->
//! Result<T, Refusal>`), and a port the kernel reports held ([`Refusal::HeldElsewhere`]:
//! another process, or any other librdmacm user) is skipped by a port-0 search and is
//! ND_SHARING_VIOLATION for an explicit port. What the kernel cannot tell us, the 4-tuples of
//! another process's shared endpoints, is not enforced across processes
//! (`docs/nd-semantics.md`, "What holds across processes").
//!
//! Addresses overlap when they are equal or either is a wildcard (0.0.0.0 / ::), as in the
//! kernel's `cma_check_port`.

#![forbid(unsafe_code)]

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::marker::PhantomData;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::status::NdStatus;

/// The environment variable that narrows the ephemeral range, as `lo-hi` (inclusive).
pub const PORT_RANGE_ENV: &str = "ND_SHIM_PORT_RANGE";

/// An inclusive range of port numbers for port-0 binds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRange {
    first: u16,
    last: u16,
}

/// Why a port range setting was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortRangeError {
    /// Not of the form `lo-hi` with two decimal port numbers.
    Syntax(String),
    /// `lo` is 0 or greater than `hi`.
    Empty { first: u16, last: u16 },
}

impl fmt::Display for PortRangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortRangeError::Syntax(value) => write!(
                f,
                "{PORT_RANGE_ENV}={value:?}: expected lo-hi, two port numbers such as 49152-65535"
            ),
            PortRangeError::Empty { first, last } => write!(
                f,
                "{PORT_RANGE_ENV}: range {first}-{last} is empty (need 1 <= lo <= hi <= 65535)"
            ),
        }
    }
}

impl std::error::Error for PortRangeError {}

impl Refusal {
    /// An explicitly asked-for port held elsewhere is the caller's sharing violation.
    fn explicit(self) -> NdStatus {
        match self {
            Refusal::HeldElsewhere => NdStatus::ND_SHARING_VIOLATION,
            Refusal::Failed(status) => status,
        }
    }
}

impl PortRange {
    /// The ND ephemeral range, 49152-65535.
    pub const ND_EPHEMERAL: PortRange = PortRange {
        first: 49152,
        last: 65535,
    };

    pub fn new(first: u16, last: u16) -> Result<Self, PortRangeError> {
        if first == 0 || first > last {
            return Err(PortRangeError::Empty { first, last });
        }
        Ok(PortRange { first, last })
    }

    /// Parses `lo-hi`, surrounding whitespace allowed. The ports are decimal digits only
    /// (`str::parse` alone would take a sign: `+1-+2`).
    pub fn parse(value: &str) -> Result<Self, PortRangeError> {
        let syntax = || PortRangeError::Syntax(value.to_owned());
        let (lo, hi) = value.trim().split_once('-').ok_or_else(syntax)?;
        let port = |s: &str| {
            let s = s.trim();
            if !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(syntax());
            }
            s.parse::<u16>().map_err(|_| syntax())
        };
        PortRange::new(port(lo)?, port(hi)?)
    }

    /// The range from [`PORT_RANGE_ENV`], or the ND ephemeral range when it is not set.
    pub fn from_env() -> Result<Self, PortRangeError> {
        Self::from_setting(std::env::var(PORT_RANGE_ENV).ok().as_deref())
    }

    fn from_setting(setting: Option<&str>) -> Result<Self, PortRangeError> {
        match setting {
            None => Ok(PortRange::ND_EPHEMERAL),
            Some(value) => PortRange::parse(value),
        }
    }

    pub fn first(self) -> u16 {
        self.first
    }

    pub fn last(self) -> u16 {
        self.last
    }

    pub fn port_count(self) -> u32 {
        u32::from(self.last - self.first) + 1
    }

    pub fn contains(self, port: u16) -> bool {
        (self.first..=self.last).contains(&port)
    }

    /// The port after `port`, wrapping from the last to the first.
    fn after(self, port: u16) -> u16 {
        if port >= self.last {
            self.first
        } else {
            port + 1
        }
    }
}

/// Why the kernel would not bind a candidate address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Someone outside this table holds the port (EADDRINUSE; EADDRNOTAVAIL against a wildcard
    /// holder): a port-0 search moves on, an explicit port is ND_SHARING_VIOLATION.
    HeldElsewhere,
    /// Any other failure ends the call with this code.
    Failed(NdStatus),
}

#[derive(Debug)]
enum Use {
    Exclusive,
    Shared { peers: HashSet<SocketAddr> },
}

#[derive(Debug)]
struct Entry {
    id: u64,
    ip: IpAddr,
    usage: Use,
    /// Live guards for this entry; the entry is removed when this reaches zero.
    holders: usize,
}

#[derive(Debug)]
struct Table {
    range: PortRange,
    /// Where the next ephemeral search starts, so released ports are not reused at once.
    cursor: u16,
    next_id: u64,
    by_port: HashMap<u16, Vec<Entry>>,
}

fn overlaps(a: IpAddr, b: IpAddr) -> bool {
    a == b || a.is_unspecified() || b.is_unspecified()
}

impl Table {
    fn overlapping(&self, ip: IpAddr, port: u16) -> impl Iterator<Item = &Entry> {
        self.by_port
            .get(&port)
            .into_iter()
            .flatten()
            .filter(move |e| overlaps(e.ip, ip))
    }

    /// The first port from the cursor that no entry here overlaps and the kernel binds.
    fn bind_ephemeral<T>(
        &mut self,
        ip: IpAddr,
        kernel: &mut impl FnMut(SocketAddr) -> Result<T, Refusal>,
    ) -> Result<(u16, T), NdStatus> {
        let mut port = self.cursor;
        for _ in 0..self.range.port_count() {
            if self.overlapping(ip, port).next().is_none() {
                match kernel(SocketAddr::new(ip, port)) {
                    Ok(bound) => {
                        self.cursor = self.range.after(port);
                        return Ok((port, bound));
                    }
                    Err(Refusal::HeldElsewhere) => log::trace!("port {port} is held outside this process"),
                    Err(Refusal::Failed(status)) => return Err(status),
                }
            }
            port = self.range.after(port);
        }
        Err(NdStatus::ND_TOO_MANY_ADDRESSES)
    }

    fn insert(&mut self, ip: IpAddr, port: u16, usage: Use) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.by_port.entry(port).or_default().push(Entry {
            id,
            ip,
            usage,
            holders: 1,
        });
        id
    }

    fn entry_mut(&mut self, port: u16, id: u64) -> &mut Entry {
        self.by_port
            .get_mut(&port)
            .and_then(|entries| entries.iter_mut().find(|e| e.id == id))
            .expect("a live guard's entry stays in the table")
    }

    fn release(&mut self, port: u16, id: u64) {
        let entry = self.entry_mut(port, id);
        entry.holders -= 1;
        if entry.holders > 0 {
            return;
        }
        let entries = self.by_port.get_mut(&port).expect("entry found above");
        entries.retain(|e| e.id != id);
        if entries.is_empty() {
            self.by_port.remove(&port);
        }
    }
}

/// The port space of one adapter (or of the whole process: the engine decides). Cheap to clone;
/// clones share the table.
#[derive(Clone, Debug)]
pub struct PortSpace {
    table: Arc<Mutex<Table>>,
}

impl PortSpace {
    pub fn new(range: PortRange) -> Self {
        Self::starting_at(range, range.first)
    }

    /// A port space whose first port-0 search starts at `first_pick` (clamped into the range).
    pub fn starting_at(range: PortRange, first_pick: u16) -> Self {
        let cursor = if range.contains(first_pick) {
            first_pick
        } else {
            range.first
        };
        PortSpace {
            table: Arc::new(Mutex::new(Table {
                range,
                cursor,
                next_id: 0,
                by_port: HashMap::new(),
            })),
        }
    }

    /// A port space over the range configured in [`PORT_RANGE_ENV`]. Each process starts its
    /// search at a point of its own (from its pid), so that ND programs sharing a host rarely try
    /// a port the other one holds; when they do, the kernel's EADDRINUSE moves the search on.
    pub fn from_env() -> Result<Self, PortRangeError> {
        let range = PortRange::from_env()?;
        let spread = (u64::from(std::process::id()) * 2_654_435_761) % u64::from(range.port_count());
        let first_pick = u32::from(range.first) + u32::try_from(spread).unwrap_or(0);
        Ok(PortSpace::starting_at(
            range,
            u16::try_from(first_pick).unwrap_or(range.first),
        ))
    }

    pub fn range(&self) -> PortRange {
        self.lock().range
    }

    /// Reserves `addr` for one exclusive owner (a listener, or a connector that used Bind or
    /// Connect) and has `kernel` bind it; port 0 searches the range. Returns what `kernel` made
    /// (the bound id). The table stays locked across the kernel's answer, so two threads of this
    /// process never race for one port.
    pub fn bind_exclusive<T>(
        &self,
        addr: SocketAddr,
        mut kernel: impl FnMut(SocketAddr) -> Result<T, Refusal>,
    ) -> Result<(PortReservation, T), NdStatus> {
        self.bind(addr, Use::Exclusive, |_| true, &mut kernel)
    }

    /// Reserves `addr` for a shared user (an NDK shared endpoint, an ND2 connector's Bind) and
    /// has `kernel` bind it (with REUSEADDR, so that other shared users may join and exclusive
    /// ones are refused in every process). Other shared users here may hold the same address; an
    /// exclusive holder may not. Port 0 picks a port nobody here holds.
    pub fn bind_shared<T>(
        &self,
        addr: SocketAddr,
        mut kernel: impl FnMut(SocketAddr) -> Result<T, Refusal>,
    ) -> Result<(SharedReservation, T), NdStatus> {
        let exclusive = |usage: &Use| matches!(usage, Use::Exclusive);
        self.bind(addr, Use::Shared { peers: HashSet::new() }, exclusive, &mut kernel)
    }

    /// Reserves `addr` as `usage` and has `kernel` bind it, unless a holder here that overlaps
    /// it is one that `keeps_out` (any holder, for an exclusive user; an exclusive one, for a
    /// shared user).
    fn bind<Kind, T>(
        &self,
        addr: SocketAddr,
        usage: Use,
        keeps_out: impl Fn(&Use) -> bool,
        kernel: &mut impl FnMut(SocketAddr) -> Result<T, Refusal>,
    ) -> Result<(Reservation<Kind>, T), NdStatus> {
        let mut table = self.lock();
        let (port, bound) = match addr.port() {
            0 => table.bind_ephemeral(addr.ip(), kernel)?,
            port if table.overlapping(addr.ip(), port).any(|e| keeps_out(&e.usage)) => {
                return Err(NdStatus::ND_SHARING_VIOLATION)
            }
            port => (port, kernel(addr).map_err(Refusal::explicit)?),
        };
        let id = table.insert(addr.ip(), port, usage);
        let reservation = Reservation {
            hold: Hold {
                table: Arc::clone(&self.table),
                port,
                id,
            },
            addr: SocketAddr::new(addr.ip(), port),
            kind: PhantomData,
        };
        Ok((reservation, bound))
    }

    /// [`PortSpace::bind_exclusive`] with nobody outside this process: the table's own rules.
    pub fn reserve_exclusive(&self, addr: SocketAddr) -> Result<PortReservation, NdStatus> {
        self.bind_exclusive(addr, |_| Ok(())).map(|(r, ())| r)
    }

    /// [`PortSpace::bind_shared`] with nobody outside this process.
    pub fn reserve_shared(&self, addr: SocketAddr) -> Result<SharedReservation, NdStatus> {
        self.bind_shared(addr, |_| Ok(())).map(|(r, ())| r)
    }

    /// How many reservations (entries, not holders) are live; for leak checks.
    pub fn reserved_count(&self) -> usize {
        self.lock().by_port.values().map(Vec::len).sum()
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        lock(&self.table)
    }
}

/// The table stays consistent across a panic elsewhere (no update panics half way), so a
/// poisoned lock is still usable.
fn lock(table: &Mutex<Table>) -> MutexGuard<'_, Table> {
    crate::sync::lock(table)
}

/// One holder of an entry; dropping the last holder frees the address.
#[derive(Debug)]
struct Hold {
    table: Arc<Mutex<Table>>,
    port: u16,
    id: u64,
}

impl Hold {
    fn another(&self) -> Hold {
        lock(&self.table).entry_mut(self.port, self.id).holders += 1;
        Hold {
            table: Arc::clone(&self.table),
            port: self.port,
            id: self.id,
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        lock(&self.table).release(self.port, self.id);
    }
}

/// A reserved address, exclusive ([`PortReservation`]) or shared ([`SharedReservation`]).
#[derive(Debug)]
pub struct Reservation<Kind> {
    hold: Hold,
    addr: SocketAddr,
    kind: PhantomData<Kind>,
}

/// [`Reservation`]'s kind for a listener or a connector that connected without Bind.
#[derive(Debug)]
pub enum Exclusive {}

/// [`Reservation`]'s kind for an NDK shared endpoint or an ND2 connector's Bind.
#[derive(Debug)]
pub enum Shared {}

/// An exclusive address. Clone it to give a connector accepted from a listener a hold on the
/// listener's address: the address stays busy until the listener and those connectors are gone.
pub type PortReservation = Reservation<Exclusive>;

/// A shared address: an NDK shared endpoint's, or an ND2 connector's from Bind.
pub type SharedReservation = Reservation<Shared>;

impl<Kind> Reservation<Kind> {
    /// The reserved address, with the chosen port when port 0 was asked for.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Clone for PortReservation {
    fn clone(&self) -> Self {
        Reservation {
            hold: self.hold.another(),
            addr: self.addr,
            kind: PhantomData,
        }
    }
}

impl SharedReservation {
    /// Records an outgoing connection from this address to `remote`. The same 4-tuple as a live
    /// connection of any shared user of this address is ND_ADDRESS_ALREADY_EXISTS.
    pub fn connect(&self, remote: SocketAddr) -> Result<SharedConnection, NdStatus> {
        let mut table = lock(&self.hold.table);
        let taken = table
            .overlapping(self.addr.ip(), self.addr.port())
            .any(|e| match &e.usage {
                Use::Shared { peers } => peers.contains(&remote),
                Use::Exclusive => false,
            });
        if taken {
            return Err(NdStatus::ND_ADDRESS_ALREADY_EXISTS);
        }
        let entry = table.entry_mut(self.hold.port, self.hold.id);
        let Use::Shared { peers } = &mut entry.usage else {
            unreachable!("a shared endpoint's entry is shared")
        };
        peers.insert(remote);
        entry.holders += 1;
        drop(table);
        Ok(SharedConnection {
            hold: Hold {
                table: Arc::clone(&self.hold.table),
                port: self.hold.port,
                id: self.hold.id,
            },
            local: self.addr,
            remote,
        })
    }
}

/// One connection's claim on a shared address's 4-tuple; it also keeps the address busy after
/// the endpoint (or connector) that reserved it is closed.
#[derive(Debug)]
pub struct SharedConnection {
    hold: Hold,
    local: SocketAddr,
    remote: SocketAddr,
}

impl SharedConnection {
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub fn remote_addr(&self) -> SocketAddr {
        self.remote
    }
}

impl Drop for SharedConnection {
    fn drop(&mut self) {
        let mut table = lock(&self.hold.table);
        if let Use::Shared { peers } = &mut table.entry_mut(self.hold.port, self.hold.id).usage {
            peers.remove(&self.remote);
        }
        // `self.hold` drops after this and releases the holder count.
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
    const ANY: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

    fn sa(ip: IpAddr, port: u16) -> SocketAddr {
        SocketAddr::new(ip, port)
    }

    fn narrow(first: u16, last: u16) -> PortSpace {
        PortSpace::new(PortRange::new(first, last).unwrap())
    }

    /// What reserving `addr` exclusively is refused with.
    fn refused_exclusive(space: &PortSpace, addr: SocketAddr) -> NdStatus {
        space.reserve_exclusive(addr).unwrap_err()
    }

    /// What reserving `addr` for a shared user is refused with.
    fn refused_shared(space: &PortSpace, addr: SocketAddr) -> NdStatus {
        space.reserve_shared(addr).unwrap_err()
    }

    #[test]
    fn range_parsing() {
        assert_eq!(PortRange::parse("50000-50002"), PortRange::new(50000, 50002));
        assert_eq!(PortRange::parse(" 1 - 1 ").unwrap().port_count(), 1);
        assert_eq!(PortRange::parse("49152-65535"), Ok(PortRange::ND_EPHEMERAL));
        assert_eq!(PortRange::ND_EPHEMERAL.port_count(), 16384);
        // A sign is not a digit: "6-+6" found by the fuzz target nd_connection_data.
        let signed = ["+1-2", "6-+6", " +1 - 2 "];
        for bad in ["", "50000", "50000-", "-5", "a-b", "1-65536", "50000:50002", "1-2-3"]
            .into_iter()
            .chain(signed)
        {
            assert_eq!(
                PortRange::parse(bad),
                Err(PortRangeError::Syntax(bad.into())),
                "{bad:?}"
            );
        }
        assert_eq!(
            PortRange::parse("5-4"),
            Err(PortRangeError::Empty { first: 5, last: 4 })
        );
        assert_eq!(
            PortRange::parse("0-4"),
            Err(PortRangeError::Empty { first: 0, last: 4 })
        );
        let message = PortRange::parse("x").unwrap_err().to_string();
        assert!(
            message.contains("ND_SHIM_PORT_RANGE") && message.contains("lo-hi"),
            "{message}"
        );
    }

    #[test]
    fn range_setting_defaults_to_the_nd_ephemeral_range() {
        assert_eq!(PortRange::from_setting(None), Ok(PortRange::ND_EPHEMERAL));
        assert_eq!(
            PortRange::from_setting(Some("60000-60009")),
            PortRange::new(60000, 60009)
        );
        assert!(PortRange::from_setting(Some("60000")).is_err());
    }

    #[test]
    fn port_zero_picks_in_order_then_exhausts() {
        let space = narrow(50000, 50002);
        let r: Vec<_> = (0..3).map(|_| space.reserve_exclusive(sa(A, 0)).unwrap()).collect();
        let ports: Vec<_> = r.iter().map(|r| r.addr().port()).collect();
        assert_eq!(ports, [50000, 50001, 50002]);
        assert_eq!(r[0].addr().ip(), A);
        assert_eq!(refused_exclusive(&space, sa(A, 0)), NdStatus::ND_TOO_MANY_ADDRESSES);
        assert_eq!(refused_shared(&space, sa(A, 0)), NdStatus::ND_TOO_MANY_ADDRESSES);
        // Another address has its own ports; a wildcard overlaps every address.
        assert_eq!(space.reserve_exclusive(sa(B, 0)).unwrap().addr().port(), 50000);
        assert_eq!(refused_exclusive(&space, sa(ANY, 0)), NdStatus::ND_TOO_MANY_ADDRESSES);
    }

    #[test]
    fn release_on_drop_and_wrap_around() {
        let space = narrow(50000, 50002);
        let first = space.reserve_exclusive(sa(A, 0)).unwrap();
        let second = space.reserve_exclusive(sa(A, 0)).unwrap();
        drop(first);
        // The cursor moves on: 50002 next, then wraps round to the freed 50000.
        assert_eq!(space.reserve_exclusive(sa(A, 0)).unwrap().addr().port(), 50002);
        let wrapped = space.reserve_exclusive(sa(A, 0)).unwrap();
        assert_eq!(wrapped.addr().port(), 50000);
        // 50002 was dropped at the end of its statement, so it is found again after a full lap.
        assert_eq!(space.reserve_exclusive(sa(A, 0)).unwrap().addr().port(), 50002);
        drop(second);
        drop(wrapped);
        assert_eq!(space.reserved_count(), 0);
    }

    #[test]
    fn explicit_ports_ignore_the_range() {
        let space = narrow(50000, 50000);
        let r = space.reserve_exclusive(sa(A, 80)).unwrap();
        assert_eq!(r.addr(), sa(A, 80));
        assert_eq!(space.reserve_exclusive(sa(A, 0)).unwrap().addr().port(), 50000);
    }

    #[test]
    fn exclusive_meets_anyone_is_a_sharing_violation() {
        let space = narrow(50000, 50010);
        let listener = space.reserve_exclusive(sa(A, 7000)).unwrap();
        assert_eq!(refused_exclusive(&space, sa(A, 7000)), NdStatus::ND_SHARING_VIOLATION);
        assert_eq!(refused_shared(&space, sa(A, 7000)), NdStatus::ND_SHARING_VIOLATION);
        assert_eq!(refused_exclusive(&space, sa(ANY, 7000)), NdStatus::ND_SHARING_VIOLATION);
        assert!(space.reserve_exclusive(sa(B, 7000)).is_ok());
        let shared = space.reserve_shared(sa(B, 7001)).unwrap();
        assert_eq!(refused_exclusive(&space, sa(B, 7001)), NdStatus::ND_SHARING_VIOLATION);
        drop((listener, shared));
        assert!(space.reserve_exclusive(sa(A, 7000)).is_ok());
        assert!(space.reserve_exclusive(sa(B, 7001)).is_ok());
    }

    #[test]
    fn wildcard_and_ipv6() {
        let space = narrow(50000, 50010);
        let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        let any6 = IpAddr::V6(Ipv6Addr::UNSPECIFIED);
        let _w = space.reserve_exclusive(sa(any6, 7000)).unwrap();
        assert_eq!(refused_exclusive(&space, sa(v6, 7000)), NdStatus::ND_SHARING_VIOLATION);
        assert_eq!(refused_exclusive(&space, sa(A, 7000)), NdStatus::ND_SHARING_VIOLATION);
        assert!(space.reserve_exclusive(sa(v6, 7001)).is_ok());
    }

    #[test]
    fn shared_endpoints_and_the_four_tuple() {
        let space = narrow(50000, 50010);
        let ep = space.reserve_shared(sa(A, 0)).unwrap();
        let local = ep.addr();
        assert_eq!(local.port(), 50000);
        let c1 = ep.connect(sa(B, 445)).unwrap();
        let c2 = ep.connect(sa(B, 446)).unwrap();
        assert_eq!((c1.local_addr(), c1.remote_addr()), (local, sa(B, 445)));
        assert_eq!(ep.connect(sa(B, 445)).unwrap_err(), NdStatus::ND_ADDRESS_ALREADY_EXISTS);
        // A second shared endpoint on the same address shares the 4-tuple check.
        let ep2 = space.reserve_shared(local).unwrap();
        assert_eq!(
            ep2.connect(sa(B, 446)).unwrap_err(),
            NdStatus::ND_ADDRESS_ALREADY_EXISTS
        );
        let c3 = ep2.connect(sa(B, 447)).unwrap();
        // Closing a connection frees its 4-tuple only.
        drop(c1);
        let c1_again = ep.connect(sa(B, 445)).unwrap();
        assert_eq!(refused_exclusive(&space, local), NdStatus::ND_SHARING_VIOLATION);
        drop((c1_again, c2, c3, ep2));
        assert_eq!(space.reserved_count(), 1);
    }

    #[test]
    fn connectors_share_a_bound_address_and_a_listener_keeps_its_own() {
        let space = narrow(50000, 50010);
        // Two connectors' Binds on one address, port 0's pick and then that port explicitly.
        let first = space.reserve_shared(sa(A, 0)).unwrap();
        let port = first.addr().port();
        let second = space.reserve_shared(sa(A, port)).unwrap();
        // A listener (exclusive) is refused there, and a connector on a listener's port.
        assert_eq!(refused_exclusive(&space, sa(A, port)), NdStatus::ND_SHARING_VIOLATION);
        let _listener = space.reserve_exclusive(sa(A, 7101)).unwrap();
        assert_eq!(refused_shared(&space, sa(A, 7101)), NdStatus::ND_SHARING_VIOLATION);
        // Port 0 picks a port nobody here holds, shared or not.
        assert_ne!(space.reserve_shared(sa(A, 0)).unwrap().addr().port(), port);
        // Distinct destinations from the shared address; the same 4-tuple twice is refused.
        let c1 = first.connect(sa(B, 445)).unwrap();
        let c2 = second.connect(sa(B, 446)).unwrap();
        assert_eq!(
            second.connect(sa(B, 445)).unwrap_err(),
            NdStatus::ND_ADDRESS_ALREADY_EXISTS
        );
        drop(c1);
        let c3 = second.connect(sa(B, 445)).unwrap();
        drop((first, second, c2, c3));
        assert!(space.reserve_exclusive(sa(A, port)).is_ok());
    }

    /// An address stays busy until its last holder closes: a shared endpoint and all its
    /// connections, a listener and the connectors accepted from it.
    #[test]
    fn address_busy_until_its_last_holder_closes() {
        let space = narrow(50000, 50010);
        let ep = space.reserve_shared(sa(A, 9000)).unwrap();
        let c1 = ep.connect(sa(B, 1)).unwrap();
        let c2 = ep.connect(sa(B, 2)).unwrap();
        drop(ep);
        assert_eq!(refused_exclusive(&space, sa(A, 9000)), NdStatus::ND_SHARING_VIOLATION);
        drop(c1);
        assert_eq!(refused_exclusive(&space, sa(A, 9000)), NdStatus::ND_SHARING_VIOLATION);
        drop(c2);
        assert_eq!(space.reserved_count(), 0);
        assert!(space.reserve_exclusive(sa(A, 9000)).is_ok());
        let listener = space.reserve_exclusive(sa(A, 445)).unwrap();
        let accepted = listener.clone();
        assert_eq!(accepted.addr(), sa(A, 445));
        drop(listener);
        assert_eq!(refused_exclusive(&space, sa(A, 445)), NdStatus::ND_SHARING_VIOLATION);
        drop(accepted);
        assert!(space.reserve_exclusive(sa(A, 445)).is_ok());
    }

    #[test]
    fn concurrent_allocation_hands_out_distinct_ports() {
        let space = narrow(50000, 50799);
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let space = space.clone();
                std::thread::spawn(move || {
                    (0..100)
                        .map(|_| space.reserve_exclusive(sa(A, 0)).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let held: Vec<PortReservation> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
        let ports: HashSet<u16> = held.iter().map(|r| r.addr().port()).collect();
        assert_eq!(ports.len(), 800);
        assert!(ports.iter().all(|p| space.range().contains(*p)));
        assert_eq!(refused_exclusive(&space, sa(A, 0)), NdStatus::ND_TOO_MANY_ADDRESSES);
        drop(held);
        assert_eq!(space.reserved_count(), 0);
    }

    /// Another process, as the kernel shows it: the ports it holds.
    fn kernel_with(held_elsewhere: &[u16]) -> impl FnMut(SocketAddr) -> Result<u16, Refusal> + '_ {
        move |addr| {
            if held_elsewhere.contains(&addr.port()) {
                Err(Refusal::HeldElsewhere)
            } else {
                Ok(addr.port())
            }
        }
    }

    #[test]
    fn port_zero_skips_ports_the_kernel_reports_held_elsewhere() {
        let space = narrow(50000, 50004);
        let elsewhere = [50000, 50001, 50003];
        let (first, bound) = space.bind_exclusive(sa(A, 0), kernel_with(&elsewhere)).unwrap();
        assert_eq!((first.addr().port(), bound), (50002, 50002));
        let (second, _) = space.bind_shared(sa(A, 0), kernel_with(&elsewhere)).unwrap();
        assert_eq!(second.addr().port(), 50004);
        // Every port is held here or elsewhere: only now ND_TOO_MANY_ADDRESSES.
        assert_eq!(
            space.bind_exclusive(sa(A, 0), kernel_with(&elsewhere)).unwrap_err(),
            NdStatus::ND_TOO_MANY_ADDRESSES
        );
        // The ports held elsewhere were never entered in this table.
        assert_eq!(space.reserved_count(), 2);
    }

    #[test]
    fn explicit_port_held_elsewhere_is_a_sharing_violation_and_other_refusals_pass_through() {
        let space = narrow(50000, 50004);
        assert_eq!(
            space.bind_exclusive(sa(A, 7000), kernel_with(&[7000])).unwrap_err(),
            NdStatus::ND_SHARING_VIOLATION
        );
        assert_eq!(
            space.bind_shared(sa(A, 7000), kernel_with(&[7000])).unwrap_err(),
            NdStatus::ND_SHARING_VIOLATION
        );
        let invalid = |_| Err::<(), _>(Refusal::Failed(NdStatus::ND_INVALID_ADDRESS));
        assert_eq!(
            space.bind_exclusive(sa(A, 0), invalid).unwrap_err(),
            NdStatus::ND_INVALID_ADDRESS
        );
        assert_eq!(
            space.bind_exclusive(sa(A, 7001), invalid).unwrap_err(),
            NdStatus::ND_INVALID_ADDRESS
        );
        assert_eq!(space.reserved_count(), 0);
        // A port this table holds is refused without asking the kernel.
        let _held = space.reserve_exclusive(sa(A, 7002)).unwrap();
        let never = |_| -> Result<(), Refusal> { panic!("the kernel was asked about a port held here") };
        assert_eq!(
            space.bind_exclusive(sa(A, 7002), never).unwrap_err(),
            NdStatus::ND_SHARING_VIOLATION
        );
    }

    #[test]
    fn the_search_starts_where_asked() {
        let space = PortSpace::starting_at(PortRange::new(50000, 50009).unwrap(), 50007);
        let held: Vec<_> = (0..4).map(|_| space.reserve_exclusive(sa(A, 0)).unwrap()).collect();
        let ports: Vec<u16> = held.iter().map(|r| r.addr().port()).collect();
        assert_eq!(ports, [50007, 50008, 50009, 50000]);
        let outside = PortSpace::starting_at(PortRange::new(50000, 50009).unwrap(), 80);
        assert_eq!(outside.reserve_exclusive(sa(A, 0)).unwrap().addr().port(), 50000);
        assert!(PortSpace::from_env()
            .unwrap()
            .range()
            .contains(PortSpace::from_env().unwrap().lock().cursor));
    }
}
