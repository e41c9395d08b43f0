//! The HTTP front door under load: a listener out of descriptors waits instead of spinning,
//! and serves again once descriptors are free.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::mcp_frames::Http;
use crate::support::template_config;

/// CPU time (user + system, in clock ticks of 10 ms) a process has used.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which ends with the last ')'): utime is the 12th, stime
    // the 13th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

fn initialize() -> Vec<u8> {
    serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "front-door", "version": "0"}}}),
    )
    .unwrap()
}

/// Descriptors the process holds now (an inherited one past the limit counts too, so a
/// process at its limit may show one more).
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// A new connection that sends one 2026-07-28 request and waits up to `wait` for its answer's
/// head, then is left open with its body unread. An answered connection is authenticated, so
/// never evicted to make room; one not answered in time waits in the backlog.
fn authenticated_idle(addr: &str, wait: Duration) -> TcpStream {
    use std::io::{Read, Write};
    let message = crate::mcp_stateless::request(1, "tools/list", json!({}), json!({}));
    let body = message.to_string();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in crate::mcp_stateless::routing_headers(&message) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut sock = TcpStream::connect(addr).unwrap();
    sock.write_all(head.as_bytes()).unwrap();
    sock.write_all(body.as_bytes()).unwrap();
    sock.set_read_timeout(Some(wait)).unwrap();
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") && got.len() < 64 << 10 {
        match sock.read(&mut byte) {
            Ok(1) => got.push(byte[0]),
            _ => break,
        }
    }
    sock
}

/// A server whose descriptors are all taken by authenticated idle connections (descriptor
/// limit 128; opened one at a time until the server holds all 128, none evicted) while 32 more
/// wait in the backlog, so every accept fails with `EMFILE`, and still holds them after the
/// CPU window, uses under a fifth of a core while the rest wait in
/// the backlog (the listener backs off; it spun at about 60% before), and answers again once
/// they close.
#[test]
fn an_accept_loop_out_of_descriptors_backs_off() {
    const LIMIT: u32 = 128;
    let (_dir, config) = template_config();
    let text = std::fs::read_to_string(&config).unwrap();
    // Room for every connection in the caller's own bounds: only the descriptors run out.
    let serve = "[serve]\nconnections_per_principal = 192\nrequest_burst = 400\n";
    std::fs::write(&config, format!("{text}{serve}")).unwrap();
    let http = Http::start_limited(&config, Some(LIMIT));
    let pid = http.server.child.id();
    let (status, _, _) = http.post(&initialize(), None);
    assert_eq!(status, 200);

    // One at a time, each answered before the next, so none waits unauthenticated (and none is
    // evicted); a connection left unanswered waits in the backlog because accept failed.
    let mut idle = Vec::new();
    while open_fds(pid) < LIMIT as usize {
        assert!(
            idle.len() < 200,
            "the server holds {} descriptors of {LIMIT} after 200 connections",
            open_fds(pid)
        );
        idle.push(authenticated_idle(&http.addr, Duration::from_secs(2)));
    }
    // More wait in the backlog: the listener is readable and every accept fails.
    idle.extend((0..32).map(|_| TcpStream::connect(&http.addr).unwrap()));
    std::thread::sleep(Duration::from_millis(300));
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_ticks(pid) - before;
    assert!(
        used < 40,
        "{used} ticks of CPU in 2 s with its descriptors exhausted"
    );
    let held = open_fds(pid);
    assert!(
        held >= LIMIT as usize,
        "{held} descriptors: no longer exhausted"
    );

    drop(idle);
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, _, _) = http.post(&initialize(), None);
        if status == 200 {
            break;
        }
        assert!(
            Instant::now() < until,
            "the server never answered again ({status})"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Bearer tokens of two principals: alice's session is attacked with mallory's token.
const ALICE: &str = "front-door-alice-token";
const MALLORY: &str = "front-door-mallory-token";

/// A config with the template component and the two tokens.
fn two_principals() -> (tempfile::TempDir, std::path::PathBuf) {
    two_principals_with("")
}

/// [`two_principals`] with more lines for `[serve]`.
fn two_principals_with(serve: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    use sha2::{Digest, Sha256};
    let dir = tempfile::tempdir().unwrap();
    let token = |t: &str, who: &str| {
        format!(
            "[[serve.token]]\nsha256 = \"{}\"\nprincipal = \"{who}\"\ntenant = \"{who}-corp\"\n",
            hex::encode(Sha256::digest(t.as_bytes()))
        )
    };
    let text = format!(
        "data_dir = {data}\n[serve]\n{serve}\n{alice}{mallory}\n[[component]]\npath = {template}\n\
         {hostile}",
        data = crate::support::own_data(),
        alice = token(ALICE, "alice"),
        mallory = token(MALLORY, "mallory"),
        template = crate::support::toml_path(&crate::support::guest("template")),
        hostile = crate::support::hostile_component(
            "[component.tools.sleep-forever]\nlimits = { deadline_ms = 3_000 }\n"
        ),
    );
    let path = dir.path().join("toolhost.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// One raw HTTP/1.1 exchange with /mcp: the status, the session header and the body.
fn exchange(
    addr: &str,
    method: &str,
    token: &str,
    session: Option<&str>,
    body: &[u8],
) -> (u16, Option<String>, String) {
    use std::io::{Read, Write};
    let mut sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = format!(
        "{method} /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(s) = session {
        head.push_str(&format!(
            "Mcp-Session-Id: {s}\r\nMcp-Protocol-Version: 2025-11-25\r\n"
        ));
    }
    head.push_str("\r\n");
    sock.write_all(head.as_bytes()).unwrap();
    sock.write_all(body).unwrap();
    let mut raw = Vec::new();
    // A GET stream stays open: what arrived before the read timed out is enough.
    let _ = sock.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let session = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("mcp-session-id")
            .then(|| v.trim().to_string())
    });
    (status, session, body.to_string())
}

fn rpc(id: u64, method: &str, params: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        .unwrap()
}

fn greet_call(id: u64) -> Vec<u8> {
    rpc(
        id,
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "x"}}),
    )
}

