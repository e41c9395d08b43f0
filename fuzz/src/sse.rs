//! Target `sse`: the agent loop's response readers — [`SseParser`] over a streamed body, then
//! each API's [`Reader`] (Chat Completions, Responses, Messages) over its events, and over the
//! whole body as a non-streamed response.
//!
//! Input: the first byte seeds how the body is cut into reads, the rest is the body. Invariants,
//! beyond "no panic":
//!
//! - the events (or the error) do not depend on how the body is cut into reads: byte at a time,
//!   pseudo-random cuts, or whole;
//! - no event is longer than [`MAX_EVENT_BYTES`];
//! - a turn has at most [`MAX_CALLS_PER_TURN`] calls, in strictly increasing index order (their
//!   positions), at most [`MAX_CONTENT_BYTES`] of text (and the cut marker), and each call whose
//!   arguments failed carries an `invalid_arguments` failure.

use std::time::Instant;

use toolhost::agent::sse::{SseParser, MAX_EVENT_BYTES};
use toolhost::agent::turn::{
    ModelTurn, TurnError, CONTENT_CUT_MARKER, MAX_CALLS_PER_TURN, MAX_CONTENT_BYTES,
};
use toolhost::agent::wire::{Api, Reader};
use toolhost::{Code, Status};

/// Check one fuzz input.
pub fn check(data: &[u8]) {
    let Some((&seed, body)) = data.split_first() else {
        return;
    };
    let whole = read(body, &[body.len().max(1)]);
    let bytewise = read(body, &[1]);
    assert_eq!(whole, bytewise, "one read vs a byte at a time");
    let sizes: Vec<usize> = (0..16)
        .map(|i| 1 + (usize::from(seed) * 7 + i * 13) % 97)
        .collect();
    assert_eq!(whole, read(body, &sizes), "one read vs reads of {sizes:?}");

    let now = Instant::now();
    if let Ok(events) = &whole {
        for e in events {
            assert!(e.len() <= MAX_EVENT_BYTES, "an event of {} bytes", e.len());
        }
    }
    for api in Api::ALL {
        if let Ok(events) = &whole {
            let mut reader = Reader::new(*api);
            let mut ok = true;
            for e in events {
                if reader.event(e, now).is_err() {
                    ok = false;
                    break;
                }
                if reader.saw_done() {
                    break; // the provider stops reading here
                }
            }
            if ok {
                check_turn(reader.finish(now));
            }
        }
        let mut reader = Reader::new(*api);
        if reader.whole_body(body, now).is_ok() {
            check_turn(reader.finish(now));
        }
    }
}

/// The events of `body` read in pieces of the given sizes (cycled), as the provider reads them:
/// events of every read in order, up to the first error.
fn read(body: &[u8], sizes: &[usize]) -> Result<Vec<String>, TurnError> {
    let mut parser = SseParser::default();
    let mut events = Vec::new();
    let mut rest = body;
    for &size in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (now, later) = rest.split_at(size.min(rest.len()));
        events.extend(parser.push(now)?);
        rest = later;
    }
    Ok(events)
}

fn check_turn(turn: Result<ModelTurn, TurnError>) {
    let Ok(turn) = turn else { return };
    assert!(
        turn.calls.len() <= MAX_CALLS_PER_TURN,
        "{} calls",
        turn.calls.len()
    );
    assert!(
        turn.calls.windows(2).all(|w| w[0].index < w[1].index),
        "calls out of index order"
    );
    let content = turn.content.as_deref().unwrap_or("");
    assert!(
        content.len() <= MAX_CONTENT_BYTES + CONTENT_CUT_MARKER.len(),
        "{} bytes of text",
        content.len()
    );
    for c in &turn.calls {
        if let Err(r) = &c.arguments {
            assert_eq!(r.status, Status::Failed, "{r:?}");
            assert_eq!(r.code, Some(Code::InvalidArguments), "{r:?}");
        }
    }
}
