//! Figures that need the real binary: MCP round trips over stdio, and cold start.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use crate::stats::{micros, Figure};
use crate::usage::{self, ServerCost};

const BINARY: &str = env!("CARGO_BIN_EXE_toolhost");

/// The `toolhost` the MCP figures start: this build's, or `TOOLHOST_BENCH_BINARY` (another
/// build's, for a paired comparison in one run).
pub fn binary() -> String {
    std::env::var("TOOLHOST_BENCH_BINARY").unwrap_or_else(|_| BINARY.to_string())
}

/// `tools/call add` round trips through `toolhost serve` on stdio: sequential, then with
/// `in_flight` requests outstanding. Returns (sequential, concurrent) per-request latency and
/// what the sequential calls cost the server.
pub async fn mcp_stdio(
    config: &Path,
    calls: usize,
    in_flight: usize,
) -> (Figure, Figure, ServerCost) {
    let mut server = Command::new(binary());
    server.args(["serve", "--config"]).arg(config);
    let (sequential, concurrent, cost) = round_trips(server, calls, in_flight, &add).await;
    (
        Figure::of(
            "mcp_stdio_sequential",
            "µs",
            &sequential,
            "tools/call add through toolhost serve (stdio), one at a time",
        ),
        Figure::of(
            &format!("mcp_stdio_{in_flight}_in_flight"),
            "µs",
            &concurrent,
            "the same with requests outstanding (latency per request)",
        ),
        cost,
    )
}

/// The same sequential round trips through the stdio floor server
/// ([`crate::floor_server`]): rmcp and toolhost's stdio transport, no pipeline; and what
/// they cost it.
pub async fn mcp_stdio_floor(calls: usize) -> (Figure, ServerCost) {
    let mut server = Command::new(std::env::current_exe().expect("the bench binary"));
    server.env(crate::floor_server::ROLE, "stdio");
    let (sequential, _, cost) = round_trips(server, calls, 0, &add).await;
    let figure = Figure::of(
        "mcp_stdio_floor",
        "µs",
        &sequential,
        "tools/call add, one at a time, through the same rmcp and stdio transport answering at once (no pipeline): the front door's own round trip",
    );
    (figure, cost)
}

/// The `add` call of request `id`: (tool, arguments).
fn add(id: usize) -> (&'static str, Value) {
    ("add", json!({"a": id, "b": 1}))
}

