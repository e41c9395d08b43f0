//! Secrets bound to hosts, attacked by the downstream component's `leak-secret` fixtures:
//! the secret's own host receives the value; every other allowed host, the guest's results,
//! logs, progress, stdout, stderr, files and environment, the ledger and the diagnostics hold
//! only the call's placeholder; a server that echoes the value has it redacted before the
//! guest reads it.

use std::path::{Path, PathBuf};

use serde_json::json;
use toolhost::{EpochMode, Runtime, Status};

use crate::api_server::{every_form, ApiServer};
use crate::call_context::{downstream_config, SECRET};
use crate::support::{call, shared_cache, toml_path};

const PLACEHOLDER: &str = "toolhost-secret-PAYMENTS_TOKEN-";

/// A runtime for `cfg` whose data directory is `data` (so the test can read every byte of it).
fn runtime_in(cfg: &Path, data: PathBuf) -> Runtime {
    let mut loaded = toolhost::Config::load(cfg).expect("config loads");
    loaded.data_dir = Some(data);
    loaded.cache_dir = Some(shared_cache());
    loaded.start(EpochMode::Ticker).expect("runtime")
}

/// The fixture's world: a bound API, another allowed host, a writable `/out` and, by the
/// operator's mistake, the value itself readable at `/secrets/token.txt`.
struct World {
    dir: tempfile::TempDir,
    bound: ApiServer,
    other: ApiServer,
    rt: Runtime,
}

impl World {
    async fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let (bound, other) = (ApiServer::start().await, ApiServer::start().await);
        for sub in ["out", "granted"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        std::fs::write(dir.path().join("granted/token.txt"), SECRET).unwrap();
        let fs = format!(
            "fs = [{{ host = {out}, guest = \"/out\", mode = \"rw\" }}, \
             {{ host = {granted}, guest = \"/secrets\" }}]\n",
            out = toml_path(&dir.path().join("out")),
            granted = toml_path(&dir.path().join("granted")),
        );
        let cfg = downstream_config(
            dir.path(),
            "",
            &[bound.authority(), other.authority()],
            &[bound.authority()],
            &fs,
        );
        let rt = runtime_in(&cfg, dir.path().join("data"));
        World {
            dir,
            bound,
            other,
            rt,
        }
    }

    /// `leak_secret` the way `how` says, to `url`: the tool's answer (a completed call).
    async fn leak(&self, how: &str, url: &str) -> String {
        let c = call("leak_secret", json!({"how": how, "url": url}));
        let mut c = c;
        c.call_id = format!("leak-{how}-{}", uuid::Uuid::new_v4().simple());
        let r = self.rt.call(&c).await;
        assert_eq!(r.status, Status::Completed, "{how}: {r:?}");
        let shown = serde_json::to_string(&r).unwrap();
        assert!(
            !shown.contains(SECRET),
            "{how}: the result holds the value: {shown}"
        );
        r.output.unwrap().as_str().unwrap().to_string()
    }

    /// Every file the host wrote (ledger, diagnostics, cache) and none holds the value.
    fn assert_data_clean(&self) {
        let mut stack = vec![self.dir.path().join("data")];
        let mut files = 0;
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                files += 1;
                let bytes = std::fs::read(&p).unwrap();
                let found = bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes());
                assert!(!found, "{} holds the secret's value", p.display());
            }
        }
        assert!(files > 0, "the data directory holds the ledger");
    }
}