/// Every HTTP request of a session must come from the identity that initialized it: with
/// alice's session id, mallory's requests, notifications, POSTed responses, GET stream and
/// DELETE all get 404 (as an unknown session does) — including a request sent before alice's
/// first one, which no longer binds the session — and alice's session works throughout.
#[test]
fn a_session_answers_only_the_principal_that_initialized_it() {
    let (_dir, config) = two_principals();
    let http = Http::start(&config);
    let addr = http.addr.as_str();
    let (status, session, _) = exchange(addr, "POST", ALICE, None, &initialize());
    assert_eq!(status, 200);
    let session = session.expect("initialize names the session");
    let s = Some(session.as_str());

    // Before alice's first request: mallory tries to take the session over.
    let (status, _, _) = exchange(addr, "POST", MALLORY, s, &greet_call(2));
    assert_eq!(status, 404, "a request with another principal's session");
    let initialized =
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .unwrap();
    assert_eq!(exchange(addr, "POST", ALICE, s, &initialized).0, 202);
    let (status, _, body) = exchange(addr, "POST", ALICE, s, &greet_call(3));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Hello, x!"), "{body}");

    let cancel = serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 3}}),
    )
    .unwrap();
    let answer = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 0,
        "result": {"action": "accept", "content": {"approve": true}}}))
    .unwrap();
    for (method, body) in [
        ("POST", cancel.as_slice()),
        ("POST", answer.as_slice()),
        ("GET", b"".as_slice()),
        ("DELETE", b"".as_slice()),
    ] {
        let (status, _, text) = exchange(addr, method, MALLORY, s, body);
        assert_eq!(
            status,
            404,
            "{method} {}: {text}",
            String::from_utf8_lossy(body)
        );
    }
    let (status, _, body) = exchange(addr, "POST", ALICE, s, &greet_call(4));
    assert_eq!(status, 200, "alice's session after the attempts: {body}");
    let (status, _, _) = exchange(addr, "DELETE", ALICE, s, b"");
    assert_eq!(
        status, 204,
        "alice ends her session (the SDKs take 200 or 204)"
    );
    assert_eq!(exchange(addr, "POST", ALICE, s, &greet_call(5)).0, 404);
}

/// A `tools/call` without a session is refused (400) and runs nothing; sessions are made by
/// `initialize` only.
#[test]
fn a_call_without_a_session_is_refused() {
    let (_dir, config) = two_principals();
    let http = Http::start(&config);
    let (status, session, body) = exchange(&http.addr, "POST", ALICE, None, &greet_call(1));
    assert_eq!(status, 400, "{body}");
    assert!(session.is_none());
    assert!(!body.contains("Hello"), "{body}");
}

/// One principal holds at most 32 sessions (the 33rd `initialize` is 429, and grows nothing),
/// another principal still opens one, and ending a session makes room again.
#[test]
fn sessions_per_principal_are_capped() {
    use toolhost::serve::sessions::MAX_SESSIONS_PER_PRINCIPAL;
    let (_dir, config) = two_principals();
    let http = Http::start(&config);
    let addr = http.addr.as_str();
    let mut sessions = Vec::new();
    for _ in 0..MAX_SESSIONS_PER_PRINCIPAL {
        let (status, session, _) = exchange(addr, "POST", MALLORY, None, &initialize());
        assert_eq!(status, 200);
        sessions.push(session.unwrap());
    }
    let (status, session, _) = exchange(addr, "POST", MALLORY, None, &initialize());
    assert_eq!(status, 429);
    assert!(session.is_none());
    let (status, _, _) = exchange(addr, "POST", ALICE, None, &initialize());
    assert_eq!(status, 200, "another principal is not held back");
    let (status, _, _) = exchange(addr, "DELETE", MALLORY, Some(&sessions[0]), b"");
    assert_eq!(status, 204);
    let (status, _, _) = exchange(addr, "POST", MALLORY, None, &initialize());
    assert_eq!(status, 200, "an ended session makes room");
}

