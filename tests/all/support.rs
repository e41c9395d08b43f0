//! Shared helpers: paths, the binary, runtimes, and a bounded loopback HTTP server.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use toolhost::{EpochMode, Runtime, ToolCall, ToolResult};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A built guest component; fails with a clear message when guests were not built.
pub fn guest(crate_name: &str) -> PathBuf {
    let p = repo()
        .join("guest-tools/target/wasm32-wasip2/release")
        .join(format!("{}.wasm", crate_name.replace('-', "_")));
    assert!(
        p.is_file(),
        "{} is missing: run `just build-guests` first",
        p.display()
    );
    p
}

pub fn adversarial_config() -> PathBuf {
    guest("hostile");
    guest("template");
    repo().join("tests/fixtures/adversarial.toml")
}

pub fn example_config() -> PathBuf {
    std::fs::create_dir_all(repo().join("workspace")).unwrap();
    repo().join("toolhost.toml")
}

/// A runtime for `config` with a ledger of its own: a fresh data directory (under
/// `target/test-data`), and the repository's shared compile cache.
pub fn runtime(config: &Path) -> Runtime {
    let mut loaded = toolhost::Config::load(config).expect("config loads");
    loaded.data_dir = Some(fresh_data_dir());
    loaded.cache_dir = Some(shared_cache());
    loaded.start(EpochMode::Ticker).expect("config loads")
}

/// The compile cache every test shares (compiling is the slow part; the ledger is per test).
pub fn shared_cache() -> PathBuf {
    repo().join(".toolhost/cache")
}

/// What follows `data_dir = ` in a test config: a fresh data directory (so a ledger of its
/// own), then a `cache_dir` line naming the shared compile cache.
pub fn own_data() -> String {
    format!(
        "{}\ncache_dir = {}",
        toml_path(&fresh_data_dir()),
        toml_path(&shared_cache())
    )
}

