//! ND2 / NDK connector conformance over nd-shim, for the VM rig (rxe0 on 198.18.0.1, rxe1 on
//! 198.18.0.2). `nd-conformance CASE` runs one case (passive and active side as threads, each on
//! its own adapter), prints `PASS CASE` or `FAIL CASE: why`, and exits 0 only on PASS.
//! `nd-conformance --list` prints the case names. The rig suite is `tests/suites/nd-conformance.sh`.
//!
//! Which case produces which documented code, with the C cases of the NDK face beside them and
//! the reason for each code this rig cannot produce, is in `docs/nd-conformance.md`.

mod case_main;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use nd_shim::{
    Adapter, BufferFill, CompletionQueue, Connector, Listener, MemoryRegion, NdStatus, Pending, QueuePair,
    SharedEndpoint,
};

const SERVER: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));

use case_main::{Case, Outcome};

macro_rules! ensure {
    ($cond:expr, $($why:tt)*) => {
        if !$cond {
            return Err(format!($($why)*));
        }
    };
}

fn expect(what: &str, got: NdStatus, want: NdStatus) -> Outcome {
    ensure!(got == want, "{what}: got {got}, want {want}");
    println!("  {what}: {got}");
    Ok(())
}

fn expect_err<T>(what: &str, got: Result<T, NdStatus>, want: NdStatus) -> Outcome {
    match got {
        Ok(_) => Err(format!("{what}: succeeded, want {want}")),
        Err(status) => expect(what, status, want),
    }
}

fn ok<T>(what: &str, r: Result<T, NdStatus>) -> Result<T, String> {
    r.map_err(|s| format!("{what}: {s}"))
}

/// A call on a connector that never connected (`what`, printed as "`what` on a new connector"):
/// ND_CONNECTION_INVALID inline.
fn expect_invalid_when_new<T>(what: &str, got: Result<T, NdStatus>) -> Outcome {
    expect_err(
        &format!("{what} on a new connector"),
        got,
        NdStatus::ND_CONNECTION_INVALID,
    )
}

/// A getter (`label` in its error) into N bytes of 0xee, too few: ND_BUFFER_OVERFLOW, printed as
/// "`what` into N bytes". The fill and the buffer, for what the getter copied.
fn fill_short<const N: usize>(
    label: &str,
    what: &str,
    get: impl FnOnce(&mut [u8]) -> Result<BufferFill, NdStatus>,
) -> Result<(BufferFill, [u8; N]), String> {
    let mut short = [0xeeu8; N];
    let fill = ok(label, get(&mut short))?;
    expect(
        &format!("{what} into {N} bytes"),
        fill.status,
        NdStatus::ND_BUFFER_OVERFLOW,
    )?;
    Ok((fill, short))
}

/// One side's verbs objects.
struct Side {
    adapter: Adapter,
    cq: Arc<CompletionQueue>,
    qp: QueuePair,
    mr: MemoryRegion,
    /// Completions taken from the shared CQ while waiting for another request.
    early: std::cell::RefCell<Vec<nd_shim::Completion>>,
}

impl Side {
    fn open(ip: IpAddr, polled: bool) -> Result<Side, String> {
        let adapter = ok(
            "open adapter",
            if polled {
                Adapter::open_polled(ip)
            } else {
                Adapter::open(ip)
            },
        )?;
        let cq = Arc::new(ok("create cq", CompletionQueue::new(&adapter, 64))?);
        let qp = ok("create qp", QueuePair::new(&adapter, &cq, &cq, 16, 16, 2))?;
        let mr = ok("register mr", MemoryRegion::new(&adapter, 4096))?;
        Ok(Side {
            adapter,
            cq,
            qp,
            mr,
            early: Default::default(),
        })
    }

    /// A further QP on this side's CQ, for cases with more than one connection.
    fn another_qp(&self) -> Result<QueuePair, String> {
        ok("qp", QueuePair::new(&self.adapter, &self.cq, &self.cq, 4, 4, 1))
    }

    /// Private data that tells the peer where to RDMA-write: address and token.
    fn token_data(&self, len: usize) -> Vec<u8> {
        let mut data = vec![0u8; len];
        data[..8].copy_from_slice(&self.mr.address().to_le_bytes());
        data[8..12].copy_from_slice(&self.mr.remote_token().to_le_bytes());
        for (i, b) in data.iter_mut().enumerate().skip(12) {
            *b = i as u8;
        }
        data
    }

    fn post_receive(&self, ctx: u64, offset: usize) -> Outcome {
        let sge = ok("sge", self.mr.sge(offset, 64))?;
        ok("receive", self.qp.receive(ctx, &[sge]))
    }

    fn send(&self, ctx: u64, offset: usize, text: &[u8]) -> Outcome {
        ok("fill", self.mr.write(offset, text))?;
        let sge = ok("sge", self.mr.sge(offset, text.len() as u32))?;
        ok("send", self.qp.send(ctx, &[sge], 0))?;
        self.wait_completion(ctx).and_then(|c| {
            ensure!(c.status == NdStatus::ND_SUCCESS, "send completed {}", c.status);
            Ok(())
        })
    }

    fn write_remote(&self, ctx: u64, offset: usize, text: &[u8], remote: (u64, u32)) -> Outcome {
        ok("fill", self.mr.write(offset, text))?;
        let sge = ok("sge", self.mr.sge(offset, text.len() as u32))?;
        ok(
            "write",
            self.qp.write(ctx, &[sge], remote.0 + offset as u64, remote.1, 0),
        )?;
        let c = self.wait_completion(ctx)?;
        ensure!(c.status == NdStatus::ND_SUCCESS, "write completed {}", c.status);
        Ok(())
    }

    /// The completion of request `ctx`. Send and receive share one CQ, so other requests'
    /// completions can come first; they are kept for their own waits.
    fn wait_completion(&self, ctx: u64) -> Result<nd_shim::Completion, String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut early = self.early.borrow_mut();
            if let Some(i) = early.iter().position(|c| c.request_context == ctx) {
                return Ok(early.remove(i));
            }
            match self.cq.get_results(1).first() {
                Some(c) if c.request_context == ctx => return Ok(*c),
                Some(c) => early.push(*c),
                None if Instant::now() >= deadline => return Err(format!("no completion for request {ctx}")),
                None => thread::sleep(Duration::from_millis(1)),
            }
        }
    }

    fn received(&self, ctx: u64, offset: usize, want: &[u8]) -> Outcome {
        let c = self.wait_completion(ctx)?;
        ensure!(c.status == NdStatus::ND_SUCCESS, "receive completed {}", c.status);
        self.holds("received", offset, want)
    }

    fn memory_holds(&self, offset: usize, want: &[u8]) -> Outcome {
        self.holds("memory holds", offset, want)
    }

    /// The MR holds `want` at `offset`; otherwise "`what` GOT, want WANT".
    fn holds(&self, what: &str, offset: usize, want: &[u8]) -> Outcome {
        let mut got = vec![0u8; want.len()];
        ok("read", self.mr.read(offset, &mut got))?;
        ensure!(
            got == want,
            "{what} {:?}, want {:?}",
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want)
        );
        Ok(())
    }
}

fn remote_of(data: &[u8]) -> (u64, u32) {
    let mut a = [0u8; 8];
    a.copy_from_slice(&data[..8]);
    let mut t = [0u8; 4];
    t.copy_from_slice(&data[8..12]);
    (u64::from_le_bytes(a), u32::from_le_bytes(t))
}

fn private_data(connector: &Connector) -> Result<Vec<u8>, String> {
    let mut buf = [0u8; 256];
    let fill = ok("get_private_data", connector.get_private_data(&mut buf))?;
    Ok(buf[..fill.required.min(buf.len())].to_vec())
}

/// Runs the passive side on a thread; `ready` fires once it listens.
fn passive<F>(f: F) -> (mpsc::Receiver<()>, thread::JoinHandle<Outcome>)
where
    F: FnOnce(mpsc::Sender<()>) -> Outcome + Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    (rx, thread::spawn(move || f(tx)))
}

fn join(handle: thread::JoinHandle<Outcome>) -> Outcome {
    handle.join().unwrap_or_else(|_| Err("passive side panicked".into()))
}

fn listening(side: &Side, port: u16) -> Result<Listener, String> {
    let listener = Listener::new(&side.adapter);
    ok("listener bind", listener.bind(SocketAddr::new(SERVER, port)))?;
    ok("listen", listener.listen(4))?;
    Ok(listener)
}

/// A listener on SERVER:`port` for each of `ports`.
fn listening_on(side: &Side, ports: &[u16]) -> Result<Vec<Listener>, String> {
    ports.iter().map(|p| listening(side, *p)).collect()
}

