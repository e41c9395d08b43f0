//! The routing headers of a 2026-07-28 request (SEP-2243: `MCP-Protocol-Version`, `Mcp-Method`,
//! `Mcp-Name`), checked for presence before rmcp compares them with the body.
//!
//! rmcp answers the first header it finds missing, so a client learns of them one 400 at a
//! time; here one answer names every missing one. `Mcp-Name` on `tasks/get`, `tasks/update`
//! and `tasks/cancel` (the tasks extension mirrors `taskId` there) is taken from the body when
//! a client leaves it out, as the official Python SDK does: the header only mirrors the body,
//! and the body is what the server acts on. A header that is present, on any method, is left
//! for rmcp to compare with the body, so a mismatch is still `-32020`.

use http::request::Parts;
use http::HeaderValue;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Response, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ErrorCode};
use serde_json::json;

use super::Body;

const METHOD: &str = "mcp-method";
const NAME: &str = "mcp-name";

/// How an `Mcp-Name` header is written when its value cannot be a plain header value.
const BASE64_SENTINEL: &str = "=?base64?";

/// What a request's `Mcp-Name` must mirror, if anything.
enum Named<'a> {
    /// Required by SEP-2243 (`tools/call`, `prompts/get`, `resources/read`).
    Required,
    /// A task's id (`tasks/*`): supplied from the body when missing.
    Task(&'a str),
    /// The method names nothing.
    Nothing,
}

fn named(request: &ClientRequest) -> Named<'_> {
    match request {
        ClientRequest::CallToolRequest(_)
        | ClientRequest::GetPromptRequest(_)
        | ClientRequest::ReadResourceRequest(_) => Named::Required,
        ClientRequest::GetTaskRequest(r) => Named::Task(&r.params.task_id),
        ClientRequest::UpdateTaskRequest(r) => Named::Task(&r.params.task_id),
        ClientRequest::CancelTaskRequest(r) => Named::Task(&r.params.task_id),
        _ => Named::Nothing,
    }
}

/// A task id as an `Mcp-Name` value, when it can be one as written (the ids this host issues
/// always can).
fn plain_value(id: &str) -> Option<HeaderValue> {
    let visible = !id.is_empty() && id.bytes().all(|b| b.is_ascii_graphic());
    (visible && !id.starts_with(BASE64_SENTINEL))
        .then(|| HeaderValue::from_str(id).ok())
        .flatten()
}

/// Complete and check the routing headers of `message`, a request that names 2026-07-28 or
/// later (in its `_meta` or its version header): supply a task's `Mcp-Name` from its body, and
/// return the answer when any header the request needs is absent (400, `-32020`, every
/// missing header named in the message and in `data.missing`).
pub(super) fn complete(
    parts: &mut Parts,
    message: &ClientJsonRpcMessage,
) -> Option<Response<Body>> {
    let ClientJsonRpcMessage::Request(request) = message else {
        return None;
    };
    let mut missing = Vec::new();
    if !parts.headers.contains_key(VERSION_HEADER) {
        missing.push("MCP-Protocol-Version");
    }
    if !parts.headers.contains_key(METHOD) {
        missing.push("Mcp-Method");
    }
    if !parts.headers.contains_key(NAME) {
        match named(&request.request) {
            Named::Required => missing.push("Mcp-Name"),
            Named::Task(id) => match plain_value(id) {
                Some(value) => {
                    parts.headers.insert(NAME, value);
                }
                None => missing.push("Mcp-Name"),
            },
            Named::Nothing => {}
        }
    }
    if missing.is_empty() {
        return None;
    }
    let message = format!(
        "missing header{} {}: a 2026-07-28 request over HTTP carries MCP-Protocol-Version (its \
         version), Mcp-Method (its method) and, for tools/call, prompts/get and resources/read, \
         Mcp-Name (the tool, prompt or resource), each as in the body",
        if missing.len() > 1 { "s" } else { "" },
        missing.join(", "),
    );
    let body = json!({
        "jsonrpc": "2.0",
        "id": request.id,
        "error": {
            "code": ErrorCode::HEADER_MISMATCH.0,
            "message": message,
            "data": {"missing": missing},
        },
    });
    Some(json_answer(StatusCode::BAD_REQUEST, &body))
}

/// The header a Streamable HTTP client names its protocol version in.
pub(super) const VERSION_HEADER: &str = "mcp-protocol-version";

/// A JSON-RPC message as an HTTP answer with `status`.
pub(super) fn json_answer(status: StatusCode, message: &serde_json::Value) -> Response<Body> {
    let body = serde_json::to_vec(message).expect("a JSON value serializes");
    let mut r = Response::new(Full::new(Bytes::from(body)).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    /// A 2026-07-28 request (its `_meta` names the revision).
    fn message(method: &str, mut params: serde_json::Value) -> ClientJsonRpcMessage {
        params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
        serde_json::from_value(
            json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}),
        )
        .expect("a client request")
    }

    fn parts(headers: &[(&str, &str)]) -> Parts {
        let mut b = http::Request::builder().method("POST").uri("/mcp");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    const ALL: [(&str, &str); 2] = [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "x")];

    /// Every missing header is named in one answer, as text and as `data.missing`.
    #[tokio::test]
    async fn one_answer_names_every_missing_header() {
        let call = message("tools/call", json!({"name": "greet", "arguments": {}}));
        let answer = complete(&mut parts(&[]), &call).expect("an answer");
        assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
        let body = answer.into_body().collect().await.unwrap().to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["error"]["code"], -32020);
        assert_eq!(
            v["error"]["data"]["missing"],
            json!(["MCP-Protocol-Version", "Mcp-Method", "Mcp-Name"])
        );
        let text = v["error"]["message"].as_str().unwrap();
        assert!(text.starts_with("missing headers MCP-Protocol-Version, Mcp-Method, Mcp-Name"));
    }

    /// A task's `Mcp-Name` is supplied from its body when absent; a present one is kept as
    /// sent (rmcp compares it); one that cannot be written plainly is reported missing.
    #[test]
    fn a_tasks_name_comes_from_its_body() {
        for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
            let m = message(method, json!({"taskId": "task-0b69", "inputResponses": {}}));
            let mut p = parts(&ALL);
            assert!(complete(&mut p, &m).is_none());
            assert_eq!(p.headers[NAME], "task-0b69", "{method}");

            let mut p = parts(&[ALL[0], ALL[1], ("Mcp-Name", "task-other")]);
            assert!(complete(&mut p, &m).is_none());
            assert_eq!(p.headers[NAME], "task-other", "{method}");
        }
        let odd = message("tasks/get", json!({"taskId": "a b"}));
        assert!(complete(&mut parts(&ALL), &odd).is_some());
        let sentinel = message("tasks/get", json!({"taskId": "=?base64?eA==?="}));
        assert!(complete(&mut parts(&ALL), &sentinel).is_some());
    }

    /// A call still needs its `Mcp-Name`; a list names nothing.
    #[test]
    fn only_naming_methods_need_a_name() {
        let call = message("tools/call", json!({"name": "greet"}));
        assert!(complete(&mut parts(&ALL), &call).is_some());
        let list = message("tools/list", json!({}));
        let mut p = parts(&ALL);
        assert!(complete(&mut p, &list).is_none());
        assert!(!p.headers.contains_key(NAME));
    }
}
