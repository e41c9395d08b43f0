//! MCP over stdio with every line checked: an rmcp transport that sits between the pipes and
//! the session.
//!
//! One reader task reads newline-delimited frames under [`MAX_FRAME_BYTES`] (a longer line is
//! answered as soon as it crosses the cap and the rest of it is skipped as it arrives, never
//! buffered), runs [`check_frame`] on each line, hands good messages to rmcp and queues the
//! JSON-RPC error of each bad one. One writer task owns stdout and writes whole lines, from
//! that queue and from rmcp's responses alike, so an error answer can never land inside another
//! line. Both queues are bounded: a client that stops reading stops being read.

use std::io;

use rmcp::model::{ClientJsonRpcMessage, GetExtensions, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use super::frames::{check_frame, Frame, FrameError, MAX_FRAME_BYTES};

/// Lines waiting for stdout. Small: the writer blocks on a client that does not read, and
/// then so does everything that answers it.
const OUTGOING_QUEUE: usize = 16;

/// Checked messages waiting for rmcp. One: the reader holds at most one parsed frame beyond
/// the line it is reading.
const INCOMING_QUEUE: usize = 1;

/// The checked stdio transport (see the module docs).
pub struct CheckedStdio {
    incoming: mpsc::Receiver<ClientJsonRpcMessage>,
    outgoing: mpsc::Sender<Outgoing>,
}

/// One whole line for stdout, and who waits for it to be written.
struct Outgoing {
    line: Vec<u8>,
    written: Option<oneshot::Sender<io::Result<()>>>,
}

impl CheckedStdio {
    /// Serve frames read from `read`, answering on `write`. Spawns the reader and the writer
    /// task (on the current tokio runtime); they end with the input and the transport.
    pub fn new<R, W>(read: R, write: W) -> CheckedStdio
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (out_tx, out_rx) = mpsc::channel(OUTGOING_QUEUE);
        let (in_tx, in_rx) = mpsc::channel(INCOMING_QUEUE);
        tokio::spawn(write_lines(write, out_rx));
        tokio::spawn(read_frames(read, in_tx, out_tx.clone()));
        CheckedStdio {
            incoming: in_rx,
            outgoing: out_tx,
        }
    }
}

impl Transport<RoleServer> for CheckedStdio {
    type Error = io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl std::future::Future<Output = Result<(), io::Error>> + Send + 'static {
        let out = self.outgoing.clone();
        async move {
            let mut line = serde_json::to_vec(&item).map_err(io::Error::other)?;
            line.push(b'\n');
            let (done, written) = oneshot::channel();
            out.send(Outgoing {
                line,
                written: Some(done),
            })
            .await
            .map_err(|_| closed())?;
            written.await.map_err(|_| closed())?
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        self.incoming.recv().await
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        self.incoming.close();
        Ok(())
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "stdout is closed")
}

/// Write each line whole, then flush; stop at the first write error.
async fn write_lines<W: AsyncWrite + Unpin>(mut write: W, mut lines: mpsc::Receiver<Outgoing>) {
    while let Some(o) = lines.recv().await {
        let result = async {
            write.write_all(&o.line).await?;
            write.flush().await
        }
        .await;
        let failed = result.is_err();
        if let Some(done) = o.written {
            let _ = done.send(result);
        }
        if failed {
            return;
        }
    }
}

