//! Three `toolhost serve --http` hosts on one PostgreSQL ledger behind HAProxy (Debian's
//! package; round robin, no affinity for 2026-07-28 requests): calls spread across hosts; a
//! call resent through the balancer is answered from the ledger; an approval asked on one host
//! is answered through another, once; a host killed mid-load loses nothing and runs nothing
//! twice; handshake-era sessions keep working through the same balancer with affinity on
//! `Mcp-Session-Id`. Ignored unless run with `--ignored pg_` (`just test` does, after
//! installing HAProxy when it is missing).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::mcp::{http_serve, HttpServer};
use crate::mcp_stateless::{answer, call, code, executions, http_post, ledger, routing_headers};
use crate::multi_host::Schema;
use crate::support::{guest, toml_path};
use toolhost::contract::Caller;
use toolhost::serve::stateless::run_of;

/// The response header HAProxy adds: which host served the request.
const SERVED_BY: &str = "x-toolhost-host";

/// HAProxy in front of `backends`, on a port of its own, stopped on drop.
struct Balancer {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Balancer {
    fn start(backends: &[String]) -> Balancer {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(i, b)| format!("    server h{i} {b} check inter 200ms fall 1 rise 2\n"))
            .collect();
        // Round robin; a request that names a session sticks to the host that opened it
        // (learned from the initialize answer's Mcp-Session-Id); a connection refused by a
        // dead host is retried on another (nothing reached it), nothing else is.
        let cfg = format!(
            "global\n    maxconn 512\n\
             defaults\n    mode http\n    timeout connect 2s\n    timeout client 60s\n    \
             timeout server 60s\n    retries 2\n    option redispatch\n    retry-on conn-failure\n\
             frontend mcp\n    bind 127.0.0.1:{port}\n    default_backend hosts\n\
             backend hosts\n    balance roundrobin\n    \
             stick-table type string len 64 size 10k expire 30m\n    \
             stick on req.hdr(mcp-session-id)\n    \
             stick store-response res.hdr(mcp-session-id)\n    \
             http-response set-header X-Toolhost-Host %[srv_name]\n{servers}"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, cfg).unwrap();
        let child = Command::new(haproxy())
            .arg("-f")
            .arg(&path)
            .arg("-db")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("haproxy starts (just test installs Debian's haproxy when missing)");
        let addr = format!("127.0.0.1:{port}");
        let until = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(&addr).is_err() {
            assert!(Instant::now() < until, "haproxy did not listen on {addr}");
            std::thread::sleep(Duration::from_millis(50));
        }
        // Health checks mark every host up before the test sends anything.
        std::thread::sleep(Duration::from_millis(800));
        Balancer {
            child,
            addr,
            _dir: dir,
        }
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The haproxy binary: on PATH, or where Debian puts it (`/usr/sbin`, not on every PATH).
fn haproxy() -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/sbin")])
        .map(|d| d.join("haproxy"))
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("haproxy"))
}

/// One HTTP exchange ([`http_post`]): in `session` (handshake era), else a 2026-07-28 request
/// with its routing headers (an `initialize` carries none).
fn exchange(
    addr: &str,
    message: &Value,
    session: Option<&str>,
) -> std::io::Result<(u16, BTreeMap<String, String>, String)> {
    let headers = match session {
        Some(s) => vec![
            ("Mcp-Session-Id".to_string(), s.to_string()),
            ("MCP-Protocol-Version".to_string(), "2025-11-25".to_string()),
        ],
        None if message["method"] != "initialize" => routing_headers(message),
        None => Vec::new(),
    };
    http_post(addr, &headers, message)
}

