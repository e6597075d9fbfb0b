//! Connection setup and teardown through nd-shim against rdma_cm used directly, in one rig boot.
//! A benchmark: it prints figures and fails only when a connection fails, never on a time.
//!
//! `nd-bench [CONNECTIONS] [ROUNDS]` (100, 3; `tests/bench.sh nd` runs it). Each round runs rdmacm-utils' `cmtime` client
//! (rdma_cm directly) and then the shim's active side, each against a fresh `cmtime` server on
//! rxe0 (198.18.0.1), from rxe1 (198.18.0.2). The shim runs cmtime's phases: every connection
//! goes through a phase before the next phase starts.
//!
//! | phase | cmtime steps | shim calls |
//! |---|---|---|
//! | create | create id, bind, create qp | `Connector::new`, `QueuePair::new` |
//! | connect | resolve addr, resolve route, connect | `connect` (addr, route, REQ/REP), `complete_connect` (RTU) |
//! | disconnect | disconnect (with destroy qp) | `disconnect`, until DISCONNECTED |
//! | destroy | destroy id | release of connector and QP |
//!
//! Per phase it prints milliseconds for all connections (median of the rounds, and the lowest
//! and highest round) and the ratio shim / rdma_cm, then setup (create + connect), teardown and
//! the total, with the median, lowest and highest of the per-round ratios. The order alternates
//! (odd rounds cmtime first, even rounds the shim first), so neither side always runs second.
//!
//! `nd-bench shim [CONNECTIONS]` runs the shim's side of one round alone, for valgrind and
//! strace, against a `cmtime -b 198.18.0.1 -c CONNECTIONS -p 7471` server started beforehand.
//! Before each phase it calls `nd_bench_phase`, a function that does nothing: callgrind's
//! `--dump-before=nd_bench_phase` then writes one profile per phase (cmtime prints a line with
//! `puts` before each of its steps, so `--dump-before=puts` does the same for it).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use nd_shim::{Adapter, CompletionQueue, Connector, NdStatus, QueuePair};

const SERVER: &str = "198.18.0.1";
const CLIENT: &str = "198.18.0.2";
const PORT: u16 = 7471;
const PHASES: [&str; 4] = ["create", "connect", "disconnect", "destroy"];

type Figures = BTreeMap<&'static str, f64>;

/// A cmtime server for `n` connections; it exits after their disconnects.
struct CmtimeServer(Child);

impl CmtimeServer {
    fn start(n: usize) -> Result<CmtimeServer, String> {
        let child = Command::new("cmtime")
            .args(["-b", SERVER, "-c", &n.to_string(), "-p", &PORT.to_string()])
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("cmtime server: {e}"))?;
        // Until its id listens (rdma resource show lists it).
        let deadline = Instant::now() + Duration::from_secs(30);
        let want = format!("{SERVER}:{PORT}");
        while Instant::now() < deadline {
            let out = Command::new("rdma")
                .args(["resource", "show", "cm_id"])
                .output()
                .map_err(|e| format!("rdma: {e}"))?;
            if String::from_utf8_lossy(&out.stdout)
                .lines()
                .any(|l| l.contains("LISTEN") && l.contains(&want))
            {
                return Ok(CmtimeServer(child));
            }
            thread::sleep(Duration::from_millis(50));
        }
        Err("the cmtime server never listened".into())
    }

    /// Stops the server: it exits by itself once it counted every disconnect, which it does not
    /// always do (it is killed then; the figures are the client's).
    fn finish(self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut server = self;
        while Instant::now() < deadline {
            if server.0.try_wait().map_err(|e| e.to_string())?.is_some() {
                return Ok(());
            }
            thread::sleep(Duration::from_millis(20));
        }
        drop(server);
        Ok(())
    }
}

