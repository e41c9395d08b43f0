//! What the host logs about itself (`telemetry`): JSON lines that a JSON parser reads, each
//! call's span and its stage spans with the call's identity and never its arguments, guest log
//! lines inside the call's span and bounded as the kept reports are, and a quiet default.

use serde_json::{json, Value};

use crate::support::{guest, own_data, temp_config, toml_path, toolhost};

/// Argument content that must never reach a log line.
const ARGUMENT_MARK: &str = "argmark-5d41402abc4b2a76";

/// Every stderr line parsed as JSON (a line that is not JSON fails the test).
fn json_lines(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The names of the spans a JSON line is in, outermost first (for a span's closing: its
/// parents).
fn span_names(line: &Value) -> Vec<&str> {
    line["spans"]
        .as_array()
        .map(|s| s.iter().map(|s| s["name"].as_str().unwrap()).collect())
        .unwrap_or_default()
}

/// With `--log-format json --log-level debug`, a call logs its span with its identity and
/// outcome, one closed child span per stage, and the guest's log line inside the call's span;
/// no line holds argument content.
#[test]
fn a_call_logs_its_span_stages_and_guest_lines_as_json() {
    let (_dir, cfg) = temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\n",
        own_data(),
        toml_path(&guest("template"))
    ));
    let args = json!({ "name": ARGUMENT_MARK }).to_string();
    let out = toolhost(&[
        "--log-format",
        "json",
        "--log-level",
        "debug",
        "call",
        "--config",
        cfg.to_str().unwrap(),
        "--principal",
        "alice",
        "--tenant",
        "acme",
        "--call-id",
        "c-1",
        "greet",
        &args,
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let stderr = &out.stderr;
    assert!(
        !stderr.contains(ARGUMENT_MARK),
        "argument content in the log"
    );
    let lines = json_lines(&out.stderr);

    let guest_line = lines
        .iter()
        .find(|l| l["target"] == "toolhost::guest")
        .unwrap_or_else(|| panic!("no guest line in {stderr}"));
    assert_eq!(guest_line["level"], "INFO");
    assert_eq!(guest_line["fields"]["message"], "greeting");
    let call = guest_line["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "call")
        .expect("the guest line is inside the call's span");
    assert_eq!(call["call_id"], "c-1");
    assert_eq!(call["tool"], "greet");
    assert_eq!(call["principal"], "alice");
    assert_eq!(call["tenant"], "acme");
    assert!(call["run_id"].as_str().is_some_and(|r| !r.is_empty()));

    let closed: Vec<&Value> = lines
        .iter()
        .filter(|l| l["fields"]["message"] == "close")
        .collect();
    let call_close = closed
        .iter()
        .find(|l| l["span"]["name"] == "call")
        .expect("the call span closes");
    assert_eq!(call_close["span"]["status"], "completed");
    assert!(call_close["span"].get("code").is_none(), "{call_close}");
    for stage in [
        "admit",
        "resolve",
        "validate",
        "authorize",
        "limit",
        "execute",
        "check",
        "record",
    ] {
        let line = closed
            .iter()
            .find(|l| l["span"]["name"] == stage)
            .unwrap_or_else(|| panic!("no closed {stage} span in {stderr}"));
        assert_eq!(span_names(line), ["call"], "{line}");
        assert!(line["fields"]["time.busy"].is_string(), "{line}");
    }
}

/// A guest that logs 100,000 lines of 8 KiB in one call puts at most the kept reports' count in
/// the host's log, each bounded; the call still completes.
#[test]
fn a_flooding_guest_cannot_flood_the_host_log() {
    let cfg = crate::support::adversarial_config();
    let out = toolhost(&[
        "--log-format",
        "json",
        "--log-level",
        "toolhost::guest=debug",
        "call",
        "--config",
        cfg.to_str().unwrap(),
        "log_spam",
        "{}",
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let lines = json_lines(&out.stderr);
    let guest: Vec<&Value> = lines
        .iter()
        .filter(|l| l["target"] == "toolhost::guest")
        .collect();
    assert_eq!(guest.len(), toolhost_sandbox::MAX_REPORTS_PER_CALL);
    for l in &guest {
        let m = l["fields"]["message"].as_str().unwrap();
        assert!(
            m.len() <= toolhost_sandbox::MAX_REPORT_MESSAGE_BYTES,
            "{}",
            m.len()
        );
    }
    assert!(
        out.stderr.len() < 2 * 1024 * 1024,
        "{} bytes",
        out.stderr.len()
    );
}

/// By default a call logs nothing (guest lines below `warn`, no spans); a filter that does not
/// parse is refused before anything runs, naming where it came from.
#[test]
fn the_default_is_quiet_and_a_bad_filter_is_refused() {
    let (_dir, cfg) = temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\n",
        own_data(),
        toml_path(&guest("template"))
    ));
    let config = cfg.to_str().unwrap();
    let out = toolhost(&["call", "--config", config, "greet", r#"{"name": "x"}"#]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.stderr, "");

    let out = toolhost(&["--log-level", "toolhost=loud", "tools", "--config", config]);
    assert_eq!(out.status, 2);
    let stderr = &out.stderr;
    assert!(
        stderr.contains("--log-level \"toolhost=loud\" is not a log filter"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

/// With `--log-format json`, what the command itself says on stderr is JSON too: a config that
/// cannot be read, a filter that does not parse, a session that cannot start (each one JSON
/// object, level `ERROR`, target `toolhost`, the text in `fields.message`).
#[test]
fn json_logs_hold_only_json() {
    let (_dir, cfg) = temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\n",
        own_data(),
        toml_path(&guest("template"))
    ));
    let config = cfg.to_str().unwrap();
    for (args, says) in [
        (
            vec!["call", "--config", "no-such.toml", "greet", "{}"],
            "cannot read config no-such.toml",
        ),
        (
            vec!["--log-level", "toolhost=loud", "tools", "--config", config],
            "is not a log filter",
        ),
        (
            vec!["serve", "--config", config],
            "the MCP session could not start",
        ),
    ] {
        let mut all = vec!["--log-format", "json"];
        all.extend(&args);
        let out = toolhost(&all);
        assert_ne!(out.status, 0, "{args:?}");
        let lines = json_lines(&out.stderr);
        assert_eq!(lines.len(), 1, "{args:?}: {}", out.stderr);
        assert_eq!(lines[0]["level"], "ERROR", "{args:?}");
        assert_eq!(lines[0]["target"], "toolhost", "{args:?}");
        let message = lines[0]["fields"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{args:?}: {message}");
    }
}