/// A new session of `token`'s principal: its id.
fn open_session(addr: &str, token: &str) -> String {
    let (status, session, _) = exchange(addr, "POST", token, None, &initialize());
    assert_eq!(status, 200);
    session.unwrap()
}

/// Open the GET event stream of `session` and read its head: the status and the socket (kept
/// open by the caller).
fn open_stream(addr: &str, token: &str, session: &str) -> (u16, TcpStream) {
    use std::io::{Read, Write};
    let mut sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let head = format!(
        "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Accept: text/event-stream\r\nMcp-Session-Id: {session}\r\n\
         Mcp-Protocol-Version: 2025-11-25\r\n\r\n"
    );
    sock.write_all(head.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") && got.len() < 8192 {
        match sock.read(&mut byte) {
            Ok(1) => got.push(byte[0]),
            _ => break,
        }
    }
    let text = String::from_utf8_lossy(&got);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, sock)
}

/// One principal holds at most 4 GET event streams (the fifth is 429) while another still
/// opens its own; a stream ends at `stream_lifetime_secs` (here 2 s) though the client never
/// closes it, and its place is free again.
#[test]
fn event_streams_are_bounded_and_end() {
    use std::io::Read;
    use toolhost::serve::streams::MAX_STREAMS_PER_PRINCIPAL;
    let (_dir, config) = two_principals_with("stream_lifetime_secs = 2");
    let http = Http::start(&config);
    let addr = http.addr.as_str();
    let mut held = Vec::new();
    for _ in 0..MAX_STREAMS_PER_PRINCIPAL {
        let session = open_session(addr, MALLORY);
        let (status, sock) = open_stream(addr, MALLORY, &session);
        assert_eq!(status, 200);
        held.push(sock);
    }
    let extra = open_session(addr, MALLORY);
    let (status, _) = open_stream(addr, MALLORY, &extra);
    assert_eq!(status, 429, "a fifth stream of one principal");
    let alices = open_session(addr, ALICE);
    let (status, _alice_stream) = open_stream(addr, ALICE, &alices);
    assert_eq!(status, 200, "another principal's stream");

    // The held streams end by themselves at their lifetime.
    let started = Instant::now();
    for mut sock in held {
        let mut rest = Vec::new();
        let _ = sock.read_to_end(&mut rest);
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(20),
        "streams ended after {took:?}"
    );
    let (status, _) = open_stream(addr, MALLORY, &extra);
    assert_eq!(status, 200, "an ended stream frees its place");
}

/// A session whose idle lifetime (1 s) is shorter than a call it runs (3 s) keeps the call:
/// the session lives past the longest tool deadline, and the client gets the call's own result
/// (`deadline_exceeded`), not a closed session.
#[test]
fn a_running_call_keeps_its_session() {
    let (_dir, config) = two_principals_with("session_idle_secs = 1");
    let http = Http::start(&config);
    let addr = http.addr.as_str();
    let session = open_session(addr, ALICE);
    let call = rpc(
        2,
        "tools/call",
        json!({"name": "sleep_forever", "arguments": {}}),
    );
    let (status, _, body) = exchange(addr, "POST", ALICE, Some(&session), &call);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("deadline_exceeded"), "{body}");
    let (status, _, body) = exchange(addr, "POST", ALICE, Some(&session), &greet_call(3));
    assert_eq!(status, 200, "{body}");
}

/// 300 connections that send half a request head and wait (each would hold a slot for the
/// 10 s header timeout) do not keep an authenticated client waiting: at most 64 unauthenticated
/// connections wait at once, a newer one closes the longest-waiting, and the client's
/// `initialize` is answered in well under the header timeout (it waited ~9 s before).
#[test]
fn half_sent_heads_do_not_starve_authenticated_clients() {
    use std::io::Write;
    let (_dir, config) = two_principals();
    let http = Http::start(&config);
    let addr = http.addr.as_str();
    let half: Vec<TcpStream> = (0..300)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"POST /mcp HTTP/1.1\r\nHost: x\r\n").unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let (status, session, _) = exchange(addr, "POST", ALICE, None, &initialize());
    let took = started.elapsed();
    assert_eq!(status, 200);
    assert!(session.is_some());
    assert!(
        took < Duration::from_secs(5),
        "an authenticated initialize waited {took:?} behind half-sent heads"
    );
    drop(half);
}