/// The bound host gets the value in headers (only there: not in the query or the body); an
/// allowed host that is not the secret's gets the placeholder; an echo of the value comes back
/// redacted, in headers and body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_reaches_only_its_host_and_never_comes_back() {
    let w = World::new().await;

    let receipt =
        w.rt.call(&call(
            "charge",
            json!({"url": w.bound.url("/charge"), "amount-cents": 500}),
        ))
        .await;
    assert_eq!(receipt.status, Status::Completed, "{receipt:?}");
    let sent = &w.bound.requests()[0];
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {SECRET}"))
    );
    let key = receipt.output.as_ref().unwrap()["idempotency-key"].clone();
    assert_eq!(sent.header("idempotency-key").as_deref(), key.as_str());

    let elsewhere = w.leak("header", &w.other.url("/echo")).await;
    let got = &w.other.requests()[0];
    assert!(!got.text().contains(SECRET), "{}", got.text());
    let held = got.header("x-leak").unwrap();
    assert!(held.starts_with(PLACEHOLDER), "{held}");
    assert!(elsewhere.contains(&held), "{elsewhere}");

    let echoed = w.leak("header", &w.bound.url("/echo")).await;
    let got = &w.bound.requests()[1];
    assert_eq!(got.header("x-leak").as_deref(), Some(SECRET));
    // The server sent the value back in a header and twice in its body: the guest read only
    // placeholders, and no length of the original body.
    assert!(
        echoed.contains(&format!("x-echo-authorization: Bearer {PLACEHOLDER}")),
        "{echoed}"
    );
    assert_eq!(echoed.matches(PLACEHOLDER).count(), 3, "{echoed}");
    assert!(!echoed.contains("content-length"), "{echoed}");

    for how in ["query", "body"] {
        let before = w.bound.requests().len();
        w.leak(how, &w.bound.url("/plain")).await;
        let got = &w.bound.requests()[before];
        assert!(!got.text().contains(SECRET), "{how}: {}", got.text());
        assert!(got.text().contains(PLACEHOLDER), "{how}: {}", got.text());
    }
    w.assert_data_clean();
}

/// A server that echoes the value in any form the host can compute (every JSON escape, percent,
/// case, hex, base64 and base64url at each alignment, a header name) is answered with only
/// placeholders: no form of the value reaches the guest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echo_in_any_form_reaches_the_guest_as_a_placeholder() {
    let w = World::new().await;
    let echoed = w.leak("header", &w.bound.url("/forms")).await;
    let folded = echoed.to_ascii_lowercase();
    assert!(!folded.contains(&SECRET.to_ascii_lowercase()), "{echoed}");
    assert!(!folded.contains(&hex::encode(SECRET)), "{echoed}");
    for form in every_form(SECRET).lines() {
        assert!(!echoed.contains(form), "{form} came through: {echoed}");
    }
    // Twelve lines of forms (the JSON line holds two) and the header name.
    assert_eq!(echoed.matches(PLACEHOLDER).count(), 13, "{echoed}");
    let renamed = format!("x-{}", PLACEHOLDER.to_ascii_lowercase());
    assert!(echoed.contains(&renamed), "{echoed}");
    w.assert_data_clean();
}

/// A request to the secret's host asks for its answer whole and plain whatever the guest asked
/// (no `accept-encoding: gzip`, `range`, `if-range` or `te` reaches it); an answer that comes
/// compressed or partial anyway is refused, so the guest never reads a value in a shape no
/// search sees through. A host the secret is not bound to gets the guest's headers as sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_hosts_answer_is_never_compressed_or_partial() {
    let w = World::new().await;
    let echoed = w.leak("shaped", &w.bound.url("/echo")).await;
    let got = w.bound.requests().pop().unwrap();
    assert_eq!(
        got.header("authorization"),
        Some(format!("Bearer {SECRET}"))
    );
    assert_eq!(got.header("accept-encoding").as_deref(), Some("identity"));
    for name in ["range", "if-range", "te"] {
        assert_eq!(got.header(name), None, "{name} reached the server");
    }
    assert!(echoed.starts_with("status 200"), "{echoed}");
    assert!(echoed.contains(PLACEHOLDER), "{echoed}");

    let compressed = w.leak("shaped", &w.bound.url("/compressed")).await;
    assert_eq!(
        compressed, "request failed: HttpResponseContentCoding(Some(\"gzip\"))",
        "{compressed}"
    );
    let reversed: String = SECRET.chars().rev().collect();
    assert!(!compressed.contains(&reversed));
    let partial = w.leak("shaped", &w.bound.url("/partial")).await;
    assert!(
        partial.starts_with("request failed: InternalError(Some(\"a partial answer"),
        "{partial}"
    );
    assert!(!partial.contains(&SECRET[..12]), "{partial}");

    let elsewhere = w.leak("shaped", &w.other.url("/partial")).await;
    let got = w.other.requests().pop().unwrap();
    assert_eq!(got.header("accept-encoding").as_deref(), Some("gzip, br"));
    assert_eq!(got.header("range").as_deref(), Some("bytes=0-11"));
    assert!(elsewhere.starts_with("status 206"), "{elsewhere}");
    // The host keeps serving the secret's host after refusing.
    let after = w.leak("header", &w.bound.url("/echo")).await;
    assert!(after.starts_with("status 200"), "{after}");
    w.assert_data_clean();
}