/// The `tools/call` request `id` of `request(id)` (a tool and its arguments).
fn tools_call(id: usize, request: &dyn Fn(usize) -> (&'static str, Value)) -> Value {
    let (name, arguments) = request(id);
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
}

/// Sequential round trips of `request(id)` (a tool and its arguments) through the MCP server
/// `server` starts on stdio, then (when `in_flight` > 0) as many with `in_flight` requests
/// outstanding; and what the sequential calls cost the server.
pub async fn round_trips(
    server: Command,
    calls: usize,
    in_flight: usize,
    request: &dyn Fn(usize) -> (&'static str, Value),
) -> (Vec<f64>, Vec<f64>, ServerCost) {
    let (mut session, idle) = StdioSession::open(server).await;
    // warm-up
    for id in 1..=20 {
        session.timed_call(id, request).await;
    }
    let mut sequential = Vec::with_capacity(calls);
    let before = usage::sample(session.pid());
    for i in 0..calls {
        sequential.push(session.timed_call(1000 + i, request).await);
    }
    let cost = usage::cost(&idle, &before, &usage::sample(session.pid()), calls);
    let mut sent: HashMap<u64, Instant> = HashMap::new();
    let mut concurrent = Vec::with_capacity(calls);
    let mut next = 0usize;
    let base = 1_000_000usize;
    while in_flight > 0 && concurrent.len() < calls {
        while sent.len() < in_flight && next < calls {
            let id = base + next;
            sent.insert(id as u64, Instant::now());
            session.send(&tools_call(id, request)).await;
            next += 1;
        }
        let r = session.answer().await;
        let id = r["id"].as_u64().expect("a response id");
        let t = sent.remove(&id).expect("a response to a sent request");
        concurrent.push(micros(t.elapsed()));
    }
    session.close().await;
    (sequential, concurrent, cost)
}

/// Sequential `tools/call add` through `toolhost serve` and through the stdio floor server,
/// both running, one call to each in turn, `calls` of each: (floor, toolhost) latencies.
/// Whatever else the machine does falls on both alike, so their ratio holds still where two
/// phases measured one after the other do not (the floor alone measured 79–181 µs in three
/// runs).
pub async fn mcp_stdio_interleaved(config: &Path, calls: usize) -> (Vec<f64>, Vec<f64>) {
    let mut toolhost = Command::new(binary());
    toolhost.args(["serve", "--config"]).arg(config);
    let mut floor = Command::new(std::env::current_exe().expect("the bench binary"));
    floor.env(crate::floor_server::ROLE, "stdio");
    let (mut toolhost, _) = StdioSession::open(toolhost).await;
    let (mut floor, _) = StdioSession::open(floor).await;
    for id in 1..=20 {
        toolhost.timed_call(id, &add).await;
        floor.timed_call(id, &add).await;
    }
    let (mut ours, mut floors) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
    for i in 0..calls {
        floors.push(floor.timed_call(1000 + i, &add).await);
        ours.push(toolhost.timed_call(1000 + i, &add).await);
    }
    toolhost.close().await;
    floor.close().await;
    (floors, ours)
}

/// An MCP server on stdio in a session (`initialize`, then `notifications/initialized`): its
/// process (killed on drop) and its pipes.
pub struct StdioSession {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl StdioSession {
    /// Start the server `server` names and open a session; and a reading of the server after
    /// the handshake, before any call (its idle resident set).
    pub async fn open(mut server: Command) -> (StdioSession, usage::Sample) {
        let mut child = server
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("the MCP server starts");
        let stdin = child.stdin.take().expect("stdin");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut session = StdioSession {
            child,
            stdin,
            lines,
        };
        session
            .send(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"}}}),
            )
            .await;
        session.answer().await;
        let idle = usage::sample(session.pid());
        session
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        (session, idle)
    }

    /// The server's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Write one message, a line.
    pub async fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .await
            .expect("the request is written");
    }

    /// The next answer (a message with an id and no method), within 60 s.
    pub async fn answer(&mut self) -> Value {
        loop {
            let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
                .await
                .expect("the server answers within 60 s")
                .expect("stdout reads")
                .expect("the server is still running");
            let v: Value = serde_json::from_str(&line).expect("JSON-RPC on stdout");
            if v.get("id").is_some() && v.get("method").is_none() {
                return v;
            }
        }
    }

    /// One `tools/call` round trip of `request(id)`: its latency in µs; panics on an error
    /// result.
    pub async fn timed_call(
        &mut self,
        id: usize,
        request: &dyn Fn(usize) -> (&'static str, Value),
    ) -> f64 {
        let message = tools_call(id, request);
        let t = Instant::now();
        self.send(&message).await;
        let r = self.answer().await;
        let elapsed = micros(t.elapsed());
        assert_eq!(r["result"]["isError"], false, "{r}");
        elapsed
    }

    /// Close stdin and wait (at most 10 s) for the server to end.
    pub async fn close(self) {
        let StdioSession {
            mut child,
            stdin,
            lines,
        } = self;
        drop(stdin);
        drop(lines);
        let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    }
}

/// Process start to the first completed call (`toolhost call add`), with the compile cache
/// emptied before each run (`cold`) or kept (`warm`).
pub fn cold_start(config: &Path, data: &Path, tool: &str, runs: usize, warm: bool) -> Vec<f64> {
    let mut samples = Vec::with_capacity(runs);
    if warm {
        run_call(config, tool); // fills the cache
    }
    for _ in 0..runs {
        if !warm {
            let _ = std::fs::remove_dir_all(data.join("cache"));
        }
        let t = Instant::now();
        run_call(config, tool);
        samples.push(t.elapsed().as_secs_f64() * 1e3);
    }
    samples
}

fn run_call(config: &Path, tool: &str) {
    let args: [&OsStr; 5] = [
        "call".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        tool.as_ref(),
        r#"{"a": 1, "b": 2}"#.as_ref(),
    ];
    output_of(BINARY, &args);
}

/// Run `program` with `args` to its end: its stdout, or a panic showing both streams.
pub fn output_of(program: &str, args: &[&OsStr]) -> Vec<u8> {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .expect("the program runs");
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}
