//! A POST body: read (bounded, timed), checked as one frame, and classified for the session
//! rules ([`Kind`]).

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ErrorCode, GetMeta};

use super::{plain, Body, BODY_READ_TIMEOUT, MAX_REQUEST_BODY_BYTES};
use crate::serve::frames::{check_body, Frame, FrameError};
use crate::serve::stateless::is_stateless_version;

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

/// The header a Streamable HTTP client names its protocol version in.
const VERSION_HEADER: &str = "mcp-protocol-version";

/// Whether a message is of the 2026-07-28 revision (see [`Kind::Stateless`]).
fn is_stateless(message: &ClientJsonRpcMessage, parts: &http::request::Parts) -> bool {
    let header = parts
        .headers
        .get(VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(is_stateless_version);
    let body = match message {
        ClientJsonRpcMessage::Request(r) => {
            matches!(r.request, ClientRequest::DiscoverRequest(_))
                || r.request
                    .get_meta()
                    .protocol_version()
                    .is_some_and(|v| is_stateless_version(v.as_str()))
        }
        _ => false,
    };
    header || body
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
            } else if is_stateless(&message, &parts) {
                Kind::Stateless
            } else {
                Kind::InSession
            };
            if kind == Kind::Stateless {
                if let Some(answer) = super::routing::complete(&mut parts, &message) {
                    return Err(answer);
                }
            }
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
    let body = serde_json::to_vec(&e.answer()).expect("a JSON value serializes");
    let mut r = Response::new(Full::new(Bytes::from(body)).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}