/// A data directory no other test uses.
pub fn fresh_data_dir() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = repo()
        .join("target/test-data")
        .join(format!("{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

pub fn call(name: &str, args: Value) -> ToolCall {
    ToolCall {
        call_id: format!("test-{name}"),
        name: name.to_string(),
        arguments: args,
    }
}

/// Run one call on a runtime.
pub async fn run(rt: &Runtime, name: &str, args: Value) -> ToolResult {
    rt.call(&call(name, args)).await
}

/// The outcome of one `toolhost` process.
pub struct Cli {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Cli {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }
}

/// Run the real binary with `args` from the repository root.
pub fn toolhost(args: &[&str]) -> Cli {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(args)
        .current_dir(repo())
        .env("TOOLHOST_TEST_SECRET", "hunter2")
        // What the host logs is the default filter's, whatever the developer's shell sets.
        .env_remove("RUST_LOG")
        .output()
        .expect("toolhost runs");
    Cli {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: started.elapsed(),
    }
}

/// Write a config into a fresh temporary directory and return (dir guard, config path).
pub fn temp_config(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolhost.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// A config in a fresh temporary directory where `write_text` (fs-tools, risk `write`) needs a
/// human's approval, with a workspace of its own: (dir guard, config path, workspace). The
/// data directory is `data` (a TOML string), else the temporary directory's own `data`.
pub fn approval_config(data: Option<String>) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let text = format!(
        "data_dir = {data}\n\
         [[component]]\npath = {fs}\nfs = [{{ host = {ws}, guest = \"/workspace\", mode = \"rw\" }}]\n\
         [component.tools.write-text]\nrisk = \"write\"\napproval = \"required\"\n",
        data = data.unwrap_or_else(|| toml_path(&dir.path().join("data"))),
        fs = toml_path(&guest("fs-tools")),
        ws = toml_path(&ws),
    );
    let path = dir.path().join("toolhost.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path, ws)
}

/// What `r` says, without its replay mark (how it was obtained).
pub fn said(r: &toolhost::ToolResult) -> toolhost::ToolResult {
    let mut r = r.clone();
    r.replayed = false;
    r
}

/// `replay` answers the call again from the ledger: marked as a replay, and saying what
/// `original` said.
pub fn assert_replay(replay: &toolhost::ToolResult, original: &toolhost::ToolResult) {
    assert!(replay.replayed, "not marked as a replay: {replay:?}");
    assert_eq!(said(replay), said(original));
}

/// A TOML string literal for a path.
pub fn toml_path(p: &Path) -> String {
    format!("{:?}", p.display().to_string())
}

/// A loopback HTTP server that answers every request with `body` and counts connections.
pub struct TestServer {
    pub port: u16,
    pub connections: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

pub async fn http_server(body: &'static str) -> TestServer {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = connections.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let _ = tokio::time::timeout(Duration::from_secs(5), sock.read(&mut buf)).await;
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
                    body.len(),
                    body
                );
                let _ = sock.write_all(resp.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    TestServer { port, connections }
}

/// The hostile component as a `[[component]]` entry for a temporary config (it imports
/// `wasi:http`, so one of its tools gets a network grant), followed by `tools`: more
/// `[component.tools.*]` tables for it.
pub fn hostile_component(tools: &str) -> String {
    format!(
        "[[component]]\npath = {}\n[component.tools.exfiltrate]\nnetwork = {{ allow = [\"127.0.0.1:47002\"] }}\n{tools}",
        toml_path(&guest("hostile"))
    )
}

/// The peak resident set of a live process, in bytes (`VmHWM` in /proc/PID/status).
pub fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status");
    kb * 1024
}

/// Each line `r` yields, sent on a channel by a thread of its own (a child's stdout or stderr
/// read without blocking the test).
pub fn line_reader(r: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// `toolhost serve --config CONFIG` over stdio, every pipe captured (the caller kills it).
pub fn serve_stdio(config: &Path) -> std::process::Child {
    serve_stdio_limited(config, None)
}

/// A `Command` for the real binary; with `nofile`, started with its descriptor limit (soft and
/// hard) set to that.
pub fn toolhost_command(nofile: Option<u32>) -> Command {
    match nofile {
        None => Command::new(env!("CARGO_BIN_EXE_toolhost")),
        Some(n) => {
            let mut c = Command::new("bash");
            c.args(["-c", &format!("ulimit -n {n} && exec \"$0\" \"$@\"")])
                .arg(env!("CARGO_BIN_EXE_toolhost"));
            c
        }
    }
}

/// [`serve_stdio`], started with its descriptor limit (soft and hard) set to `nofile`.
pub fn serve_stdio_limited(config: &Path, nofile: Option<u32>) -> std::process::Child {
    serve_stdio_with(config, nofile, &[])
}

/// [`serve_stdio_limited`] with `extra` arguments after `serve`.
pub fn serve_stdio_with(config: &Path, nofile: Option<u32>, extra: &[&str]) -> std::process::Child {
    use std::process::Stdio;
    let mut command = toolhost_command(nofile);
    command
        .arg("serve")
        .args(extra)
        .arg("--config")
        .arg(config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A config with the template component (`greet`) and a fresh data directory, in a new
/// temporary directory: the config's path.
pub fn template_config() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "data_dir = {data}\n[[component]]\npath = {template}\n",
        data = own_data(),
        template = toml_path(&guest("template")),
    );
    let path = dir.path().join("toolhost.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// One HTTP/1.1 GET of `path` on `addr` (loopback): the status, the content type (empty when
/// none) and the body.
pub fn http_get(addr: &str, path: &str) -> (u16, String, String) {
    use std::io::{Read, Write};
    let mut sock = std::net::TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    write!(
        sock,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    sock.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let content_type = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    (status, content_type, body.to_string())
}

/// `sha256:` and the hex SHA-256 of `bytes`: a digest as lock files and ledger rows write it.
pub fn sha256_digest(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// The [`sha256_digest`] of the file at `path`.
pub fn sha256_of(path: &Path) -> String {
    sha256_digest(&std::fs::read(path).unwrap())
}

/// `toolhost call --config CONFIG greet {"name":"Ada"}` (the template component's tool).
pub fn greet_ada(config: &Path) -> Cli {
    toolhost(&[
        "call",
        "--config",
        config.to_str().unwrap(),
        "greet",
        r#"{"name":"Ada"}"#,
    ])
}

/// Give a copy of the template component another description of `greet`, as a rebuild with a
/// changed doc comment would (`toolhost embed-wit`): its bytes change too.
pub fn redescribe_greet(wasm: &Path, description: &str) {
    let wit = wasm.with_extension("wit");
    std::fs::write(
        &wit,
        format!(
            "package example:template@0.1.0;\n\
             interface tools {{\n  /// {description}\n  greet: func(name: string) -> string;\n}}\n\
             world template {{ include toolhost:tool/tool@0.1.0; export tools; }}\n"
        ),
    )
    .unwrap();
    let out = toolhost(&["embed-wit", wasm.to_str().unwrap(), wit.to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
}