impl Drop for CmtimeServer {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// rdma_cm directly: cmtime's client, its "total ms" column grouped into our phases.
fn rdma_cm_round(n: usize) -> Result<Figures, String> {
    let server = CmtimeServer::start(n)?;
    let out = Command::new("cmtime")
        .args([
            "-s",
            SERVER,
            "-b",
            CLIENT,
            "-c",
            &n.to_string(),
            "-p",
            &PORT.to_string(),
        ])
        .output()
        .map_err(|e| format!("cmtime client: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || text.contains("error") {
        return Err(format!("cmtime client failed:\n{text}"));
    }
    server.finish()?;
    let mut figures = Figures::new();
    for line in text.lines() {
        let Some((step, numbers)) = line.split_once(':') else {
            continue;
        };
        let Some(total) = numbers.split_whitespace().next().and_then(|v| v.parse::<f64>().ok()) else {
            continue;
        };
        let phase = match step.trim() {
            "create id" | "bind addr" | "create qp" => "create",
            "resolve addr" | "resolve route" | "connect" => "connect",
            "disconnect" => "disconnect",
            "destroy" => "destroy",
            _ => continue,
        };
        *figures.entry(phase).or_default() += total;
    }
    if figures.len() != PHASES.len() {
        return Err(format!("unexpected cmtime output:\n{text}"));
    }
    Ok(figures)
}

/// Marks the start of phase `phase` (an index into PHASES; PHASES.len() marks the end).
#[no_mangle]
#[inline(never)]
pub extern "C" fn nd_bench_phase(phase: usize) -> usize {
    std::hint::black_box(phase)
}

fn wait_all(what: &str, pendings: &[nd_shim::Pending]) -> Result<(), String> {
    for p in pendings {
        let status = p
            .wait_for(Duration::from_secs(120))
            .ok_or_else(|| format!("{what} still pending after 120 s"))?;
        if status != NdStatus::ND_SUCCESS {
            return Err(format!("{what}: {status}"));
        }
    }
    Ok(())
}

/// The shim's active side, phase by phase as cmtime does it.
fn shim_round(n: usize) -> Result<Figures, String> {
    let server = CmtimeServer::start(n)?;
    let figures = shim_client(n)?;
    server.finish()?;
    Ok(figures)
}

/// The shim's side of a round, against a cmtime server for `n` connections that listens already.
fn shim_client(n: usize) -> Result<Figures, String> {
    let ip: IpAddr = CLIENT.parse::<Ipv4Addr>().map_err(|e| e.to_string())?.into();
    let remote = SocketAddr::new(SERVER.parse::<Ipv4Addr>().map_err(|e| e.to_string())?.into(), PORT);
    let adapter = Adapter::open(ip).map_err(|s| format!("open adapter: {s}"))?;
    let cq = Arc::new(CompletionQueue::new(&adapter, 16).map_err(|s| format!("cq: {s}"))?);
    let mut figures = Figures::new();
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1000.0;

    nd_bench_phase(0);
    let t = Instant::now();
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        let connector = Connector::new(&adapter);
        let qp = QueuePair::new(&adapter, &cq, &cq, 1, 1, 1).map_err(|s| format!("qp: {s}"))?;
        conns.push((connector, qp));
    }
    figures.insert("create", ms(t));

    nd_bench_phase(1);
    let t = Instant::now();
    let pendings = conns
        .iter()
        .map(|(c, qp)| c.connect(qp, remote, 1, 1, &[]))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|s| format!("connect: {s}"))?;
    for ((c, _), p) in conns.iter().zip(&pendings) {
        wait_all("Connect", std::slice::from_ref(p))?;
        c.complete_connect().map_err(|s| format!("complete_connect: {s}"))?;
    }
    figures.insert("connect", ms(t));

    nd_bench_phase(2);
    let t = Instant::now();
    let pendings = conns
        .iter()
        .map(|(c, _)| c.disconnect())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|s| format!("disconnect: {s}"))?;
    wait_all("Disconnect", &pendings)?;
    figures.insert("disconnect", ms(t));

    nd_bench_phase(3);
    let t = Instant::now();
    drop(conns);
    figures.insert("destroy", ms(t));
    nd_bench_phase(PHASES.len());
    Ok(figures)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median, lowest and highest.
fn spread(v: Vec<f64>) -> (f64, f64, f64) {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (median(v), lo, hi)
}

type Round = fn(usize) -> Result<Figures, String>;

fn main() {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let shim_only = raw.first().is_some_and(|a| a == "shim");
    let args: Vec<usize> = raw.iter().filter_map(|a| a.parse().ok()).collect();
    let n = args.first().copied().unwrap_or(100);
    if shim_only {
        match shim_client(n) {
            Ok(f) => println!("nd-shim: {f:?}"),
            Err(why) => {
                println!("FAIL nd-shim: {why}");
                std::process::exit(1);
            }
        }
        return;
    }
    let rounds = args.get(1).copied().unwrap_or(3).max(1);
    let mut cm = Vec::new();
    let mut shim = Vec::new();
    for round in 1..=rounds {
        let mut order: [(&str, Round, bool); 2] = [
            ("rdma_cm (cmtime)", rdma_cm_round, true),
            ("nd-shim", shim_round, false),
        ];
        if round % 2 == 0 {
            order.reverse();
        }
        for (name, run, is_cm) in order {
            match run(n) {
                Ok(f) => {
                    println!("round {round} {name}: {f:?}");
                    if is_cm { &mut cm } else { &mut shim }.push(f);
                }
                Err(why) => {
                    println!("FAIL round {round} {name}: {why}");
                    std::process::exit(1);
                }
            }
        }
    }
    let total = |f: &Figures, phases: &[&str]| phases.iter().map(|p| f[p]).sum::<f64>();
    println!(
        "\n{n} connections, {rounds} rounds, order alternating (ms for all connections: \
         median [lowest-highest round]; ratio of the medians, and the median [lowest-highest] \
         of the per-round ratios)"
    );
    println!(
        "{:<12} {:>24} {:>24} {:>7} {:>20}",
        "phase", "rdma_cm", "nd-shim", "ratio", "per-round ratio"
    );
    let groups: [(&str, &[&str]); 7] = [
        ("create", &["create"]),
        ("connect", &["connect"]),
        ("disconnect", &["disconnect"]),
        ("destroy", &["destroy"]),
        ("setup", &["create", "connect"]),
        ("teardown", &["disconnect", "destroy"]),
        ("total", &PHASES),
    ];
    for (name, phases) in groups {
        let a: Vec<f64> = cm.iter().map(|f| total(f, phases)).collect();
        let b: Vec<f64> = shim.iter().map(|f| total(f, phases)).collect();
        let ratios = a.iter().zip(&b).map(|(a, b)| b / a).collect();
        let (am, al, ah) = spread(a);
        let (bm, bl, bh) = spread(b);
        let (rm, rl, rh) = spread(ratios);
        let a = format!("{am:.1} [{al:.1}-{ah:.1}]");
        let b = format!("{bm:.1} [{bl:.1}-{bh:.1}]");
        let r = format!("{rm:.2} [{rl:.2}-{rh:.2}]");
        println!("{name:<12} {a:>24} {b:>24} {:>7.2} {r:>20}", bm / am);
    }
}