/// The named gap, measured: an API that itself hands out the value in pieces (12 bytes a call
/// here) gives it whole to a guest in `ceil(len / 12)` calls (3 for this 30-byte value), since
/// no piece is a form of the value. Bind a secret only to an API that never does this.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_handed_out_in_pieces_by_its_own_api_is_not_caught() {
    let w = World::new().await;
    let mut whole = String::new();
    for from in (0..SECRET.len()).step_by(12) {
        let got = w
            .leak("header", &w.bound.url(&format!("/slice-{from}")))
            .await;
        whole.push_str(got.rsplit('\n').next().unwrap());
    }
    assert_eq!(
        whole, SECRET,
        "the gap is closed: update docs/threat-model.md"
    );
}

/// Whatever the guest holds and writes (its result, logs, progress, stdout, stderr, a file, its
/// environment) is the placeholder; one call's placeholder differs from the next one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guest_holds_only_a_placeholder() {
    let w = World::new().await;
    let first = w.leak("output", "").await;
    let second = w.leak("output", "").await;
    assert!(first.starts_with(PLACEHOLDER) && second.starts_with(PLACEHOLDER));
    assert_ne!(first, second, "a placeholder is good for one call only");

    let env = w.leak("env", "").await;
    let vars: Vec<&str> = env.lines().collect();
    assert_eq!(vars.len(), 1, "{env}");
    assert!(
        vars[0].starts_with(&format!("PAYMENTS_TOKEN={PLACEHOLDER}")),
        "{env}"
    );

    let written = w.leak("file", "").await;
    let file = std::fs::read_to_string(w.dir.path().join("out/leak.txt")).unwrap();
    assert_eq!(file, written);
    assert!(file.starts_with(PLACEHOLDER));

    for how in ["log", "stdio"] {
        let exec = execute(&w.rt, how).await;
        let text = everything(&exec);
        assert!(!text.contains(SECRET), "{how}: {text}");
        assert!(text.contains(PLACEHOLDER), "{how}: {text}");
    }
    w.assert_data_clean();
}

/// A value the guest found some other way (a granted file holding it, the operator's mistake)
/// is redacted from its result, logs and stderr: defense in depth, for verbatim copies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_found_in_a_file_is_redacted_from_what_the_call_leaves() {
    let w = World::new().await;
    let out = w.leak("read-file", "").await;
    assert!(out.starts_with(PLACEHOLDER), "{out}");
    let exec = execute(&w.rt, "read-file").await;
    let text = everything(&exec);
    assert!(!text.contains(SECRET), "{text}");
    assert!(text.contains(&format!("found {PLACEHOLDER}")), "{text}");
    w.assert_data_clean();
}

/// The execution of `leak_secret` the way `how` says, with what it reported.
async fn execute(rt: &Runtime, how: &str) -> toolhost_sandbox::Execution {
    let registry = rt.registry();
    let tool = registry.get("leak_secret").unwrap();
    let params = rt
        .benchmark_params(tool, &json!({"how": how, "url": ""}))
        .unwrap();
    rt.execute(tool, &params).await
}

