//! One model turn, whatever the wire format: the text, the proposed tool calls in the order
//! they arrived, how the response ended, and the token usage the endpoint reported. Each
//! format's reader (`wire/`) feeds a [`Parts`] as events arrive and finishes it once.
//!
//! Tool-call argument fragments accumulate per call in the pipeline's
//! [`ArgumentStream`](toolhost_runtime::stream_args::ArgumentStream) (byte and time limits) and are
//! parsed once, when the turn ends. Arguments that never complete or do not parse become an
//! `invalid_arguments` result for that call; nothing partial is ever executed.

use std::time::Instant;

use serde_json::Value;
use sha2::{Digest, Sha256};

use toolhost_contract::ToolResult;
use toolhost_runtime::stream_args::ArgumentStream;

/// Bytes of assistant text kept per turn; the rest is cut (and the text says so).
pub const MAX_CONTENT_BYTES: usize = 1 << 20;
/// What ends a text cut at [`MAX_CONTENT_BYTES`].
pub const CONTENT_CUT_MARKER: &str = "\n[toolhost: the reply was cut here, at 1 MiB]";
/// Tool calls one turn may propose; more is a malformed response.
pub const MAX_CALLS_PER_TURN: usize = 64;
/// Bytes of a call's arguments *as proposed* kept for the history sent back to the model (so
/// it can see a mistake); the arguments themselves are bounded by the argument stream.
pub const MAX_PROPOSED_ARGUMENT_BYTES: usize = 8 << 10;
/// Bytes of a provider's id (call id, item id) kept; a longer one is cut.
pub const MAX_PROVIDER_ID_BYTES: usize = 200;

/// Token counts an endpoint reported for one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TokenUsage {
    pub prompt: u64,
    pub completion: u64,
    pub total: u64,
}

/// How a response ended, in the terms every wire format shares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Finish {
    /// The model ended its answer (`stop`, `end_turn`, `completed`), or the format says no more.
    #[default]
    Stop,
    /// The model stopped to have its tool calls run.
    ToolCalls,
    /// The response was cut at its output limit (`length`, `max_tokens`,
    /// `max_output_tokens`): its text is partial and its calls may be.
    OutputLimit,
    /// The provider withheld or cut the answer (`content_filter`, `refusal`).
    ContentFilter,
}

/// One call the model proposed.
#[derive(Debug, Clone)]
pub struct ProposedCall {
    /// Its position in the turn (0, 1, …), unique within the turn.
    pub index: u32,
    /// The provider's id for it, if it sent one (not trusted to be unique): the id a result
    /// answers (Chat `id`, Responses `call_id`, Messages `id`).
    pub provider_id: Option<String>,
    /// The provider's id of the output item that carried the call (Responses `id`, `fc_…`),
    /// kept beside the call id and never taken for it.
    pub item_id: Option<String>,
    pub name: String,
    /// The parsed arguments, or the `invalid_arguments` result to feed back instead.
    pub arguments: Result<Value, Box<ToolResult>>,
    /// The argument text as the model sent it, cut at [`MAX_PROPOSED_ARGUMENT_BYTES`].
    pub proposed_arguments: String,
    /// SHA-256 (hex) of the whole argument text as sent: what the repeat guard compares when
    /// the arguments do not parse.
    pub proposed_digest: String,
}

/// A complete model turn.
#[derive(Debug, Clone, Default)]
pub struct ModelTurn {
    pub content: Option<String>,
    pub calls: Vec<ProposedCall>,
    /// How it ended, normalized.
    pub finish: Finish,
    /// How it ended, in the format's own word (`length`, `max_tokens`, …), for the operator.
    pub finish_reason: Option<String>,
    pub usage: Option<TokenUsage>,
}

/// Why a response could not become a turn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TurnError {
    #[error("the response is not what the API sends: {0}")]
    Malformed(String),
    #[error("the stream ended before the message finished")]
    Truncated,
    /// Past one of toolhost's own size caps: asking again would pull as much again.
    #[error("{0} is larger than toolhost accepts")]
    TooLarge(&'static str),
}

/// One proposed call as it accumulates.
#[derive(Debug)]
pub(crate) struct PartialCall {
    pub(crate) id: Option<String>,
    item_id: Option<String>,
    pub(crate) name: Option<String>,
    proposed: String,
    digest: Sha256,
    /// Any argument text arrived (a call without any gets `{}` where the format allows it).
    has_arguments: bool,
}

/// What every wire format's reader accumulates: the text (capped), the calls in arrival order
/// with their arguments in the argument stream, the usage and how the response ended.
#[derive(Debug, Default)]
pub(crate) struct Parts {
    content: String,
    has_content: bool,
    /// Text arrived past [`MAX_CONTENT_BYTES`].
    content_cut: bool,
    /// Calls in the order their first part arrived; a call's position keys its arguments.
    pub(crate) calls: Vec<PartialCall>,
    args: ArgumentStream,
    pub(crate) finish: Option<(Finish, String)>,
    pub(crate) usage: Option<TokenUsage>,
}

fn key(position: usize) -> String {
    format!("call-{position}")
}

/// `s` cut at [`MAX_PROVIDER_ID_BYTES`].
fn id(s: &str) -> String {
    toolhost_contract::bounds::clip(s, MAX_PROVIDER_ID_BYTES).to_string()
}

