//! A scripted OpenAI-compatible chat-completions server on loopback: real HTTP/1.1 with
//! keep-alive (chunked streams), real server-sent-event chunks in the format hosted endpoints
//! send. Each request gets the next scripted reply (or the fallback's), and every request and
//! connection is counted for assertions.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One scripted answer to a model request.
#[derive(Clone)]
pub enum Reply {
    /// `text/event-stream` with these chunks, then `data: [DONE]`.
    Stream(Vec<Value>),
    /// These chunks, then the connection closes mid-stream (no finish, no `[DONE]`).
    Cut(Vec<Value>),
    /// A whole `application/json` response.
    Json(Value),
    /// An error status, with `Retry-After` seconds if given.
    Status(u16, Option<u64>),
    /// A status with this `application/json` body, as given.
    Body(u16, String),
    /// Hold the request this long before answering with the inner reply.
    Delay(Duration, Box<Reply>),
    /// `text/event-stream` with exactly these bytes as the body (line endings, BOM, …).
    RawStream(Vec<u8>),
    /// `text/event-stream` of this many bytes of keep-alive comments, never finishing.
    Flood(usize),
}

/// What the server saw of one request.
#[derive(Debug, Clone)]
pub struct Seen {
    pub authorization: Option<String>,
    /// The W3C `traceparent` header, when the host exports spans.
    pub traceparent: Option<String>,
    pub body: Value,
    /// Which accepted connection (0, 1, …) the request came on.
    pub connection: usize,
}

type Fallback = Arc<dyn Fn(usize) -> Reply + Send + Sync>;

pub struct Scripted {
    pub port: u16,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl Scripted {
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Serve `script` in order, then `fallback(request_number)` (0-based) for every later request.
pub async fn scripted(script: Vec<Reply>, fallback: Option<Fallback>) -> Scripted {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let accepted = AtomicUsize::new(0);
    let state = Arc::new(Server {
        log: seen.clone(),
        script: Mutex::new(std::collections::VecDeque::from(script)),
        fallback,
        n: AtomicUsize::new(0),
    });
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                return;
            };
            let connection = accepted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve_connection(sock, connection, state.clone()));
        }
    });
    Scripted { port, seen }
}

struct Server {
    log: Arc<Mutex<Vec<Seen>>>,
    script: Mutex<std::collections::VecDeque<Reply>>,
    fallback: Option<Fallback>,
    n: AtomicUsize,
}

/// Requests on one connection, in turn, for as long as the replies leave it open.
async fn serve_connection(mut sock: tokio::net::TcpStream, connection: usize, state: Arc<Server>) {
    // A bound on requests per connection keeps the loop finite.
    for _ in 0..10_000 {
        let Some(mut seen) = read_request(&mut sock).await else {
            return;
        };
        seen.connection = connection;
        state.log.lock().unwrap().push(seen);
        let n = state.n.fetch_add(1, Ordering::SeqCst);
        let next = state.script.lock().unwrap().pop_front();
        let reply = next.unwrap_or_else(|| {
            state
                .fallback
                .as_ref()
                .map_or(Reply::Status(500, None), |f| f(n))
        });
        if !answer(&mut sock, reply).await {
            let _ = sock.shutdown().await;
            return;
        }
    }
}

async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        let n = tokio::time::timeout(Duration::from_secs(10), sock.read(&mut chunk))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 1 << 20 {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let len: usize = header("content-length")?.parse().ok()?;
    while buf.len() < head_end + len {
        let n = tokio::time::timeout(Duration::from_secs(10), sock.read(&mut chunk))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&buf[head_end..head_end + len]).ok()?;
    Some(Seen {
        connection: 0,
        authorization: header("authorization"),
        traceparent: header("traceparent"),
        body,
    })
}

