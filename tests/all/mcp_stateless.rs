//! MCP 2026-07-28 beside 2025-11-25: raw stateless requests (no `initialize`, no session) over
//! stdio and HTTP, against the real binary.
//!
//! Each request carries its version and capabilities in `_meta`; a run and call named in
//! `_meta` make a resend an answer from the ledger; approvals go through `input_required` and
//! a sealed `requestState`, refused with the approval codes when the state or the retry is not
//! the one approved. A handshake-era session on the same server sees what it always saw.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::contract::Caller;
use toolhost::serve::stateless::run_of;

use crate::support::{line_reader, toml_path};

/// The longest any one answer may take before a test gives up.
const PATIENCE: Duration = Duration::from_secs(60);
pub(crate) const MODERN: &str = "2026-07-28";
const ALICE: &str = "alice-token";
const MALLORY: &str = "mallory-token";

/// A config with `greet` (template) and `write_text` (fs-tools, approval required) over a
/// workspace of its own; with `tokens`, alice and mallory as bearer-token callers.
fn config(tokens: bool) -> (tempfile::TempDir, PathBuf, PathBuf) {
    use sha2::{Digest, Sha256};
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let token = |t: &str, who: &str| {
        format!(
            "[[serve.token]]\nsha256 = \"{}\"\nprincipal = \"{who}\"\ntenant = \"{who}-corp\"\n",
            hex::encode(Sha256::digest(t.as_bytes()))
        )
    };
    let serve = if tokens {
        format!(
            "[serve]\n{}{}",
            token(ALICE, "alice"),
            token(MALLORY, "mallory")
        )
    } else {
        String::new()
    };
    let text = format!(
        "data_dir = {data}\n{serve}\n[[component]]\npath = {template}\n\
         [[component]]\npath = {fs}\nfs = [{{ host = {ws}, guest = \"/workspace\", mode = \"rw\" }}]\n\
         [component.tools.write-text]\nrisk = \"write\"\napproval = \"required\"\n",
        data = toml_path(&dir.path().join("data")),
        template = toml_path(&crate::support::guest("template")),
        fs = toml_path(&crate::support::guest("fs-tools")),
        ws = toml_path(&ws),
    );
    let path = dir.path().join("toolhost.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path, ws)
}

/// The `_meta` every 2026-07-28 request carries, plus `extra`.
pub(crate) fn meta(extra: Value) -> Value {
    let mut m = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    });
    m.as_object_mut()
        .unwrap()
        .extend(extra.as_object().cloned().unwrap_or_default());
    m
}

/// A 2026-07-28 request: `params` with the `_meta` above (and `extra` in it).
pub(crate) fn request(id: u64, method: &str, mut params: Value, extra: Value) -> Value {
    params["_meta"] = meta(extra);
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A `tools/call` of `name` in run `r1` as call `call`.
pub(crate) fn call(id: u64, name: &str, arguments: Value, call: &str) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
        json!({"toolhost/run": "r1", "toolhost/callId": call}),
    )
}

