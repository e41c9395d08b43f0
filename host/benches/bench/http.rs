//! MCP over Streamable HTTP: `tools/call add` round trips through `toolhost serve --http` on one
//! kept-alive connection, with a minimal HTTP/1.1 client (the figure is the server's, so the
//! client does as little as it can: one write per request, a chunked-body reader).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::Command;

use crate::stats::{micros, Figure};
use crate::usage::{self, ServerCost};

/// The longest one answer may take.
const PATIENCE: Duration = Duration::from_secs(60);

/// Sequential `tools/call add` over HTTP, one connection kept alive; per-request latency, and
/// what the calls cost the server.
pub async fn mcp_http_sequential(config: &Path, calls: usize) -> (Figure, ServerCost) {
    let mut server = Command::new(crate::procs::binary());
    server
        .args(["serve", "--http", "127.0.0.1:0", "--config"])
        .arg(config);
    let (samples, cost) = round_trips(server, calls).await;
    let figure = Figure::of(
        "mcp_http_sequential",
        "µs",
        &samples,
        "tools/call add through toolhost serve --http, one kept-alive connection, one at a time",
    );
    (figure, cost)
}

/// The same through the HTTP floor server ([`crate::floor_server`]): rmcp's Streamable HTTP
/// service behind hyper, no pipeline; and what the calls cost it.
pub async fn mcp_http_floor(calls: usize) -> (Figure, ServerCost) {
    let mut server = Command::new(std::env::current_exe().expect("the bench binary"));
    server.env(crate::floor_server::ROLE, "http");
    let (samples, cost) = round_trips(server, calls).await;
    let figure = Figure::of(
        "mcp_http_floor",
        "µs",
        &samples,
        "tools/call add, one at a time, through the same rmcp service and hyper listener answering at once (no pipeline): the front door's own round trip",
    );
    (figure, cost)
}

/// Sequential `tools/call add` over HTTP through `toolhost serve --http` and through the HTTP
/// floor server, both running, one call to each in turn, `calls` of each: (floor, toolhost)
/// latencies, read against each other as `procs::mcp_stdio_interleaved`'s are.
pub async fn mcp_http_interleaved(config: &Path, calls: usize) -> (Vec<f64>, Vec<f64>) {
    let mut toolhost = Command::new(crate::procs::binary());
    toolhost
        .args(["serve", "--http", "127.0.0.1:0", "--config"])
        .arg(config);
    let mut floor = Command::new(std::env::current_exe().expect("the bench binary"));
    floor.env(crate::floor_server::ROLE, "http");
    let (mut toolhost_child, toolhost_addr) = start(toolhost).await;
    let (mut floor_child, floor_addr) = start(floor).await;
    let mut ours = Conn::open(&toolhost_addr, false).await;
    let mut theirs = Conn::open(&floor_addr, false).await;
    ours.initialize().await;
    theirs.initialize().await;
    for id in 1..=20 {
        ours.timed_call(id).await;
        theirs.timed_call(id).await;
    }
    let (mut toolhost, mut floor) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
    for i in 0..calls {
        floor.push(theirs.timed_call(1000 + i).await);
        toolhost.push(ours.timed_call(1000 + i).await);
    }
    drop((ours, theirs));
    let _ = toolhost_child.kill().await;
    let _ = floor_child.kill().await;
    (floor, toolhost)
}

/// Start the MCP server `server` names, which announces its address on stderr as `toolhost
/// serve --http` does: the child (killed on drop) and its `host:port`.
pub(crate) async fn start(mut server: Command) -> (tokio::process::Child, String) {
    let mut child = server
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the MCP server starts");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let addr = tokio::time::timeout(PATIENCE, async {
        loop {
            let line = stderr.next_line().await.expect("stderr reads");
            let line = line.expect("toolhost serve --http announces its address");
            if let Some(url) = line.split("serving MCP on ").nth(1) {
                let url = url.trim().trim_start_matches("http://");
                break url.trim_end_matches("/mcp").to_string();
            }
        }
    })
    .await
    .expect("the address within 60 s");
    tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });
    (child, addr)
}