/// Write one reply; whether the connection stays open for the next request.
async fn answer(sock: &mut tokio::net::TcpStream, reply: Reply) -> bool {
    let mut reply = reply;
    while let Reply::Delay(d, inner) = reply {
        tokio::time::sleep(d).await;
        reply = *inner;
    }
    let sse_head =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n";
    match reply {
        Reply::Stream(chunks) => {
            let mut body: Vec<Vec<u8>> = chunks
                .iter()
                .map(|c| format!("data: {c}\n\n").into_bytes())
                .collect();
            body.push(b"data: [DONE]\n\n".to_vec());
            chunked(sock, sse_head, body).await
        }
        Reply::RawStream(bytes) => {
            // In small pieces, so the reader sees line endings split across reads.
            chunked(
                sock,
                sse_head,
                bytes.chunks(3).map(<[u8]>::to_vec).collect(),
            )
            .await
        }
        Reply::Flood(total) => {
            let _ = sock
                .write_all(format!("{sse_head}connection: close\r\n\r\n").as_bytes())
                .await;
            let line = format!(": {}\n", "k".repeat(64 * 1024 - 3));
            let mut sent = 0;
            while sent < total {
                if sock.write_all(line.as_bytes()).await.is_err() {
                    break;
                }
                sent += line.len();
            }
            false
        }
        Reply::Cut(chunks) => {
            let _ = sock
                .write_all(format!("{sse_head}connection: close\r\n\r\n").as_bytes())
                .await;
            for c in chunks {
                let _ = sock.write_all(format!("data: {c}\n\n").as_bytes()).await;
            }
            false
        }
        Reply::Json(v) => whole(sock, 200, &v.to_string(), "").await,
        Reply::Status(code, retry_after) => {
            let body = json!({"error": {"message": "scripted failure", "type": "server_error"}})
                .to_string();
            let retry = retry_after
                .map(|s| format!("retry-after: {s}\r\n"))
                .unwrap_or_default();
            whole(sock, code, &body, &retry).await
        }
        Reply::Body(code, body) => whole(sock, code, &body, "").await,
        Reply::Delay(..) => unreachable!(),
    }
}

/// A response with a content-length; the connection stays open.
async fn whole(sock: &mut tokio::net::TcpStream, code: u16, body: &str, extra: &str) -> bool {
    let head = format!(
        "HTTP/1.1 {code} Scripted\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n",
        body.len()
    );
    sock.write_all(head.as_bytes()).await.is_ok()
        && sock.write_all(body.as_bytes()).await.is_ok()
        && sock.flush().await.is_ok()
}

/// A chunked response, one chunk per piece, flushed as it goes; the connection stays open.
async fn chunked(sock: &mut tokio::net::TcpStream, head: &str, pieces: Vec<Vec<u8>>) -> bool {
    let head = format!("{head}transfer-encoding: chunked\r\n\r\n");
    if sock.write_all(head.as_bytes()).await.is_err() {
        return false;
    }
    for p in pieces.iter().filter(|p| !p.is_empty()) {
        let mut frame = format!("{:x}\r\n", p.len()).into_bytes();
        frame.extend_from_slice(p);
        frame.extend_from_slice(b"\r\n");
        if sock.write_all(&frame).await.is_err() || sock.flush().await.is_err() {
            return false;
        }
    }
    sock.write_all(b"0\r\n\r\n").await.is_ok() && sock.flush().await.is_ok()
}

/// Chunks of an assistant message that proposes `calls` (id, name, arguments text), each
/// argument string sent in fragments of `fragment` bytes, then the usage chunk.
pub fn tool_calls(calls: &[(&str, &str, &str)], fragment: usize, tokens: u64) -> Vec<Value> {
    let mut out = vec![
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": null}}]}),
    ];
    for (i, (id, name, args)) in calls.iter().enumerate() {
        out.push(delta(
            json!({"tool_calls": [{"index": i, "id": id, "type": "function",
            "function": {"name": name, "arguments": ""}}]}),
        ));
        let bytes: Vec<char> = args.chars().collect();
        for piece in bytes.chunks(fragment.max(1)) {
            let text: String = piece.iter().collect();
            out.push(delta(
                json!({"tool_calls": [{"index": i, "function": {"arguments": text}}]}),
            ));
        }
    }
    out.push(
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    );
    out.push(usage(tokens));
    out
}

/// Chunks of a plain text answer.
pub fn text(answer: &str, tokens: u64) -> Vec<Value> {
    let mut out: Vec<Value> = answer
        .split_inclusive(' ')
        .map(|w| delta(json!({"content": w})))
        .collect();
    out.push(
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    );
    out.push(usage(tokens));
    out
}

fn delta(d: Value) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": d, "finish_reason": null}]})
}

fn usage(total: u64) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
        "usage": {"prompt_tokens": total / 2, "completion_tokens": total - total / 2,
                  "total_tokens": total}})
}

/// One agent run on `rt` as `principal` of `tenant` against a scripted server answering
/// `replies` (default agent settings): the run's summary and the server, which kept every
/// request.
pub async fn scripted_run(
    rt: &toolhost::Runtime,
    replies: Vec<Reply>,
    principal: &str,
    tenant: &str,
) -> (toolhost::agent::Summary, Scripted) {
    use toolhost::agent::{self, AgentConfig, Provider, ProviderOptions};
    let server = scripted(replies, None).await;
    let provider = Provider::new(
        agent::Endpoint::parse(&server.base_url()).unwrap(),
        None,
        ProviderOptions::default(),
    )
    .unwrap();
    let config = AgentConfig::default();
    let messages = agent::prompt_messages("do the task", &config);
    let ctx = rt.context(principal, tenant);
    let summary = agent::run_agent(rt, &provider, "m", messages, &config, ctx).await;
    (summary, server)
}