/// The recorded calls of one run.
pub(crate) fn ledger(config: &Path, run: &str) -> Vec<Value> {
    let out =
        crate::support::toolhost(&["ledger", "--config", config.to_str().unwrap(), "--run", run]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    out.json()["calls"].as_array().unwrap().clone()
}

/// How many times the call `call_id` of `calls` reached the sandbox.
pub(crate) fn executions(calls: &[Value], call_id: &str) -> usize {
    calls
        .iter()
        .filter(|c| c["call_id"] == call_id)
        .flat_map(|c| c["events"].as_array().cloned().unwrap_or_default())
        .filter(|e| e["stage"] == "execute")
        .count()
}

/// The failure code of a tool result (`_meta["toolhost/failure"].code`).
pub(crate) fn code(result: &Value) -> &str {
    assert_eq!(result["isError"], true, "{result}");
    result["_meta"]["toolhost/failure"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("{result}"))
}

/// The approval code of a retry refused for its `requestState`: a JSON-RPC `-32602` error
/// carrying the code in `data`.
pub(crate) fn state_refusal(answer: &Value) -> &str {
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    answer["error"]["data"]["toolhost/failure"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"))
}

/// A raw stdio server that has not been initialized, killed on drop.
pub(crate) struct Stdio {
    child: Child,
    stdin: ChildStdin,
    out: Receiver<String>,
}

impl Stdio {
    pub(crate) fn start(config: &Path) -> Stdio {
        let mut child = crate::support::serve_stdio(config);
        Stdio {
            stdin: child.stdin.take().unwrap(),
            out: line_reader(child.stdout.take().unwrap()),
            child,
        }
    }

    /// Send `message` and return the answer to its id (notifications before it are skipped).
    pub(crate) fn ask(&mut self, message: &Value) -> Value {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
        let until = Instant::now() + PATIENCE;
        while Instant::now() < until {
            let Ok(line) = self.out.recv_timeout(Duration::from_millis(100)) else {
                continue;
            };
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("id") == message.get("id") && v.get("method").is_none() {
                return v;
            }
        }
        panic!("no answer to {message}");
    }
}

impl Drop for Stdio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The fields 2026-07-28 adds to results, removed, for comparing with a handshake-era answer.
fn without_modern_fields(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("resultType");
        o.remove("ttlMs");
        o.remove("cacheScope");
    }
    v
}

/// Over stdio without `initialize`: a request with neither `initialize` nor the 2026-07-28
/// `_meta` is told what is missing; `server/discover` lists both eras; a version we do not
/// speak is `-32022` with the list; `tools/list` carries cache hints; a call completes, its
/// resend (same run and call) is answered from the ledger without running; a failed call has
/// its code; `logging/setLevel` is gone (`-32601`); and a handshake-era session of another
/// process gets the same tools and the same result without the 2026-07-28 fields.
#[test]
fn stdio_serves_stateless_requests() {
    let (_dir, config, _ws) = config(false);
    let mut s = Stdio::start(&config);
    // Neither `initialize` nor the 2026-07-28 `_meta`: the error names what is missing.
    let bare = s.ask(&json!({"jsonrpc": "2.0", "id": 0, "method": "tools/list"}));
    assert_eq!(bare["error"]["code"], -32602, "{bare}");
    let why = bare["error"]["message"].as_str().unwrap();
    assert!(
        why.contains("io.modelcontextprotocol/protocolVersion"),
        "{bare}"
    );
    let discover = s.ask(&request(1, "server/discover", json!({}), json!({})));
    let versions = &discover["result"]["supportedVersions"];
    assert!(
        versions.as_array().unwrap().contains(&json!(MODERN))
            && versions.as_array().unwrap().contains(&json!("2025-11-25")),
        "{discover}"
    );
    assert_eq!(
        discover["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "toolhost",
        "{discover}"
    );

    let mut future = request(2, "tools/list", json!({}), json!({}));
    future["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let refused = s.ask(&future);
    assert_eq!(refused["error"]["code"], -32022, "{refused}");
    assert!(
        refused["error"]["data"]["supported"]
            .as_array()
            .is_some_and(|v| v.contains(&json!(MODERN))),
        "{refused}"
    );

    let list = s.ask(&request(3, "tools/list", json!({}), json!({})));
    assert_eq!(list["result"]["resultType"], "complete", "{list}");
    assert_eq!(list["result"]["ttlMs"], 60_000, "{list}");
    assert_eq!(list["result"]["cacheScope"], "private", "{list}");
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"greet") && names.contains(&"write_text"),
        "{names:?}"
    );

    let done = s.ask(&call(4, "greet", json!({"name": "x"}), "c1"));
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["result"], "Hello, x!",
        "{done}"
    );
    let again = s.ask(&call(5, "greet", json!({"name": "x"}), "c1"));
    assert_eq!(
        again["result"], done["result"],
        "a resend is answered from the ledger"
    );

    let failed = s.ask(&call(6, "greet", json!({"name": 5}), "c2"));
    assert_eq!(code(&failed["result"]), "invalid_arguments");

    let set_level = s.ask(&request(
        7,
        "logging/setLevel",
        json!({"level": "info"}),
        json!({}),
    ));
    assert_eq!(set_level["error"]["code"], -32601, "{set_level}");

    let bad_run = s.ask(&request(
        8,
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "x"}}),
        json!({"toolhost/run": "two words"}),
    ));
    assert_eq!(bad_run["error"]["code"], -32602, "{bad_run}");

    let local = Caller::new("local", "default");
    let calls = ledger(&config, &run_of(&local, "r1"));
    assert_eq!(executions(&calls, "key:c1"), 1, "{calls:?}");
    assert_eq!(executions(&calls, "key:c2"), 0, "{calls:?}");

    // A handshake-era session (another process: stdio chooses its lifecycle once).
    let mut old = Stdio::start(&config);
    let init = old.ask(
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "old", "version": "0"}}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    writeln!(
        old.stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    let old_list = old.ask(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert!(old_list["result"].get("resultType").is_none(), "{old_list}");
    assert!(old_list["result"].get("ttlMs").is_none(), "{old_list}");
    assert_eq!(
        old_list["result"],
        without_modern_fields(list["result"].clone())
    );
    let old_call = old.ask(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "greet", "arguments": {"name": "x"}}}));
    // The same result, but for the call id (a session's comes from the request id).
    let same = without_modern_fields(done["result"].clone())
        .to_string()
        .replace("key:c1", "rpc-n:2");
    assert_eq!(old_call["result"].to_string(), same);
}