/// A request from each of `listeners` in turn, accepted on a QP of its own; the connections are
/// held 300 ms.
fn accept_in_turn(side: &Side, listeners: &[&Listener]) -> Outcome {
    let mut accepted = Vec::new();
    for listener in listeners {
        let connector = request(side, listener)?;
        let qp = side.another_qp()?;
        expect("Accept", accept(&connector, &qp)?.wait(), NdStatus::ND_SUCCESS)?;
        accepted.push((connector, qp));
    }
    thread::sleep(Duration::from_millis(300));
    Ok(())
}

fn wait_ready(ready: &mpsc::Receiver<()>) -> Outcome {
    ready
        .recv_timeout(Duration::from_secs(20))
        .map_err(|_| "passive side never got ready".to_string())
}

/// The passive side's set-up: its side on SERVER (the adapter on its own event thread) and a
/// listener on `port`.
fn listening_side(port: u16) -> Result<(Side, Listener), String> {
    let side = Side::open(SERVER, false)?;
    let listener = listening(&side, port)?;
    Ok((side, listener))
}

/// GetConnectionRequest into a new connector; it must succeed.
fn request(side: &Side, listener: &Listener) -> Result<Connector, String> {
    let connector = Connector::new(&side.adapter);
    let get = ok("get_connection_request", listener.get_connection_request(&connector))?;
    expect("GetConnectionRequest", get.wait(), NdStatus::ND_SUCCESS)?;
    Ok(connector)
}

/// The passive side of a one-connection case, on its own thread: listens on SERVER:`port`, takes
/// the first connection request and hands its connector to `body`.
fn passive_request<F>(port: u16, body: F) -> (mpsc::Receiver<()>, thread::JoinHandle<Outcome>)
where
    F: FnOnce(&Side, &Connector) -> Outcome + Send + 'static,
{
    passive(move |ready| {
        let (side, listener) = listening_side(port)?;
        ready.send(()).ok();
        let connector = request(&side, &listener)?;
        body(&side, &connector)
    })
}

/// The active side's set-up: its side on CLIENT (a polled adapter), once the passive side listens.
fn active(ready: &mpsc::Receiver<()>) -> Result<Side, String> {
    let side = Side::open(CLIENT, true)?;
    wait_ready(ready)?;
    Ok(side)
}

/// Connect on `qp` to SERVER:`port`, no reads either way.
fn connect(connector: &Connector, qp: &QueuePair, port: u16, private_data: &[u8]) -> Result<Pending, String> {
    ok(
        "connect",
        connector.connect(qp, SocketAddr::new(SERVER, port), 0, 0, private_data),
    )
}

/// Connect on `connector` to SERVER:`port` (no private data) ends with `want`.
fn connect_ends(what: &str, connector: &Connector, qp: &QueuePair, port: u16, want: NdStatus) -> Outcome {
    expect(what, connect(connector, qp, port, &[])?.wait(), want)
}

/// Connect to `ip`:`port` on `qp`, no reads either way and no private data.
fn connect_to(connector: &Connector, qp: &QueuePair, ip: IpAddr, port: u16) -> Result<Pending, String> {
    ok("connect", connector.connect(qp, SocketAddr::new(ip, port), 0, 0, &[]))
}

/// Accept on `qp`, no reads either way and no private data.
fn accept(connector: &Connector, qp: &QueuePair) -> Result<Pending, String> {
    ok("accept", connector.accept(qp, 0, 0, &[]))
}

/// A new connector on `side`, connected to SERVER:`port` (Connect and CompleteConnect succeed).
fn connected(side: &Side, port: u16) -> Result<Connector, String> {
    let connector = Connector::new(&side.adapter);
    connect_ends("Connect", &connector, &side.qp, port, NdStatus::ND_SUCCESS)?;
    ok("complete_connect", connector.complete_connect())?;
    Ok(connector)
}

/// Checks the peer's private data (`token_data` of `len` bytes, the wire size, in the `what`
/// message: REQ or REP) and the read limits `want` (inbound, outbound) on the `side` side; returns
/// where the peer lets this side write.
fn peer_token(
    connector: &Connector,
    what: &str,
    len: usize,
    side: &str,
    want: (u32, u32),
) -> Result<(u64, u32), String> {
    let data = private_data(connector)?;
    ensure!(
        data.len() == len,
        "{what} private data is {} bytes, want the wire size {len}",
        data.len()
    );
    ensure!(
        data[12..len].iter().enumerate().all(|(i, b)| *b == (i + 12) as u8),
        "{what} private data differs"
    );
    let limits = ok("get_read_limits", connector.get_read_limits())?;
    ensure!(
        (limits.inbound, limits.outbound) == want,
        "{side} read limits {limits:?}, want in {} out {}",
        want.0,
        want.1
    );
    println!("  {side} read limits {limits:?}");
    Ok(remote_of(&data))
}

/// Connect/Accept/CompleteConnect with private data both ways and read limits as negotiated,
/// then send/receive and RDMA write both ways.
fn connect_accept_data() -> Outcome {
    const PORT: u16 = 7001;
    let (ready, server) = passive_request(PORT, |side, connector| {
        let peer = peer_token(connector, "REQ", 56, "passive", (2, 3))?;
        side.post_receive(1, 0)?;
        side.post_receive(2, 64)?;
        let accept = ok("accept", connector.accept(&side.qp, 8, 8, &side.token_data(196)))?;
        expect("Accept", accept.wait(), NdStatus::ND_SUCCESS)?;
        side.received(1, 0, b"ping")?;
        side.send(10, 1024, b"pong")?;
        side.received(2, 64, b"wrote")?;
        side.memory_holds(256, b"written by active")?;
        side.write_remote(11, 512, b"written by passive", peer)?;
        side.send(12, 1024, b"wrote")?;
        thread::sleep(Duration::from_millis(200));
        Ok(())
    });
    let side = active(&ready)?;
    side.post_receive(1, 0)?;
    side.post_receive(2, 64)?;
    let connector = Connector::new(&side.adapter);
    let connect = ok(
        "connect",
        connector.connect(&side.qp, SocketAddr::new(SERVER, PORT), 3, 2, &side.token_data(56)),
    )?;
    expect("Connect", connect.wait(), NdStatus::ND_SUCCESS)?;
    let peer = peer_token(&connector, "REP", 196, "active", (3, 2))?;
    ok("complete_connect", connector.complete_connect())?;
    side.send(10, 1024, b"ping")?;
    side.received(1, 0, b"pong")?;
    side.write_remote(11, 256, b"written by active", peer)?;
    side.send(12, 1024, b"wrote")?;
    side.received(2, 64, b"wrote")?;
    side.memory_holds(512, b"written by passive")?;
    join(server)
}

/// Connect with no listener on the port: ND_CONNECTION_REFUSED (REJ reason 8).
fn no_listener_refused() -> Outcome {
    let _server = Side::open(SERVER, false)?;
    let side = Side::open(CLIENT, true)?;
    let connector = Connector::new(&side.adapter);
    let connect = ok(
        "connect",
        connector.connect(&side.qp, SocketAddr::new(SERVER, 7002), 1, 1, &[]),
    )?;
    expect("Connect", connect.wait(), NdStatus::ND_CONNECTION_REFUSED)
}

/// Private data over 56: ND_INVALID_BUFFER_SIZE inline; the same connector then connects with 56.
fn private_data_limit() -> Outcome {
    const PORT: u16 = 7003;
    let (ready, server) = passive_request(PORT, |side, connector| {
        let data = private_data(connector)?;
        ensure!(data[..56] == [0x5a; 56], "REQ private data differs");
        expect("Accept", accept(connector, &side.qp)?.wait(), NdStatus::ND_SUCCESS)
    });
    let side = active(&ready)?;
    let connector = Connector::new(&side.adapter);
    let remote = SocketAddr::new(SERVER, PORT);
    expect_err(
        "Connect with 57 bytes",
        connector.connect(&side.qp, remote, 0, 0, &[0x5a; 57]),
        NdStatus::ND_INVALID_BUFFER_SIZE,
    )?;
    let connect = connect(&connector, &side.qp, PORT, &[0x5a; 56])?;
    expect("Connect with 56 bytes", connect.wait(), NdStatus::ND_SUCCESS)?;
    ok("complete_connect", connector.complete_connect())?;
    join(server)
}

/// Connect on a connected connector: ND_CONNECTION_ACTIVE; CompleteConnect when not
/// connecting: ND_CONNECTION_INVALID (before Connect, and again after it).
fn connect_state_errors() -> Outcome {
    const PORT: u16 = 7004;
    let (ready, server) = passive_request(PORT, |side, connector| {
        expect("Accept", accept(connector, &side.qp)?.wait(), NdStatus::ND_SUCCESS)
    });
    let side = active(&ready)?;
    let connector = Connector::new(&side.adapter);
    expect_invalid_when_new("CompleteConnect", connector.complete_connect())?;
    connect_ends("Connect", &connector, &side.qp, PORT, NdStatus::ND_SUCCESS)?;
    ok("complete_connect", connector.complete_connect())?;
    expect_err(
        "Connect on a connected connector",
        connector.connect(&side.qp, SocketAddr::new(SERVER, PORT), 0, 0, &[]),
        NdStatus::ND_CONNECTION_ACTIVE,
    )?;
    expect_err(
        "CompleteConnect when connected",
        connector.complete_connect(),
        NdStatus::ND_CONNECTION_INVALID,
    )?;
    join(server)
}

