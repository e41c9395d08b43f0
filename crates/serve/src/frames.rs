//! Every MCP frame is checked before rmcp sees it, and every bad one gets a JSON-RPC error.
//!
//! [`check_frame`] is the pure entry point (bytes in, verdict out; no I/O, no state): the stdio
//! transport ([`super::stdio`]) runs it on each line, the HTTP listener on each POST body. A
//! good frame goes on to rmcp; a bad one is answered here:
//!
//! | frame | answer |
//! |---|---|
//! | not JSON, a number past `f64` (`1e400`), a lone surrogate, invalid UTF-8, nested past [`MAX_DEPTH`] | `-32700`, `id: null` |
//! | two `id` keys (which one would the answer carry?) | `-32700`, `id: null` |
//! | longer than [`MAX_FRAME_BYTES`] (discarded while read, never buffered whole) | `-32600`, `id: null` |
//! | JSON but not one request object (array, scalar, no or bad `jsonrpc`, `method` not a string, an `id` that is not a string or an integer — rmcp also takes an integer written as a float below 2^53, like `7.0`, and the answer echoes it as written) | `-32600`, with the id when it can be read |
//! | a repeated key anywhere but inside `tools/call`'s `params.arguments` | `-32600`, with the id |
//! | `params` neither an object nor an array | `-32600`, with the id |
//! | `params` an array, or an object a known method cannot take (`tools/call` without `name`, …) | `-32602`, with the id |
//! | a method 2026-07-28 removed (`initialize`, `ping`, `logging/setLevel`, `resources/(un)subscribe`) in a request whose `_meta` names 2026-07-28 | `-32601`, with the id |
//! | a notification (no `id`) that is otherwise valid but unusable | nothing: JSON-RPC never answers a notification |
//!
//! A `tools/call` whose `params.arguments` repeats a key is a good frame carrying a
//! [`RepeatedArgumentKey`]: the frontend attaches it to the request and the handler refuses the
//! call as `invalid_arguments`, recorded in the ledger like any refusal (see `docs/mcp.md`).

use rmcp::model::{
    CallToolRequestMethod, CancelTaskMethod, ClientJsonRpcMessage, ClientRequest,
    CompleteRequestMethod, ConstString, DiscoverRequestMethod, ErrorCode, GetPromptRequestMethod,
    GetSkillRequestMethod, GetTaskMethod, InitializeResultMethod, JsonRpcMessage,
    ListPromptsRequestMethod, ListResourceTemplatesRequestMethod, ListResourcesRequestMethod,
    ListSkillsRequestMethod, ListToolsRequestMethod, PingRequestMethod,
    ReadResourceDirectoryRequestMethod, ReadResourceRequestMethod, RequestId,
    SetLevelRequestMethod, SubscribeRequestMethod, SubscriptionsListenRequestMethod,
    UnsubscribeRequestMethod, UpdateTaskMethod,
};
use serde_json::{json, Map, Value};

pub use toolhost_contract::strict_json::MAX_DEPTH;
use toolhost_contract::strict_json::{self, KeyPath, StrictJsonError};

/// Largest frame accepted: one stdio line (without its newline) or one HTTP POST body.
///
/// Twice the pipeline's own argument cap (`runtime::MAX_INPUT_BYTES`, 1 MiB), so every call the
/// pipeline could accept fits with its JSON-RPC envelope, name, `_meta` and escaping; anything
/// larger could only be refused later, after the host had held and parsed it. It is what one
/// line can make the host hold (a frame is read into one buffer, then parsed once).
pub const MAX_FRAME_BYTES: usize = 2 << 20;

/// The UTF-8 byte order mark, which RFC 8259 §8.1 lets a parser ignore (rmcp does too).
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// The requests rmcp has a typed form for. rmcp files a known method whose params do not fit
/// under its catch-all `CustomRequest` and then answers "method not found"; for these methods
/// that is wrong, and the frame check answers `-32602` instead.
const TYPED_METHODS: &[&str] = &[
    PingRequestMethod::VALUE,
    InitializeResultMethod::VALUE,
    DiscoverRequestMethod::VALUE,
    CompleteRequestMethod::VALUE,
    SetLevelRequestMethod::VALUE,
    GetPromptRequestMethod::VALUE,
    ListPromptsRequestMethod::VALUE,
    ListResourcesRequestMethod::VALUE,
    ListResourceTemplatesRequestMethod::VALUE,
    ReadResourceRequestMethod::VALUE,
    SubscriptionsListenRequestMethod::VALUE,
    SubscribeRequestMethod::VALUE,
    UnsubscribeRequestMethod::VALUE,
    CallToolRequestMethod::VALUE,
    ListToolsRequestMethod::VALUE,
    GetTaskMethod::VALUE,
    UpdateTaskMethod::VALUE,
    CancelTaskMethod::VALUE,
    ListSkillsRequestMethod::VALUE,
    GetSkillRequestMethod::VALUE,
    ReadResourceDirectoryRequestMethod::VALUE,
];

