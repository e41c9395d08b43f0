//! OTLP export, read by a receiver on loopback that decodes what it gets with the official
//! OpenTelemetry protobuf definitions (`opentelemetry-proto`): one trace per call with a span
//! per stage under the call's span, the guest's line a log record of that trace, the call
//! counted in the exported metrics; an MCP request's span continues the caller's `traceparent`
//! and is the call's parent; the agent loop's run is the parent of its model requests and calls,
//! and the model endpoint gets the run's `traceparent`; a flooding guest exports bounded logs.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::metrics::v1::{metric::Data, Metric};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::json;

use crate::support::{guest, own_data, temp_config, toml_path};

/// Argument content that must never be exported.
const ARGUMENT_MARK: &str = "argmark-7c4a8d09ca3762af";

/// What the receiver kept: each request's path and body.
type Kept = Mutex<Vec<(String, Vec<u8>)>>;

/// An OTLP/HTTP receiver: every body POSTed to `/v1/traces`, `/v1/metrics` or `/v1/logs`, kept
/// raw under its path.
struct Receiver {
    port: u16,
    bodies: Arc<Kept>,
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

    /// The bodies POSTed to `path`, after checking that no body carries argument content.
    fn bodies(&self, path: &str) -> Vec<Vec<u8>> {
        let bodies = self.bodies.lock().unwrap();
        for (_, body) in bodies.iter() {
            let text = String::from_utf8_lossy(body);
            assert!(
                !text.contains(ARGUMENT_MARK),
                "argument content was exported"
            );
        }
        bodies
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, b)| b.clone())
            .collect()
    }

    /// Every exported span, decoded.
    fn spans(&self) -> Vec<Span> {
        self.bodies("/v1/traces")
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

    /// Every exported log record, decoded.
    fn records(&self) -> Vec<LogRecord> {
        self.bodies("/v1/logs")
            .iter()
            .flat_map(|b| {
                ExportLogsServiceRequest::decode(&b[..])
                    .expect("OTLP protobuf")
                    .resource_logs
            })
            .flat_map(|r| r.scope_logs)
            .flat_map(|s| s.log_records)
            .collect()
    }

    /// Every export of metrics, decoded: one list of metrics per request.
    fn metric_exports(&self) -> Vec<Vec<Metric>> {
        self.bodies("/v1/metrics")
            .iter()
            .map(|b| {
                ExportMetricsServiceRequest::decode(&b[..])
                    .expect("OTLP protobuf")
                    .resource_metrics
                    .into_iter()
                    .flat_map(|r| r.scope_metrics)
                    .flat_map(|s| s.metrics)
                    .collect()
            })
            .collect()
    }
}

/// Answer the requests of one connection (keep-alive), keeping each body.
fn serve(stream: std::net::TcpStream, kept: &Kept) {
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
        let path = first
            .strip_prefix("POST ")
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or_default();
        assert!(
            ["/v1/traces", "/v1/metrics", "/v1/logs"].contains(&path),
            "{first}"
        );
        kept.lock().unwrap().push((path.to_string(), body));
        let _ = writer.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n",
        );
    }
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    find(&span.attributes, key)
}

fn find(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| text(a.value.as_ref()?.value.as_ref()?))
}

fn text(value: &Any) -> Option<String> {
    match value {
        Any::StringValue(s) => Some(s.clone()),
        Any::IntValue(i) => Some(i.to_string()),
        other => Some(format!("{other:?}")),
    }
}

/// The text of a log record's body.
fn body(record: &LogRecord) -> String {
    record
        .body
        .as_ref()
        .and_then(|b| text(b.value.as_ref()?))
        .unwrap_or_default()
}

/// The sum of `name`'s data points whose attributes include all of `with`: a counter's value
/// or a histogram's count.
fn total(metrics: &[Metric], name: &str, with: &[(&str, &str)]) -> f64 {
    let matches = |attrs: &[KeyValue]| {
        with.iter()
            .all(|(k, v)| find(attrs, k).as_deref() == Some(*v))
    };
    metrics
        .iter()
        .filter(|m| m.name == name)
        .map(|m| match m.data.as_ref() {
            Some(Data::Sum(sum)) => sum
                .data_points
                .iter()
                .filter(|p| matches(&p.attributes))
                .map(|p| match p.value {
                    Some(
                        opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsInt(i),
                    ) => i as f64,
                    Some(
                        opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsDouble(
                            d,
                        ),
                    ) => d,
                    None => 0.0,
                })
                .sum::<f64>(),
            Some(Data::Histogram(h)) => h
                .data_points
                .iter()
                .filter(|p| matches(&p.attributes))
                .map(|p| p.count as f64)
                .sum(),
            _ => 0.0,
        })
        .sum()
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
/// tool, principal, outcome) and one child per stage, the guest's log line is a log record of
/// the call's trace (not a span event), and each process exports its call in its metrics. No
/// argument content is exported.
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
        assert!(!events.contains(&"greeting"), "{events:?}");
        let execute = children.iter().find(|s| s.name == "execute").unwrap();
        let records = receiver.records();
        let guest: Vec<&LogRecord> = records
            .iter()
            .filter(|r| r.trace_id == call.trace_id)
            .collect();
        assert_eq!(guest.len(), 1, "{records:#?}");
        assert_eq!(body(guest[0]), "greeting");
        assert_eq!(guest[0].span_id, execute.span_id);
        assert_eq!(guest[0].severity_text, "INFO");
    }

    let exports = receiver.metric_exports();
    assert_eq!(exports.len(), 2, "one export per process, at its exit");
    for metrics in &exports {
        let done = [("tool", "greet"), ("status", "completed"), ("code", "")];
        assert_eq!(total(metrics, "toolhost.calls", &done), 1.0, "{metrics:#?}");
        assert_eq!(total(metrics, "toolhost.calls", &[]), 1.0);
        let greet = [("tool", "greet")];
        assert_eq!(total(metrics, "toolhost.call.duration", &greet), 1.0);
        assert_eq!(total(metrics, "toolhost.memory.peak", &greet), 1.0);
        assert!(total(metrics, "toolhost.fuel", &greet) > 0.0);
        for stage in ["admit", "validate", "execute", "record"] {
            let at = [("stage", stage)];
            assert_eq!(
                total(metrics, "toolhost.stage.duration", &at),
                1.0,
                "{stage}"
            );
        }
        assert_eq!(total(metrics, "toolhost.calls.in_flight", &[]), 0.0);
    }
}

