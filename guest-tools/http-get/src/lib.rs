//! An HTTP GET tool over wasi:http.
wit_bindgen::generate!({
    path: ["../../wit", "wit"],
    world: "example:http-get/http-get",
    generate_all,
});

use exports::example::http_get::tools::{Guest, Response};
use wasi::http::outgoing_handler;
use wasi::http::types::{ErrorCode, Fields, Method, OutgoingRequest, Scheme};
use wasi::io::streams::StreamError;

/// The most body bytes returned.
const MAX_BODY: usize = 64 * 1024;

struct HttpGet;

/// The pieces of an http(s) URL that wasi:http needs.
struct Target {
    scheme: Scheme,
    authority: String,
    path_with_query: String,
}

fn parse_url(url: &str) -> Result<Target, String> {
    let url = url.trim();
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| "bad URL: expected http://host/path or https://host/path".to_string())?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => return Err(format!("bad URL: unsupported scheme {other:?}")),
    };
    // A fragment is never sent to the server.
    let rest = rest.split('#').next().unwrap_or("");
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    if authority.is_empty() {
        return Err("bad URL: missing host".to_string());
    }
    if authority.contains('@') {
        return Err("bad URL: credentials in the URL are not supported".to_string());
    }
    if authority
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err("bad URL: invalid characters in host".to_string());
    }
    if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("bad URL: spaces and control characters must be percent-encoded".to_string());
    }
    let path_with_query = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    Ok(Target {
        scheme,
        authority: authority.to_string(),
        path_with_query,
    })
}

/// The wasi:http error code as text, without the Rust type prefix: `HttpRequestDenied`.
fn code_text(code: &ErrorCode) -> String {
    let text = format!("{code:?}");
    match text.strip_prefix("ErrorCode::") {
        Some(rest) => rest.to_string(),
        None => text,
    }
}

fn get(url: &str) -> Result<Response, String> {
    let target = parse_url(url)?;

    let headers = Fields::new();
    // Best effort: a host may forbid setting some headers.
    let _ = headers.set("user-agent", &[b"toolhost-http-get/0.1".to_vec()]);
    let request = OutgoingRequest::new(headers);
    request
        .set_method(&Method::Get)
        .map_err(|()| "bad URL: invalid method".to_string())?;
    request
        .set_scheme(Some(&target.scheme))
        .map_err(|()| "bad URL: invalid scheme".to_string())?;
    request
        .set_authority(Some(&target.authority))
        .map_err(|()| format!("bad URL: invalid host {:?}", target.authority))?;
    request
        .set_path_with_query(Some(&target.path_with_query))
        .map_err(|()| format!("bad URL: invalid path {:?}", target.path_with_query))?;

    let pending = outgoing_handler::handle(request, None)
        .map_err(|e| format!("request failed: {}", code_text(&e)))?;
    let response = loop {
        match pending.get() {
            Some(Ok(Ok(response))) => break response,
            Some(Ok(Err(e))) => return Err(format!("request failed: {}", code_text(&e))),
            Some(Err(())) => return Err("request failed: response already taken".to_string()),
            None => pending.subscribe().block(),
        }
    };
    drop(pending);

    let status = response.status();
    let content_type = {
        let headers = response.headers();
        let values = headers.get("content-type");
        values
            .first()
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };

    let body = response
        .consume()
        .map_err(|()| "body read failed: body unavailable".to_string())?;
    let stream = body
        .stream()
        .map_err(|()| "body read failed: body unavailable".to_string())?;
    let mut bytes = Vec::new();
    let mut truncated = false;
    loop {
        // Ask for one byte more than the limit so that truncation is detected exactly.
        let want = (MAX_BODY + 1 - bytes.len()) as u64;
        match stream.blocking_read(want) {
            Ok(chunk) => {
                bytes.extend_from_slice(&chunk);
                if bytes.len() > MAX_BODY {
                    bytes.truncate(MAX_BODY);
                    truncated = true;
                    break;
                }
            }
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                let detail = match wasi::http::types::http_error_code(&e) {
                    Some(code) => code_text(&code),
                    None => e.to_debug_string(),
                };
                return Err(format!("body read failed: {detail}"));
            }
        }
    }
    // Child resources go before their parents.
    drop(stream);
    drop(body);
    drop(response);

    Ok(Response {
        status,
        content_type,
        body: String::from_utf8_lossy(&bytes).into_owned(),
        truncated,
    })
}

impl Guest for HttpGet {
    fn http_get(url: String) -> Result<Response, String> {
        get(&url)
    }
}

export!(HttpGet);

/// The WIT this component was built from, embedded so the host can show its `///` docs to models.
#[link_section = "toolhost-wit"]
#[used]
static WIT: [u8; include_bytes!("../wit/world.wit").len()] = *include_bytes!("../wit/world.wit");