/// Send `message` until a whole 200 answer with a result arrives (a host died, the balancer
/// answered 502/503, or the call is still running elsewhere): the result and who served it.
fn until_answered(addr: &str, message: &Value) -> (Value, String) {
    let until = Instant::now() + Duration::from_secs(90);
    loop {
        if let Ok((200, headers, body)) = exchange(addr, message, None) {
            let a = answer(&body, &message["id"]);
            let still_running = a["result"]["_meta"]["toolhost/failure"]["code"]
                == "duplicate_call_id"
                && a["result"]["_meta"]["toolhost/failure"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("running"));
            if a.get("result").is_some() && !still_running {
                return (a["result"].clone(), headers[SERVED_BY].clone());
            }
        }
        assert!(Instant::now() < until, "no answer to {message}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Three hosts on one schema of the test server, and HAProxy in front of them.
struct Deployment {
    hosts: Vec<HttpServer>,
    balancer: Balancer,
    config: PathBuf,
    _schema: Schema,
    _dir: tempfile::TempDir,
    workspace: PathBuf,
}

/// A deployment serving `greet` (risk `write`, so a start is committed before it runs),
/// `write_text` (approval required) and `http_get` (risk `write`) allowed to reach `port`.
fn deploy(port: u16) -> Deployment {
    deploy_with(port, "")
}

/// [`deploy`] with `run` as the config's `[run]` section.
fn deploy_with(port: u16, run: &str) -> Deployment {
    let schema = Schema::new();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let text = format!(
        "data_dir = {data}\n{run}\n{ledger}\n\
         [[component]]\npath = {template}\n[component.tools.greet]\nrisk = \"write\"\n\
         [[component]]\npath = {fs}\nfs = [{{ host = {ws}, guest = \"/workspace\", mode = \"rw\" }}]\n\
         [component.tools.write-text]\nrisk = \"write\"\napproval = \"required\"\n\
         [[component]]\npath = {http}\nnetwork = {{ allow = [\"127.0.0.1:{port}\"] }}\n\
         [component.tools.http-get]\nrisk = \"write\"\n",
        data = toml_path(&dir.path().join("data")),
        ledger = schema.ledger_section(),
        template = toml_path(&guest("template")),
        fs = toml_path(&guest("fs-tools")),
        ws = toml_path(&ws),
        http = toml_path(&guest("http-get")),
    );
    let config = dir.path().join("toolhost.toml");
    std::fs::write(&config, text).unwrap();
    // One after another: the first creates the approval key the others then read.
    let hosts: Vec<HttpServer> = (0..3).map(|_| http_serve(&config)).collect();
    let backends: Vec<String> = hosts
        .iter()
        .map(|h| {
            h.url
                .trim_start_matches("http://")
                .trim_end_matches("/mcp")
                .to_string()
        })
        .collect();
    let balancer = Balancer::start(&backends);
    Deployment {
        hosts,
        balancer,
        config,
        _schema: schema,
        _dir: dir,
        workspace: ws,
    }
}

impl Deployment {
    fn host_addr(&self, i: usize) -> String {
        self.hosts[i]
            .url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_string()
    }
}

fn local_run() -> String {
    let local = Caller::new("local", "default");
    run_of(&local, "r1")
}

/// 2026-07-28 calls through the balancer spread over all three hosts; each call resent
/// through the balancer (landing on another host) is answered from the ledger — the same
/// result, one execution per call id; and a handshake-era session opened through the same
/// balancer keeps working, every request on the host that opened it.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL) and HAProxy"]
fn pg_stateless_calls_spread_and_resends_replay_behind_haproxy() {
    let d = deploy(9);
    let lb = d.balancer.addr.as_str();
    let mut first = Vec::new();
    let mut served = BTreeSet::new();
    for i in 0..12u64 {
        let m = call(
            i,
            "greet",
            json!({"name": format!("n{i}")}),
            &format!("g{i}"),
        );
        let (result, host) = until_answered(lb, &m);
        assert_eq!(result["isError"], false, "{result}");
        served.insert(host);
        first.push((m, result));
    }
    assert_eq!(
        served.len(),
        3,
        "round robin reached every host: {served:?}"
    );
    let mut resent_on = BTreeSet::new();
    for (m, result) in &first {
        let (again, host) = until_answered(lb, m);
        assert_eq!(&again, result, "a resend is the recorded result");
        resent_on.insert(host);
    }
    assert_eq!(resent_on.len(), 3);
    let calls = ledger(&d.config, &local_run());
    assert_eq!(calls.len(), 12, "{calls:?}");
    for i in 0..12 {
        assert_eq!(
            executions(&calls, &format!("key:g{i}")),
            1,
            "g{i}: {calls:?}"
        );
    }

    // A handshake-era session through the balancer: affinity on Mcp-Session-Id.
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "old", "version": "0"}}});
    let (status, headers, body) = exchange(lb, &init, None).unwrap();
    assert_eq!(status, 200, "{body}");
    let session = headers["mcp-session-id"].clone();
    let opened_on = headers[SERVED_BY].clone();
    for i in 1..=6u64 {
        let m = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "greet", "arguments": {"name": "s"}}});
        let (status, headers, body) = exchange(lb, &m, Some(&session)).unwrap();
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            headers[SERVED_BY], opened_on,
            "the session sticks to its host"
        );
        assert_eq!(
            answer(&body, &json!(i))["result"]["isError"],
            false,
            "{body}"
        );
    }
}