/// Results, kept reports, stdout and stderr of an execution, as one text.
fn everything(exec: &toolhost_sandbox::Execution) -> String {
    format!(
        "{:?}\n{}\n{}\n{}",
        exec.outcome,
        serde_json::to_string(&exec.reports.kept).unwrap(),
        String::from_utf8_lossy(&exec.stdout),
        String::from_utf8_lossy(&exec.stderr)
    )
}

/// A value from the host's environment, through the real binary: the bound host receives it,
/// the printed result does not hold it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_from_the_environment_through_toolhost_call() {
    let api = ApiServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = downstream_config(dir.path(), "", &[api.authority()], &[api.authority()], "");
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("file = \"token.txt\"", "env = \"TOOLHOST_TEST_PAYMENTS\"");
    std::fs::write(&cfg, text).unwrap();
    let args = json!({"url": api.url("/charge"), "amount-cents": 1}).to_string();
    let cfg_arg = cfg.to_str().unwrap().to_string();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args(["call", "--config", &cfg_arg, "charge", &args])
            .env("TOOLHOST_TEST_PAYMENTS", SECRET)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains(SECRET), "{stdout}");
    let got = api.requests();
    assert_eq!(
        got[0].header("authorization"),
        Some(format!("Bearer {SECRET}"))
    );

    // Without the variable, the config is refused, naming the variable and not a value.
    let no_env =
        crate::support::toolhost(&["call", "--config", cfg.to_str().unwrap(), "charge", "{}"]);
    assert_eq!(no_env.status, 2, "{}", no_env.stderr);
    assert!(
        no_env.stderr.contains("TOOLHOST_TEST_PAYMENTS is not set"),
        "{}",
        no_env.stderr
    );
}

/// Each way `leak_secret` tries, and the test that proves it fails. A new way must be added
/// here (`every_leak_has_a_test` fails until it is).
const LEAKS: &[(&str, fn())] = &[
    (
        "header",
        a_secret_reaches_only_its_host_and_never_comes_back,
    ),
    (
        "shaped",
        a_secret_hosts_answer_is_never_compressed_or_partial,
    ),
    ("query", a_secret_reaches_only_its_host_and_never_comes_back),
    ("body", a_secret_reaches_only_its_host_and_never_comes_back),
    ("output", the_guest_holds_only_a_placeholder),
    ("log", the_guest_holds_only_a_placeholder),
    ("stdio", the_guest_holds_only_a_placeholder),
    ("file", the_guest_holds_only_a_placeholder),
    ("env", the_guest_holds_only_a_placeholder),
    (
        "read-file",
        a_value_found_in_a_file_is_redacted_from_what_the_call_leaves,
    ),
    ("trap", a_trap_leaves_no_value_in_the_diagnostic_log),
];

/// A guest that prints the value it found and traps: the call ends `guest_trap`, and the
/// diagnostic log (stderr and trap detail) holds the placeholder, not the value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_leaves_no_value_in_the_diagnostic_log() {
    let w = World::new().await;
    let r =
        w.rt.call(&call("leak_secret", json!({"how": "trap", "url": ""})))
            .await;
    assert_eq!(r.code, Some(toolhost::Code::GuestTrap), "{r:?}");
    w.rt.diagnostics().flush();
    let log = std::fs::read_to_string(w.dir.path().join("data/diagnostics.log")).unwrap();
    assert!(
        log.contains(&format!("about to fail with {PLACEHOLDER}")),
        "{log}"
    );
    w.assert_data_clean();
}

/// The fixture's ways (its input schema's enum) are exactly the ones listed above.
#[tokio::test]
async fn every_leak_has_a_test() {
    let w = World::new().await;
    let registry = w.rt.registry();
    let tool = registry.get("leak_secret").unwrap();
    let mut ways: Vec<&str> = tool.input_schema["properties"]["how"]["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", tool.input_schema))
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    ways.sort();
    let mut listed: Vec<&str> = LEAKS.iter().map(|(w, _)| *w).collect();
    listed.sort();
    assert_eq!(ways, listed);
}