/// Bind twice: STATUS_ADDRESS_ALREADY_ASSOCIATED.
fn second_bind() -> Outcome {
    let side = Side::open(CLIENT, true)?;
    let connector = Connector::new(&side.adapter);
    ok("bind", connector.bind(SocketAddr::new(CLIENT, 0)))?;
    let local = connector.local_address().ok_or("no local address after bind")?;
    ensure!(
        (49152..=65535).contains(&local.port()),
        "port 0 bound {local}, want the ND range"
    );
    println!("  bound {local}");
    expect_err(
        "second Bind",
        connector.bind(SocketAddr::new(CLIENT, 0)),
        NdStatus::STATUS_ADDRESS_ALREADY_ASSOCIATED,
    )
}

/// A port another connector or listener holds: ND_SHARING_VIOLATION.
fn port_in_use() -> Outcome {
    const PORT: u16 = 7005;
    let side = Side::open(SERVER, true)?;
    let listener = listening(&side, PORT)?;
    let addr = SocketAddr::new(SERVER, PORT);
    let connector = Connector::new(&side.adapter);
    expect_err(
        "Bind to a listener's port",
        connector.bind(addr),
        NdStatus::ND_SHARING_VIOLATION,
    )?;
    let other = Listener::new(&side.adapter);
    expect_err(
        "second listener on the port",
        other.bind(addr),
        NdStatus::ND_SHARING_VIOLATION,
    )?;
    drop(listener);
    // The refused connector stays spent (no reuse after a failed Bind); a new one gets the port.
    expect_err(
        "Bind again on the refused connector",
        connector.bind(addr),
        NdStatus::ND_CONNECTION_INVALID,
    )?;
    ok(
        "Bind after the listener closed",
        Connector::new(&side.adapter).bind(addr),
    )
}

/// Addresses no RDMA adapter has: ND_INVALID_ADDRESS. Each Bind on a connector of its own: a
/// failed Bind leaves its connector unusable (`no-reuse-after-failure`).
fn invalid_address() -> Outcome {
    let side = Side::open(SERVER, true)?;
    let test_net = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    expect_err(
        "Bind to 192.0.2.1",
        Connector::new(&side.adapter).bind(SocketAddr::new(test_net, 0)),
        NdStatus::ND_INVALID_ADDRESS,
    )?;
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    expect_err(
        "Bind to 127.0.0.1",
        Connector::new(&side.adapter).bind(SocketAddr::new(loopback, 0)),
        NdStatus::ND_INVALID_ADDRESS,
    )?;
    expect_err(
        "open adapter 192.0.2.1",
        Adapter::open_polled(test_net),
        NdStatus::ND_INVALID_ADDRESS,
    )?;
    ok(
        "Bind to the adapter's address",
        Connector::new(&side.adapter).bind(SocketAddr::new(SERVER, 0)),
    )
}

/// With the ND range narrowed (ND_SHIM_PORT_RANGE, set by the suite) and used up:
/// ND_TOO_MANY_ADDRESSES.
fn ports_exhausted() -> Outcome {
    let range = std::env::var("ND_SHIM_PORT_RANGE").map_err(|_| "ND_SHIM_PORT_RANGE is not set")?;
    let side = Side::open(SERVER, true)?;
    let mut held = Vec::new();
    loop {
        let connector = Connector::new(&side.adapter);
        match connector.bind(SocketAddr::new(SERVER, 0)) {
            Ok(()) => held.push(connector),
            Err(status) => {
                println!("  {} binds in {range}, then {status}", held.len());
                ensure!(held.len() < 1000, "the range did not run out");
                return expect("Bind with the range used up", status, NdStatus::ND_TOO_MANY_ADDRESSES);
            }
        }
    }
}

/// Nobody behind an address of the local subnet: ND_HOST_UNREACHABLE through the completion.
fn host_unreachable() -> Outcome {
    let side = Side::open(CLIENT, true)?;
    let connector = Connector::new(&side.adapter);
    let nobody = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 77));
    let connect = connect_to(&connector, &side.qp, nobody, 7006)?;
    expect("Connect to 198.18.0.77", connect.wait(), NdStatus::ND_HOST_UNREACHABLE)
}

/// No route to the destination: ND_NETWORK_UNREACHABLE inline.
fn network_unreachable() -> Outcome {
    let side = Side::open(CLIENT, true)?;
    let connector = Connector::new(&side.adapter);
    let far = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 1));
    match connector.connect(&side.qp, SocketAddr::new(far, 7007), 0, 0, &[]) {
        Err(status) => expect(
            "Connect to 203.0.113.1 (inline)",
            status,
            NdStatus::ND_NETWORK_UNREACHABLE,
        ),
        Ok(pending) => Err(format!(
            "Connect to 203.0.113.1 returned pending, then completed {}",
            pending.wait()
        )),
    }
}

/// The listener side rejects: Connect fails ND_CONNECTION_REFUSED and the REJ's private data is
/// readable.
fn listener_reject() -> Outcome {
    const PORT: u16 = 7008;
    let (ready, server) = passive_request(PORT, |_, connector| {
        expect_err(
            "Reject with 149 bytes",
            connector.reject(&[0; 149]),
            NdStatus::ND_INVALID_BUFFER_SIZE,
        )?;
        ok("reject", connector.reject(b"go away"))
    });
    let side = active(&ready)?;
    let connector = Connector::new(&side.adapter);
    let connect = connect(&connector, &side.qp, PORT, &[])?;
    expect("Connect", connect.wait(), NdStatus::ND_CONNECTION_REFUSED)?;
    let data = private_data(&connector)?;
    ensure!(
        data.starts_with(b"go away"),
        "REJ private data {:?}",
        String::from_utf8_lossy(&data)
    );
    println!("  REJ private data readable, {} bytes", data.len());
    join(server)
}

/// The active side rejects after its Connect completed: the passive Accept fails
/// ND_CONNECTION_REFUSED.
fn active_reject() -> Outcome {
    const PORT: u16 = 7009;
    let (ready, server) = passive_request(PORT, |side, connector| {
        let accept = accept(connector, &side.qp)?;
        expect("Accept", accept.wait(), NdStatus::ND_CONNECTION_REFUSED)
    });
    let side = active(&ready)?;
    let connector = Connector::new(&side.adapter);
    let connect = connect(&connector, &side.qp, PORT, &[])?;
    expect("Connect", connect.wait(), NdStatus::ND_SUCCESS)?;
    ok("reject after Connect", connector.reject(&[]))?;
    join(server)
}

/// Disconnect: the peer's NotifyDisconnect completes, and outstanding receives complete with
/// ND_CANCELED (on the disconnecting side at once, on the peer when the disconnect reaches it).
fn disconnect() -> Outcome {
    const PORT: u16 = 7010;
    let (ready, server) = passive_request(PORT, |side, connector| {
        side.post_receive(1, 0)?;
        expect("Accept", accept(connector, &side.qp)?.wait(), NdStatus::ND_SUCCESS)?;
        let notify = ok("notify_disconnect", connector.notify_disconnect())?;
        expect("NotifyDisconnect", notify.wait(), NdStatus::ND_SUCCESS)?;
        // The peer's disconnect flushes the QP (Microsoft's ndreceiveconnectorclosed).
        let c = side.wait_completion(1)?;
        expect(
            "passive receive after the peer's Disconnect",
            c.status,
            NdStatus::ND_CANCELED,
        )?;
        ok("disconnect", connector.disconnect()).map(drop)
    });
    let side = active(&ready)?;
    side.post_receive(1, 0)?;
    side.post_receive(2, 64)?;
    let connector = connected(&side, PORT)?;
    thread::sleep(Duration::from_millis(300));
    let disconnect = ok("disconnect", connector.disconnect())?;
    for ctx in [1, 2] {
        let c = side.wait_completion(ctx)?;
        expect("active receive after Disconnect", c.status, NdStatus::ND_CANCELED)?;
    }
    expect("Disconnect", disconnect.wait(), NdStatus::ND_SUCCESS)?;
    join(server)
}