/// An approval asked on host 0 is answered on host 1 (the sealed state opens on any host
/// sharing the approval key) and the call runs once; the same answer sent to host 2 and
/// through the balancer is answered from the ledger and writes nothing again.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL) and HAProxy"]
fn pg_an_approval_asked_on_one_host_is_answered_through_another_once() {
    let d = deploy(9);
    let args = json!({"path": "/workspace/a.txt", "content": "once"});
    let (status, _, body) = exchange(
        &d.host_addr(0),
        &call(1, "write_text", args.clone(), "w1"),
        None,
    )
    .unwrap();
    assert_eq!(status, 200, "{body}");
    let asked = answer(&body, &json!(1));
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let mut retry = call(2, "write_text", args.clone(), "w1");
    retry["params"]["requestState"] = asked["result"]["requestState"].clone();
    retry["params"]["inputResponses"] =
        json!({"approval": {"action": "accept", "content": {"approve": true}}});
    let (status, _, body) = exchange(&d.host_addr(1), &retry, None).unwrap();
    assert_eq!(status, 200, "{body}");
    let done = answer(&body, &json!(2))["result"].clone();
    assert_eq!(done["isError"], false, "{done}");
    let file = d.workspace.join("a.txt");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "once");
    std::fs::remove_file(&file).unwrap();
    let (status, _, body) = exchange(&d.host_addr(2), &retry, None).unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(answer(&body, &json!(2))["result"], done);
    for _ in 0..3 {
        let (again, _) = until_answered(&d.balancer.addr, &retry);
        assert_eq!(again, done);
    }
    assert!(!file.exists(), "the answer ran the call once");
    // The same answer with other arguments, on yet another host: the approved call is taken.
    let mut altered = retry.clone();
    altered["params"]["arguments"]["content"] = json!("twice");
    let (_, _, body) = exchange(&d.host_addr(0), &altered, None).unwrap();
    let refused = answer(&body, &json!(2));
    assert_eq!(code(&refused["result"]), "duplicate_call_id", "{refused}");
    let calls = ledger(&d.config, &local_run());
    assert_eq!(executions(&calls, "key:w1~approved"), 1, "{calls:?}");
}

/// A run's budget holds across the hosts: 9 calls of one named run through the balancer (so
/// spread over all three hosts), with `[run] max_calls = 5`: exactly 5 complete and 4 end
/// `budget_exhausted`.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL) and HAProxy"]
fn pg_a_named_runs_budget_holds_across_hosts_behind_haproxy() {
    let d = deploy_with(9, "[run]\nmax_calls = 5");
    let lb = d.balancer.addr.as_str();
    let mut codes = BTreeMap::new();
    let mut served = BTreeSet::new();
    for i in 0..9u64 {
        let m = call(i, "greet", json!({"name": "b"}), &format!("b{i}"));
        let (result, host) = until_answered(lb, &m);
        served.insert(host);
        let code = result["_meta"]["toolhost/failure"]["code"]
            .as_str()
            .unwrap_or("completed")
            .to_string();
        *codes.entry(code).or_insert(0) += 1;
    }
    assert_eq!(served.len(), 3, "{served:?}");
    assert_eq!(codes.get("completed"), Some(&5), "{codes:?}");
    assert_eq!(codes.get("budget_exhausted"), Some(&4), "{codes:?}");
}

