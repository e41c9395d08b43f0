//! A POST body: read (bounded, timed), checked as one frame, and classified for the session
//! rules ([`Kind`]).

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ErrorCode, GetMeta};

use super::routing::{json_answer, VERSION_HEADER};
use super::{plain, Body, BODY_READ_TIMEOUT, MAX_REQUEST_BODY_BYTES};
use crate::frames::{check_body, Frame, FrameError};
use crate::stateless::is_stateless_version;

/// What a good POST body asks of the session rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `initialize`: opens a session.
    Initialize,
    /// A 2026-07-28 message (its `_meta` or the `MCP-Protocol-Version` header names that
    /// revision, or it is `server/discover`): served without a session.
    Stateless,
    /// Anything else belongs to a session.
    InSession,
}

/// Whether a message names the 2026-07-28 revision or a later one, in its `_meta` or in the
/// `MCP-Protocol-Version` header.
fn names_revision(message: &ClientJsonRpcMessage, parts: &http::request::Parts) -> bool {
    let header = parts
        .headers
        .get(VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(is_stateless_version);
    let body = match message {
        ClientJsonRpcMessage::Request(r) => r
            .request
            .get_meta()
            .protocol_version()
            .is_some_and(|v| is_stateless_version(v.as_str())),
        _ => false,
    };
    header || body
}

/// Whether a message is a `server/discover`, which is served without a session whatever it
/// names (see [`Kind::Stateless`]).
fn is_discover(message: &ClientJsonRpcMessage) -> bool {
    matches!(message, ClientJsonRpcMessage::Request(r)
        if matches!(r.request, ClientRequest::DiscoverRequest(_)))
}

/// A good POST body: the request rmcp gets, its [`Kind`], and the tool it calls (for a
/// `tools/call`).
pub(super) type Checked = (Request<Full<Bytes>>, Kind, Option<String>);

/// Read a POST body (bounded) and check it as one frame. A good one comes back as the request
/// rmcp gets, carrying the frame check's mark when its arguments repeat a key, with its
/// [`Kind`] and the tool it calls; anything else comes back as the answer.
pub(super) async fn checked(req: Request<Incoming>) -> Result<Checked, Response<Body>> {
    let (mut parts, body) = req.into_parts();
    let too_large = || rpc_error(StatusCode::PAYLOAD_TOO_LARGE, &FrameError::too_large());
    if hyper::body::Body::size_hint(&body).lower() > MAX_REQUEST_BODY_BYTES as u64 {
        return Err(too_large());
    }
    let read = Limited::new(body, MAX_REQUEST_BODY_BYTES).collect();
    let Ok(read) = tokio::time::timeout(BODY_READ_TIMEOUT, read).await else {
        return Err(plain(
            StatusCode::REQUEST_TIMEOUT,
            "the request body did not arrive in time",
        ));
    };
    let bytes = match read {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => return Err(too_large()),
        Err(_) => {
            return Err(plain(
                StatusCode::BAD_REQUEST,
                "the request body could not be read",
            ))
        }
    };
    match check_body(&bytes) {
        Ok(Frame::Message {
            message,
            repeated_argument,
        }) => {
            if let Some(mark) = repeated_argument {
                parts.extensions.insert(mark);
            }
            let kind = if matches!(
                *message,
                ClientJsonRpcMessage::Request(ref r)
                    if matches!(r.request, ClientRequest::InitializeRequest(_))
            ) {
                Kind::Initialize
            } else if names_revision(&message, &parts) {
                // A request naming 2026-07-28 owes its routing headers (`routing.rs`).
                if let Some(answer) = super::routing::complete(&mut parts, &message) {
                    return Err(answer);
                }
                Kind::Stateless
            } else if is_discover(&message) {
                // A bare probe: rmcp answers what its `_meta` lacks.
                Kind::Stateless
            } else {
                Kind::InSession
            };
            let tool = match *message {
                ClientJsonRpcMessage::Request(ref r) => match &r.request {
                    ClientRequest::CallToolRequest(c) => Some(c.params.name.to_string()),
                    _ => None,
                },
                _ => None,
            };
            Ok((Request::from_parts(parts, Full::new(bytes)), kind, tool))
        }
        // A notification nothing can use: accepted, as rmcp accepts notifications.
        Ok(Frame::Skip) => Err(plain(StatusCode::ACCEPTED, "")),
        // Streamable HTTP answers an unknown method 404.
        Err(e) if e.code == ErrorCode::METHOD_NOT_FOUND.0 => {
            Err(rpc_error(StatusCode::NOT_FOUND, &e))
        }
        Err(e) => Err(rpc_error(StatusCode::BAD_REQUEST, &e)),
    }
}

/// A JSON-RPC error as an HTTP answer.
fn rpc_error(status: StatusCode, e: &FrameError) -> Response<Body> {
    json_answer(status, &e.answer())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bare `server/discover` names no revision, so it owes no routing headers (rmcp names
    /// the `_meta` it lacks) and is still served without a session; the version header alone
    /// makes it name one, as `_meta` does.
    #[test]
    fn a_bare_discover_names_no_revision() {
        let parts = |headers: &[(&str, &str)]| {
            let mut b = http::Request::builder().method("POST").uri("/mcp");
            for (k, v) in headers {
                b = b.header(*k, *v);
            }
            b.body(()).unwrap().into_parts().0
        };
        let message = |params: serde_json::Value| -> ClientJsonRpcMessage {
            serde_json::from_value(serde_json::json!(
                {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": params}))
            .unwrap()
        };
        let bare = message(serde_json::json!({}));
        assert!(!names_revision(&bare, &parts(&[])));
        assert!(is_discover(&bare));
        assert!(names_revision(
            &bare,
            &parts(&[("MCP-Protocol-Version", "2026-07-28")])
        ));
        let modern = message(serde_json::json!(
            {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}));
        assert!(names_revision(&modern, &parts(&[])));
        assert!(!names_revision(
            &bare,
            &parts(&[("MCP-Protocol-Version", "2025-11-25")])
        ));
    }
}
