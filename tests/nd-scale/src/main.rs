//! nd-shim at scale, for the VM rig (rxe0 on 198.18.0.1 passive, rxe1 on 198.18.0.2 active,
//! both in this process). `nd-scale CASE` runs one case, prints counts per outcome and
//! `PASS CASE` or `FAIL CASE: why`, and exits 0 only on PASS; `nd-scale --list` names the cases.
//! The rig suite is `tests/suites/nd-scale.sh`.
//!
//! - `shared-endpoint-1000`: 1,000 connections (ND_SCALE_CONNECTIONS) from one shared endpoint
//!   to 1,000 distinct destinations (one listener per port on 198.18.0.1), in windows of 100
//!   concurrent connects. Every destination has a pending GetConnectionRequest, so every
//!   connection must succeed.
//! - `storm-200`: 200 concurrent connects (ND_SCALE_STORM) to one listener with backlog 8
//!   (ND_SCALE_BACKLOG). While no GetConnectionRequest is pending the listener queues 8 and
//!   must refuse the other 192 (ND_CONNECTION_REFUSED, counted after a quiet second); then
//!   the passive side accepts one request at a time, and exactly the 8 queued connects
//!   succeed, each with one Accept.
//!
//! Both cases then release everything and check that the process's file descriptors and the
//! system's rdma_cm ids and QPs (`rdma resource show`) are back at their starting counts.
//! Every wait is bounded and fails the case when it runs out; nothing here times speed.

#[path = "../../nd-conformance/src/case_main.rs"]
mod case_main;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::Command;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use nd_shim::{Adapter, CompletionQueue, Connector, Listener, NdStatus, Pending, QueuePair, SharedEndpoint};

const SERVER: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
/// Listener ports of `shared-endpoint-1000`: BASE_PORT, BASE_PORT + 1, ...
const BASE_PORT: u16 = 20000;
const STORM_PORT: u16 = 7100;
/// How long any one phase may take before the case fails as hung.
const PHASE_LIMIT: Duration = Duration::from_secs(240);

use case_main::{Case, Outcome};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn ok<T>(what: &str, r: Result<T, NdStatus>) -> Result<T, String> {
    r.map_err(|s| format!("{what}: {s}"))
}

/// What the process and the system hold: open fds, and rdma_cm ids and QPs on every device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Resources {
    fds: usize,
    cm_ids: usize,
    qps: usize,
}

