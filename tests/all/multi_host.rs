//! Many hosts, one PostgreSQL ledger: every cross-call guarantee holds between `toolhost`
//! processes that share nothing but the database. Each test works in a schema of its own.
//! Ignored unless run with `--ignored pg_` and `TOOLHOST_TEST_POSTGRES_URL` (`just test` and
//! `.ci/run` do); then an unreachable server fails them.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{guest, temp_config, toml_path, toolhost, Cli};

/// A schema of the test's own on the test server, dropped when the test ends.
pub(super) struct Schema {
    pub(super) url: String,
    pub(super) name: String,
}

impl Schema {
    pub(super) fn new() -> Schema {
        let url = std::env::var("TOOLHOST_TEST_POSTGRES_URL").expect(
            "set TOOLHOST_TEST_POSTGRES_URL (e.g. postgres://postgres@127.0.0.1:5432/test) and \
             run with --ignored pg_",
        );
        Schema {
            url,
            name: format!("t_{}", uuid::Uuid::new_v4().simple()),
        }
    }

    /// The `[ledger]` section that puts a host on this schema.
    pub(super) fn ledger_section(&self) -> String {
        format!(
            "[ledger]\nurl = {:?}\nschema = {:?}\nlease_secs = 3\n",
            self.url, self.name
        )
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let config = toolhost_ledger::PgConfig {
            url: self.url.clone(),
            password_env: None,
            schema: self.name.clone(),
            ca_file: None,
        };
        let name = self.name.clone();
        // On a thread of its own: the test may be inside a runtime, where blocking on another
        // is refused.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async {
                let client = config.connect().await.ok()?;
                client
                    .batch_execute(&format!("DROP SCHEMA {name} CASCADE"))
                    .await
                    .ok()
            })
        })
        .join();
    }
}

/// A loopback HTTP server that counts requests and answers each after `hold` (or never, for
/// the first request, with `hold_first`), reporting each arrival.
pub(super) struct Server {
    pub(super) port: u16,
    pub(super) requests: Arc<AtomicUsize>,
    arrived: mpsc::Receiver<()>,
}

pub(super) fn server(hold: Duration, hold_first: bool) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(AtomicUsize::new(0));
    let (tx, arrived) = mpsc::channel();
    let counter = requests.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut sock) = stream else { return };
            let n = counter.fetch_add(1, Ordering::SeqCst);
            let _ = tx.send(());
            if n == 0 && hold_first {
                held.push(sock);
                continue;
            }
            std::thread::spawn(move || {
                let _ = sock.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf);
                std::thread::sleep(hold);
                let body = format!("answer {n}");
                let _ = sock.write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                );
            });
        }
    });
    Server {
        port,
        requests,
        arrived,
    }
}

/// A config for hosts on `schema` with `http_get` (risk `write`) allowed to reach `port`,
/// with `extra` appended to its tool section, and `run` as the `[run]` section.
pub(super) fn config(
    schema: &Schema,
    port: u16,
    extra: &str,
    run: &str,
) -> (tempfile::TempDir, String) {
    let (dir, path) = temp_config(&format!(
        "data_dir = {}\n{run}\n{}[[component]]\npath = {}\nnetwork = {{ allow = [\"127.0.0.1:{port}\"] }}\n\
         [component.tools.http-get]\nrisk = \"write\"\n{extra}",
        crate::support::own_data(),
        schema.ledger_section(),
        toml_path(&guest("http-get")),
    ));
    let path = path.to_str().unwrap().to_owned();
    (dir, path)
}

/// `toolhost call` as one host: `http_get` of `url` as alice, in run `R`.
fn call_command(cfg: &str, call_id: &str, url: &str, token: Option<&str>) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolhost"));
    c.args([
        "call",
        "--config",
        cfg,
        "--principal",
        "alice",
        "--run-id",
        "R",
    ])
    .args(["--call-id", call_id])
    .current_dir(crate::support::repo());
    if let Some(t) = token {
        c.args(["--approval-token", t]);
    }
    c.args(["http_get", &json!({ "url": url }).to_string()]);
    c
}