/// The approval round trip over stdio: the first round answers `input_required` with the
/// question and a sealed state; the retry that accepts runs the call once (its resend is
/// answered from the ledger); a retry with other arguments is `approval_mismatch`, a decline
/// `approval_denied`, a forged state a `-32602` error with `approval_invalid`; a retry without a
/// readable answer is asked again; a cancel is `approval_required`; none of those writes
/// anything.
#[test]
fn stdio_approves_through_input_required() {
    let (_dir, config, ws) = config(false);
    let mut s = Stdio::start(&config);
    let args = json!({"path": "/workspace/a.txt", "content": "approved"});
    let first = s.ask(&call(1, "write_text", args.clone(), "w1"));
    let asked = &first["result"];
    assert_eq!(asked["resultType"], "input_required", "{first}");
    let question = &asked["inputRequests"]["approval"];
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let message = question["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("write_text") && message.contains("approved"),
        "{message}"
    );
    let state = asked["requestState"].as_str().unwrap().to_string();
    assert!(!ws.join("a.txt").exists(), "nothing runs before the answer");

    let retry = |id: u64, args: &Value, state: &str, answer: Value| {
        let mut r = call(id, "write_text", args.clone(), "ignored-on-retry");
        r["params"]["requestState"] = json!(state);
        r["params"]["inputResponses"] = json!({"approval": answer});
        r
    };
    let yes = json!({"action": "accept", "content": {"approve": true}});
    let done = s.ask(&retry(2, &args, &state, yes.clone()));
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "approved"
    );
    std::fs::remove_file(ws.join("a.txt")).unwrap();
    let resent = s.ask(&retry(3, &args, &state, yes.clone()));
    assert_eq!(
        resent["result"], done["result"],
        "a resent retry is answered from the ledger"
    );
    assert!(!ws.join("a.txt").exists(), "and runs nothing");

    // The same first round resent: the same question again, nothing run.
    let again = s.ask(&call(4, "write_text", args.clone(), "w1"));
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");

    // Another call, answered with other arguments, declined, or with a forged state.
    let other = json!({"path": "/workspace/b.txt", "content": "b"});
    let asked = s.ask(&call(5, "write_text", other.clone(), "w2"));
    let state2 = asked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    let altered = json!({"path": "/workspace/b.txt", "content": "changed"});
    let r = s.ask(&retry(6, &altered, &state2, yes.clone()));
    assert_eq!(code(&r["result"]), "approval_mismatch");
    let asked = s.ask(&call(7, "write_text", other.clone(), "w3"));
    let state3 = asked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    let r = s.ask(&retry(8, &other, &state3, json!({"action": "decline"})));
    assert_eq!(code(&r["result"]), "approval_denied");
    let mut forged = state3.clone();
    forged.insert(10, 'x');
    let r = s.ask(&retry(9, &other, &forged, yes.clone()));
    assert_eq!(state_refusal(&r), "approval_invalid");
    assert!(!ws.join("b.txt").exists());

    // A retry without a readable answer is asked again, the same handle; a cancel ends the
    // call `approval_required`, with the handle for `toolhost approve`.
    let asked = s.ask(&call(10, "write_text", other.clone(), "w4"));
    let state4 = asked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    let message = |v: &Value| v["result"]["inputRequests"]["approval"]["params"]["message"].clone();
    for junk in [json!(null), json!("yes"), json!({"action": "maybe"})] {
        let mut r = retry(11, &other, &state4, junk.clone());
        if junk.is_null() {
            r["params"]
                .as_object_mut()
                .unwrap()
                .remove("inputResponses");
        }
        let again = s.ask(&r);
        assert_eq!(
            again["result"]["resultType"], "input_required",
            "{junk}: {again}"
        );
        assert_eq!(message(&again), message(&asked), "{junk}");
    }
    // Without an answer but with other arguments: not asked again (the approval could not
    // run them); the call ends approval_required.
    let mut altered = other.clone();
    altered["content"] = json!("changed");
    let mut r = retry(13, &altered, &state4, json!(null));
    r["params"]
        .as_object_mut()
        .unwrap()
        .remove("inputResponses");
    let not_again = s.ask(&r);
    assert_eq!(
        code(&not_again["result"]),
        "approval_required",
        "{not_again}"
    );
    let asked = s.ask(&call(14, "write_text", other.clone(), "w5"));
    let state4 = asked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    let r = s.ask(&retry(12, &other, &state4, json!({"action": "cancel"})));
    assert_eq!(code(&r["result"]), "approval_required");
    assert!(
        r["result"]["_meta"]["toolhost/failure"]["approval"]["handle"].is_string(),
        "{r}"
    );
    assert!(!ws.join("b.txt").exists());

    let local = Caller::new("local", "default");
    let calls = ledger(&config, &run_of(&local, "r1"));
    assert_eq!(executions(&calls, "key:w1~approved"), 1, "{calls:?}");
    assert_eq!(executions(&calls, "key:w1"), 0, "{calls:?}");
    for id in [
        "key:w2~approved",
        "key:w3~approved",
        "key:w4~approved",
        "key:w5~approved",
    ] {
        assert_eq!(executions(&calls, id), 0, "{id}: {calls:?}");
    }
}

