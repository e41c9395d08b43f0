//! The approval console over raw HTTP: what it refuses (a caller's MCP token, a foreign
//! `Origin` or `Host`, a form without this session's CSRF token, another operator's token, a
//! replayed decision), the headers every page carries, and that markup and invisible
//! characters in a call's arguments reach the page as visible text only.
//! `console_browser.rs` drives the same pages in Chromium.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{json, Value};

use crate::mcp::{http_serve, HttpServer};
use crate::mcp_tasks::request as mcp_request;
use crate::mcp_tasks::{
    calls, config_serving, deletes_run, operator_only, send, start, until, PATIENCE,
};

pub(crate) const OPERATOR: &str = "operator-one-token";
pub(crate) const OTHER_OPERATOR: &str = "operator-two-token";

/// The `[serve.console]` section naming two operators.
pub(crate) fn console_section() -> String {
    use sha2::{Digest, Sha256};
    let op = |name: &str, token: &str| {
        format!(
            "[[serve.console.operator]]\nname = \"{name}\"\nsha256 = \"{}\"\n",
            hex::encode(Sha256::digest(token.as_bytes()))
        )
    };
    format!(
        "[serve.console]\n{}{}",
        op("ops-one", OPERATOR),
        op("ops-two", OTHER_OPERATOR)
    )
}

/// Arguments a model might write to fool a human: markup, a script, and Unicode TAG
/// characters that spell a hidden instruction.
pub(crate) fn hostile_filename() -> String {
    let hidden: String = "approve"
        .chars()
        .map(|c| char::from_u32(0xE0000 + c as u32).unwrap())
        .collect();
    format!("<img src=x onerror=alert(1)><script>alert(2)</script>a.txt{hidden}")
}

/// One answer: status, headers (lower-case names), body.
pub(crate) struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The host:port of `server`.
pub(crate) fn addr(server: &HttpServer) -> String {
    server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string()
}

/// One HTTP/1.1 request to `addr` (its own connection): `method` `path`, `headers`, `body`.
pub(crate) fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.take(4 << 20).read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let mut lines = head.lines();
    let status = lines.next().unwrap_or("")[9..12].parse().unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_string(),
    }
}

/// A form post to the console from its own page, with `cookie` (may be empty).
pub(crate) fn post(addr: &str, path: &str, cookie: &str, form: &[(&str, &str)]) -> Answer {
    let origin = format!("http://{addr}");
    post_from(addr, path, cookie, form, Some(&origin))
}

fn post_from(
    addr: &str,
    path: &str,
    cookie: &str,
    form: &[(&str, &str)],
    origin: Option<&str>,
) -> Answer {
    let body: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let mut headers = vec![("Content-Type", "application/x-www-form-urlencoded")];
    if let Some(o) = origin {
        headers.push(("Origin", o));
    }
    let cookie = format!("toolhost_console={cookie}");
    headers.push(("Cookie", &cookie));
    request(addr, "POST", path, &headers, &body)
}

/// Sign in with `token`: the session cookie's value.
pub(crate) fn sign_in(addr: &str, token: &str) -> String {
    let a = post(addr, "/console/sign-in", "", &[("token", token)]);
    assert_eq!(a.status, 303, "{}", a.body);
    let cookie = a.header("set-cookie").expect("a session cookie");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    assert!(cookie.contains("Path=/console"), "{cookie}");
    let value = cookie.split(';').next().unwrap();
    value.split_once('=').unwrap().1.to_string()
}

/// A GET of `path` with session `cookie`.
pub(crate) fn get(addr: &str, path: &str, cookie: &str) -> Answer {
    let cookie = format!("toolhost_console={cookie}");
    request(addr, "GET", path, &[("Cookie", &cookie)], "")
}

/// The CSRF token of the session `cookie` names, read from its pages.
fn csrf_of(addr: &str, cookie: &str) -> String {
    let page = get(addr, "/console", cookie);
    let at = page.body.find("name=\"csrf\" value=\"").expect("a form") + 19;
    page.body[at..at + 64].to_string()
}

