use std::future::poll_fn;

use futures::FutureExt;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};

use super::*;
use crate::frames::MAX_FRAME_BYTES;

type Server = CheckedStdio<ReadHalf<DuplexStream>, WriteHalf<DuplexStream>>;

/// A transport over an in-memory pipe of `capacity` bytes each way, and the client's end.
fn pair(capacity: usize) -> (DuplexStream, Server) {
    let (client, server) = tokio::io::duplex(capacity);
    let (read, write) = tokio::io::split(server);
    (client, CheckedStdio::new(read, write))
}

/// Read at least `n` whole lines from the client's end, parsed (a partial last line is
/// dropped).
async fn answers(client: &mut DuplexStream, n: usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while out.iter().filter(|b| **b == b'\n').count() < n {
        let got = client.read(&mut buf).await.unwrap();
        assert!(got > 0, "the server closed its output");
        out.extend_from_slice(&buf[..got]);
    }
    let whole = out.iter().rposition(|b| *b == b'\n').unwrap();
    out[..whole]
        .split(|b| *b == b'\n')
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect()
}

/// Lines past the cap are answered and skipped without being held; the next line is read.
#[tokio::test]
async fn long_lines_are_skipped_and_the_next_one_read() {
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    let mut input = Input::new(server);
    let writer = tokio::spawn(async move {
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..(3 * MAX_FRAME_BYTES / chunk.len()) {
            client.write_all(&chunk).await.unwrap();
        }
        client.write_all(b"\n{\"a\":1}\r\nlast").await.unwrap();
    });
    assert_eq!(
        poll_fn(|cx| input.poll_line(cx)).await.unwrap(),
        Line::TooLong
    );
    assert_eq!(
        poll_fn(|cx| input.poll_line(cx)).await.unwrap(),
        Line::Whole
    );
    writer.await.unwrap();
    assert_eq!(input.line(), b"{\"a\":1}\r");
    assert!(input.held() <= MAX_FRAME_BYTES + 1, "{}", input.held());
    assert_eq!(poll_fn(|cx| input.poll_line(cx)).await.unwrap(), Line::End);
}

/// A line of exactly the cap is read whole; one byte more is too long.
#[tokio::test]
async fn a_line_at_the_cap_is_whole() {
    let mut at_cap = vec![b' '; MAX_FRAME_BYTES];
    at_cap.push(b'\n');
    let mut input = Input::new(&at_cap[..]);
    assert_eq!(
        poll_fn(|cx| input.poll_line(cx)).await.unwrap(),
        Line::Whole
    );
    assert_eq!(input.line().len(), MAX_FRAME_BYTES);
    let mut over = vec![b' '; MAX_FRAME_BYTES + 2];
    over.push(b'\n');
    let mut input = Input::new(&over[..]);
    assert_eq!(
        poll_fn(|cx| input.poll_line(cx)).await.unwrap(),
        Line::TooLong
    );
    assert_eq!(poll_fn(|cx| input.poll_line(cx)).await.unwrap(), Line::End);
}

/// Through the transport: bad lines are answered in order between good ones, each answer a
/// whole line, and good frames reach rmcp's side.
#[tokio::test]
async fn bad_lines_are_answered_and_good_ones_passed_on() {
    let (mut client, mut t) = pair(1 << 16);
    client
        .write_all(b"nope\n{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"id\":4,\"id\":5}\n{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"}\n")
        .await
        .unwrap();
    let first = t.receive().await.unwrap();
    assert!(matches!(first, JsonRpcMessage::Request(ref r) if r.id.to_string() == "3"));
    let second = t.receive().await.unwrap();
    assert!(matches!(second, JsonRpcMessage::Request(ref r) if r.id.to_string() == "6"));
    let answers = answers(&mut client, 2).await;
    assert_eq!(answers[0]["error"]["code"], json!(-32700));
    assert_eq!(answers[0]["id"], Value::Null);
    assert_eq!(answers[1]["error"]["code"], json!(-32700));
    drop(client);
    assert!(t.receive().await.is_none());
}

