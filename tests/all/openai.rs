//! A scripted OpenAI-compatible chat-completions server on loopback: real HTTP/1.1, real
//! server-sent-event chunks in the format hosted endpoints send. Each request gets the next
//! scripted reply (or the fallback's), and every request is kept for assertions.

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
}

/// What the server saw of one request.
#[derive(Debug, Clone)]
pub struct Seen {
    pub authorization: Option<String>,
    pub body: Value,
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
    let log = seen.clone();
    let script = Arc::new(Mutex::new(std::collections::VecDeque::from(script)));
    tokio::spawn(async move {
        let mut n = 0usize;
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let Some(seen) = read_request(&mut sock).await else {
                continue;
            };
            log.lock().unwrap().push(seen);
            let reply =
                script.lock().unwrap().pop_front().unwrap_or_else(|| {
                    fallback.as_ref().map_or(Reply::Status(500, None), |f| f(n))
                });
            n += 1;
            tokio::spawn(async move { answer(sock, reply).await });
        }
    });
    Scripted { port, seen }
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
        authorization: header("authorization"),
        body,
    })
}

async fn answer(mut sock: tokio::net::TcpStream, reply: Reply) {
    let mut reply = reply;
    while let Reply::Delay(d, inner) = reply {
        tokio::time::sleep(d).await;
        reply = *inner;
    }
    let sse_head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
    match reply {
        Reply::Stream(chunks) => {
            let _ = sock.write_all(sse_head.as_bytes()).await;
            for c in chunks {
                let _ = sock.write_all(format!("data: {c}\n\n").as_bytes()).await;
                let _ = sock.flush().await;
            }
            let _ = sock.write_all(b"data: [DONE]\n\n").await;
        }
        Reply::Cut(chunks) => {
            let _ = sock.write_all(sse_head.as_bytes()).await;
            for c in chunks {
                let _ = sock.write_all(format!("data: {c}\n\n").as_bytes()).await;
            }
        }
        Reply::Json(v) => {
            let body = v.to_string();
            let _ = sock
                .write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                )
                .await;
        }
        Reply::Status(code, retry_after) => {
            let body = json!({"error": {"message": "scripted failure", "type": "server_error"}})
                .to_string();
            let retry = retry_after
                .map(|s| format!("retry-after: {s}\r\n"))
                .unwrap_or_default();
            let _ = sock
                .write_all(
                    format!(
                        "HTTP/1.1 {code} Scripted\r\ncontent-type: application/json\r\n{retry}content-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                )
                .await;
        }
        Reply::Body(code, body) => {
            let _ = sock
                .write_all(
                    format!(
                        "HTTP/1.1 {code} Scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                )
                .await;
        }
        Reply::Delay(..) => unreachable!(),
    }
    let _ = sock.shutdown().await;
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
