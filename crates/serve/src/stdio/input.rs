//! stdin as newline-delimited lines under [`MAX_FRAME_BYTES`], read by polling: every bit of
//! state (the partial line, whether a long line is being skipped) lives here, not in a future,
//! so a read dropped half way by rmcp's `select!` loses nothing.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncBufRead, AsyncRead, BufReader};

use super::super::frames::MAX_FRAME_BYTES;

/// How reading one line ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Line {
    /// [`Input::line`] holds a whole line, without its newline.
    Whole,
    /// The line passed [`MAX_FRAME_BYTES`]; what was read of it is dropped, and the rest of it
    /// is skipped as it arrives.
    TooLong,
    /// The input ended (a last line without a newline is incomplete and dropped).
    End,
}

/// The reading half of the stdio transport.
pub(super) struct Input<R> {
    read: BufReader<R>,
    line: Vec<u8>,
    /// In the middle of a line that passed the cap: drop bytes up to its newline.
    skipping: bool,
    /// `line` holds the whole line delivered last; the next poll starts a new one.
    delivered: bool,
}

impl<R: AsyncRead + Unpin> Input<R> {
    pub(super) fn new(read: R) -> Input<R> {
        Input {
            read: BufReader::new(read),
            line: Vec::new(),
            skipping: false,
            delivered: false,
        }
    }

    /// The line the last [`Line::Whole`] delivered (emptied by the next poll).
    pub(super) fn line(&self) -> &[u8] {
        &self.line
    }

    /// What the line buffer holds allocated (the bound the tests check).
    #[cfg(test)]
    pub(super) fn held(&self) -> usize {
        self.line.capacity()
    }

    /// The next line. Holds at most [`MAX_FRAME_BYTES`] (+ the `\r` of a CRLF ending).
    pub(super) fn poll_line(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Line>> {
        if self.delivered {
            self.line.clear();
            self.delivered = false;
        }
        loop {
            let available = ready!(Pin::new(&mut self.read).poll_fill_buf(cx))?;
            if available.is_empty() {
                return Poll::Ready(Ok(Line::End));
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.unwrap_or(available.len());
            let consumed = newline.map_or(take, |n| n + 1);
            if self.skipping {
                Pin::new(&mut self.read).consume(consumed);
                self.skipping = newline.is_none();
                continue;
            }
            if self.line.len() + take > MAX_FRAME_BYTES + 1 {
                Pin::new(&mut self.read).consume(consumed);
                self.line.clear();
                self.line.shrink_to(MAX_FRAME_BYTES);
                self.skipping = newline.is_none();
                return Poll::Ready(Ok(Line::TooLong));
            }
            self.line.extend_from_slice(&available[..take]);
            Pin::new(&mut self.read).consume(consumed);
            if newline.is_some() {
                self.delivered = true;
                return Poll::Ready(Ok(Line::Whole));
            }
        }
    }
}
