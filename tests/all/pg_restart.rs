//! The database really restarted under load: a PostgreSQL server of the test's own (initdb in a
//! temporary directory, so stopping it touches no other test) is stopped and started again
//! while a host keeps calling a `write` tool. Ignored unless run with `--ignored pg_` (needs
//! PostgreSQL's server programs, as `.ci/run` has them).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::multi_host::{config, server, Schema};

/// A PostgreSQL server in a temporary directory, on a port of its own, stopped on drop.
pub(super) struct PrivateServer {
    bin: PathBuf,
    pub(super) dir: tempfile::TempDir,
    pub(super) port: u16,
    /// More server options (`-c name=value …`).
    options: String,
}

/// Run `program` from PostgreSQL's `bin` directory as the `postgres` user when this process is
/// root (the server refuses to run as root), else as ourselves; panic with its output if it fails.
fn pg(bin: &Path, program: &str, args: &[&str]) {
    let root = rustix::process::getuid().is_root();
    let mut cmd = if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(program));
        c
    } else {
        Command::new(bin.join(program))
    };
    let out = cmd.args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl PrivateServer {
    pub(super) fn start() -> PrivateServer {
        PrivateServer::start_with(|_| String::new())
    }

    /// Initialise the server, let `prepare` put files into its directory (still ours, before
    /// it is handed to the postgres user) and return more server options, then start it.
    pub(super) fn start_with(prepare: impl FnOnce(&Path) -> String) -> PrivateServer {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .and_then(|versions| {
                versions
                    .flatten()
                    .map(|v| v.path().join("bin"))
                    .find(|b| b.join("initdb").is_file())
            })
            .expect("PostgreSQL's server programs (/usr/lib/postgresql/*/bin/initdb)");
        let dir = tempfile::tempdir().unwrap();
        let options = prepare(dir.path());
        if rustix::process::getuid().is_root() {
            let ok = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(ok.success());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let data = dir.path().join("data");
        pg(
            &bin,
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "--auth=trust",
                "--username=postgres",
                "--no-sync",
                "--encoding=UTF8",
            ],
        );
        let s = PrivateServer {
            bin,
            dir,
            port,
            options,
        };
        s.ctl("start");
        s
    }

    pub(super) fn ctl(&self, what: &str) {
        let data = self.dir.path().join("data");
        let log = self.dir.path().join("log");
        let options = format!(
            "-F -p {} -k {} -c listen_addresses=127.0.0.1 {}",
            self.port,
            self.dir.path().display(),
            self.options
        );
        let mut args = vec![
            "-D",
            data.to_str().unwrap(),
            "-l",
            log.to_str().unwrap(),
            "-w",
            "-t",
            "60",
            "-o",
            &options,
        ];
        if what == "stop" {
            args.extend(["-m", "fast"]);
        }
        args.push(what);
        pg(&self.bin, "pg_ctl", &args);
    }

    pub(super) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .args(["-D", data.to_str().unwrap(), "-m", "immediate", "stop"])
            .output();
    }
}

/// What the load saw: each call's id and (status, code), and when the server was down.
#[derive(Default)]
struct Seen {
    results: Vec<(String, String, Option<String>)>,
    down: bool,
    host_errors_while_down: usize,
    completed_after_restart: usize,
    restarted: bool,
}

