//! OTLP export, read by a receiver on loopback that decodes what it gets with the official
//! OpenTelemetry protobuf definitions (`opentelemetry-proto`): one trace per call with a span
//! per stage under the call's span; an MCP request's span continues the caller's `traceparent`
//! and is the call's parent; the agent loop's run is the parent of its model requests and calls,
//! and the model endpoint gets the run's `traceparent`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::json;

use crate::support::{guest, own_data, temp_config, toml_path};

/// Argument content that must never be exported.
const ARGUMENT_MARK: &str = "argmark-7c4a8d09ca3762af";

/// An OTLP/HTTP receiver: every body POSTed to `/v1/traces`, kept raw.
struct Receiver {
    port: u16,
    bodies: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let kept = bodies.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().take(64) {
                let Ok(stream) = stream else { continue };
                let kept = kept.clone();
                std::thread::spawn(move || serve(stream, &kept));
            }
        });
        Receiver { port, bodies }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every exported span, decoded.
    fn spans(&self) -> Vec<Span> {
        let bodies = self.bodies.lock().unwrap();
        for body in bodies.iter() {
            let text = String::from_utf8_lossy(body);
            assert!(
                !text.contains(ARGUMENT_MARK),
                "argument content was exported"
            );
        }
        bodies
            .iter()
            .flat_map(|b| {
                ExportTraceServiceRequest::decode(&b[..])
                    .expect("OTLP protobuf")
                    .resource_spans
            })
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans)
            .collect()
    }
}

/// Answer the requests of one connection (keep-alive), keeping each body.
fn serve(stream: std::net::TcpStream, kept: &Mutex<Vec<Vec<u8>>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    for _ in 0..1000 {
        let mut length = 0usize;
        let mut first = String::new();
        if reader.read_line(&mut first).unwrap_or(0) == 0 {
            return;
        }
        for _ in 0..100 {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line.trim().is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap();
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        assert!(first.starts_with("POST /v1/traces "), "{first}");
        kept.lock().unwrap().push(body);
        let _ = writer.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n",
        );
    }
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes.iter().find(|a| a.key == key).and_then(|a| {
        match a.value.as_ref()?.value.as_ref()? {
            Any::StringValue(s) => Some(s.clone()),
            Any::IntValue(i) => Some(i.to_string()),
            other => Some(format!("{other:?}")),
        }
    })
}

fn config(receiver: &Receiver) -> (tempfile::TempDir, std::path::PathBuf) {
    temp_config(&format!(
        "data_dir = {}\n[telemetry]\notlp_endpoint = \"{}\"\n[[component]]\npath = {}\n",
        own_data(),
        receiver.endpoint(),
        toml_path(&guest("template"))
    ))
}

/// Two `toolhost call` processes export two traces; each has one root `call` span (call id,
/// tool, principal, outcome) and one child per stage, and the guest's log line is an event of
/// the call's trace. No argument content is exported.
#[test]
fn each_call_is_one_trace_with_its_stages() {
    let receiver = Receiver::start();
    let (_dir, cfg) = config(&receiver);
    for id in ["t-1", "t-2"] {
        let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args([
                "call",
                "--config",
                cfg.to_str().unwrap(),
                "--principal",
                "alice",
            ])
            .args(["--call-id", id, "greet"])
            .arg(json!({ "name": ARGUMENT_MARK }).to_string())
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let spans = receiver.spans();
    let calls = named(&spans, "call");
    assert_eq!(calls.len(), 2, "{spans:#?}");
    assert_ne!(calls[0].trace_id, calls[1].trace_id);
    for call in calls {
        assert!(call.parent_span_id.is_empty(), "a call alone is a root");
        assert_eq!(attribute(call, "tool").as_deref(), Some("greet"));
        assert_eq!(attribute(call, "principal").as_deref(), Some("alice"));
        assert_eq!(attribute(call, "status").as_deref(), Some("completed"));
        let id = attribute(call, "call_id").unwrap();
        assert!(id == "t-1" || id == "t-2", "{id}");
        let children: Vec<&Span> = spans
            .iter()
            .filter(|s| s.trace_id == call.trace_id && s.parent_span_id == call.span_id)
            .collect();
        let mut names: Vec<&str> = children.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "admit",
                "authorize",
                "check",
                "execute",
                "limit",
                "record",
                "resolve",
                "validate"
            ]
        );
        let events: Vec<&str> = spans
            .iter()
            .filter(|s| s.trace_id == call.trace_id)
            .flat_map(|s| s.events.iter().map(|e| e.name.as_str()))
            .collect();
        assert!(events.contains(&"greeting"), "{events:?}");
    }
}