/// Sequential round trips through the MCP server `server` starts, in a session; and what they
/// cost it.
async fn round_trips(server: Command, calls: usize) -> (Vec<f64>, ServerCost) {
    let (mut child, addr) = start(server).await;
    let mut conn = Conn::open(&addr, false).await;
    conn.initialize().await;
    let idle = usage::sample(child.id());
    for id in 1..=20 {
        conn.timed_call(id).await;
    }
    let mut samples = Vec::with_capacity(calls);
    let before = usage::sample(child.id());
    for i in 0..calls {
        samples.push(conn.timed_call(1000 + i).await);
    }
    let cost = usage::cost(&idle, &before, &usage::sample(child.id()), calls);
    drop(conn);
    let _ = child.kill().await;
    (samples, cost)
}

/// One kept-alive client connection: in a session (handshake era), or sending 2026-07-28
/// requests with their routing headers and no session.
pub(crate) struct Conn {
    addr: String,
    session: Option<String>,
    modern: bool,
    io: BufReader<TcpStream>,
}

impl Conn {
    pub(crate) async fn open(addr: &str, modern: bool) -> Conn {
        let stream = TcpStream::connect(addr).await.expect("connects");
        stream.set_nodelay(true).expect("nodelay");
        Conn {
            addr: addr.to_string(),
            session: None,
            modern,
            io: BufReader::new(stream),
        }
    }

    /// Open a session: `initialize`, then `notifications/initialized`.
    pub(crate) async fn initialize(&mut self) {
        let (_, session) = self
            .post(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"}}}),
            )
            .await;
        self.session = Some(session.expect("a session id"));
        self.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }

    /// One `tools/call add` request `id`, in the session: its latency in µs; panics on an error
    /// result.
    pub(crate) async fn timed_call(&mut self, id: usize) -> f64 {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": "add", "arguments": {"a": id, "b": 1}}});
        let t = Instant::now();
        let (body, _) = self.post(&call).await;
        let elapsed = micros(t.elapsed());
        let answer = answer_in(&body);
        assert_eq!(answer["result"]["isError"], false, "{answer}");
        elapsed
    }

    /// One POST; the body (de-chunked) and the session id header, if any.
    pub(crate) async fn post(&mut self, message: &Value) -> (String, Option<String>) {
        let body = message.to_string();
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        if let Some(s) = &self.session {
            head.push_str(&format!(
                "Mcp-Session-Id: {s}\r\nMcp-Protocol-Version: 2025-11-25\r\n"
            ));
        }
        if self.modern {
            let method = message["method"].as_str().unwrap_or_default();
            head.push_str(&format!(
                "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n"
            ));
            if let Some(name) = message["params"]["name"].as_str() {
                head.push_str(&format!("Mcp-Name: {name}\r\n"));
            }
        }
        head.push_str("\r\n");
        head.push_str(&body);
        self.io
            .get_mut()
            .write_all(head.as_bytes())
            .await
            .expect("the request is written");
        tokio::time::timeout(PATIENCE, read_response(&mut self.io))
            .await
            .expect("an answer within 60 s")
    }
}

/// Status line and headers, then a chunked or sized body.
async fn read_response<R: AsyncBufRead + Unpin>(io: &mut R) -> (String, Option<String>) {
    let mut status = String::new();
    io.read_line(&mut status).await.expect("a status line");
    assert!(
        status.starts_with("HTTP/1.1 2"),
        "an HTTP success: {status}"
    );
    let (mut chunked, mut length, mut session) = (false, 0usize, None);
    loop {
        let mut line = String::new();
        io.read_line(&mut line).await.expect("a header");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (k, v) = line.split_once(':').expect("a header line");
        let (k, v) = (k.to_ascii_lowercase(), v.trim());
        match k.as_str() {
            "transfer-encoding" => chunked = v.eq_ignore_ascii_case("chunked"),
            "content-length" => length = v.parse().expect("a length"),
            "mcp-session-id" => session = Some(v.to_string()),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            io.read_line(&mut size).await.expect("a chunk size");
            let size = usize::from_str_radix(size.trim(), 16).expect("a hex chunk size");
            let mut chunk = vec![0; size + 2];
            io.read_exact(&mut chunk).await.expect("a chunk");
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        body.resize(length, 0);
        io.read_exact(&mut body).await.expect("the body");
    }
    (String::from_utf8(body).expect("UTF-8"), session)
}

/// The JSON-RPC answer in an SSE body.
pub(crate) fn answer_in(body: &str) -> Value {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some() && v.get("method").is_none())
        .unwrap_or_else(|| panic!("no answer in {body}"))
}