/// Read and check frames until the input ends (or rmcp stops listening).
async fn read_frames<R: AsyncRead + Unpin>(
    read: R,
    to_rmcp: mpsc::Sender<ClientJsonRpcMessage>,
    answers: mpsc::Sender<Outgoing>,
) {
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    let answer = |e: FrameError| Outgoing {
        line: e.answer_line(),
        written: None,
    };
    loop {
        match read_line(&mut reader, &mut line).await {
            Ok(Line::Whole) => {}
            Ok(Line::TooLong) => {
                if answers.send(answer(FrameError::too_large())).await.is_err() {
                    return;
                }
                match skip_line(&mut reader).await {
                    Ok(true) => continue,
                    _ => return,
                }
            }
            Ok(Line::End) | Err(_) => return,
        }
        let verdict = check_frame(&line);
        line.clear();
        match verdict {
            Ok(Frame::Skip) => {}
            Ok(Frame::Message {
                mut message,
                repeated_argument,
            }) => {
                if let (JsonRpcMessage::Request(r), Some(rep)) = (&mut *message, repeated_argument)
                {
                    r.request.extensions_mut().insert(rep);
                }
                if to_rmcp.send(*message).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                if answers.send(answer(e)).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// How reading one line ended.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// `line` holds a whole line, without its newline.
    Whole,
    /// The line passed [`MAX_FRAME_BYTES`]; what was read of it is dropped.
    TooLong,
    /// The input ended (a last line without a newline is incomplete and dropped).
    End,
}

/// Read one line into `line` (empty on entry), holding at most [`MAX_FRAME_BYTES`] (+ the `\r`
/// of a CRLF ending).
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    line: &mut Vec<u8>,
) -> io::Result<Line> {
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(Line::End);
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.unwrap_or(available.len());
        if line.len() + take > MAX_FRAME_BYTES + 1 {
            line.clear();
            line.shrink_to(MAX_FRAME_BYTES);
            return Ok(Line::TooLong);
        }
        line.extend_from_slice(&available[..take]);
        reader.consume(newline.map_or(take, |n| n + 1));
        if newline.is_some() {
            return Ok(Line::Whole);
        }
    }
}

/// Skip the rest of a line without keeping it; `false` when the input ended first.
async fn skip_line<R: AsyncRead + Unpin>(reader: &mut BufReader<R>) -> io::Result<bool> {
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(false);
        }
        match available.iter().position(|b| *b == b'\n') {
            Some(n) => {
                reader.consume(n + 1);
                return Ok(true);
            }
            None => {
                let all = available.len();
                reader.consume(all);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Lines past the cap are answered and skipped without being held; the next line is read.
    #[tokio::test]
    async fn long_lines_are_skipped_and_the_next_one_read() {
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let mut reader = BufReader::new(server);
        let writer = tokio::spawn(async move {
            let chunk = vec![b'x'; 64 * 1024];
            for _ in 0..(3 * MAX_FRAME_BYTES / chunk.len()) {
                client.write_all(&chunk).await.unwrap();
            }
            client.write_all(b"\n{\"a\":1}\r\nlast").await.unwrap();
        });
        let mut line = Vec::new();
        assert_eq!(
            read_line(&mut reader, &mut line).await.unwrap(),
            Line::TooLong
        );
        assert!(
            line.capacity() <= MAX_FRAME_BYTES + 1,
            "{}",
            line.capacity()
        );
        assert!(skip_line(&mut reader).await.unwrap());
        assert_eq!(
            read_line(&mut reader, &mut line).await.unwrap(),
            Line::Whole
        );
        assert_eq!(line, b"{\"a\":1}\r");
        line.clear();
        writer.await.unwrap();
        assert_eq!(read_line(&mut reader, &mut line).await.unwrap(), Line::End);
    }

    /// A line of exactly the cap is read whole.
    #[tokio::test]
    async fn a_line_at_the_cap_is_whole() {
        let mut input = vec![b' '; MAX_FRAME_BYTES];
        input.push(b'\n');
        let mut reader = BufReader::new(&input[..]);
        let mut line = Vec::new();
        assert_eq!(
            read_line(&mut reader, &mut line).await.unwrap(),
            Line::Whole
        );
        assert_eq!(line.len(), MAX_FRAME_BYTES);
    }

    /// Through the transport: bad lines are answered in order between good ones, each answer a
    /// whole line, and good frames reach rmcp's side.
    #[tokio::test]
    async fn bad_lines_are_answered_and_good_ones_passed_on() {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server);
        let mut t = CheckedStdio::new(read, write);
        client
            .write_all(b"nope\n{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"id\":4,\"id\":5}\n")
            .await
            .unwrap();
        let first = t.receive().await.unwrap();
        assert!(matches!(first, JsonRpcMessage::Request(ref r) if r.id.to_string() == "3"));
        let mut out = Vec::new();
        let mut buf = [0u8; 512];
        while out.iter().filter(|b| **b == b'\n').count() < 2 {
            let n = client.read(&mut buf).await.unwrap();
            assert!(n > 0);
            out.extend_from_slice(&buf[..n]);
        }
        let answers: Vec<Value> = out
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        assert_eq!(answers[0]["error"]["code"], json!(-32700));
        assert_eq!(answers[0]["id"], Value::Null);
        assert_eq!(answers[1]["error"]["code"], json!(-32700));
        drop(client);
        assert!(t.receive().await.is_none());
    }
}
