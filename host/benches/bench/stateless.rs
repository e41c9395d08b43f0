//! MCP 2026-07-28 over Streamable HTTP: `tools/call add` without `initialize` or a session,
//! beside the handshake era's session.
//!
//! - One host (the SQLite config): one connection, one call at a time; then [`CONNECTIONS`]
//!   connections at once, in each era.
//! - When a PostgreSQL server is named and HAProxy is installed: three `toolhost serve --http`
//!   hosts on one schema, HAProxy (round robin) in front, [`CONNECTIONS`] connections through
//!   it to one host, then to all three (aggregate calls/s).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use serde_json::{json, Value};
use tokio::process::Command;

use crate::http::{answer_in, start, Conn};
use crate::stats::{micros, Figure};

/// Client connections at once in the concurrent rounds.
const CONNECTIONS: usize = 16;

/// A 2026-07-28 `tools/call add` (its own run: no run name).
fn modern_call(id: usize) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
    "name": "add", "arguments": {"a": id, "b": 1},
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }}})
}

/// The same in a session.
fn session_call(id: usize) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "add", "arguments": {"a": id, "b": 1}}})
}

/// One completed call through `conn`; its latency in µs.
async fn one(conn: &mut Conn, modern: bool, id: usize) -> f64 {
    let message = if modern {
        modern_call(id)
    } else {
        session_call(id)
    };
    let t = Instant::now();
    let (body, _) = conn.post(&message).await;
    let took = micros(t.elapsed());
    let answer = answer_in(&body);
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    took
}

/// `total` calls over `connections` kept-alive connections to `addr` at once (each a session
/// of its own in the handshake era): calls per second, and each call's latency.
async fn concurrent(addr: &str, connections: usize, total: usize, modern: bool) -> (f64, Vec<f64>) {
    let per = total.div_ceil(connections);
    let mut conns = Vec::new();
    for _ in 0..connections {
        let mut c = Conn::open(addr, modern).await;
        if !modern {
            c.initialize().await;
        }
        one(&mut c, modern, 1).await; // warm: this connection's first call
        conns.push(c);
    }
    let started = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(k, mut c)| {
            tokio::spawn(async move {
                let mut lat = Vec::with_capacity(per);
                for i in 0..per {
                    lat.push(one(&mut c, modern, 1_000_000 * (k + 1) + i).await);
                }
                lat
            })
        })
        .collect();
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.expect("a connection's calls"));
    }
    let rate = lat.len() as f64 / started.elapsed().as_secs_f64();
    (rate, lat)
}

fn serve(config: &Path) -> Command {
    let mut c = Command::new(crate::procs::binary());
    c.args(["serve", "--http", "127.0.0.1:0", "--config"])
        .arg(config);
    c
}

/// The figures (see the module docs); `calls` per sequential round, `total` per concurrent one.
pub async fn figures(normal: &Path, dir: &Path, calls: usize, total: usize) -> Vec<Figure> {
    let (mut child, addr) = start(serve(normal)).await;
    let mut conn = Conn::open(&addr, true).await;
    for id in 1..=20 {
        one(&mut conn, true, id).await;
    }
    let mut seq = Vec::with_capacity(calls);
    for i in 0..calls {
        seq.push(one(&mut conn, true, 1000 + i).await);
    }
    drop(conn);
    let (rate_new, lat_new) = concurrent(&addr, CONNECTIONS, total, true).await;
    let (rate_old, lat_old) = concurrent(&addr, CONNECTIONS, total, false).await;
    let _ = child.kill().await;
    let mut figures = vec![
        Figure::of(
            "mcp_http_2026_sequential",
            "µs",
            &seq,
            "tools/call add as 2026-07-28 requests (no session, a run each), one kept-alive connection, one at a time",
        ),
        Figure::of(
            "mcp_http_2026_16_connections",
            "µs",
            &lat_new,
            &format!("{rate_new:.0} calls/s, 2026-07-28, {CONNECTIONS} connections at once, one host (SQLite); latency per call"),
        ),
        Figure::of(
            "mcp_http_2025_16_sessions",
            "µs",
            &lat_old,
            &format!("{rate_old:.0} calls/s, handshake era, {CONNECTIONS} sessions at once, one host (SQLite); latency per call"),
        ),
    ];
    for f in &mut figures {
        f.versus = None;
    }
    figures.extend(balanced(dir, total).await);
    figures
}