/// One raw HTTP/1.1 POST of `body` to /mcp with these extra headers: the status, the
/// lower-cased response headers and the body; an error when the connection failed or was cut
/// before a whole answer (a host died).
pub(crate) fn http_post(
    addr: &str,
    headers: &[(String, String)],
    body: &Value,
) -> std::io::Result<(u16, BTreeMap<String, String>, String)> {
    use std::io::Read;
    let body = body.to_string();
    let mut sock = TcpStream::connect(addr)?;
    sock.set_read_timeout(Some(PATIENCE))?;
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    sock.write_all(head.as_bytes())?;
    sock.write_all(body.as_bytes())?;
    let mut raw = Vec::new();
    sock.read_to_end(&mut raw)?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let Some((head, body)) = raw.split_once("\r\n\r\n") else {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    };
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or(std::io::ErrorKind::InvalidData)?;
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok((status, headers, body.to_string()))
}

/// The routing headers a 2026-07-28 request carries over HTTP: its version, its method and,
/// for a `tools/call`, the tool's name.
pub(crate) fn routing_headers(message: &Value) -> Vec<(String, String)> {
    let mut headers = vec![
        ("MCP-Protocol-Version".to_string(), MODERN.to_string()),
        (
            "Mcp-Method".to_string(),
            message["method"].as_str().unwrap_or_default().to_string(),
        ),
    ];
    // A call names its tool; a `tasks/*` request its task.
    let params = &message["params"];
    if let Some(name) = params["name"].as_str().or(params["taskId"].as_str()) {
        headers.push(("Mcp-Name".to_string(), name.to_string()));
    }
    headers
}

