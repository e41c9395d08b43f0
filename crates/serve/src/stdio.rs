//! MCP over stdio with every line checked: an rmcp transport that sits between the pipes and
//! the session, with no task of its own.
//!
//! `receive` reads newline-delimited frames under [`MAX_FRAME_BYTES`](super::frames::MAX_FRAME_BYTES) itself (a longer line is
//! answered as soon as it crosses the cap and the rest of it is skipped as it arrives, never
//! buffered), runs [`check_frame`] on each line, returns good messages to rmcp and queues the
//! JSON-RPC error of each bad one. `send` writes its line at once, on the thread that answered.
//! Both go through one ordered output buffer ([`output`]), so an error answer can never land
//! inside another line. A request thus crosses no thread of ours between the pipe and rmcp's
//! session loop, and a response none between the handler and the pipe (see
//! `docs/benchmarks-history.md`, issue 15). Reading is cancel-safe: rmcp polls `receive` in a
//! `select!`, and every bit of state lives in [`input::Input`], not in the future.
//!
//! Bounded: input is held at one line; while more than [`MAX_UNREAD_OUTPUT`] bytes wait for a
//! client that does not read, no further input is read, so a client that stops reading stops
//! being read.

mod input;
mod output;

use std::future::poll_fn;
use std::io;
use std::task::Poll;

use rmcp::model::{ClientJsonRpcMessage, GetExtensions, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use tokio::io::{AsyncRead, AsyncWrite};

use super::frames::{check_frame, Frame, FrameError};
use input::{Input, Line};
use output::Output;

/// Bytes written for the client but not yet taken by it, past which no more input is read.
/// A few ordinary answers; one large tool output also stops reading until it is taken.
pub const MAX_UNREAD_OUTPUT: usize = 256 * 1024;

/// The checked stdio transport (see the module docs).
pub struct CheckedStdio<R, W> {
    input: Input<R>,
    output: Output<W>,
    closed: bool,
}

impl<R, W> CheckedStdio<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// Serve frames read from `read`, answering on `write`.
    pub fn new(read: R, write: W) -> CheckedStdio<R, W> {
        CheckedStdio {
            input: Input::new(read),
            output: Output::new(write),
            closed: false,
        }
    }

    /// The next line, while the client takes what was written for it: `None` when the input
    /// ended or cannot be read, or stdout failed (no answer could reach the client).
    fn poll_line(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Option<Line>> {
        match self.output.poll_drive(cx) {
            Err(_) => return Poll::Ready(None),
            Ok(unread) if unread > MAX_UNREAD_OUTPUT => return Poll::Pending,
            Ok(_) => {}
        }
        match self.input.poll_line(cx) {
            Poll::Ready(Ok(Line::End)) | Poll::Ready(Err(_)) => Poll::Ready(None),
            Poll::Ready(Ok(line)) => Poll::Ready(Some(line)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn answer(&self, e: FrameError) {
        self.output.push(&e.answer_line());
    }
}

impl<R, W> Transport<RoleServer> for CheckedStdio<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl std::future::Future<Output = Result<(), io::Error>> + Send + 'static {
        let output = self.output.clone();
        let queued = serde_json::to_vec(&item).map(|mut line| {
            line.push(b'\n');
            output.push(&line)
        });
        async move {
            let end = queued.map_err(io::Error::other)?;
            poll_fn(|cx| output.poll_done(end, cx))
                .await
                .map_err(|e| io::Error::new(e.kind(), "stdout is closed"))
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            if self.closed {
                return None;
            }
            match poll_fn(|cx| self.poll_line(cx)).await? {
                Line::Whole => {}
                Line::TooLong => {
                    self.answer(FrameError::too_large());
                    continue;
                }
                Line::End => return None,
            }
            match check_frame(self.input.line()) {
                Ok(Frame::Skip) => {}
                Ok(Frame::Message {
                    mut message,
                    repeated_argument,
                }) => {
                    if let (JsonRpcMessage::Request(r), Some(rep)) =
                        (&mut *message, repeated_argument)
                    {
                        r.request.extensions_mut().insert(rep);
                    }
                    return Some(*message);
                }
                Err(e) => self.answer(e),
            }
        }
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        self.closed = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