/// A guest that logs 100,000 lines of 8 KiB in one call exports at most the kept reports'
/// count as log records, each bounded (the endpoint from `OTEL_EXPORTER_OTLP_ENDPOINT`).
#[test]
fn a_flooding_guest_cannot_flood_the_exported_logs() {
    let receiver = Receiver::start();
    let cfg = crate::support::adversarial_config();
    let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["call", "--config", cfg.to_str().unwrap(), "log_spam", "{}"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let records = receiver.records();
    let guest: Vec<&LogRecord> = records
        .iter()
        .filter(|r| body(r).starts_with("zzz"))
        .collect();
    assert_eq!(guest.len(), toolhost_sandbox::MAX_REPORTS_PER_CALL);
    for r in &guest {
        let text = body(r);
        assert!(
            text.len() <= toolhost_sandbox::MAX_REPORT_MESSAGE_BYTES,
            "{}",
            text.len()
        );
    }
    let bytes: usize = receiver.bodies("/v1/logs").iter().map(Vec::len).sum();
    assert!(bytes < 2 * 1024 * 1024, "{bytes} bytes of log records");
    let spans = receiver.spans();
    assert_eq!(named(&spans, "call").len(), 1);
}

/// Run `toolhost serve` over stdio for `frames`, reading one answer line per request (a frame
/// with an `id`), then close stdin and wait for a clean exit (which exports what is buffered).
fn serve_stdio(cfg: &std::path::Path, frames: &[serde_json::Value]) -> Vec<String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["serve", "--config", cfg.to_str().unwrap()])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut answers = Vec::new();
    for frame in frames {
        writeln!(stdin, "{frame}").unwrap();
        if frame.get("id").is_some() {
            let mut answer = String::new();
            stdout.read_line(&mut answer).unwrap();
            answers.push(answer);
        }
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    answers
}

/// A W3C trace context of `trace` under the caller's span `parent`.
fn traceparent(trace: &str, parent: &str) -> String {
    format!("00-{trace}-{parent}-01")
}

/// `tools/call` over stdio with `traceparent` in `_meta`, in both eras (a 2026-07-28 request,
/// and a call in a 2025-11-25 session): its `mcp_request` span continues that trace under the
/// caller's span, and the call's span is its child; `server/discover` and `initialize` are
/// `mcp_request`s of their callers' traces too.
#[test]
fn an_mcp_request_continues_the_callers_trace() {
    let receiver = Receiver::start();
    let (_dir, cfg) = config(&receiver);
    let [call_trace, discover_trace, session_trace] = [
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "0af7651916cd43dd8448eb211c80319c",
        "5c0a2f1bd6e34e0e9d3a6c1f2b7e8d40",
    ];
    let parent = "00f067aa0ba902b7";
    let stateless = serve_stdio(
        &cfg,
        &[
            crate::mcp_stateless::request(
                2,
                "server/discover",
                json!({}),
                json!({"traceparent": traceparent(discover_trace, parent)}),
            ),
            crate::mcp_stateless::request(
                1,
                "tools/call",
                json!({"name": "greet", "arguments": {"name": "x"}}),
                json!({
                    "toolhost/run": "r1",
                    "toolhost/callId": "m1",
                    "traceparent": traceparent(call_trace, parent),
                }),
            ),
        ],
    );
    assert!(stateless[0].contains("supportedVersions"), "{stateless:?}");
    assert!(stateless[1].contains("\"isError\":false"), "{stateless:?}");
    let session = serve_stdio(
        &cfg,
        &[
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
                "_meta": {"traceparent": traceparent(session_trace, parent)}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "greet", "arguments": {"name": "y"},
                "_meta": {"traceparent": traceparent(session_trace, parent)}}}),
        ],
    );
    assert!(session[1].contains("\"isError\":false"), "{session:?}");

    let spans = receiver.spans();
    let requests = named(&spans, "mcp_request");
    assert_eq!(requests.len(), 4, "{spans:#?}");
    let asked = |method: &str, trace: &str| {
        *requests
            .iter()
            .find(|r| {
                attribute(r, "method").as_deref() == Some(method)
                    && hex::encode(&r.trace_id) == trace
            })
            .unwrap_or_else(|| panic!("no {method} span in {trace}"))
    };
    for (method, trace) in [
        ("server/discover", discover_trace),
        ("tools/call", call_trace),
        ("initialize", session_trace),
        ("tools/call", session_trace),
    ] {
        let request = asked(method, trace);
        assert_eq!(hex::encode(&request.parent_span_id), parent, "{method}");
    }
    for trace in [call_trace, session_trace] {
        let request = asked("tools/call", trace);
        let call: Vec<&Span> = named(&spans, "call")
            .into_iter()
            .filter(|c| c.trace_id == request.trace_id)
            .collect();
        assert_eq!(call.len(), 1, "{trace}");
        assert_eq!(call[0].parent_span_id, request.span_id);
    }
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