/// [`http_post`] as `token` with these extra headers: status and body.
pub(crate) fn post(
    addr: &str,
    token: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, String) {
    let mut all = vec![("Authorization".to_string(), format!("Bearer {token}"))];
    all.extend(headers.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let (status, _, body) = http_post(addr, &all, body).expect("an HTTP answer");
    (status, body)
}

/// The JSON-RPC message answering `id` in a JSON or SSE body.
pub(crate) fn answer(body: &str, id: &Value) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(body.trim()) {
        return v;
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id") == Some(id))
        .unwrap_or_else(|| panic!("no message {id} in {body}"))
}

/// One 2026-07-28 request over HTTP with its routing headers: status and answer.
pub(crate) fn modern(addr: &str, token: &str, message: &Value) -> (u16, Value) {
    let mut headers = vec![("Authorization".to_string(), format!("Bearer {token}"))];
    headers.extend(routing_headers(message));
    let (status, _, body) = http_post(addr, &headers, message).expect("an HTTP answer");
    (status, answer(&body, &message["id"]))
}

/// Over HTTP without a session: discover and a call are served; a resend replays; a routing
/// header that contradicts the body is refused as a header mismatch; one caller's run name is
/// not another's run; another caller's approval state is refused (`-32602`,
/// `approval_wrong_principal`); and a
/// handshake-era call without a session is still 400.
#[test]
fn http_serves_stateless_requests_per_caller() {
    let (_dir, config, ws) = config(true);
    let http = crate::mcp_frames::Http::start(&config);
    let addr = http.addr.as_str();

    let (status, discover) = modern(
        addr,
        ALICE,
        &request(1, "server/discover", json!({}), json!({})),
    );
    assert_eq!(status, 200, "{discover}");
    assert!(discover["result"]["supportedVersions"]
        .to_string()
        .contains(MODERN));

    let (status, done) = modern(addr, ALICE, &call(2, "greet", json!({"name": "a"}), "c1"));
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["result"], "Hello, a!",
        "{done}"
    );
    let (_, again) = modern(addr, ALICE, &call(3, "greet", json!({"name": "a"}), "c1"));
    assert_eq!(again["result"], done["result"]);
    // Mallory's run "r1" is not alice's: the same call id runs anew, as mallory's own.
    let (_, hers) = modern(addr, MALLORY, &call(2, "greet", json!({"name": "m"}), "c1"));
    assert_eq!(
        hers["result"]["structuredContent"]["result"], "Hello, m!",
        "{hers}"
    );

    let lie = call(4, "greet", json!({"name": "a"}), "c4");
    let (status, body) = post(
        addr,
        ALICE,
        &[
            ("MCP-Protocol-Version", MODERN),
            ("Mcp-Method", "tools/list"),
            ("Mcp-Name", "greet"),
        ],
        &lie,
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("Mcp-Method header `tools/list` does not match"),
        "{body}"
    );

    let args = json!({"path": "/workspace/a.txt", "content": "alice"});
    let (_, asked) = modern(addr, ALICE, &call(5, "write_text", args.clone(), "w1"));
    let state = asked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    let mut theft = call(6, "write_text", args.clone(), "w1");
    theft["params"]["requestState"] = json!(state);
    theft["params"]["inputResponses"] =
        json!({"approval": {"action": "accept", "content": {"approve": true}}});
    let (_, stolen) = modern(addr, MALLORY, &theft);
    assert_eq!(state_refusal(&stolen), "approval_wrong_principal");
    assert!(!ws.join("a.txt").exists());
    let (_, approved) = modern(addr, ALICE, &theft);
    assert_eq!(approved["result"]["isError"], false, "{approved}");
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "alice");

    // What 2026-07-28 removed is 404 with -32601; a request missing its capabilities is 400.
    for method in ["initialize", "ping", "logging/setLevel"] {
        let removed = request(10, method, json!({}), json!({}));
        let (status, body) = post(
            addr,
            ALICE,
            &[("MCP-Protocol-Version", MODERN), ("Mcp-Method", method)],
            &removed,
        );
        assert_eq!(status, 404, "{method}: {body}");
        assert_eq!(
            answer(&body, &json!(10))["error"]["code"],
            -32601,
            "{method}: {body}"
        );
    }
    let mut bare = request(11, "tools/list", json!({}), json!({}));
    bare["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    let (status, body) = post(
        addr,
        ALICE,
        &[
            ("MCP-Protocol-Version", MODERN),
            ("Mcp-Method", "tools/list"),
        ],
        &bare,
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(answer(&body, &json!(11))["error"]["code"], -32602, "{body}");

    let legacy = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "greet", "arguments": {"name": "x"}}});
    assert_eq!(post(addr, ALICE, &[], &legacy).0, 400);

    let alice = Caller::new("alice", "alice-corp");
    let mallory = Caller::new("mallory", "mallory-corp");
    assert_eq!(
        executions(&ledger(&config, &run_of(&alice, "r1")), "key:c1"),
        1
    );
    assert_eq!(
        executions(&ledger(&config, &run_of(&mallory, "r1")), "key:c1"),
        1
    );
}

/// A config with the conformance tools (`test_tool_with_logging` logs three info lines) and
/// the hostile guests, `sleep_forever` a read tool with a 30 s deadline.
fn logging_config() -> (tempfile::TempDir, PathBuf) {
    crate::support::temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\n{}",
        crate::support::own_data(),
        toml_path(&crate::support::guest("conformance")),
        crate::support::hostile_component(
            "[component.tools.sleep-forever]\nrisk = \"read\"\nlimits = { deadline_ms = 30_000 }\n"
        ),
    ))
}