/// A `tools/call` whose arguments repeat a key: attached to the request (as an rmcp or HTTP
/// request extension) so the handler refuses the call as `invalid_arguments`. Only the frame
/// check makes one; a client cannot send it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepeatedArgumentKey(pub KeyPath);

/// A frame that passed the check.
#[derive(Debug)]
pub enum Frame {
    /// A message for rmcp.
    Message {
        message: Box<ClientJsonRpcMessage>,
        /// Set when this is a `tools/call` whose arguments repeat a key.
        repeated_argument: Option<RepeatedArgumentKey>,
    },
    /// Nothing to do and nothing to answer: an empty line, or a notification rmcp cannot use.
    Skip,
}

/// A bad frame: the JSON-RPC error it is answered with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message} ({code})")]
pub struct FrameError {
    /// `-32700`, `-32600`, `-32602`, or `-32601` for a method 2026-07-28 removed.
    pub code: i32,
    /// The request's id, when one could be read unambiguously; `null` in the answer otherwise.
    pub id: Option<Value>,
    /// Safe to show the client: says what is wrong with its frame, nothing of the host.
    pub message: String,
}

impl FrameError {
    fn parse(why: impl std::fmt::Display) -> FrameError {
        FrameError {
            code: ErrorCode::PARSE_ERROR.0,
            id: None,
            message: format!("Parse error: {why}"),
        }
    }

    fn invalid(id: Option<&Value>, why: impl std::fmt::Display) -> FrameError {
        FrameError {
            code: ErrorCode::INVALID_REQUEST.0,
            id: id.cloned(),
            message: format!("Invalid request: {why}"),
        }
    }

    fn params(id: Option<&Value>, why: impl std::fmt::Display) -> FrameError {
        FrameError {
            code: ErrorCode::INVALID_PARAMS.0,
            id: id.cloned(),
            message: format!("Invalid params: {why}"),
        }
    }

    /// The answer to a frame longer than [`MAX_FRAME_BYTES`].
    pub fn too_large() -> FrameError {
        FrameError::invalid(
            None,
            format_args!("the message is longer than {MAX_FRAME_BYTES} bytes"),
        )
    }

    /// The JSON-RPC error response.
    pub fn answer(&self) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": self.id.clone().unwrap_or(Value::Null),
            "error": {"code": self.code, "message": self.message},
        })
    }

    /// The answer as one line, newline included.
    pub fn answer_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(&self.answer()).expect("a JSON value serializes");
        line.push(b'\n');
        line
    }
}

/// Check one frame: a line without its newline (a trailing `\r` and a leading BOM are
/// ignored), or an HTTP body. Pure: no I/O, no state, bounded work for bounded input.
pub fn check_frame(frame: &[u8]) -> Result<Frame, FrameError> {
    let frame = frame.strip_suffix(b"\r").unwrap_or(frame);
    let frame = frame.strip_prefix(UTF8_BOM).unwrap_or(frame);
    if frame.len() > MAX_FRAME_BYTES {
        return Err(FrameError::too_large());
    }
    if frame.iter().all(u8::is_ascii_whitespace) {
        return Ok(Frame::Skip);
    }
    let mut in_arguments = None::<KeyPath>;
    let mut elsewhere = None::<KeyPath>;
    let value = strict_json::parse_with(frame, &mut |path| {
        if path.len() == 1 && path[0].is_key("id") {
            return false; // no answer could say which request it is for
        }
        let slot = if path.len() > 2 && path[0].is_key("params") && path[1].is_key("arguments") {
            &mut in_arguments
        } else {
            &mut elsewhere
        };
        slot.get_or_insert_with(|| KeyPath(path.to_vec()));
        true
    })
    .map_err(|e| match e {
        StrictJsonError::DuplicateKey(_) => FrameError::parse("the message has more than one id"),
        e => FrameError::parse(e),
    })?;
    let Value::Object(obj) = &value else {
        return Err(FrameError::invalid(
            None,
            "a message is one JSON object (batches are not supported)",
        ));
    };
    let id = read_id(obj)?;
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(FrameError::invalid(id, "`jsonrpc` must be \"2.0\""));
    }
    if let Some(path) = elsewhere {
        return Err(FrameError::invalid(
            id,
            format_args!("the key {path} appears more than once in one object"),
        ));
    }
    let Some(method) = obj.get("method") else {
        return response(value);
    };
    let Some(method) = method.as_str() else {
        return Err(FrameError::invalid(id, "`method` must be a string"));
    };
    match obj.get("params") {
        None | Some(Value::Null | Value::Object(_)) => {}
        Some(Value::Array(_)) if id.is_some() => {
            return Err(FrameError::params(id, "MCP params are an object"));
        }
        Some(Value::Array(_)) => return Ok(Frame::Skip),
        Some(_) => {
            return Err(FrameError::invalid(
                id,
                "`params` must be an object or an array",
            ))
        }
    }
    let Some(id) = id else {
        // A notification: never answered, whatever is wrong with it.
        return Ok(match serde_json::from_value(value) {
            Ok(message) => Frame::Message {
                message: Box::new(message),
                repeated_argument: None,
            },
            Err(_) => Frame::Skip,
        });
    };
    let repeated_argument = match in_arguments {
        Some(path) if method == CallToolRequestMethod::VALUE => Some(RepeatedArgumentKey(path)),
        Some(path) => {
            return Err(FrameError::invalid(
                Some(id),
                format_args!("the key {path} appears more than once in one object"),
            ))
        }
        None => None,
    };
    if removed_in_2026(method, &value) {
        return Err(FrameError {
            code: ErrorCode::METHOD_NOT_FOUND.0,
            id: Some(id.clone()),
            message: format!("Method not found: `{method}` does not exist in protocol 2026-07-28"),
        });
    }
    // Owned copies of the small parts, so the (possibly large) value moves without a copy.
    let (id, method) = (id.clone(), method.to_owned());
    let typed = TYPED_METHODS.contains(&method.as_str());
    let bad_params = || FrameError::params(Some(&id), format_args!("not valid for `{method}`"));
    match serde_json::from_value::<ClientJsonRpcMessage>(value) {
        Ok(JsonRpcMessage::Request(r))
            if typed && matches!(r.request, ClientRequest::CustomRequest(_)) =>
        {
            Err(bad_params())
        }
        Ok(message) => Ok(Frame::Message {
            message: Box::new(message),
            repeated_argument,
        }),
        Err(_) if typed => Err(bad_params()),
        Err(_) => Err(FrameError::invalid(Some(&id), "not a valid MCP request")),
    }
}

