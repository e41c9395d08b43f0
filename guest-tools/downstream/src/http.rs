//! One bounded `wasi:http` request: method, URL, headers and an optional body in; status,
//! headers and at most [`MAX_BODY`] bytes of the body out.

use wasi::http::outgoing_handler;
use wasi::http::types::{ErrorCode, Fields, Method, OutgoingBody, OutgoingRequest, Scheme};
use wasi::io::streams::StreamError;

/// The most body bytes kept of a response.
const MAX_BODY: usize = 4096;

/// What came back.
pub struct Reply {
    pub status: u16,
    /// Every response header as `name: value` lines.
    pub headers: String,
    pub body: String,
}

/// The wasi:http error code as text: `HttpRequestDenied`.
fn code_text(code: &ErrorCode) -> String {
    let text = format!("{code:?}");
    text.strip_prefix("ErrorCode::")
        .unwrap_or(&text)
        .to_string()
}

/// Split `http(s)://authority/path?query` into its parts.
fn split(url: &str) -> Result<(Scheme, &str, String), String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| "bad URL: expected http:// or https://".to_string())?;
    let scheme = match scheme {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => return Err(format!("bad URL: unsupported scheme {other:?}")),
    };
    let at = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(at);
    if authority.is_empty() {
        return Err("bad URL: missing host".to_string());
    }
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    Ok((scheme, authority, path))
}

/// Send one request and read its answer.
pub fn send(
    method: &str,
    url: &str,
    headers: &[(&str, String)],
    body: Option<&[u8]>,
) -> Result<Reply, String> {
    let (scheme, authority, path) = split(url)?;
    let fields = Fields::new();
    for (name, value) in headers {
        fields
            .append(name, value.as_bytes())
            .map_err(|e| format!("bad header {name}: {e:?}"))?;
    }
    let request = OutgoingRequest::new(fields);
    let method = if method == "POST" {
        Method::Post
    } else {
        Method::Get
    };
    request.set_method(&method).map_err(|()| "bad method")?;
    request
        .set_scheme(Some(&scheme))
        .map_err(|()| "bad scheme")?;
    request
        .set_authority(Some(authority))
        .map_err(|()| format!("bad URL: invalid host {authority:?}"))?;
    request
        .set_path_with_query(Some(&path))
        .map_err(|()| format!("bad URL: invalid path {path:?}"))?;
    let outgoing = request.body().map_err(|()| "body unavailable")?;
    if let Some(bytes) = body {
        let stream = outgoing.write().map_err(|()| "body unavailable")?;
        for piece in bytes.chunks(4096) {
            stream
                .blocking_write_and_flush(piece)
                .map_err(|e| format!("body write failed: {e:?}"))?;
        }
        drop(stream);
    }
    let pending = outgoing_handler::handle(request, None)
        .map_err(|e| format!("request failed: {}", code_text(&e)))?;
    OutgoingBody::finish(outgoing, None)
        .map_err(|e| format!("request failed: {}", code_text(&e)))?;
    let response = loop {
        match pending.get() {
            Some(Ok(Ok(r))) => break r,
            Some(Ok(Err(e))) => return Err(format!("request failed: {}", code_text(&e))),
            Some(Err(())) => return Err("request failed: response already taken".to_string()),
            None => pending.subscribe().block(),
        }
    };
    drop(pending);
    let status = response.status();
    let headers = response
        .headers()
        .entries()
        .into_iter()
        .map(|(k, v)| format!("{k}: {}\n", String::from_utf8_lossy(&v)))
        .collect();
    let incoming = response.consume().map_err(|()| "body unavailable")?;
    let stream = incoming.stream().map_err(|()| "body unavailable")?;
    let mut bytes = Vec::new();
    while bytes.len() < MAX_BODY {
        match stream.blocking_read((MAX_BODY - bytes.len()) as u64) {
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(format!("body read failed: {}", e.to_debug_string()))
            }
        }
    }
    drop(stream);
    drop(incoming);
    drop(response);
    Ok(Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    })
}