/// The HAProxy binary, if installed (on PATH or in Debian's `/usr/sbin`).
fn haproxy() -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/sbin")])
        .map(|d| d.join("haproxy"))
        .find(|p| p.exists())
}

/// HAProxy (round robin) in front of `backends`: the child (killed on drop) and its address.
async fn balancer(dir: &Path, name: &str, backends: &[String]) -> (tokio::process::Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let servers: String = backends
        .iter()
        .enumerate()
        .map(|(i, b)| format!("    server h{i} {b}\n"))
        .collect();
    let cfg = format!(
        "global\n    maxconn 512\ndefaults\n    mode http\n    timeout connect 2s\n    \
         timeout client 60s\n    timeout server 60s\n\
         frontend mcp\n    bind 127.0.0.1:{port}\n    default_backend hosts\n\
         backend hosts\n    balance roundrobin\n{servers}"
    );
    let path = dir.join(format!("haproxy-{name}.cfg"));
    std::fs::write(&path, cfg).expect("the haproxy config is written");
    let child = Command::new(haproxy().expect("haproxy"))
        .arg("-f")
        .arg(&path)
        .arg("-db")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("haproxy starts");
    let addr = format!("127.0.0.1:{port}");
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(&addr).await.is_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    (child, addr)
}

/// Three hosts on one PostgreSQL schema behind HAProxy: one host's calls/s, then all three's.
async fn balanced(dir: &Path, total: usize) -> Vec<Figure> {
    let (Some(url), Some(_)) = (crate::postgres::url(), haproxy()) else {
        println!(
            "mcp_http_2026 behind HAProxy: not measured (needs a PostgreSQL server and haproxy)"
        );
        return Vec::new();
    };
    let schema = format!("bench_{}", uuid::Uuid::new_v4().simple());
    let config = crate::setup::postgres_config(dir, &url, &schema);
    let mut hosts = Vec::new();
    for _ in 0..3 {
        hosts.push(start(serve(&config)).await); // one by one: the first makes the approval key
    }
    let backends: Vec<String> = hosts.iter().map(|(_, a)| a.clone()).collect();
    let (mut lb1, one_addr) = balancer(dir, "one", &backends[..1]).await;
    let (mut lb3, three_addr) = balancer(dir, "three", &backends).await;
    concurrent(&three_addr, CONNECTIONS, 64.min(total), true).await; // warm every host
    let (rate1, lat1) = concurrent(&one_addr, CONNECTIONS, total, true).await;
    let (rate3, lat3) = concurrent(&three_addr, CONNECTIONS, total, true).await;
    let _ = lb1.kill().await;
    let _ = lb3.kill().await;
    for (mut h, _) in hosts {
        let _ = h.kill().await;
    }
    crate::postgres::drop_schema(&url, &schema).await;
    let mut f1 = Figure::of(
        "mcp_http_2026_haproxy_1_host",
        "µs",
        &lat1,
        &format!("{rate1:.0} calls/s, 2026-07-28 through HAProxy to one host (PostgreSQL ledger), {CONNECTIONS} connections; latency per call"),
    );
    let mut f3 = Figure::of(
        "mcp_http_2026_haproxy_3_hosts",
        "µs",
        &lat3,
        &format!("{rate3:.0} calls/s in all, 2026-07-28 through HAProxy round robin to three hosts on one schema, {CONNECTIONS} connections; latency per call"),
    );
    f1.versus = None;
    f3.versus = None;
    let ratio = Figure::of(
        "mcp_http_2026_3_hosts_vs_1",
        "x",
        &[rate3 / rate1],
        &format!("calls/s through HAProxy: 1 host → {rate1:.0}, 3 hosts → {rate3:.0} (aggregate, one 2-core machine running hosts, HAProxy, PostgreSQL and the client)"),
    );
    vec![f1, f3, ratio]
}