/// The `notifications/message` lines of an SSE body.
fn log_lines(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .filter(|v| v["method"] == "notifications/message")
        .collect()
}

/// Over stateless HTTP a guest's log lines reach the client only when the request asks for a
/// level in its `_meta` (no `logging/setLevel` exists to ask with), at that level; and a client
/// that goes away mid-call stops its guest: the call ends `cancelled` long before its deadline.
#[test]
fn http_logs_only_when_asked_and_a_dropped_request_stops_its_guest() {
    use std::io::Read;
    let (_dir, config) = logging_config();
    let http = crate::mcp_frames::Http::start(&config);
    let addr = http.addr.as_str();
    let send = |message: &Value| {
        http_post(addr, &routing_headers(message), message).expect("an HTTP answer")
    };
    let quiet = call(1, "test_tool_with_logging", json!({}), "l1");
    let (status, _, body) = send(&quiet);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        answer(&body, &json!(1))["result"]["isError"],
        false,
        "{body}"
    );
    assert!(log_lines(&body).is_empty(), "{body}");
    let mut asking = call(2, "test_tool_with_logging", json!({}), "l2");
    asking["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("info");
    let (_, _, body) = send(&asking);
    assert_eq!(log_lines(&body).len(), 3, "{body}");
    let mut above = call(3, "test_tool_with_logging", json!({}), "l3");
    above["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("warning");
    let (_, _, body) = send(&above);
    assert!(log_lines(&body).is_empty(), "{body}");

    // A call the client abandons after a second.
    let started = Instant::now();
    let sleeper_call = call(4, "sleep_forever", json!({}), "s1");
    let sleeper = sleeper_call.to_string();
    let mut sock = TcpStream::connect(addr).unwrap();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        sleeper.len()
    );
    for (k, v) in routing_headers(&sleeper_call) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    sock.write_all(head.as_bytes()).unwrap();
    sock.write_all(sleeper.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    sock.set_nonblocking(true).unwrap();
    let mut early = [0u8; 1];
    assert!(
        sock.read(&mut early).is_err(),
        "no answer before the deadline"
    );
    drop(sock);
    let local = Caller::new("local", "default");
    let run = run_of(&local, "r1");
    let until = Instant::now() + Duration::from_secs(20);
    let ended = loop {
        let calls = ledger(&config, &run);
        if let Some(c) = calls
            .iter()
            .find(|c| c["call_id"] == "key:s1" && !c["status"].is_null())
        {
            break c.clone();
        }
        assert!(
            Instant::now() < until,
            "the abandoned call did not end: {calls:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(ended["status"], "cancelled", "{ended}");
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "ended by the cancel, not the 30 s deadline"
    );
}

/// With no rate configured, `serve --http` still bounds each principal's requests
/// (`[serve] requests_per_second`, default 100): a 2026-07-28 caller flooding calls that name
/// no run (a new run each, which `[run] max_calls` cannot bound) gets 429 with `Retry-After`
/// before its 1,500th request, and another principal is served at once.
#[test]
fn http_bounds_each_callers_unnamed_requests_by_default() {
    let (_dir, cfg, _ws) = config(true);
    let server = crate::mcp::http_serve(&cfg);
    let addr = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    let greet = request(
        1,
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "flood"}}),
        json!({}),
    );
    let stop = std::sync::atomic::AtomicBool::new(false);
    let refusals: Vec<Option<BTreeMap<String, String>>> = std::thread::scope(|s| {
        let floods: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let mut headers = vec![("Authorization".into(), format!("Bearer {ALICE}"))];
                    headers.extend(routing_headers(&greet));
                    for _ in 0..375 {
                        if stop.load(std::sync::atomic::Ordering::Relaxed) {
                            return None;
                        }
                        let (status, head, body) = http_post(&addr, &headers, &greet).unwrap();
                        if status == 429 {
                            stop.store(true, std::sync::atomic::Ordering::Relaxed);
                            return Some(head);
                        }
                        assert_eq!(status, 200, "{body}");
                    }
                    None
                })
            })
            .collect();
        floods.into_iter().map(|f| f.join().unwrap()).collect()
    });
    let refused = refusals
        .into_iter()
        .flatten()
        .next()
        .expect("the flood was never refused");
    assert!(
        refused
            .get("retry-after")
            .is_some_and(|s| s.parse::<u64>().is_ok()),
        "{refused:?}"
    );
    let (status, answer) = modern(&addr, MALLORY, &greet);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
}