/// The requests 2026-07-28 removed (the handshake, `ping`, logging's level, resource
/// subscriptions): named in a request of that revision, they are `-32601` whatever their params.
const REMOVED_IN_2026: &[&str] = &[
    InitializeResultMethod::VALUE,
    PingRequestMethod::VALUE,
    SetLevelRequestMethod::VALUE,
    SubscribeRequestMethod::VALUE,
    UnsubscribeRequestMethod::VALUE,
];

/// Whether `method` is one 2026-07-28 removed, in a request whose `_meta` names that revision.
fn removed_in_2026(method: &str, request: &Value) -> bool {
    let version = request
        .pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")
        .and_then(Value::as_str);
    REMOVED_IN_2026.contains(&method) && version.is_some_and(super::stateless::is_stateless_version)
}

/// Check one HTTP POST body: [`check_frame`], except that an empty body is a parse error
/// (there is no empty line to skip over HTTP).
pub fn check_body(body: &[u8]) -> Result<Frame, FrameError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(FrameError::parse("the body is empty"));
    }
    check_frame(body)
}

/// The frame's `id`, when it has one rmcp can correlate: a string or an integer (rmcp also
/// takes an integer written as a float below 2^53, e.g. `7.0`; it is echoed as written).
fn read_id(obj: &Map<String, Value>) -> Result<Option<&Value>, FrameError> {
    match obj.get("id") {
        None => Ok(None),
        // A client's error response to a request it could not read carries `id: null`.
        Some(Value::Null) if obj.contains_key("error") && !obj.contains_key("method") => Ok(None),
        Some(v) if serde_json::from_value::<RequestId>(v.clone()).is_ok() => Ok(Some(v)),
        Some(_) => Err(FrameError::invalid(
            None,
            "`id` must be a string or an integer",
        )),
    }
}

/// A frame without `method`: the client's response to one of the server's requests. A bad one
/// is answered with `id: null`: its id names the server's request, not one of the client's.
fn response(value: Value) -> Result<Frame, FrameError> {
    match serde_json::from_value::<ClientJsonRpcMessage>(value) {
        Ok(message @ (JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_))) => {
            Ok(Frame::Message {
                message: Box::new(message),
                repeated_argument: None,
            })
        }
        _ => Err(FrameError::invalid(
            None,
            "a message without `method` must be a response (`result` or `error`)",
        )),
    }
}

impl RepeatedArgumentKey {
    /// The repeated key's path within the arguments (`/value`, not `/params/arguments/value`).
    pub fn within_arguments(&self) -> KeyPath {
        KeyPath(self.0 .0[2..].to_vec())
    }
}

/// The frame check's mark on a `tools/call` whose arguments repeat a key: on the request
/// itself over stdio, on the HTTP request's parts over HTTP.
pub fn repeated_argument_key(
    cx: &rmcp::service::RequestContext<rmcp::service::RoleServer>,
) -> Option<RepeatedArgumentKey> {
    cx.extensions
        .get::<RepeatedArgumentKey>()
        .or_else(|| {
            cx.extensions
                .get::<http::request::Parts>()
                .and_then(|p| p.extensions.get::<RepeatedArgumentKey>())
        })
        .cloned()
}

#[cfg(test)]
mod tests;