/// Cancel of a pending Connect (the listener never answers): ND_CANCELED.
fn cancel_connect() -> Outcome {
    const PORT: u16 = 7011;
    let (ready, server) = passive(|ready| {
        let _listening = listening_side(PORT)?;
        ready.send(()).ok();
        // Never calls GetConnectionRequest: the request stays queued.
        thread::sleep(Duration::from_secs(3));
        Ok(())
    });
    let side = active(&ready)?;
    let connector = Connector::new(&side.adapter);
    let connect = connect(&connector, &side.qp, PORT, &[])?;
    ensure!(
        connect.wait_for(Duration::from_secs(1)).is_none(),
        "Connect completed without an Accept"
    );
    connect.cancel();
    expect("Connect after cancel", connect.wait(), NdStatus::ND_CANCELED)?;
    expect_err(
        "CompleteConnect after cancel",
        connector.complete_connect(),
        NdStatus::ND_CONNECTION_INVALID,
    )?;
    join(server)
}

/// Shared endpoint: two connections to different destinations from one port succeed; the same
/// 4-tuple twice is ND_ADDRESS_ALREADY_EXISTS.
fn shared_endpoint() -> Outcome {
    const PORTS: [u16; 2] = [7012, 7013];
    let (ready, server) = passive(|ready| {
        let side = Side::open(SERVER, false)?;
        let listeners = listening_on(&side, &PORTS)?;
        ready.send(()).ok();
        accept_in_turn(&side, &[&listeners[0], &listeners[1]])
    });
    let side = active(&ready)?;
    let endpoint = ok(
        "shared endpoint",
        SharedEndpoint::new(&side.adapter, SocketAddr::new(CLIENT, 0)),
    )?;
    println!("  shared endpoint {}", endpoint.local_address());
    let mut connected = Vec::new();
    for port in PORTS {
        let qp = side.another_qp()?;
        let connector = Connector::new(&side.adapter);
        let remote = SocketAddr::new(SERVER, port);
        let connect = ok(
            "connect",
            connector.connect_with_shared_endpoint(&qp, &endpoint, remote, 0, 0, &[]),
        )?;
        expect("ConnectWithSharedEndpoint", connect.wait(), NdStatus::ND_SUCCESS)?;
        ok("complete_connect", connector.complete_connect())?;
        let local = connector.local_address().ok_or("no local address")?;
        ensure!(
            local == endpoint.local_address(),
            "connection bound {local}, want {}",
            endpoint.local_address()
        );
        connected.push((connector, qp));
    }
    let qp = side.another_qp()?;
    let again = Connector::new(&side.adapter);
    expect_err(
        "the same 4-tuple again",
        again.connect_with_shared_endpoint(&qp, &endpoint, SocketAddr::new(SERVER, PORTS[0]), 0, 0, &[]),
        NdStatus::ND_ADDRESS_ALREADY_EXISTS,
    )?;
    join(server)
}

/// ND2_ADAPTER_INFO: MaxCallerData 56, MaxCalleeData 196, and the read limits equal to what
/// the device reports to `ibv_devinfo -v -d rxe0` (max_qp_rd_atom, max_qp_init_rd_atom).
fn adapter_query() -> Outcome {
    let side = Side::open(SERVER, true)?;
    let info = side.adapter.query();
    println!("  {info:?}");
    ensure!(info.max_caller_data == 56, "MaxCallerData {}", info.max_caller_data);
    ensure!(info.max_callee_data == 196, "MaxCalleeData {}", info.max_callee_data);
    let devinfo = std::process::Command::new("ibv_devinfo")
        .args(["-v", "-d", "rxe0"])
        .output()
        .map_err(|e| format!("ibv_devinfo: {e}"))?;
    let text = String::from_utf8_lossy(&devinfo.stdout);
    let field = |name: &str| -> Result<u32, String> {
        text.lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix(name)
                    .and_then(|v| v.trim_start_matches(':').trim().parse().ok())
            })
            .ok_or_else(|| format!("ibv_devinfo shows no {name}"))
    };
    let device = (field("max_qp_rd_atom")?, field("max_qp_init_rd_atom")?);
    ensure!(
        (info.max_inbound_read_limit, info.max_outbound_read_limit) == device,
        "read limits {}/{}, the device says {device:?}",
        info.max_inbound_read_limit,
        info.max_outbound_read_limit
    );
    println!("  read limits {device:?} as ibv_devinfo reports them");
    Ok(())
}

/// GetPrivateData, GetLocalAddress and GetPeerAddress with short buffers: ND_BUFFER_OVERFLOW
/// and the required size; GetPrivateData copies what fits, the address getters leave the buffer
/// alone. GetPeerAddress answers on the passive side from the request on; GetLocalAddress on a
/// connector that only used Bind: the bound address, as Windows providers answer.
fn getters_short_buffers() -> Outcome {
    const PORT: u16 = 7014;
    let (ready, server) = passive(|ready| {
        let (side, listener) = listening_side(PORT)?;
        let mut addr = [0u8; 64];
        let fill = ok("listener get_local_address", listener.get_local_address(&mut addr))?;
        ensure!(
            fill.status == NdStatus::ND_SUCCESS && fill.required == 16,
            "listener address {fill:?}"
        );
        ready.send(()).ok();
        let connector = request(&side, &listener)?;
        let (fill, short) = fill_short::<10>("get_private_data", "GetPrivateData", |b| connector.get_private_data(b))?;
        ensure!(fill.required == 56, "required {}", fill.required);
        ensure!(short == *b"0123456789", "the first 10 bytes were not copied: {short:?}");
        // The request carries the peer's address (Microsoft's ndmpic reads it before Accept).
        let fill = ok("get_peer_address before Accept", connector.get_peer_address(&mut addr))?;
        ensure!(
            fill.status == NdStatus::ND_SUCCESS && addr[4..8] == [198, 18, 0, 2],
            "peer address before Accept {fill:?} {:?}",
            &addr[..16]
        );
        expect("Accept", accept(&connector, &side.qp)?.wait(), NdStatus::ND_SUCCESS)?;
        let (fill, short) = fill_short::<8>("get_peer_address", "GetPeerAddress", |b| connector.get_peer_address(b))?;
        ensure!(
            fill.required == 16 && short == [0xee; 8],
            "peer address fill {fill:?}, buffer {short:?}"
        );
        let fill = ok("get_peer_address", connector.get_peer_address(&mut addr))?;
        ensure!(
            fill.status == NdStatus::ND_SUCCESS && fill.required == 16,
            "peer address {fill:?}"
        );
        ensure!(addr[4..8] == [198, 18, 0, 2], "peer address bytes {:?}", &addr[..16]);
        Ok(())
    });
    let side = active(&ready)?;
    let bound_only = Connector::new(&side.adapter);
    ok("bind", bound_only.bind(SocketAddr::new(CLIENT, 0)))?;
    let mut room = [0u8; 64];
    // Windows providers answer after Bind, before Connect: the bound address.
    let fill = ok(
        "GetLocalAddress after Bind only",
        bound_only.get_local_address(&mut room),
    )?;
    ensure!(
        fill.status == NdStatus::ND_SUCCESS && fill.required == 16 && room[4..8] == [198, 18, 0, 2],
        "local address after Bind {fill:?} {:?}",
        &room[..16]
    );
    let connector = Connector::new(&side.adapter);
    let connect = connect(&connector, &side.qp, PORT, b"0123456789abcdef")?;
    expect("Connect", connect.wait(), NdStatus::ND_SUCCESS)?;
    let (fill, short) = fill_short::<15>("get_local_address", "GetLocalAddress", |b| {
        connector.get_local_address(b)
    })?;
    ensure!(
        fill.required == 16 && short == [0xee; 15],
        "local address fill {fill:?}, buffer {short:?}"
    );
    ok("complete_connect", connector.complete_connect())?;
    join(server)
}

/// Releasing a connected connector disconnects implicitly: its QP's outstanding receives
/// complete with ND_CANCELED and the peer's NotifyDisconnect completes.
fn release_disconnects() -> Outcome {
    const PORT: u16 = 7015;
    let (ready, server) = passive_request(PORT, |side, connector| {
        expect("Accept", accept(connector, &side.qp)?.wait(), NdStatus::ND_SUCCESS)?;
        let notify = ok("notify_disconnect", connector.notify_disconnect())?;
        expect("NotifyDisconnect", notify.wait(), NdStatus::ND_SUCCESS)
    });
    let side = active(&ready)?;
    side.post_receive(1, 0)?;
    let connector = connected(&side, PORT)?;
    thread::sleep(Duration::from_millis(300));
    drop(connector);
    let c = side.wait_completion(1)?;
    expect("receive after release", c.status, NdStatus::ND_CANCELED)?;
    // The DREQ went out; the peer's events need this adapter to do nothing more.
    join(server)
}