fn resources() -> Result<Resources, String> {
    let fds = std::fs::read_dir("/proc/self/fd")
        .map_err(|e| format!("/proc/self/fd: {e}"))?
        .count();
    // `rdma resource show`: one line per device, "0: rxe0: pd 1 cq 2 qp 3 cm_id 4 mr 0 ...".
    let out = Command::new("rdma")
        .args(["resource", "show"])
        .output()
        .map_err(|e| format!("rdma resource show: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let sum = |key: &str| -> usize {
        text.lines()
            .flat_map(|line| {
                let words: Vec<&str> = line.split_whitespace().collect();
                words
                    .windows(2)
                    .filter(|w| w[0] == key)
                    .filter_map(|w| w[1].parse::<usize>().ok())
                    .collect::<Vec<_>>()
            })
            .sum()
    };
    Ok(Resources {
        fds,
        cm_ids: sum("cm_id"),
        qps: sum("qp"),
    })
}

/// The counts before a case, once librdmacm has opened its device contexts: it keeps them (and
/// their fds) for the life of the process from the first adapter on, whatever the shim closes.
fn baseline() -> Result<Resources, String> {
    for ip in [SERVER, CLIENT] {
        drop(ok("open adapter", Adapter::open_polled(ip))?);
    }
    resources()
}

/// Waits (bounded) until the counts are back at `start`; prints both.
fn expect_resources_back(start: Resources) -> Outcome {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = resources()?;
        if now == start {
            println!("  after teardown: {now:?} (as at the start)");
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!("after teardown {now:?}, at the start {start:?}"));
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// Counts of outcomes by code name, printed as one line.
#[derive(Default)]
struct Tally(BTreeMap<String, usize>);

impl Tally {
    fn add(&mut self, status: NdStatus) {
        *self.0.entry(status.to_string()).or_default() += 1;
    }

    fn count(&self, status: NdStatus) -> usize {
        self.0.get(&status.to_string()).copied().unwrap_or(0)
    }

    fn total(&self) -> usize {
        self.0.values().sum()
    }

    fn print(&self, what: &str) {
        let parts: Vec<String> = self.0.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!("  {what}: {}", parts.join(", "));
    }
}

struct Side {
    adapter: Adapter,
    cq: Arc<CompletionQueue>,
}

impl Side {
    fn open(ip: IpAddr) -> Result<Side, String> {
        let adapter = ok("open adapter", Adapter::open(ip))?;
        let cq = Arc::new(ok("create cq", CompletionQueue::new(&adapter, 64))?);
        Ok(Side { adapter, cq })
    }

    fn qp(&self) -> Result<QueuePair, String> {
        ok("create qp", QueuePair::new(&self.adapter, &self.cq, &self.cq, 1, 1, 1))
    }
}

/// The passive side of one connection: a pending Get, then a pending Accept.
struct Incoming {
    connector: Connector,
    qp: QueuePair,
    get: Option<Pending>,
    accept: Option<Pending>,
    done: Option<NdStatus>,
}

impl Incoming {
    fn new(side: &Side, listener: &Listener) -> Result<Incoming, String> {
        let connector = Connector::new(&side.adapter);
        let get = ok("get_connection_request", listener.get_connection_request(&connector))?;
        Ok(Incoming {
            connector,
            qp: side.qp()?,
            get: Some(get),
            accept: None,
            done: None,
        })
    }

    /// Moves on if the pending request completed; true when this connection is finished.
    fn advance(&mut self) -> bool {
        if self.done.is_some() {
            return true;
        }
        if let Some(status) = self.get.as_ref().and_then(Pending::poll) {
            self.get = None;
            if status != NdStatus::ND_SUCCESS {
                self.done = Some(status);
                return true;
            }
            match self.connector.accept(&self.qp, 0, 0, &[]) {
                Ok(pending) => self.accept = Some(pending),
                Err(status) => self.done = Some(status),
            }
        }
        if let Some(status) = self.accept.as_ref().and_then(Pending::poll) {
            self.accept = None;
            self.done = Some(status);
        }
        self.done.is_some()
    }
}

/// The active side of one connection.
struct Outgoing {
    connector: Connector,
    _qp: QueuePair,
    connect: Pending,
}

/// Waits (bounded) for every Connect, completing the successful ones, into `tally`; `tick`
/// moves the passive side on meanwhile.
fn finish_connects(batch: &[Outgoing], tally: &mut Tally, tick: &mut dyn FnMut()) -> Outcome {
    let deadline = Instant::now() + PHASE_LIMIT;
    let mut open: Vec<&Outgoing> = batch.iter().collect();
    while !open.is_empty() {
        if Instant::now() >= deadline {
            return Err(format!("{} connects still pending after {PHASE_LIMIT:?}", open.len()));
        }
        let mut still = Vec::new();
        for out in open {
            match out.connect.poll() {
                None => still.push(out),
                Some(NdStatus::ND_SUCCESS) => match out.connector.complete_connect() {
                    Ok(()) => tally.add(NdStatus::ND_SUCCESS),
                    Err(status) => return Err(format!("CompleteConnect: {status}")),
                },
                Some(status) => tally.add(status),
            }
        }
        open = still;
        tick();
        thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Waits (bounded) until every passive connection has finished.
fn finish_incoming(incoming: &mut [Incoming], tally: &mut Tally) -> Outcome {
    let deadline = Instant::now() + PHASE_LIMIT;
    loop {
        let open = incoming.iter_mut().map(Incoming::advance).filter(|done| !done).count();
        if open == 0 {
            break;
        }
        if Instant::now() >= deadline {
            return Err(format!("{open} passive connections unfinished after {PHASE_LIMIT:?}"));
        }
        thread::sleep(Duration::from_millis(1));
    }
    for i in incoming.iter() {
        if let Some(status) = i.done {
            tally.add(status);
        }
    }
    Ok(())
}

fn shared_endpoint_1000() -> Outcome {
    let n = env_or("ND_SCALE_CONNECTIONS", 1000);
    let window = 100;
    let start = baseline()?;
    println!("  at the start: {start:?}");
    {
        let server = Side::open(SERVER)?;
        let client = Side::open(CLIENT)?;
        let started = Instant::now();
        let mut listeners = Vec::with_capacity(n);
        let mut incoming = Vec::with_capacity(n);
        for i in 0..n {
            let port = BASE_PORT + u16::try_from(i).map_err(|_| "too many connections")?;
            let listener = Listener::new(&server.adapter);
            ok("listener bind", listener.bind(SocketAddr::new(SERVER, port)))?;
            ok("listen", listener.listen(1))?;
            incoming.push(Incoming::new(&server, &listener)?);
            listeners.push(listener);
        }
        println!(
            "  {n} listeners with a pending Get each ({} ms)",
            started.elapsed().as_millis()
        );
        let endpoint = ok(
            "shared endpoint",
            SharedEndpoint::new(&client.adapter, SocketAddr::new(CLIENT, 0)),
        )?;
        println!("  shared endpoint {}", endpoint.local_address());
        let started = Instant::now();
        let mut outgoing = Vec::with_capacity(n);
        let mut connects = Tally::default();
        for first in (0..n).step_by(window) {
            let mut batch = Vec::new();
            for i in first..(first + window).min(n) {
                let qp = client.qp()?;
                let connector = Connector::new(&client.adapter);
                let remote = SocketAddr::new(SERVER, BASE_PORT + i as u16);
                let connect = connector
                    .connect_with_shared_endpoint(&qp, &endpoint, remote, 0, 0, &[])
                    .map_err(|s| format!("ConnectWithSharedEndpoint to {remote}: {s} (inline)"))?;
                batch.push(Outgoing {
                    connector,
                    _qp: qp,
                    connect,
                });
            }
            finish_connects(&batch, &mut connects, &mut || {
                incoming.iter_mut().for_each(|i| {
                    i.advance();
                })
            })?;
            outgoing.extend(batch);
        }
        connects.print("ConnectWithSharedEndpoint");
        let mut accepts = Tally::default();
        finish_incoming(&mut incoming, &mut accepts)?;
        accepts.print("GetConnectionRequest + Accept");
        println!("  {n} connections in {} ms", started.elapsed().as_millis());
        let during = resources()?;
        println!("  connected: {during:?}");
        for out in &outgoing {
            let local = out.connector.local_address();
            if local != Some(endpoint.local_address()) {
                return Err(format!("a connection is bound to {local:?}, not the endpoint"));
            }
        }
        if connects.count(NdStatus::ND_SUCCESS) != n || accepts.count(NdStatus::ND_SUCCESS) != n {
            return Err(format!(
                "{} of {n} connects and {} of {n} accepts succeeded; every destination listens",
                connects.count(NdStatus::ND_SUCCESS),
                accepts.count(NdStatus::ND_SUCCESS)
            ));
        }
        // Teardown: active connectors, their QPs, the endpoint, then the passive side.
        drop(outgoing);
        drop(endpoint);
        drop(incoming);
        drop(listeners);
    }
    expect_resources_back(start)
}

fn storm_200() -> Outcome {
    let n = env_or("ND_SCALE_STORM", 200);
    let backlog = env_or("ND_SCALE_BACKLOG", 8) as u32;
    let start = baseline()?;
    println!("  at the start: {start:?}");
    {
        let server = Side::open(SERVER)?;
        let client = Side::open(CLIENT)?;
        let listener = Listener::new(&server.adapter);
        ok("listener bind", listener.bind(SocketAddr::new(SERVER, STORM_PORT)))?;
        ok("listen", listener.listen(backlog))?;
        let started = Instant::now();
        let mut outgoing = Vec::with_capacity(n);
        for _ in 0..n {
            let qp = client.qp()?;
            let connector = Connector::new(&client.adapter);
            let connect = ok(
                "connect (inline)",
                connector.connect(&qp, SocketAddr::new(SERVER, STORM_PORT), 0, 0, &[]),
            )?;
            outgoing.push(Outgoing {
                connector,
                _qp: qp,
                connect,
            });
        }
        println!("  {n} connects issued ({} ms)", started.elapsed().as_millis());
        // No GetConnectionRequest is pending yet: the listener queues `backlog` requests and
        // must refuse every other one, so exactly n - backlog connects end refused and the
        // rest wait.
        let refusals = n.saturating_sub(backlog as usize);
        let mut connects = Tally::default();
        let mut open: Vec<&Outgoing> = outgoing.iter().collect();
        let deadline = Instant::now() + PHASE_LIMIT;
        let mut settled_at: Option<Instant> = None;
        loop {
            let mut still = Vec::new();
            for out in open {
                match out.connect.poll() {
                    None => still.push(out),
                    Some(status) => connects.add(status),
                }
            }
            open = still;
            if connects.total() > refusals || connects.count(NdStatus::ND_CONNECTION_REFUSED) != connects.total() {
                connects.print("Connect before any Get");
                return Err(format!(
                    "with backlog {backlog} and no Get pending, want exactly {refusals} connects refused and \
                     the others waiting"
                ));
            }
            match settled_at {
                // A quiet second after the last refusal: nothing more may end.
                Some(at) if at.elapsed() >= Duration::from_secs(1) => break,
                Some(_) => {}
                None if connects.total() == refusals => settled_at = Some(Instant::now()),
                None if Instant::now() >= deadline => {
                    return Err(format!(
                        "{} of the {refusals} refusals the backlog must produce after {PHASE_LIMIT:?}",
                        connects.total()
                    ))
                }
                None => {}
            }
            thread::sleep(Duration::from_millis(5));
        }
        connects.print("Connect before any Get");
        println!(
            "  backlog {backlog}: {refusals} refused, {} waiting ({} ms)",
            open.len(),
            started.elapsed().as_millis()
        );
        // The passive side takes one request at a time: one pending Get at any moment.
        let deadline = Instant::now() + PHASE_LIMIT;
        let mut incoming: Vec<Incoming> = Vec::new();
        let mut current = Incoming::new(&server, &listener)?;
        while !open.is_empty() {
            if Instant::now() >= deadline {
                return Err(format!("{} connects still pending after {PHASE_LIMIT:?}", open.len()));
            }
            if current.get.is_none() {
                let next = Incoming::new(&server, &listener)?;
                incoming.push(std::mem::replace(&mut current, next));
            }
            incoming.iter_mut().for_each(|i| {
                i.advance();
            });
            current.advance();
            let mut still = Vec::new();
            for out in open {
                match out.connect.poll() {
                    None => still.push(out),
                    Some(NdStatus::ND_SUCCESS) => {
                        ok("CompleteConnect", out.connector.complete_connect())?;
                        connects.add(NdStatus::ND_SUCCESS);
                    }
                    Some(status) => connects.add(status),
                }
            }
            open = still;
            thread::sleep(Duration::from_millis(1));
        }
        connects.print("Connect");
        listener.cancel();
        let mut accepts = Tally::default();
        incoming.push(current);
        finish_incoming(&mut incoming, &mut accepts)?;
        accepts.print("GetConnectionRequest + Accept");
        println!("  storm settled in {} ms", started.elapsed().as_millis());
        let succeeded = connects.count(NdStatus::ND_SUCCESS);
        let refused = connects.count(NdStatus::ND_CONNECTION_REFUSED);
        if succeeded + refused != connects.total() {
            return Err("a connect ended with neither ND_SUCCESS nor ND_CONNECTION_REFUSED".into());
        }
        // The Get still pending at the end (if any) was cancelled by the listener's cancel.
        let accepted = accepts.count(NdStatus::ND_SUCCESS);
        let cancelled = accepts.count(NdStatus::ND_CANCELED);
        if accepted != succeeded || cancelled > 1 || accepts.total() != accepted + cancelled {
            return Err(format!(
                "{succeeded} connects succeeded but the passive side counted {accepted} accepts"
            ));
        }
        if refused != refusals || succeeded != n - refusals {
            return Err(format!(
                "{succeeded} connects succeeded and {refused} were refused, want {} and {refusals}",
                n - refusals
            ));
        }
        let during = resources()?;
        println!("  connected: {during:?}");
        drop(outgoing);
        drop(incoming);
        drop(listener);
    }
    expect_resources_back(start)
}

const CASES: &[(&str, Case)] = &[("shared-endpoint-1000", shared_endpoint_1000), ("storm-200", storm_200)];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    case_main::run("nd-scale", CASES, &args);
}