/// A loopback server that records every request path and answers each after `hold`.
fn recording_server(hold: Duration) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let paths = Arc::new(Mutex::new(Vec::new()));
    let seen = paths.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut sock) = stream else { return };
            let seen = seen.clone();
            std::thread::spawn(move || {
                let _ = sock.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = [0u8; 4096];
                let n = sock.read(&mut buf).unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]);
                // A request is a whole request line. A host killed after it connected and
                // before its request line was out leaves a connection that carried none (an
                // empty or cut line): no call reached the server through it.
                let line = head.lines().next().unwrap_or("");
                let mut parts = line.split(' ');
                if let (Some(_), Some(path), Some(version)) =
                    (parts.next(), parts.next(), parts.next())
                {
                    if version.starts_with("HTTP/") {
                        seen.lock().unwrap().push(path.to_string());
                    }
                }
                std::thread::sleep(hold);
                let _ = sock.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                );
            });
        }
    });
    (port, paths)
}

/// Four clients send 40 distinct calls (each a request to a recording server, 300 ms) through
/// the balancer and resend whatever got no answer; host 1 is killed (SIGKILL) mid-load. Every
/// call gets one answer (completed, or `outcome_unknown` for one the dead host had started);
/// the server saw each call at most once, only calls the ledger started, and every started call
/// it did not see is `outcome_unknown`; every call id has one record in the ledger.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL) and HAProxy"]
fn pg_a_host_killed_mid_load_loses_nothing_and_runs_nothing_twice() {
    let (port, paths) = recording_server(Duration::from_millis(300));
    let mut d = deploy(port);
    let lb = d.balancer.addr.clone();
    let answered = Arc::new(Mutex::new(BTreeMap::new()));
    let clients: Vec<_> = (0..4u64)
        .map(|c| {
            let lb = lb.clone();
            let answered = answered.clone();
            std::thread::spawn(move || {
                for i in 0..10u64 {
                    let n = c * 10 + i;
                    let url = format!("http://127.0.0.1:{port}/c{n}");
                    let m = call(n, "http_get", json!({ "url": url }), &format!("h{n}"));
                    let (result, _) = until_answered(&lb, &m);
                    answered.lock().unwrap().insert(n, result);
                }
            })
        })
        .collect();
    let until = Instant::now() + Duration::from_secs(60);
    while answered.lock().unwrap().len() < 8 {
        assert!(Instant::now() < until, "no progress before the kill");
        std::thread::sleep(Duration::from_millis(20));
    }
    d.hosts[1].child.kill().unwrap();
    for c in clients {
        c.join().unwrap();
    }
    let answered = answered.lock().unwrap();
    assert_eq!(answered.len(), 40);
    let mut unknown = 0;
    for (n, r) in answered.iter() {
        match r["isError"].as_bool() {
            Some(false) => {}
            _ => {
                assert_eq!(
                    r["_meta"]["toolhost/failure"]["status"], "outcome_unknown",
                    "{n}: {r}"
                );
                unknown += 1;
            }
        }
    }
    let seen = paths.lock().unwrap().clone();
    let distinct: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(
        distinct.len(),
        seen.len(),
        "a call reached the server twice: {seen:?}"
    );
    let calls = ledger(&d.config, &local_run());
    assert_eq!(calls.len(), 40, "one record per call id");
    // Started: the start mark a write commits before it enters the sandbox. Every request the
    // server saw is a started call; a started call the server did not see is one the dead host
    // marked and died before its request left (it ends outcome_unknown: it may have run).
    let started: BTreeSet<String> = calls
        .iter()
        .filter(|c| !c["started_at_ms"].is_null())
        .map(|c| c["call_id"].as_str().unwrap().replace("key:h", "/c"))
        .collect();
    let requested: BTreeSet<String> = seen.iter().cloned().collect();
    assert!(
        requested.is_subset(&started),
        "a request the ledger did not start: {requested:?} vs {started:?}"
    );
    for path in started.difference(&requested) {
        let id = path.replace("/c", "key:h");
        let c = calls.iter().find(|c| c["call_id"] == id.as_str()).unwrap();
        assert_eq!(c["status"], "outcome_unknown", "{c}");
    }
    assert!(
        unknown <= 4,
        "at most the dead host's in-flight calls are unknown: {unknown}"
    );
    eprintln!(
        "killed mid-load: {} executions, {unknown} outcome_unknown",
        seen.len()
    );
}