/// A receive dropped in the middle of a line (rmcp's loop polls it in a `select!`) loses
/// nothing: the next receive finishes the same line.
#[tokio::test]
async fn a_receive_dropped_mid_line_loses_nothing() {
    let (mut client, mut t) = pair(1 << 16);
    client
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,")
        .await
        .unwrap();
    for _ in 0..3 {
        assert!(t.receive().now_or_never().is_none(), "no whole line yet");
    }
    client.write_all(b"\"method\":\"ping\"}\n").await.unwrap();
    let m = t.receive().await.unwrap();
    assert!(matches!(m, JsonRpcMessage::Request(ref r) if r.id.to_string() == "7"));
}

/// Responses sent at once through a pipe far smaller than one of them all arrive, each a
/// whole line, in the order they were sent, and every send completes.
#[tokio::test]
async fn concurrent_sends_write_whole_lines_in_order() {
    const SENDS: usize = 40;
    let (mut client, mut t) = pair(64);
    let sends: Vec<_> = (0..SENDS)
        .map(|i| {
            let body = json!({"jsonrpc": "2.0", "id": i, "result": {"pad": "x".repeat(3000)}});
            let msg: ServerJsonRpcMessage = serde_json::from_value(body).unwrap();
            tokio::spawn(t.send(msg))
        })
        .collect();
    // Bounded: a lost wake-up would leave the sends waiting for ever.
    let got = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        answers(&mut client, SENDS),
    )
    .await
    .expect("every line is written");
    assert_eq!(got.len(), SENDS);
    for (i, v) in got.iter().enumerate() {
        assert_eq!(v["id"], json!(i), "line {i} out of order");
        assert_eq!(v["result"]["pad"].as_str().unwrap().len(), 3000);
    }
    for s in sends {
        s.await.unwrap().unwrap();
    }
}

/// A send whose client has gone reports the closed pipe instead of waiting for ever.
#[tokio::test]
async fn a_send_to_a_closed_client_fails() {
    let (client, mut t) = pair(64);
    drop(client);
    let msg: ServerJsonRpcMessage =
        serde_json::from_value(json!({"jsonrpc": "2.0", "id": 1, "result": {}})).unwrap();
    assert!(t.send(msg).await.is_err());
    assert!(t.receive().await.is_none());
}

/// A client that sends bad lines and never reads the answers stops being read once
/// [`MAX_UNREAD_OUTPUT`] bytes of answers wait for it; when it reads, reading resumes.
#[tokio::test]
async fn a_client_that_does_not_read_stops_being_read() {
    const CAPACITY: usize = 4096;
    let (mut client, mut t) = pair(CAPACITY);
    let server = tokio::spawn(async move { while t.receive().await.is_some() {} });
    let bad = b"nope\n".repeat(200_000); // 1 MB of lines, each answered with ~100 bytes
    let mut sent = 0;
    let mut idle = 0;
    while sent < bad.len() && idle < 1_000 {
        match client.write(&bad[sent..]).now_or_never() {
            Some(n) => {
                sent += n.unwrap();
                idle = 0;
            }
            None => {
                idle += 1;
                tokio::task::yield_now().await;
            }
        }
    }
    let answer_len = match check_frame(b"nope") {
        Err(e) => e.answer_line().len(),
        Ok(_) => unreachable!("not JSON"),
    };
    // What may be taken before reading stops: the answers that fit in the pending buffer and
    // the pipe, the pipe's own bytes, and the reader's buffer (8 KiB).
    let bound = ((MAX_UNREAD_OUTPUT + CAPACITY) / answer_len + 2) * 5 + CAPACITY + 8192;
    assert!(
        sent < bound,
        "{sent} bytes read from a client that reads nothing"
    );
    // The client reads everything answered so far; the server reads on.
    let taken = answers(&mut client, MAX_UNREAD_OUTPUT / answer_len).await;
    assert!(taken.iter().all(|a| a["error"]["code"] == json!(-32700)));
    let more = client.write(&bad[sent..]).await.unwrap();
    assert!(more > 0);
    drop(client);
    server.await.unwrap();
}