/// Run hosts at once, each its own process, and return what each printed.
fn at_once(commands: Vec<Command>) -> Vec<Value> {
    let children: Vec<Child> = commands
        .into_iter()
        .map(|mut c| {
            c.stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            serde_json::from_str(&stdout).unwrap_or_else(|e| {
                panic!(
                    "not JSON ({e}): {stdout}\nstderr: {}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })
        })
        .collect()
}

fn ledger(cfg: &str) -> Vec<Value> {
    let out: Cli = toolhost(&["ledger", "--config", cfg, "--run", "R"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    out.json()["calls"].as_array().cloned().unwrap_or_default()
}

/// The same `(run, call id)` sent to three hosts at once runs once: the server sees one
/// request, all three answer with the one recorded result, and the ledger holds one call.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
fn pg_three_hosts_run_one_call_once() {
    let schema = Schema::new();
    let srv = server(Duration::from_millis(1500), false);
    let (_d, cfg) = config(&schema, srv.port, "", "");
    let url = format!("http://127.0.0.1:{}/once", srv.port);
    let answers = at_once(
        (0..3)
            .map(|_| call_command(&cfg, "c1", &url, None))
            .collect(),
    );
    assert_eq!(srv.requests.load(Ordering::SeqCst), 1, "{answers:?}");
    for a in &answers {
        assert_eq!(a["status"], json!("completed"), "{a}");
        assert_eq!(a, &answers[0]);
    }
    let calls = ledger(&cfg);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["status"], json!("completed"));
}

/// A run budget of 4 spread over three hosts (9 calls, three at a time): exactly 4 run; the
/// other 5 end `budget_exhausted` without reaching the server.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
fn pg_a_run_budget_holds_across_hosts() {
    let schema = Schema::new();
    let srv = server(Duration::ZERO, false);
    let (_d, cfg) = config(&schema, srv.port, "", "[run]\nmax_calls = 4");
    let url = format!("http://127.0.0.1:{}/budget", srv.port);
    let mut answers = Vec::new();
    for round in 0..3 {
        answers.extend(at_once(
            (0..3)
                .map(|i| call_command(&cfg, &format!("b{round}-{i}"), &url, None))
                .collect(),
        ));
    }
    let completed = answers
        .iter()
        .filter(|a| a["status"] == json!("completed"))
        .count();
    let exhausted = answers
        .iter()
        .filter(|a| a["code"] == json!("budget_exhausted"))
        .count();
    assert_eq!((completed, exhausted), (4, 5), "{answers:?}");
    assert_eq!(srv.requests.load(Ordering::SeqCst), 4);
}

/// An approval token spent on one host is refused on the other two (`approval_reused`), and
/// nothing runs for them.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
fn pg_an_approval_token_is_single_use_across_hosts() {
    let schema = Schema::new();
    let srv = server(Duration::ZERO, false);
    let (_d, cfg) = config(&schema, srv.port, "approval = \"required\"\n", "");
    let url = format!("http://127.0.0.1:{}/approved", srv.port);
    let asked = at_once(vec![call_command(&cfg, "ask", &url, None)]);
    assert_eq!(asked[0]["code"], json!("approval_required"), "{}", asked[0]);
    let handle = asked[0]["approval"]["handle"].as_str().unwrap().to_owned();
    let shown = json!({ "url": url }).to_string();
    let minted = toolhost(&[
        "approve",
        "--config",
        &cfg,
        "--arguments",
        &shown,
        "--yes",
        &handle,
    ]);
    assert_eq!(minted.status, 0, "{}", minted.stderr);
    let token = minted.stdout.trim().to_owned();
    let first = at_once(vec![call_command(&cfg, "use-1", &url, Some(&token))]);
    assert_eq!(first[0]["status"], json!("completed"), "{}", first[0]);
    let others = at_once(
        ["use-2", "use-3"]
            .iter()
            .map(|id| call_command(&cfg, id, &url, Some(&token)))
            .collect(),
    );
    for o in &others {
        assert_eq!(o["code"], json!("approval_reused"), "{o}");
    }
    assert_eq!(srv.requests.load(Ordering::SeqCst), 1);
}

/// A host killed (`kill -9`) in the middle of a write: once its lease passes (3 s here) another
/// host closes the call as `outcome_unknown` — the same id sent to it answers that, and never
/// runs again — while a third host serves its own call meanwhile. An operator on a fourth
/// host reconciles it; two more hosts replay the reconciliation, and a second one is refused.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
fn pg_a_killed_hosts_call_ends_outcome_unknown_and_is_reconciled_elsewhere() {
    let schema = Schema::new();
    let srv = server(Duration::ZERO, true);
    let (_d, cfg) = config(&schema, srv.port, "", "");
    let url = format!("http://127.0.0.1:{}/killed", srv.port);
    let mut doomed = call_command(&cfg, "k1", &url, None)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    srv.arrived
        .recv_timeout(Duration::from_secs(120))
        .expect("the call reached the server");
    let open = ledger(&cfg);
    assert_eq!(open[0]["state"], json!("started"), "{open:?}");
    doomed.kill().unwrap(); // SIGKILL
    doomed.wait().unwrap();
    let answers = at_once(vec![
        call_command(&cfg, "k1", &url, None),
        call_command(&cfg, "other", &url, None),
    ]);
    assert_eq!(
        answers[0]["status"],
        json!("outcome_unknown"),
        "{}",
        answers[0]
    );
    assert_eq!(answers[1]["status"], json!("completed"), "{}", answers[1]);
    assert_eq!(
        srv.requests.load(Ordering::SeqCst),
        2,
        "k1 ran once, other once"
    );
    let again = at_once(vec![call_command(&cfg, "k1", &url, None)]);
    assert_eq!(again[0], answers[0]);
    let calls = ledger(&cfg);
    let k1: Vec<_> = calls
        .iter()
        .filter(|c| c["call_id"] == json!("k1"))
        .collect();
    assert_eq!(k1.len(), 1);
    assert_eq!(k1[0]["status"], json!("outcome_unknown"));

    // An operator on yet another host records what k1 did; every host replays that.
    let output = json!({"status": 200, "content-type": null, "body": "k1", "truncated": false});
    let record = toolhost(&[
        "reconcile",
        "--config",
        &cfg,
        "record",
        "--run",
        "R",
        "--call",
        "k1",
        "completed",
        "--output",
        &output.to_string(),
        "--by",
        "ops",
        "--why",
        "the server saw it",
    ]);
    assert_eq!(record.status, 0, "{}", record.stderr);
    let replays = at_once(vec![
        call_command(&cfg, "k1", &url, None),
        call_command(&cfg, "k1", &url, None),
    ]);
    for r in &replays {
        assert_eq!(r, &record.json(), "{r}");
        assert_eq!(r["output"], output);
    }
    assert_eq!(srv.requests.load(Ordering::SeqCst), 2, "k1 never ran again");
    let again = toolhost(&[
        "reconcile",
        "--config",
        &cfg,
        "record",
        "--run",
        "R",
        "--call",
        "k1",
        "confirmed-not-run",
        "--by",
        "ops",
        "--why",
        "second thoughts",
    ]);
    assert_eq!(again.status, 1, "{}", again.stderr);
    let k1 = ledger(&cfg)
        .into_iter()
        .find(|c| c["call_id"] == json!("k1"))
        .unwrap();
    assert_eq!(k1["status"], json!("outcome_unknown"));
    assert_eq!(k1["reconciliation"]["status"], json!("completed"), "{k1}");
}

/// A loopback TCP proxy in front of the PostgreSQL server, which the test can take down (every
/// connection through it cut, new ones dropped at once) and bring back: an outage of the
/// database as one host sees it, without touching the server other tests use.
struct Proxy {
    port: u16,
    down: Arc<std::sync::atomic::AtomicBool>,
    open: Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl Proxy {
    fn start(target: (String, u16)) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let down = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let open = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (d, o) = (down.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                if d.load(Ordering::SeqCst) {
                    continue; // dropped: the connection closes at once
                }
                let Ok(server) = std::net::TcpStream::connect((target.0.as_str(), target.1)) else {
                    continue;
                };
                let mut kept = o.lock().unwrap();
                kept.push(client.try_clone().unwrap());
                kept.push(server.try_clone().unwrap());
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Proxy { port, down, open }
    }

    /// Cut every connection and refuse new ones until [`Proxy::up`].
    fn down(&self) {
        self.down.store(true, Ordering::SeqCst);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    fn up(&self) {
        self.down.store(false, Ordering::SeqCst);
    }
}

/// A schema of the test's own, a proxy in front of the test server, and the same schema as
/// reached through the proxy (forget it: the first one drops the schema, over the real server).
fn proxied_schema() -> (Schema, Proxy, Schema) {
    let schema = Schema::new();
    let target: tokio_postgres::Config = schema.url.parse().unwrap();
    let host = match &target.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        other => panic!("the test server must be reached over TCP, not {other:?}"),
    };
    let proxy = Proxy::start((host, target.get_ports()[0]));
    let user = target.get_user().unwrap_or("postgres");
    let db = target.get_dbname().unwrap_or("postgres");
    let proxied = Schema {
        url: format!("postgres://{user}@127.0.0.1:{}/{db}", proxy.port),
        name: schema.name.clone(),
    };
    (schema, proxy, proxied)
}

/// The database goes away under a running host and comes back: eight calls at once during the
/// outage all end `host_error` and run nothing; afterwards the same host — not restarted —
/// serves eight at once again (and one of the refused calls, resent), and the ledger holds
/// exactly the calls that ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
async fn pg_an_outage_fails_calls_cleanly_and_the_host_recovers_by_itself() {
    let (_schema, proxy, proxied) = proxied_schema(); // `_schema` drops it at the end
    let srv = server(Duration::ZERO, false);
    let (_d, cfg) = config(&proxied, srv.port, "", "");
    std::mem::forget(proxied); // `schema` drops it, over the real server
                               // Opened off the test's own runtime, as a host process opens it.
    let cfg_path = std::path::PathBuf::from(&cfg);
    let rt = tokio::task::spawn_blocking(move || crate::support::runtime(&cfg_path))
        .await
        .unwrap();
    let ctx = rt.context("alice", "default");
    let url = format!("http://127.0.0.1:{}/outage", srv.port);
    let call = |id: &str| toolhost::ToolCall {
        call_id: id.into(),
        name: "http_get".into(),
        arguments: json!({ "url": url }),
    };
    let before = rt.run_call(&ctx, &call("before"), None).await;
    assert_eq!(before.status.as_str(), "completed", "{before:?}");

    proxy.down();
    // Under load: eight calls at once while the database is away.
    let during = futures::future::join_all((0..8).map(|i| {
        let (rt, ctx, c) = (&rt, &ctx, call(&format!("during-{i}")));
        async move { rt.run_call(ctx, &c, None).await }
    }))
    .await;
    for r in &during {
        assert_eq!(
            (r.status.as_str(), r.code.map(|c| c.as_str())),
            ("failed", Some("host_error")),
            "{r:?}"
        );
    }
    assert_eq!(
        srv.requests.load(Ordering::SeqCst),
        1,
        "nothing ran during the outage"
    );

    proxy.up();
    // The same host, not restarted: eight calls at once, and one from the outage sent again.
    let after = futures::future::join_all(
        (0..8)
            .map(|i| call(&format!("after-{i}")))
            .chain([call("during-1")])
            .map(|c| {
                let (rt, ctx) = (&rt, &ctx);
                async move { rt.run_call(ctx, &c, None).await }
            }),
    )
    .await;
    for r in &after {
        assert_eq!(r.status.as_str(), "completed", "{r:?}");
    }
    assert_eq!(srv.requests.load(Ordering::SeqCst), 10);
    let mut recorded: Vec<String> = rt
        .ledger()
        .calls(None)
        .unwrap()
        .into_iter()
        .map(|c| format!("{} {:?}", c.call_id, c.status))
        .collect();
    recorded.sort();
    let mut expected: Vec<String> = (0..8)
        .map(|i| format!("after-{i} Some(Completed)"))
        .chain([
            "before Some(Completed)".to_string(),
            "during-1 Some(Completed)".to_string(),
        ])
        .collect();
    expected.sort();
    assert_eq!(recorded, expected);
}

/// A write that was running when the database went away: its outcome cannot be committed, so
/// the caller is told `outcome_unknown` (`host_error`) — but the host keeps the outcome and
/// records it with its next commit once the database is back, so the call does not stay open
/// while the host lives; sent again, the call answers the recorded result and never runs twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
async fn pg_an_outcome_the_outage_kept_out_is_recorded_when_the_database_is_back() {
    let (_schema, proxy, proxied) = proxied_schema(); // `_schema` drops it at the end
                                                      // Every request is answered after a second: time to take the database away meanwhile.
    let srv = server(Duration::from_secs(1), false);
    let (_d, cfg) = config(&proxied, srv.port, "", "");
    std::mem::forget(proxied); // `schema` drops it, over the real server
    let cfg_path = std::path::PathBuf::from(&cfg);
    let rt = tokio::task::spawn_blocking(move || crate::support::runtime(&cfg_path))
        .await
        .unwrap();
    let rt = Arc::new(rt);
    let ctx = rt.context("alice", "default");
    let url = format!("http://127.0.0.1:{}/owed", srv.port);
    let call = |id: &str| toolhost::ToolCall {
        call_id: id.into(),
        name: "http_get".into(),
        arguments: json!({ "url": url }),
    };

    let running = {
        let (rt, ctx, c) = (rt.clone(), ctx.clone(), call("ran-during-outage"));
        tokio::spawn(async move { rt.run_call(&ctx, &c, None).await })
    };
    // The call reached the tool's server: it was admitted and started. Now the outage.
    tokio::task::block_in_place(|| srv.arrived.recv_timeout(Duration::from_secs(30)).unwrap());
    proxy.down();
    let r = running.await.unwrap();
    assert_eq!(
        (r.status.as_str(), r.code.map(|c| c.as_str())),
        ("outcome_unknown", Some("host_error")),
        "{r:?}"
    );
    let open = |rt: &toolhost::Runtime| {
        rt.ledger()
            .calls(None)
            .unwrap()
            .into_iter()
            .find(|c| c.call_id == "ran-during-outage")
            .unwrap()
    };

    proxy.up();
    let next = rt.run_call(&ctx, &call("after"), None).await;
    assert_eq!(next.status.as_str(), "completed", "{next:?}");
    let rec = open(&rt);
    assert_eq!(rec.status.map(|s| s.as_str()), Some("completed"), "{rec:?}");
    assert!(
        rec.events
            .iter()
            .any(|e| e.stage == "record" && e.decision == "recorded_late"),
        "{rec:?}"
    );
    let again = rt.run_call(&ctx, &call("ran-during-outage"), None).await;
    assert_eq!(again.status.as_str(), "completed", "{again:?}");
    assert_eq!(srv.requests.load(Ordering::SeqCst), 2, "it never ran twice");
}

/// One host, eight copies of one call at once: the claim is taken before the ledger is asked
/// whether the id is known (the question is a round trip, awaited outside the runtime's
/// lock), so the copies that arrive meanwhile wait for the first — one execution, eight
/// identical completed answers, one call in the ledger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
async fn pg_copies_of_one_call_at_once_on_one_host_run_once() {
    let schema = Schema::new();
    let srv = server(Duration::from_millis(200), false);
    let (_d, cfg) = config(&schema, srv.port, "", "");
    let cfg_path = std::path::PathBuf::from(&cfg);
    let rt = tokio::task::spawn_blocking(move || crate::support::runtime(&cfg_path))
        .await
        .unwrap();
    let ctx = rt.context("alice", "default");
    let call = toolhost::ToolCall {
        call_id: "the-one".into(),
        name: "http_get".into(),
        arguments: json!({ "url": format!("http://127.0.0.1:{}/once", srv.port) }),
    };
    let results = futures::future::join_all((0..8).map(|_| rt.run_call(&ctx, &call, None))).await;
    for r in &results {
        assert_eq!(r.status.as_str(), "completed", "{r:?}");
        assert_eq!(r.output, results[0].output);
    }
    assert_eq!(srv.requests.load(Ordering::SeqCst), 1);
    assert_eq!(rt.executions(), 1);
    assert_eq!(rt.ledger().calls(None).unwrap().len(), 1);
}