/// The active side abandons its Connect (cancel in REQ_SENT: the kernel sends REJ reason 4,
/// which ucma does not report for a request not yet accepted). While the request is queued at
/// the listener it leaves the queue (the backlog has room again); once a GetConnectionRequest has
/// taken it, the passive side's Accept reports ND_CONNECTION_ABORTED.
fn active_abandons() -> Outcome {
    const PORT: u16 = 7016;
    let (take_tx, take_rx) = mpsc::channel::<()>();
    let (taken_tx, taken_rx) = mpsc::channel::<()>();
    let (cancelled_tx, cancelled_rx) = mpsc::channel::<()>();
    let (ready, server) = passive(move |ready| {
        let side = Side::open(SERVER, false)?;
        let listener = Listener::new(&side.adapter);
        ok("listener bind", listener.bind(SocketAddr::new(SERVER, PORT)))?;
        ok("listen", listener.listen(1))?;
        ready.send(()).ok();
        take_rx
            .recv_timeout(Duration::from_secs(60))
            .map_err(|_| "the active side never asked for the Get")?;
        let connector = request(&side, &listener)?;
        taken_tx.send(()).ok();
        cancelled_rx
            .recv_timeout(Duration::from_secs(60))
            .map_err(|_| "the active side never cancelled")?;
        // The REJ (reason 4) left the active side when its cancel returned; half a second
        // later it has reached this side's CM, which left REQ_RCVD, so the shim's probe finds
        // the request dead before any REP goes out: inline.
        thread::sleep(Duration::from_millis(500));
        expect_err(
            "Accept after the peer abandoned (inline)",
            connector.accept(&side.qp, 0, 0, &[]),
            NdStatus::ND_CONNECTION_ABORTED,
        )
    });
    let side = active(&ready)?;
    let remote = SocketAddr::new(SERVER, PORT);
    let start = |what: &str| -> Result<(Connector, QueuePair, Pending), String> {
        let qp = side.another_qp()?;
        let connector = Connector::new(&side.adapter);
        let pending = ok(what, connector.connect(&qp, remote, 0, 0, &[]))?;
        Ok((connector, qp, pending))
    };
    // Backlog 1: A is queued, B over the backlog is refused.
    let a = start("connect A")?;
    ensure!(
        a.2.wait_for(Duration::from_millis(500)).is_none(),
        "Connect A completed without an Accept"
    );
    let b = start("connect B")?;
    expect(
        "Connect B (over the backlog)",
        b.2.wait(),
        NdStatus::ND_CONNECTION_REFUSED,
    )?;
    ensure!(a.2.poll().is_none(), "Connect A completed {:?}", a.2.poll());
    // A abandons while queued: REJ reason 4 takes it out of the queue.
    a.2.cancel();
    expect("Connect A after cancel", a.2.wait(), NdStatus::ND_CANCELED)?;
    drop(a);
    thread::sleep(Duration::from_secs(1));
    let c = start("connect C")?;
    ensure!(
        c.2.wait_for(Duration::from_millis(500)).is_none(),
        "Connect C completed {:?}: the abandoned request still held the backlog",
        c.2.poll()
    );
    let d = start("connect D")?;
    expect(
        "Connect D (C holds the backlog, A left it)",
        d.2.wait(),
        NdStatus::ND_CONNECTION_REFUSED,
    )?;
    // A Get takes C; then C abandons.
    take_tx.send(()).ok();
    taken_rx
        .recv_timeout(Duration::from_secs(20))
        .map_err(|_| "the passive side's Get did not complete")?;
    ensure!(c.2.poll().is_none(), "Connect C completed {:?}", c.2.poll());
    c.2.cancel();
    expect("Connect C after cancel", c.2.wait(), NdStatus::ND_CANCELED)?;
    cancelled_tx.send(()).ok();
    join(server)
}

/// A REQ that nobody answers (a permanent neighbour entry for 198.18.0.50 on veth1 with a MAC
/// no interface has, set by the suite): the IB CM retries for about 100 s here, then UNREACHABLE:
/// ND_IO_TIMEOUT.
fn io_timeout() -> Outcome {
    let side = Side::open(CLIENT, true)?;
    let connector = Connector::new(&side.adapter);
    let silent = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 50));
    let connect = connect_to(&connector, &side.qp, silent, 7017)?;
    let started = Instant::now();
    let status = connect
        .wait_for(Duration::from_secs(180))
        .ok_or("Connect to 198.18.0.50 still pending after 180 s")?;
    println!("  completed after {} s", started.elapsed().as_secs());
    expect("Connect to 198.18.0.50", status, NdStatus::ND_IO_TIMEOUT)
}

/// Issue 9 item 7: how long an unanswered handshake survives. Two connections at once: on
/// SERVER:7030 (ND_SURVIVAL_PORT) the listener hands the request over and nobody calls Accept (the passive rdma_cm
/// answers the REQ with an MRA); on the port after it the passive side accepts and the active side
/// never calls CompleteConnect (the active rdma_cm answers the REP with an MRA). Prints the
/// seconds until each ends, or that it still lives after `ND_SURVIVAL_CAP` seconds (default
/// 1500). The shim adds no timer: each must last longer than the IB CM's plain retries (about
/// 100 s without an MRA, `io-timeout`) and, when the kernel gives up, end with ND_IO_TIMEOUT
/// through the completion. Not in the default suite (it runs for many minutes): the suite runs
/// it when RIG_ND_SLOW=1, once per provider at the same time, each on its own two ports
/// (`ND_SURVIVAL_PORT` and the one after it; default 7030).
fn unanswered_survival() -> Outcome {
    let held_port = std::env::var("ND_SURVIVAL_PORT")
        .ok()
        .and_then(|v| v.parse::<u16>().ok())
        .filter(|p| *p < u16::MAX)
        .unwrap_or(7030);
    let uncompleted_port = held_port + 1;
    const FLOOR: u64 = 120;
    let cap = std::env::var("ND_SURVIVAL_CAP")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(1500);
    let passive = Side::open(SERVER, false)?;
    let held_listener = listening(&passive, held_port)?;
    let accept_listener = listening(&passive, uncompleted_port)?;
    let active = Side::open(CLIENT, false)?;

    // The request nobody accepts.
    let held_connector = Connector::new(&active.adapter);
    let held_qp = active.another_qp()?;
    let held = connect_to(&held_connector, &held_qp, SERVER, held_port)?;
    let held_request = request(&passive, &held_listener)?;
    let started_req = Instant::now();

    // The REP nobody completes.
    let uncompleted_connector = Connector::new(&active.adapter);
    let uncompleted_qp = active.another_qp()?;
    let uncompleted = connect_to(&uncompleted_connector, &uncompleted_qp, SERVER, uncompleted_port)?;
    let accepting = request(&passive, &accept_listener)?;
    let accepted_qp = passive.another_qp()?;
    let accept = accept(&accepting, &accepted_qp)?;
    expect(
        "Connect to the accepting side",
        uncompleted
            .wait_for(Duration::from_secs(20))
            .ok_or("Connect still pending 20 s after Accept")?,
        NdStatus::ND_SUCCESS,
    )?;
    let started_rep = Instant::now();

    let mut req_end: Option<(u64, NdStatus)> = None;
    let mut rep_end: Option<(u64, NdStatus)> = None;
    let mut last_report = 0;
    loop {
        thread::sleep(Duration::from_secs(1));
        if req_end.is_none() {
            if let Some(status) = held.poll() {
                let secs = started_req.elapsed().as_secs();
                println!("  REQ without Accept: the active Connect completed {status} after {secs} s");
                req_end = Some((secs, status));
            }
        }
        if rep_end.is_none() {
            if let Some(status) = accept.poll() {
                let secs = started_rep.elapsed().as_secs();
                println!("  REP without CompleteConnect: the passive Accept completed {status} after {secs} s");
                rep_end = Some((secs, status));
            }
        }
        let elapsed = started_req.elapsed().as_secs();
        if (req_end.is_some() && rep_end.is_some()) || elapsed >= cap {
            break;
        }
        if elapsed >= last_report + 60 {
            last_report = elapsed;
            println!("  {elapsed} s: both still waiting as they should");
        }
    }
    let mut verdict = Ok(());
    for (what, end, started) in [
        ("REQ without Accept (active Connect)", req_end, started_req),
        ("REP without CompleteConnect (passive Accept)", rep_end, started_rep),
    ] {
        match end {
            None => println!(
                "  {what}: still pending after {} s (ND_SURVIVAL_CAP)",
                started.elapsed().as_secs()
            ),
            Some((secs, status)) => {
                if secs < FLOOR {
                    verdict = verdict.and(Err(format!("{what} ended after {secs} s, before {FLOOR} s")));
                }
                if status != NdStatus::ND_IO_TIMEOUT {
                    verdict = verdict.and(Err(format!("{what} completed {status}, want ND_IO_TIMEOUT")));
                }
            }
        }
    }
    // What each side meets afterwards, for the record (docs/nd-semantics.md "Timeliness").
    if req_end.is_some() {
        match held_request.accept(&passive.qp, 0, 0, &[]) {
            Err(status) => println!("  Accept of the request the active side gave up on: {status} inline"),
            Ok(p) => match p.wait_for(Duration::from_secs(30)) {
                Some(status) => println!("  Accept of the request the active side gave up on: {status} (completion)"),
                None => println!("  Accept of the request the active side gave up on: still pending after 30 s"),
            },
        }
    }
    if rep_end.is_some() {
        match uncompleted_connector.complete_connect() {
            Ok(()) => println!("  CompleteConnect after the passive Accept timed out: ND_SUCCESS"),
            Err(status) => println!("  CompleteConnect after the passive Accept timed out: {status}"),
        }
    }
    verdict
}