/// The server stopped (`pg_ctl stop -m fast`: every connection closed by the server) and
/// started again while one host keeps four calls of a `write` tool in flight: calls while it
/// is down end `host_error`, every execution the tool's server saw is recorded as started in
/// the ledger (nothing ran unrecorded), every call answered `completed` is recorded completed,
/// and the same host — not restarted — completes calls again once the server is back, and
/// records the outcomes the outage kept out, so no call that ran stays open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL's server programs (run with --ignored pg_)"]
async fn pg_a_database_restart_under_load_loses_nothing() {
    let pg = tokio::task::spawn_blocking(PrivateServer::start)
        .await
        .unwrap();
    let schema = Schema {
        url: pg.url(),
        name: format!("t_{}", uuid::Uuid::new_v4().simple()),
    };
    let srv = server(Duration::ZERO, false);
    let (_d, cfg) = config(&schema, srv.port, "", "");
    let cfg_path = PathBuf::from(&cfg);
    let rt = tokio::task::spawn_blocking(move || crate::support::runtime(&cfg_path))
        .await
        .unwrap();
    let rt = Arc::new(rt);
    let ctx = rt.context("alice", "default");
    let url = format!("http://127.0.0.1:{}/restart", srv.port);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));

    // The load: four calls at a time, each with a new id, until told to stop (bounded).
    let load = {
        let (rt, seen, stop) = (rt.clone(), seen.clone(), stop.clone());
        tokio::spawn(async move {
            for round in 0..2000 {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let calls: Vec<toolhost::ToolCall> = (0..4)
                    .map(|i| toolhost::ToolCall {
                        call_id: format!("c{round}-{i}"),
                        name: "http_get".into(),
                        arguments: json!({ "url": url }),
                    })
                    .collect();
                let results =
                    futures::future::join_all(calls.iter().map(|c| rt.run_call(&ctx, c, None)))
                        .await;
                {
                    let mut s = seen.lock().unwrap();
                    for r in results {
                        let code = r.code.map(|c| c.as_str().to_string());
                        if s.down && code.as_deref() == Some("host_error") {
                            s.host_errors_while_down += 1;
                        }
                        if s.restarted && r.status.as_str() == "completed" {
                            s.completed_after_restart += 1;
                        }
                        s.results
                            .push((r.call_id, r.status.as_str().to_string(), code));
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let wait_until = |what: &str, done: &dyn Fn(&Seen) -> bool| {
        let started = Instant::now();
        while !done(&seen.lock().unwrap()) {
            assert!(
                started.elapsed() < Duration::from_secs(90),
                "timed out waiting for {what}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let completed = |s: &Seen| s.results.iter().filter(|r| r.1 == "completed").count();

    tokio::task::block_in_place(|| {
        wait_until("calls before the restart", &|s| completed(s) >= 8);
        seen.lock().unwrap().down = true;
        pg.ctl("stop");
        wait_until("host errors while the server is down", &|s| {
            s.host_errors_while_down >= 8
        });
        pg.ctl("start");
        {
            let mut s = seen.lock().unwrap();
            s.down = false;
            s.restarted = true;
        }
        wait_until("calls after the restart", &|s| {
            s.completed_after_restart >= 8
        });
    });
    stop.store(true, Ordering::SeqCst);
    load.await.unwrap();

    // One more call after the load: owed outcomes are recorded with a commit that succeeds.
    let last = toolhost::ToolCall {
        call_id: "last".into(),
        name: "http_get".into(),
        arguments: json!({ "url": format!("http://127.0.0.1:{}/restart", srv.port) }),
    };
    let ctx = rt.context("alice", "default");
    let r = rt.run_call(&ctx, &last, None).await;
    assert_eq!(r.status.as_str(), "completed", "{r:?}");

    let seen = seen.lock().unwrap();
    for (id, status, code) in &seen.results {
        assert!(
            status == "completed" || code.as_deref() == Some("host_error"),
            "{id}: {status} {code:?}"
        );
    }
    let ledger = rt.ledger().calls(None).unwrap();
    let started = ledger.iter().filter(|c| c.started_at_ms.is_some()).count();
    assert_eq!(
        srv.requests.load(Ordering::SeqCst),
        started,
        "every execution is recorded as started"
    );
    // Nothing that ran stays open: an outcome the outage kept out was recorded late.
    for c in ledger.iter().filter(|c| c.started_at_ms.is_some()) {
        assert!(
            c.status.is_some(),
            "{} ran and is still open: {c:?}",
            c.call_id
        );
    }
    for (id, status, _) in &seen.results {
        if status == "completed" {
            let rec = ledger.iter().find(|c| &c.call_id == id).unwrap();
            assert_eq!(rec.status.map(|s| s.as_str()), Some("completed"), "{id}");
        }
    }
    drop(schema);
}