impl Parts {
    /// Text of the answer.
    pub(crate) fn text(&mut self, text: &str) {
        self.has_content = true;
        let room = MAX_CONTENT_BYTES.saturating_sub(self.content.len());
        let kept = toolhost_contract::bounds::clip(text, room);
        self.content_cut |= kept.len() < text.len();
        self.content.push_str(kept);
    }

    /// Whether any text arrived.
    pub(crate) fn has_text(&self) -> bool {
        self.has_content
    }

    /// A new call; its position.
    pub(crate) fn new_call(&mut self) -> Result<usize, TurnError> {
        if self.calls.len() >= MAX_CALLS_PER_TURN {
            return Err(TurnError::Malformed(format!(
                "more than {MAX_CALLS_PER_TURN} tool calls in one message"
            )));
        }
        self.calls.push(PartialCall {
            id: None,
            item_id: None,
            name: None,
            proposed: String::new(),
            digest: Sha256::new(),
            has_arguments: false,
        });
        Ok(self.calls.len() - 1)
    }

    /// The call's id, name and item id, where they arrive (the first non-empty one of each
    /// is kept).
    pub(crate) fn identify(
        &mut self,
        position: usize,
        call_id: Option<&str>,
        name: Option<&str>,
        item_id: Option<&str>,
    ) {
        let c = &mut self.calls[position];
        let nonempty = |s: Option<&str>| s.filter(|s| !s.is_empty()).map(id);
        if c.id.is_none() {
            c.id = nonempty(call_id);
        }
        if c.name.is_none() {
            c.name = name.filter(|s| !s.is_empty()).map(str::to_string);
        }
        if c.item_id.is_none() {
            c.item_id = nonempty(item_id);
        }
    }

    /// A piece of a call's argument text.
    pub(crate) fn arguments(&mut self, position: usize, fragment: &str, now: Instant) {
        let c = &mut self.calls[position];
        c.has_arguments |= !fragment.is_empty();
        c.digest.update(fragment.as_bytes());
        let room = MAX_PROPOSED_ARGUMENT_BYTES.saturating_sub(c.proposed.len());
        c.proposed
            .push_str(toolhost_contract::bounds::clip(fragment, room));
        self.args
            .push(&key(position), c.name.as_deref(), fragment, now);
    }

    /// Whether any argument text arrived for the call.
    pub(crate) fn has_arguments(&self, position: usize) -> bool {
        self.calls[position].has_arguments
    }

    /// SHA-256 of the call's argument text so far.
    pub(crate) fn arguments_digest(&self, position: usize) -> Vec<u8> {
        self.calls[position].digest.clone().finalize().to_vec()
    }

    /// The call's arguments were seen and refused whole (`why` is model-safe).
    pub(crate) fn fail(&mut self, position: usize, why: &'static str) {
        self.args.fail(&key(position), why);
    }

    pub(crate) fn set_finish(&mut self, finish: Finish, word: &str) {
        self.finish = Some((finish, word.to_string()));
    }

    /// The turn: every call's arguments parsed once, the text with its cut marker.
    pub(crate) fn finish(mut self, now: Instant) -> ModelTurn {
        let calls = std::mem::take(&mut self.calls);
        let calls = calls
            .into_iter()
            .enumerate()
            .map(|(position, p)| {
                let name = p.name.unwrap_or_default();
                let arguments = match self.args.finish(&key(position), now) {
                    Ok(call) => Ok(call.arguments),
                    Err(mut r) => {
                        r.tool = name.clone();
                        Err(Box::new(r))
                    }
                };
                ProposedCall {
                    index: u32::try_from(position).unwrap_or(u32::MAX),
                    provider_id: p.id,
                    item_id: p.item_id,
                    name,
                    arguments,
                    proposed_arguments: p.proposed,
                    proposed_digest: hex::encode(p.digest.finalize()),
                }
            })
            .collect();
        if self.content_cut {
            self.content.push_str(CONTENT_CUT_MARKER);
        }
        let (finish, word) = match self.finish {
            Some((f, w)) => (f, Some(w)),
            None => (Finish::Stop, None),
        };
        ModelTurn {
            content: self.has_content.then_some(self.content),
            calls,
            finish,
            finish_reason: word,
            usage: self.usage,
        }
    }
}

/// A response's JSON through the strict parser (depth and number rules). A repeated key is
/// tolerated (the last value wins), but where `in_arguments` places it inside a call's object
/// arguments it is reported by that call's number, so the call ends `invalid_arguments`
/// instead of running with one of the values.
pub(crate) fn parse_strict(
    data: &[u8],
    in_arguments: &dyn Fn(&[toolhost_contract::strict_json::Segment]) -> Option<usize>,
) -> Result<(Value, Vec<usize>), TurnError> {
    let mut repeated = Vec::new();
    let v = toolhost_contract::strict_json::parse_with(data, &mut |path| {
        repeated.extend(in_arguments(path));
        true
    })
    .map_err(|e| TurnError::Malformed(e.to_string()))?;
    Ok((v, repeated))
}

/// Whether a provider id as received names the call whose id was kept (cut at
/// [`MAX_PROVIDER_ID_BYTES`]).
pub(crate) fn same_id(received: &str, kept: &str) -> bool {
    id(received) == kept
}