/// A 2026-07-28 `tools/call` over stdio with `traceparent` in `_meta`: its `mcp_request` span
/// continues that trace under the caller's span, and the call's span is its child.
#[test]
fn an_mcp_request_continues_the_callers_trace() {
    let receiver = Receiver::start();
    let (_dir, cfg) = config(&receiver);
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let frame = crate::mcp_stateless::request(
        1,
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "x"}}),
        json!({
            "toolhost/run": "r1",
            "toolhost/callId": "m1",
            "traceparent": format!("00-{trace}-{parent}-01"),
        }),
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["serve", "--config", cfg.to_str().unwrap()])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{frame}").unwrap();
    let mut answer = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut answer)
        .unwrap();
    assert!(answer.contains("\"isError\":false"), "{answer}");
    drop(stdin);
    assert!(child.wait().unwrap().success());

    let spans = receiver.spans();
    let request = named(&spans, "mcp_request");
    assert_eq!(request.len(), 1, "{spans:#?}");
    let request = request[0];
    assert_eq!(hex::encode(&request.trace_id), trace);
    assert_eq!(hex::encode(&request.parent_span_id), parent);
    assert_eq!(attribute(request, "method").as_deref(), Some("tools/call"));
    let call = named(&spans, "call")[0];
    assert_eq!(call.trace_id, request.trace_id);
    assert_eq!(call.parent_span_id, request.span_id);
}

/// `toolhost agent`: the run is one trace, its model requests and its call are children of
/// the `agent_run` span, and each model request carries the trace to the endpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_run_is_one_trace_and_the_model_gets_it() {
    use crate::openai::{scripted, text, tool_calls, Reply};
    let receiver = Receiver::start();
    let (_dir, cfg) = config(&receiver);
    let server = scripted(
        vec![
            Reply::Stream(tool_calls(&[("c1", "greet", r#"{"name":"a"}"#)], 4, 10)),
            Reply::Stream(text("Greeted.", 5)),
        ],
        None,
    )
    .await;
    let base = server.base_url();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args([
                "agent",
                "--config",
                cfg.to_str().unwrap(),
                "--base-url",
                &base,
            ])
            .args(["--model", "m", "--prompt", "greet a"])
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{out:?}");

    let spans = receiver.spans();
    let run = named(&spans, "agent_run");
    assert_eq!(run.len(), 1, "{spans:#?}");
    let run = run[0];
    let models = named(&spans, "model_request");
    assert_eq!(models.len(), 2);
    let call = named(&spans, "call");
    assert_eq!(call.len(), 1);
    for child in models.iter().chain(call.iter()) {
        assert_eq!(child.trace_id, run.trace_id);
        assert_eq!(child.parent_span_id, run.span_id, "{}", child.name);
    }
    for (seen, model) in server.requests().iter().zip(&models) {
        let header = seen
            .traceparent
            .as_deref()
            .expect("the endpoint gets a traceparent");
        let parts: Vec<&str> = header.split('-').collect();
        assert_eq!(parts[1], hex::encode(&run.trace_id), "{header}");
        assert!(
            models.iter().any(|m| hex::encode(&m.span_id) == parts[2]),
            "{header} names a model_request span ({})",
            model.name
        );
    }
}