// ---- cases across processes, and against a plain librdmacm peer --------------------------

/// A helper process: this program in `--child` mode, or the plain librdmacm peer
/// (`ND_PLAIN_PEER`, built by the suite from `plain_peer.c`). Its stdin closing ends it.
struct Helper {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl Helper {
    fn spawn(program: &std::path::Path, args: &[&str]) -> Result<Helper, String> {
        use std::process::{Command, Stdio};
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", program.display()))?;
        let out = std::io::BufReader::new(child.stdout.take().ok_or("no stdout")?);
        Ok(Helper { child, out })
    }

    /// Another process of this program running `--child NAME ARGS`.
    fn shim(args: &[&str]) -> Result<Helper, String> {
        let me = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut all = vec!["--child"];
        all.extend_from_slice(args);
        Helper::spawn(&me, &all)
    }

    fn plain(args: &[&str]) -> Result<Helper, String> {
        let peer = std::env::var("ND_PLAIN_PEER").map_err(|_| "ND_PLAIN_PEER is not set")?;
        Helper::spawn(std::path::Path::new(&peer), args)
    }

    /// The next protocol line the helper prints (without the newline). Indented lines are the
    /// commentary every case prints (`expect`'s "  what: code"): echoed, not returned.
    fn line(&mut self) -> Result<String, String> {
        use std::io::BufRead;
        loop {
            let mut line = String::new();
            match self.out.read_line(&mut line) {
                Ok(0) => return Err("the helper process ended".into()),
                Ok(_) if line.starts_with("  ") => print!("  other process:{line}"),
                Ok(_) => return Ok(line.trim_end().to_string()),
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    fn expect_line(&mut self, want: &str) -> Outcome {
        let got = self.line()?;
        ensure!(got == want, "helper said {got:?}, want {want:?}");
        Ok(())
    }

    fn say(&mut self, text: &str) -> Outcome {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().ok_or("helper stdin closed")?;
        writeln!(stdin, "{text}").map_err(|e| e.to_string())
    }

    /// Closes its stdin and waits; it must exit 0.
    fn finish(mut self) -> Outcome {
        drop(self.child.stdin.take());
        let status = self.child.wait().map_err(|e| e.to_string())?;
        ensure!(status.success(), "helper exited {status}");
        Ok(())
    }
}

fn wait_stdin_closed() {
    use std::io::Read;
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
}

fn wait_stdin_line() {
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

/// `--child port-zero N`: after a line on stdin, binds N connectors to CLIENT:0, printing each
/// port (or `FAIL code`); then `done`, holding them until stdin closes.
fn child_port_zero(count: usize) -> Outcome {
    let side = Side::open(CLIENT, true)?;
    println!("ready");
    wait_stdin_line();
    let mut held = Vec::new();
    for _ in 0..count {
        let connector = Connector::new(&side.adapter);
        match connector.bind(SocketAddr::new(CLIENT, 0)) {
            Ok(()) => {
                println!("{}", connector.local_address().map_or(0, |a| a.port()));
                held.push(connector);
            }
            Err(status) => println!("FAIL {status}"),
        }
    }
    println!("done");
    wait_stdin_closed();
    Ok(())
}

/// `--child listen PORT`: an nd-shim listener on CLIENT:PORT until stdin closes.
fn child_listen(port: u16) -> Outcome {
    let side = Side::open(CLIENT, true)?;
    let listener = Listener::new(&side.adapter);
    ok("listener bind", listener.bind(SocketAddr::new(CLIENT, port)))?;
    ok("listen", listener.listen(4))?;
    println!("ready");
    wait_stdin_closed();
    Ok(())
}

/// `--child shared LOCAL_PORT REMOTE_PORT`: a shared endpoint on CLIENT:LOCAL_PORT connected to
/// SERVER:REMOTE_PORT; prints `connected`, holds it until stdin closes.
fn child_shared(local: u16, remote: u16) -> Outcome {
    let side = Side::open(CLIENT, true)?;
    let endpoint = ok(
        "shared endpoint",
        SharedEndpoint::new(&side.adapter, SocketAddr::new(CLIENT, local)),
    )?;
    let connector = Connector::new(&side.adapter);
    let connect = ok(
        "connect",
        connector.connect_with_shared_endpoint(&side.qp, &endpoint, SocketAddr::new(SERVER, remote), 0, 0, &[]),
    )?;
    expect("ConnectWithSharedEndpoint", connect.wait(), NdStatus::ND_SUCCESS)?;
    ok("complete_connect", connector.complete_connect())?;
    println!("connected");
    wait_stdin_closed();
    Ok(())
}

fn run_child(args: &[String]) -> Outcome {
    let arg = |i: usize| -> Result<u16, String> {
        args.get(i)
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| format!("--child {args:?}: argument {i}"))
    };
    match args.first().map(String::as_str) {
        Some("port-zero") => child_port_zero(usize::from(arg(1)?)),
        Some("listen") => child_listen(arg(1)?),
        Some("shared") => child_shared(arg(1)?, arg(2)?),
        _ => Err(format!("no child mode {args:?}")),
    }
}

/// Two nd-shim processes bind port 0 concurrently, 50 each, in a range of exactly 100 ports
/// (ND_SHIM_PORT_RANGE=50100-50199, set by the suite): every bind succeeds (no
/// SHARING_VIOLATION, no INVALID_ADDRESS), the 100 ports are distinct and in the range, and
/// only then is the next bind ND_TOO_MANY_ADDRESSES.
fn mp_port_zero() -> Outcome {
    const ROUNDS: usize = 50;
    let side = Side::open(CLIENT, true)?;
    let mut other = Helper::shim(&["port-zero", "50"])?;
    other.expect_line("ready")?;
    other.say("go")?;
    let mut mine = Vec::new();
    let mut ports = Vec::new();
    for round in 0..ROUNDS {
        let connector = Connector::new(&side.adapter);
        ok(&format!("bind {round}"), connector.bind(SocketAddr::new(CLIENT, 0)))?;
        ports.push(connector.local_address().ok_or("no local address")?.port());
        mine.push(connector);
    }
    for round in 0..ROUNDS {
        let line = other.line()?;
        let port: u16 = line
            .parse()
            .map_err(|_| format!("the other process's bind {round}: {line}"))?;
        ports.push(port);
    }
    other.expect_line("done")?;
    let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
    ensure!(
        distinct.len() == 2 * ROUNDS,
        "{} distinct ports of {}",
        distinct.len(),
        ports.len()
    );
    ensure!(
        distinct.iter().all(|p| (50100..=50199).contains(p)),
        "ports outside 50100-50199: {distinct:?}"
    );
    println!("  100 binds in two processes, 100 distinct ports in 50100-50199");
    let one_more = Connector::new(&side.adapter);
    expect_err(
        "bind 101 (the range used up across both processes)",
        one_more.bind(SocketAddr::new(CLIENT, 0)),
        NdStatus::ND_TOO_MANY_ADDRESSES,
    )?;
    other.finish()
}

/// `addr`, a port held elsewhere: a new connector's Bind, a new listener's Bind and a shared
/// endpoint on it are ND_SHARING_VIOLATION (`what`: their names, in that order).
fn expect_held(side: &Side, addr: SocketAddr, what: [&str; 3]) -> Outcome {
    expect_err(
        what[0],
        Connector::new(&side.adapter).bind(addr),
        NdStatus::ND_SHARING_VIOLATION,
    )?;
    expect_err(
        what[1],
        Listener::new(&side.adapter).bind(addr),
        NdStatus::ND_SHARING_VIOLATION,
    )?;
    expect_err(
        what[2],
        SharedEndpoint::new(&side.adapter, addr),
        NdStatus::ND_SHARING_VIOLATION,
    )
}

/// Ports held by a plain librdmacm program: CLIENT:50200 and the wildcard 0.0.0.0:50201
/// (ND_SHIM_PORT_RANGE=50200-50202, set by the suite). Port 0 finds 50202 whatever port the
/// search starts at, then ND_TOO_MANY_ADDRESSES; each held port asked for explicitly is
/// ND_SHARING_VIOLATION (a wildcard holder too, not ND_INVALID_ADDRESS).
fn mp_plain_holders() -> Outcome {
    let mut exact = Helper::plain(&["hold", "198.18.0.2", "50200"])?;
    exact.expect_line("ready")?;
    let mut wildcard = Helper::plain(&["hold", "0.0.0.0", "50201"])?;
    wildcard.expect_line("ready")?;
    let side = Side::open(CLIENT, true)?;
    let first = Connector::new(&side.adapter);
    ok("bind port 0", first.bind(SocketAddr::new(CLIENT, 0)))?;
    let port = first.local_address().ok_or("no local address")?.port();
    ensure!(port == 50202, "port 0 bound {port}, want 50202");
    println!("  port 0 skipped the held 50200 and 50201: {port}");
    expect_err(
        "bind port 0 with 50200-50202 held",
        Connector::new(&side.adapter).bind(SocketAddr::new(CLIENT, 0)),
        NdStatus::ND_TOO_MANY_ADDRESSES,
    )?;
    for port in [50200, 50201] {
        let addr = SocketAddr::new(CLIENT, port);
        expect_held(
            &side,
            addr,
            [
                &format!("Bind {addr}"),
                &format!("listener Bind {addr}"),
                &format!("shared endpoint on {addr}"),
            ],
        )?;
    }
    exact.finish()?;
    wildcard.finish()
}

/// An explicit port held by another nd-shim process (its listener on CLIENT:7210):
/// ND_SHARING_VIOLATION for Bind, a listener and a shared endpoint; free again once it exits.
fn mp_explicit_port() -> Outcome {
    let mut other = Helper::shim(&["listen", "7210"])?;
    other.expect_line("ready")?;
    let side = Side::open(CLIENT, true)?;
    let addr = SocketAddr::new(CLIENT, 7210);
    expect_held(
        &side,
        addr,
        [
            "Bind to the other process's port",
            "listener on the other process's port",
            "shared endpoint on the other process's port",
        ],
    )?;
    other.finish()?;
    ok(
        "Bind after the other process exited",
        Connector::new(&side.adapter).bind(addr),
    )
}

/// A shared endpoint against connections made by another process from the same ip:port
/// (CLIENT:7214, the other process connected to SERVER:7212). Across processes the kernel
/// enforces the exclusive rule (a listener: ND_SHARING_VIOLATION) and lets shared users share
/// (a shared endpoint, and a connector's Bind, which shares as on Windows providers); the
/// 4-tuple rule is this process's only (docs/nd-semantics.md, "What holds across processes"):
/// the same 4-tuple from here connects.
fn mp_shared_endpoint() -> Outcome {
    const PORTS: [u16; 2] = [7212, 7213];
    const LOCAL: u16 = 7214;
    let (ready, server) = passive(|ready| {
        let side = Side::open(SERVER, false)?;
        let listeners = listening_on(&side, &PORTS)?;
        ready.send(()).ok();
        // The other process's connection, then ours to :7213 and ours to :7212 again.
        accept_in_turn(&side, &[&listeners[0], &listeners[1], &listeners[0]])
    });
    wait_ready(&ready)?;
    let mut other = Helper::shim(&["shared", "7214", "7212"])?;
    other.expect_line("connected")?;
    let side = Side::open(CLIENT, true)?;
    let local = SocketAddr::new(CLIENT, LOCAL);
    ok(
        "connector Bind to the other process's shared port",
        Connector::new(&side.adapter).bind(local),
    )?;
    expect_err(
        "listener on the other process's shared port",
        Listener::new(&side.adapter).bind(local),
        NdStatus::ND_SHARING_VIOLATION,
    )?;
    let endpoint = ok(
        "shared endpoint on the same port",
        SharedEndpoint::new(&side.adapter, local),
    )?;
    let mut held = Vec::new();
    for (port, what) in [
        (PORTS[1], "another destination"),
        (PORTS[0], "the other process's 4-tuple (not seen across processes)"),
    ] {
        let qp = side.another_qp()?;
        let connector = Connector::new(&side.adapter);
        let connect = ok(
            "connect",
            connector.connect_with_shared_endpoint(&qp, &endpoint, SocketAddr::new(SERVER, port), 0, 0, &[]),
        )?;
        expect(
            &format!("ConnectWithSharedEndpoint to {what}"),
            connect.wait(),
            NdStatus::ND_SUCCESS,
        )?;
        ok("complete_connect", connector.complete_connect())?;
        held.push((connector, qp));
    }
    join(server)?;
    other.finish()
}

/// ND_CONNECTION_ACTIVE: Connect (active) and Accept (passive) with a queue pair that another
/// connector's connection uses fail inline, and that connection still carries data both ways.
fn qp_connection_active() -> Outcome {
    const PORT: u16 = 7018;
    let (ready, server) = passive_request(PORT, |side, first| {
        side.post_receive(1, 0)?;
        expect("Accept", accept(first, &side.qp)?.wait(), NdStatus::ND_SUCCESS)?;
        side.received(1, 0, b"still up")
    });
    let side = active(&ready)?;
    side.post_receive(1, 0)?;
    let first = connected(&side, PORT)?;
    let second = Connector::new(&side.adapter);
    expect_err(
        "Connect with the connected QP on another connector",
        second.connect(&side.qp, SocketAddr::new(SERVER, PORT), 0, 0, &[]),
        NdStatus::ND_CONNECTION_ACTIVE,
    )?;
    side.send(10, 1024, b"still up")?;
    let outcome = join(server);
    drop(first);
    outcome
}

/// The passive half of ND_CONNECTION_ACTIVE: Accept on a second request with the QP of the first
/// connection fails inline; the first connection then still carries a send from the peer.
fn qp_accept_active() -> Outcome {
    const PORT: u16 = 7019;
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (ready, server) = passive(move |ready| {
        let (side, listener) = listening_side(PORT)?;
        ready.send(()).ok();
        side.post_receive(1, 0)?;
        let first = request(&side, &listener)?;
        expect("Accept", accept(&first, &side.qp)?.wait(), NdStatus::ND_SUCCESS)?;
        let second = request(&side, &listener)?;
        expect_err(
            "Accept with the first connection's QP",
            second.accept(&side.qp, 0, 0, &[]),
            NdStatus::ND_CONNECTION_ACTIVE,
        )?;
        let qp = side.another_qp()?;
        expect(
            "Accept with a QP of its own",
            accept(&second, &qp)?.wait(),
            NdStatus::ND_SUCCESS,
        )?;
        go_tx.send(()).ok();
        side.received(1, 0, b"first")
    });
    let side = active(&ready)?;
    let first = connected(&side, PORT)?;
    let qp = side.another_qp()?;
    let second = Connector::new(&side.adapter);
    connect_ends("Connect (second)", &second, &qp, PORT, NdStatus::ND_SUCCESS)?;
    ok("complete_connect (second)", second.complete_connect())?;
    go_rx
        .recv_timeout(Duration::from_secs(20))
        .map_err(|_| "the passive side never accepted the second")?;
    side.send(10, 1024, b"first")?;
    let outcome = join(server);
    drop((first, second));
    outcome
}

/// Read limits against a plain librdmacm peer that offers the device's maxima whatever it is
/// asked (tests/nd-conformance/plain_peer.c). Active side: Connect asking 4 in / 2 out gets
/// exactly that in GetReadLimits and in the QP; asking 1000 / 1000 gets the adapter's maxima.
/// Passive side: the peer's REQ offers the maxima; Accept asking 2 in / 4 out gets exactly that.
fn read_limits_plain_peer() -> Outcome {
    let side = Side::open(CLIENT, true)?;
    let info = side.adapter.query();
    let adapter = (info.max_inbound_read_limit, info.max_outbound_read_limit);
    println!("  adapter read limits {adapter:?}");
    for (port, asked, want) in [(7020u16, (4, 2), (4, 2)), (7021, (1000, 1000), adapter)] {
        let mut peer = Helper::plain(&["accept", "198.18.0.1", &port.to_string()])?;
        peer.expect_line("ready")?;
        let qp = side.another_qp()?;
        let connector = Connector::new(&side.adapter);
        let connect = ok(
            "connect",
            connector.connect(&qp, SocketAddr::new(SERVER, port), asked.0, asked.1, &[]),
        )?;
        expect("Connect to the plain peer", connect.wait(), NdStatus::ND_SUCCESS)?;
        let limits = ok("get_read_limits", connector.get_read_limits())?;
        ensure!(
            (limits.inbound, limits.outbound) == want,
            "active GetReadLimits {limits:?} asking {asked:?}, want {want:?}"
        );
        ok("complete_connect", connector.complete_connect())?;
        peer.expect_line("established")?;
        let programmed = ok("query qp", qp.read_limits())?;
        ensure!(
            (programmed.inbound, programmed.outbound) == want,
            "active QP programmed {programmed:?} asking {asked:?}, want {want:?}"
        );
        println!("  active asking {asked:?}: GetReadLimits and QP {want:?}");
        let disconnect = ok("disconnect", connector.disconnect())?;
        expect("Disconnect", disconnect.wait(), NdStatus::ND_SUCCESS)?;
        peer.finish()?;
    }

    const PORT: u16 = 7022;
    let server = Side::open(SERVER, false)?;
    let listener = listening(&server, PORT)?;
    let mut peer = Helper::plain(&["connect", "198.18.0.1", &PORT.to_string()])?;
    let connector = request(&server, &listener)?;
    let offered = ok("get_read_limits", connector.get_read_limits())?;
    ensure!(
        (offered.inbound, offered.outbound) == adapter,
        "passive GetReadLimits before Accept {offered:?}, want the peer's offer capped to the adapter {adapter:?}"
    );
    let accept = ok("accept", connector.accept(&server.qp, 2, 4, &[]))?;
    peer.expect_line("established")?;
    expect("Accept from the plain peer", accept.wait(), NdStatus::ND_SUCCESS)?;
    let limits = ok("get_read_limits", connector.get_read_limits())?;
    ensure!(
        (limits.inbound, limits.outbound) == (2, 4),
        "passive GetReadLimits after Accept {limits:?}, want (2, 4)"
    );
    let programmed = ok("query qp", server.qp.read_limits())?;
    ensure!(
        (programmed.inbound, programmed.outbound) == (2, 4),
        "passive QP programmed {programmed:?}, want (2, 4)"
    );
    println!("  passive asking (2, 4) of a peer offering {adapter:?}: GetReadLimits and QP (2, 4)");
    let disconnect = ok("disconnect", connector.disconnect())?;
    expect("Disconnect", disconnect.wait(), NdStatus::ND_SUCCESS)?;
    peer.finish()
}

/// "The connection attempt may be retried" after ND_CONNECTION_REFUSED: the same connector
/// connects once a listener is there, from the same local address.
fn retry_after_refused() -> Outcome {
    const PORT: u16 = 7023;
    let side = Side::open(CLIENT, true)?;
    let connector = Connector::new(&side.adapter);
    connect_ends(
        "Connect with no listener",
        &connector,
        &side.qp,
        PORT,
        NdStatus::ND_CONNECTION_REFUSED,
    )?;
    let first_local = connector.local_address().ok_or("no local address after the attempt")?;
    let (ready, server) = passive_request(PORT, |side, c| {
        expect("Accept", accept(c, &side.qp)?.wait(), NdStatus::ND_SUCCESS)
    });
    wait_ready(&ready)?;
    connect_ends(
        "Connect again on the same connector",
        &connector,
        &side.qp,
        PORT,
        NdStatus::ND_SUCCESS,
    )?;
    ok("complete_connect", connector.complete_connect())?;
    let local = connector.local_address().ok_or("no local address")?;
    ensure!(
        local == first_local,
        "the retry bound {local}, the first attempt {first_local}"
    );
    println!("  retried from {local}");
    join(server)
}

/// "Errors do not allow the connector to be used to retry": after a failed Bind, Bind and
/// Connect on the same connector are ND_CONNECTION_INVALID, inline.
fn no_reuse_after_failure() -> Outcome {
    let side = Side::open(CLIENT, true)?;
    let connector = Connector::new(&side.adapter);
    let test_net = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    expect_err(
        "Bind to 192.0.2.1",
        connector.bind(SocketAddr::new(test_net, 0)),
        NdStatus::ND_INVALID_ADDRESS,
    )?;
    expect_err(
        "Bind again after the failure",
        connector.bind(SocketAddr::new(CLIENT, 0)),
        NdStatus::ND_CONNECTION_INVALID,
    )?;
    expect_err(
        "Connect after the failed Bind",
        connector.connect(&side.qp, SocketAddr::new(SERVER, 7024), 0, 0, &[]),
        NdStatus::ND_CONNECTION_INVALID,
    )
}

/// NotifyDisconnect and Disconnect on a connector that was never connected:
/// ND_CONNECTION_INVALID inline; a pending NotifyDisconnect cancelled: ND_CANCELED through the
/// completion; a second NotifyDisconnect completes exactly once when the peer disconnects.
fn notify_disconnect_codes() -> Outcome {
    const PORT: u16 = 7025;
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let (ready, server) = passive_request(PORT, move |side, c| {
        expect("Accept", accept(c, &side.qp)?.wait(), NdStatus::ND_SUCCESS)?;
        done_rx
            .recv_timeout(Duration::from_secs(30))
            .map_err(|_| "the active side never asked for the Disconnect")?;
        expect(
            "Disconnect",
            ok("disconnect", c.disconnect())?.wait(),
            NdStatus::ND_SUCCESS,
        )
    });
    let side = active(&ready)?;
    let fresh = Connector::new(&side.adapter);
    expect_invalid_when_new("NotifyDisconnect", fresh.notify_disconnect())?;
    expect_invalid_when_new("Disconnect", fresh.disconnect())?;
    let connector = connected(&side, PORT)?;
    let first = ok("notify_disconnect", connector.notify_disconnect())?;
    ensure!(
        first.poll().is_none(),
        "NotifyDisconnect completed {:?} at once",
        first.poll()
    );
    connector.cancel();
    expect("NotifyDisconnect after cancel", first.wait(), NdStatus::ND_CANCELED)?;
    let second = ok("notify_disconnect", connector.notify_disconnect())?;
    let completions = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&completions);
    second.on_complete(move |_| {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    });
    done_tx.send(()).ok();
    expect(
        "NotifyDisconnect when the peer disconnects",
        second.wait(),
        NdStatus::ND_SUCCESS,
    )?;
    // It already happened: a new NotifyDisconnect is complete when it returns (ND_SUCCESS).
    let again = ok("notify_disconnect", connector.notify_disconnect())?;
    ensure!(
        again.poll() == Some(NdStatus::ND_SUCCESS),
        "NotifyDisconnect after the peer's disconnect: {:?}, want ND_SUCCESS at once",
        again.poll()
    );
    // Our Disconnect sends the DREP that the peer's pending Disconnect waits for; it is
    // complete when it returns too.
    let disconnect = ok("disconnect", connector.disconnect())?;
    ensure!(
        disconnect.poll() == Some(NdStatus::ND_SUCCESS),
        "Disconnect after the peer's: {:?}, want ND_SUCCESS at once",
        disconnect.poll()
    );
    join(server)?;
    // Quiet period: nothing may complete it a second time.
    thread::sleep(Duration::from_secs(1));
    side.adapter.process_events();
    let n = completions.load(std::sync::atomic::Ordering::SeqCst);
    ensure!(n == 1, "NotifyDisconnect completed {n} times");
    println!("  NotifyDisconnect completed once");
    Ok(())
}

const CASES: &[(&str, Case)] = &[
    ("connect-accept-data", connect_accept_data),
    ("no-listener-refused", no_listener_refused),
    ("private-data-limit", private_data_limit),
    ("connect-state-errors", connect_state_errors),
    ("second-bind", second_bind),
    ("port-in-use", port_in_use),
    ("invalid-address", invalid_address),
    ("ports-exhausted", ports_exhausted),
    ("host-unreachable", host_unreachable),
    ("network-unreachable", network_unreachable),
    ("listener-reject", listener_reject),
    ("active-reject", active_reject),
    ("disconnect", disconnect),
    ("cancel-connect", cancel_connect),
    ("shared-endpoint", shared_endpoint),
    ("adapter-query", adapter_query),
    ("getters-short-buffers", getters_short_buffers),
    ("release-disconnects", release_disconnects),
    ("active-abandons", active_abandons),
    ("io-timeout", io_timeout),
    ("unanswered-survival", unanswered_survival),
    ("qp-connection-active", qp_connection_active),
    ("qp-accept-active", qp_accept_active),
    ("read-limits-plain-peer", read_limits_plain_peer),
    ("retry-after-refused", retry_after_refused),
    ("no-reuse-after-failure", no_reuse_after_failure),
    ("notify-disconnect-codes", notify_disconnect_codes),
    ("mp-port-zero", mp_port_zero),
    ("mp-plain-holders", mp_plain_holders),
    ("mp-explicit-port", mp_explicit_port),
    ("mp-shared-endpoint", mp_shared_endpoint),
];

fn main() {
    // Shim logs to stderr at the level in ND_SHIM_LOG (error, warn, info, debug, trace); quiet
    // without it.
    nd_shim::stderr_log::init_from_env();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        if let Err(why) = run_child(&args[1..]) {
            eprintln!("child {:?}: {why}", &args[1..]);
            std::process::exit(1);
        }
        return;
    }
    case_main::run("nd-conformance", CASES, &args);
}