/// The approval digest the console page of `task` shows (its forms carry it).
fn digest_of(addr: &str, cookie: &str, task: &str) -> String {
    let page = get(addr, &format!("/console/task?id={task}"), cookie);
    let at = page.body.find("name=\"digest\" value=\"").expect("a form") + 21;
    page.body[at..at + 64].to_string()
}

/// The console refuses a caller's MCP token (as a sign-in and as a bearer), a foreign or
/// missing `Origin`, a foreign `Host`, a form without this session's CSRF token (none, or
/// another operator's), and a replayed decision; every page carries the strict headers;
/// markup and TAG characters in the arguments and the description reach it as visible text;
/// approve runs the call once, deny ends it `approval_denied`; the host keeps serving MCP.
#[test]
fn the_console_refuses_what_it_must() {
    let (_dir, cfg) = config_serving("", &console_section());
    let host = http_serve(&cfg);
    let a = addr(&host);

    // Not signed in: the sign-in page, 401, under the strict policy.
    let page = request(&a, "GET", "/console", &[], "");
    assert_eq!(page.status, 401);
    assert!(page.body.contains("name=\"token\""), "{}", page.body);
    let csp = page.header("content-security-policy").unwrap();
    assert_eq!(
        csp,
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
         frame-ancestors 'none'; base-uri 'none'"
    );
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(page.header("cache-control"), Some("no-store"));
    assert_eq!(page.header("referrer-policy"), Some("same-origin"));

    // A caller's MCP token opens nothing: not as a sign-in, not as a bearer.
    let refused = post(&a, "/console/sign-in", "", &[("token", "alice-token")]);
    assert_eq!(refused.status, 401);
    assert!(refused.header("set-cookie").is_none());
    let bearer = request(
        &a,
        "GET",
        "/console",
        &[("Authorization", "Bearer alice-token")],
        "",
    );
    assert_eq!(bearer.status, 401);
    // A sign-in from another origin, or with none, is refused before the token is read.
    let origin = "http://evil.example";
    let foreign = post_from(
        &a,
        "/console/sign-in",
        "",
        &[("token", OPERATOR)],
        Some(origin),
    );
    assert_eq!(foreign.status, 403);
    assert!(foreign.header("set-cookie").is_none());
    let bare = post_from(&a, "/console/sign-in", "", &[("token", OPERATOR)], None);
    assert_eq!(bare.status, 403);
    // A Host the allowlist does not name (DNS rebinding) is refused.
    let rebound = request(&a, "GET", "/console", &[("Host", "evil.example")], "");
    assert_eq!(rebound.status, 403);

    let one = sign_in(&a, OPERATOR);
    let two = sign_in(&a, OTHER_OPERATOR);
    // An operator's session is not an MCP caller.
    let mcp = request(
        &a,
        "POST",
        "/mcp",
        &[("Cookie", &format!("toolhost_console={one}"))],
        "{}",
    );
    assert_eq!(mcp.status, 401);

    let task = start(
        &host,
        "confirm_delete",
        json!({"filename": hostile_filename()}),
    );
    until(&host, &task, "input_required", PATIENCE);
    let listed = get(&a, "/console", &one);
    assert_eq!(listed.status, 200);
    assert!(
        listed.body.contains(&format!("/console/task?id={task}")),
        "{}",
        listed.body
    );
    assert!(listed.body.contains("ops-one"));
    let shown = get(&a, &format!("/console/task?id={task}"), &one);
    assert_eq!(shown.status, 200);
    let body = &shown.body;
    for raw in ["<img", "<script", "onerror=alert(1)>"] {
        assert!(
            !body.contains(raw),
            "{raw} reached the page as markup: {body}"
        );
    }
    assert!(
        body.contains(
            "&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;alert(2)&lt;/script&gt;a.txt"
        ),
        "{body}"
    );
    assert!(
        body.contains("\\u{e0061}\\u{e0070}"),
        "the TAG characters are shown: {body}"
    );
    assert!(
        !body.contains('\u{E0061}'),
        "a TAG character reached the page"
    );
    assert!(
        body.contains("Markup here is text to every front end: &lt;img"),
        "{body}"
    );

    // Forged decisions change nothing: no CSRF token, another operator's, another origin.
    let csrf_one = csrf_of(&a, &one);
    let csrf_two = csrf_of(&a, &two);
    assert_ne!(csrf_one, csrf_two);
    let digest = digest_of(&a, &one, &task);
    let approve_one = [
        ("id", task.as_str()),
        ("decision", "approve"),
        ("csrf", &csrf_one),
        ("digest", &digest),
    ];
    let approve_two = [
        ("id", task.as_str()),
        ("decision", "approve"),
        ("csrf", &csrf_two),
        ("digest", &digest),
    ];
    // A form for another approval than the one shown changes nothing either.
    let other = "0".repeat(64);
    let mut elsewhere = approve_one;
    elsewhere[3] = ("digest", &other);
    assert_eq!(post(&a, "/console/task", &one, &elsewhere).status, 409);
    let none = post(
        &a,
        "/console/task",
        &one,
        &[("id", &task), ("decision", "approve")],
    );
    assert_eq!(none.status, 403);
    assert_eq!(post(&a, "/console/task", &one, &approve_two).status, 403);
    let foreign = post_from(&a, "/console/task", &one, &approve_one, Some(origin));
    assert_eq!(foreign.status, 403);
    let unsigned = post(&a, "/console/task", "", &approve_one);
    assert_eq!(unsigned.status, 401);
    let ran = || deletes_run(&cfg);
    assert_eq!(ran(), 0);
    assert_eq!(
        until(&host, &task, "input_required", PATIENCE)["status"],
        "input_required"
    );

    // Approved once: it runs once; the same post again is refused and runs nothing.
    let approved = post(&a, "/console/task", &one, &approve_one);
    assert_eq!(approved.status, 303, "{}", approved.body);
    let done = until(&host, &task, "completed", PATIENCE);
    assert_eq!(done["result"]["isError"], Value::Bool(false), "{done}");
    let replay = post(&a, "/console/task", &one, &approve_one);
    assert_eq!(replay.status, 409, "{}", replay.body);
    assert_eq!(ran(), 1);
    let after = get(&a, &format!("/console/task?id={task}"), &one);
    assert!(after.body.contains("status-completed"), "{}", after.body);
    assert!(
        !after.body.contains("<script"),
        "the guest's output is text"
    );

    // Denied: it ends approval_denied and runs nothing.
    let denied = start(&host, "confirm_delete", json!({"filename": "b.txt"}));
    until(&host, &denied, "input_required", PATIENCE);
    let digest = digest_of(&a, &two, &denied);
    let deny = [
        ("id", denied.as_str()),
        ("decision", "deny"),
        ("csrf", csrf_two.as_str()),
        ("digest", &digest),
    ];
    assert_eq!(post(&a, "/console/task", &two, &deny).status, 303);
    let done = until(&host, &denied, "completed", PATIENCE);
    assert_eq!(
        done["result"]["_meta"]["toolhost/failure"]["code"], "approval_denied",
        "{done}"
    );
    assert_eq!(ran(), 1);

    // The ledger names the operator who decided each.
    assert_eq!(
        decided_by(&cfg, "approved"),
        ["the approval console (operator ops-one)"]
    );
    assert_eq!(
        decided_by(&cfg, "approval_denied"),
        ["the approval console (operator ops-two)"]
    );

    // Signed out, the session opens nothing.
    let out = post(&a, "/console/sign-out", &one, &[("csrf", &csrf_one)]);
    assert_eq!(out.status, 303);
    let cleared = out.header("set-cookie").unwrap();
    assert!(
        cleared.contains("Path=/console") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    assert_eq!(get(&a, "/console", &one).status, 401);
    assert_eq!(get(&a, "/console", &two).status, 200);
}

/// The `detail` of every approve-stage event `decision` of run `r1`'s calls, its leading
/// "by a human, through " or "declined by a human, through " cut.
fn decided_by(cfg: &std::path::Path, decision: &str) -> Vec<String> {
    calls(cfg)
        .iter()
        .flat_map(|c| c["events"].as_array().cloned().unwrap_or_default())
        .filter(|e| e["stage"] == "approve" && e["decision"] == decision)
        .map(|e| {
            let detail = e["detail"].as_str().unwrap_or("");
            detail
                .split("through ")
                .nth(1)
                .unwrap_or(detail)
                .to_string()
        })
        .collect()
}

/// A tool only the operator approves (`approvers = "operator"`) waits for the console: its
/// task is listed there though the client was never asked; a client that takes URL
/// elicitation is pointed at the task's console page, and its answer to that changes nothing;
/// approving runs it once and denying ends it `approval_denied`, each named as the operator's
/// in the ledger.
#[test]
fn the_console_answers_for_a_tool_only_the_operator_approves() {
    let section = console_section().replace(
        "[serve.console]\n",
        "[serve.console]\nurl = \"https://approvals.example\"\n",
    );
    let (_dir, cfg) = config_serving("", &section);
    operator_only(&cfg);
    let host = http_serve(&cfg);
    let a = addr(&host);
    let one = sign_in(&a, OPERATOR);
    let csrf = csrf_of(&a, &one);
    let approve = start(&host, "confirm_delete", json!({"filename": "a.txt"}));
    let deny = start(&host, "confirm_delete", json!({"filename": "b.txt"}));
    for task in [&approve, &deny] {
        let waiting = until(&host, task, "completed", PATIENCE);
        assert_eq!(
            waiting["result"]["_meta"]["toolhost/failure"]["code"], "approval_required",
            "{waiting}"
        );
    }
    // A client that takes URL elicitation is sent to the console page of the task.
    let mut asked = mcp_request(2, "tasks/get", json!({"taskId": approve}), true);
    let caps = "/params/_meta/io.modelcontextprotocol~1clientCapabilities/elicitation";
    *asked.pointer_mut(caps).unwrap() = json!({"form": {}, "url": {}});
    let pointed = send(&host, "alice-token", &asked)["result"].clone();
    assert_eq!(pointed["status"], "input_required", "{pointed}");
    let question = &pointed["inputRequests"]["console"];
    assert_eq!(question["method"], "elicitation/create", "{pointed}");
    assert_eq!(question["params"]["mode"], "url", "{pointed}");
    assert_eq!(
        question["params"]["url"],
        format!("https://approvals.example/console/task?id={approve}")
    );
    assert!(
        pointed["inputRequests"].get("approval").is_none(),
        "{pointed}"
    );
    // Its answer (the human opened the page) approves nothing.
    let responses = json!({"console": {"action": "accept"}});
    let params = json!({"taskId": approve, "inputResponses": responses});
    let ack = send(
        &host,
        "alice-token",
        &mcp_request(3, "tasks/update", params, true),
    );
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let listed = get(&a, "/console", &one);
    assert!(
        listed.body.contains(&format!("id={approve}")),
        "{}",
        listed.body
    );
    assert!(
        listed.body.contains(&format!("id={deny}")),
        "{}",
        listed.body
    );
    let form = |task: &str, decision: &str| {
        let digest = digest_of(&a, &one, task);
        let fields = [
            ("id", task),
            ("decision", decision),
            ("csrf", csrf.as_str()),
            ("digest", &digest),
        ];
        post(&a, "/console/task", &one, &fields).status
    };
    assert_eq!(form(&approve, "approve"), 303);
    assert_eq!(form(&deny, "deny"), 303);
    let deadline = std::time::Instant::now() + PATIENCE;
    while decided_by(&cfg, "approved").is_empty() || decided_by(&cfg, "approval_denied").is_empty()
    {
        assert!(std::time::Instant::now() < deadline, "{:?}", calls(&cfg));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(deletes_run(&cfg), 1, "{:?}", calls(&cfg));
    assert_eq!(
        decided_by(&cfg, "approved"),
        ["the approval console (operator ops-one)"]
    );
    assert_eq!(
        decided_by(&cfg, "approval_denied"),
        ["the approval console (operator ops-one)"]
    );
}

/// A form past 4 KiB is refused (413) before it is read whole, and one that does not arrive
/// within 10 s is refused (408); the console keeps serving.
#[test]
fn large_and_slow_forms_are_refused() {
    let (_dir, cfg) = config_serving("", &console_section());
    let host = http_serve(&cfg);
    let a = addr(&host);
    let big = "x".repeat(5000);
    let refused = post(&a, "/console/sign-in", "", &[("token", &big)]);
    assert_eq!(refused.status, 413, "{}", refused.body);
    // Headers promise 100 bytes; none come.
    let mut s = TcpStream::connect(&a).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let head = format!(
        "POST /console/sign-in HTTP/1.1\r\nHost: {a}\r\nOrigin: http://{a}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n"
    );
    s.write_all(head.as_bytes()).unwrap();
    let started = std::time::Instant::now();
    let mut answer = String::new();
    let _ = s.take(4096).read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        started.elapsed() >= Duration::from_secs(9),
        "{:?}",
        started.elapsed()
    );
    sign_in(&a, OPERATOR);
}

/// A config whose operator signs in with a caller's token, or that names no operator, is
/// refused before anything is served.
#[test]
fn a_console_that_shares_a_callers_token_is_refused() {
    use sha2::{Digest, Sha256};
    let section = format!(
        "[serve.console]\n[[serve.console.operator]]\nname = \"ops\"\nsha256 = \"{}\"\n",
        hex::encode(Sha256::digest(b"alice-token"))
    );
    let (_dir, cfg) = config_serving("", &section);
    let out = crate::support::toolhost(&["check-config", "--config", cfg.to_str().unwrap()]);
    assert_ne!(out.status, 0);
    assert!(
        out.stderr.contains("serve.console.operator[0].sha256"),
        "{}",
        out.stderr
    );
}

/// On PostgreSQL the console of one host lists a task that waits on another and approves it:
/// the call runs once, the other host's console is then told it no longer waits (409), and
/// the task answers on both hosts.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
fn pg_a_task_waiting_on_one_host_is_approved_in_anothers_console() {
    let schema = crate::multi_host::Schema::new();
    let (_dir, cfg) = config_serving(&schema.ledger_section(), &console_section());
    let first = http_serve(&cfg);
    let second = http_serve(&cfg);
    let task = start(&first, "confirm_delete", json!({"filename": "c.txt"}));
    until(&first, &task, "input_required", PATIENCE);
    let there = addr(&second);
    let one = sign_in(&there, OPERATOR);
    let listed = get(&there, "/console", &one);
    assert!(
        listed.body.contains(&format!("id={task}")),
        "{}",
        listed.body
    );
    let csrf = csrf_of(&there, &one);
    let digest = digest_of(&there, &one, &task);
    let approve = [
        ("id", task.as_str()),
        ("decision", "approve"),
        ("csrf", &csrf),
        ("digest", &digest),
    ];
    assert_eq!(post(&there, "/console/task", &one, &approve).status, 303);
    let here = addr(&first);
    let two = sign_in(&here, OTHER_OPERATOR);
    let csrf = csrf_of(&here, &two);
    let again = [
        ("id", task.as_str()),
        ("decision", "approve"),
        ("csrf", &csrf),
    ];
    assert_eq!(post(&here, "/console/task", &two, &again).status, 409);
    let done = until(&first, &task, "completed", PATIENCE);
    assert_eq!(
        done["result"]["structuredContent"],
        json!({"result": "deleted c.txt"}),
        "{done}"
    );
    until(&second, &task, "completed", PATIENCE);
    assert_eq!(deletes_run(&cfg), 1);
    assert_eq!(
        decided_by(&cfg, "approved"),
        ["the approval console (operator ops-one)"]
    );
}
