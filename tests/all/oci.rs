//! Components from an OCI registry, against Debian's `docker-registry` (the reference
//! distribution server) on loopback: pushed with `toolhost push`, pinned by digest or by a lock,
//! run, and run again from the data directory's store with the registry gone. The registry's
//! misbehaviours are `oci_hostile.rs`.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{
    greet_ada, guest, redescribe_greet, sha256_of, shared_cache, toml_path, toolhost,
};

/// A `docker-registry serve` on a loopback port, with its storage in a temporary directory;
/// stopped when dropped.
pub struct LocalRegistry {
    child: Option<Child>,
    pub host: String,
    _dir: tempfile::TempDir,
}

impl LocalRegistry {
    pub fn start() -> LocalRegistry {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let cfg = dir.path().join("config.yml");
        std::fs::write(
            &cfg,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
                 http:\n  addr: 127.0.0.1:{port}\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry starts (just test installs Debian's docker-registry)");
        let host = format!("127.0.0.1:{port}");
        let until = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(&host).is_err() {
            assert!(
                Instant::now() < until,
                "docker-registry did not listen on {host}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        LocalRegistry {
            child: Some(child),
            host,
            _dir: dir,
        }
    }

    /// Stop it (the store must serve from here on).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for LocalRegistry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A config in `dir` whose one component is `oci = reference`, with plain HTTP allowed to
/// `host` and `extra` appended to `[oci]`.
pub fn oci_config(dir: &Path, host: &str, reference: &str, extra: &str) -> PathBuf {
    let config = dir.join("toolhost.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = \"data\"\ncache_dir = {cache}\n[oci]\n{extra}\n\
             [oci.registries.\"{host}\"]\ninsecure = true\n\
             [[component]]\noci = \"{reference}\"\n",
            cache = toml_path(&shared_cache()),
        ),
    )
    .unwrap();
    config
}

/// `toolhost push --config CONFIG FILE REFERENCE`: the manifest digest it printed.
pub fn push(config: &Path, file: &Path, reference: &str) -> String {
    let out = toolhost(&[
        "push",
        "--config",
        config.to_str().unwrap(),
        file.to_str().unwrap(),
        reference,
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v = out.json();
    v["digest"].as_str().unwrap().to_string()
}

fn description(config: &Path) -> Value {
    let out = toolhost(&["tools", "--config", config.to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    out.json()[0]["description"].clone()
}

/// A component pushed to a registry runs when the config names it by digest; its bytes land in
/// the data directory's store, so the host starts and runs it again with the registry gone;
/// without the store and without the registry, the start is refused naming the registry.
#[test]
fn a_component_pulled_by_digest_runs_and_runs_again_offline() {
    let mut registry = LocalRegistry::start();
    let dir = tempfile::tempdir().unwrap();
    let wasm = guest("template");
    let tagged = format!("{}/tools/greet:1.0", registry.host);
    let manifest = push(
        &oci_config(dir.path(), &registry.host, &tagged, ""),
        &wasm,
        &tagged,
    );
    let reference = format!("{}/tools/greet@{manifest}", registry.host);
    let config = oci_config(dir.path(), &registry.host, &reference, "");

    let out = greet_ada(&config);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.stdout.contains("Ada"), "{}", out.stdout);
    let component = sha256_of(&wasm);
    let stored = dir.path().join("data/oci/sha256");
    assert!(stored.join(&component["sha256:".len()..]).is_file());
    assert!(stored.join(&manifest["sha256:".len()..]).is_file());
    let ledger = toolhost(&["ledger", "--config", config.to_str().unwrap()]);
    assert!(ledger.stdout.contains(&component), "{}", ledger.stdout);

    registry.stop();
    let out = greet_ada(&config);
    assert_eq!(out.status, 0, "offline from the store: {}", out.stderr);

    std::fs::remove_dir_all(dir.path().join("data/oci")).unwrap();
    let out = greet_ada(&config);
    assert_eq!(out.status, 2, "{}", out.stdout);
    assert!(
        out.stderr
            .contains(&format!("cannot reach registry {}", registry.host)),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "nothing ran: {}", out.stdout);
}

/// A tag alone is refused until `toolhost lock` pins it. Once pinned, moving the tag changes
/// nothing that runs; `lock` reports the move (the new description) and exits 1, and
/// `lock --update` takes the new component.
#[test]
fn a_tag_runs_only_as_the_lock_pinned_it() {
    let registry = LocalRegistry::start();
    let dir = tempfile::tempdir().unwrap();
    let reference = format!("{}/tools/greet:stable", registry.host);
    let config = oci_config(dir.path(), &registry.host, &reference, "");
    let first = push(&config, &guest("template"), &reference);

    let out = greet_ada(&config);
    assert_eq!(out.status, 2, "{}", out.stdout);
    assert!(
        out.stderr.contains(&format!(
            "{reference} names a tag, which can move; pin it with `toolhost lock`"
        )),
        "{}",
        out.stderr
    );

    let locked = toolhost(&["lock", "--config", config.to_str().unwrap()]);
    assert_eq!(locked.status, 0, "{}", locked.stderr);
    assert_eq!(locked.json()["state"], json!("written"));
    let lock_text = std::fs::read_to_string(dir.path().join("toolhost.lock")).unwrap();
    assert!(
        lock_text.contains(&format!("source = \"oci:{reference}\"")),
        "{lock_text}"
    );
    assert!(
        lock_text.contains(&format!("manifest = \"{first}\"")),
        "{lock_text}"
    );
    assert_eq!(greet_ada(&config).status, 0);
    let before = description(&config);

    let moved = dir.path().join("moved.wasm");
    std::fs::copy(guest("template"), &moved).unwrap();
    redescribe_greet(&moved, "Greets someone, from a moved tag.");
    let second = push(&config, &moved, &reference);
    assert_ne!(first, second);
    assert_eq!(
        greet_ada(&config).status,
        0,
        "the pinned manifest still runs"
    );
    assert_eq!(description(&config), before);

    let differs = toolhost(&["lock", "--config", config.to_str().unwrap()]);
    assert_eq!(differs.status, 1, "{}", differs.stderr);
    let changes = differs.json()["changes"].to_string();
    assert!(
        changes.contains("tool `greet`: description changed"),
        "{changes}"
    );
    let updated = toolhost(&["lock", "--update", "--config", config.to_str().unwrap()]);
    assert_eq!(updated.json()["state"], json!("updated"));
    assert_eq!(
        description(&config),
        json!("Greets someone, from a moved tag.")
    );
}

/// The README's "Publishing a tool to a registry" commands, run as written against a loopback
/// registry (its address for `ghcr.io`, the digest `push` printed for `sha256:…`): the push
/// prints the reference by digest, the signature is made, and `verify` accepts it.
#[test]
fn the_readmes_publishing_commands_work_as_written() {
    let registry = LocalRegistry::start();
    let dir = tempfile::tempdir().unwrap();
    let unused = format!("{}/unused@sha256:{}", registry.host, "0".repeat(64));
    oci_config(dir.path(), &registry.host, &unused, "");
    std::fs::copy(guest("template"), dir.path().join("greet.wasm")).unwrap();
    std::fs::create_dir(dir.path().join("keys")).unwrap();
    let out = toolhost(&["keygen", dir.path().join("keys/team").to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}", out.stderr);

    let readme = std::fs::read_to_string(crate::support::repo().join("README.md")).unwrap();
    let section = readme
        .split("### Publishing a tool to a registry")
        .nth(1)
        .expect("the README's publishing section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("its sh block");
    let lines: Vec<&str> = block.lines().collect();
    assert_eq!(lines.len(), 3, "push, sign, verify: {block}");
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_toolhost"))
        .parent()
        .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = |line: String| {
        let out = Command::new("bash")
            .args(["-c", &line])
            .current_dir(dir.path())
            .env("PATH", &path)
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        );
        assert!(out.status.success(), "{line}: {stderr}");
        stdout
    };
    let here = |line: &str| line.replace("ghcr.io", &registry.host);
    let pushed: Value = serde_json::from_str(&run(here(lines[0]))).unwrap();
    let digest = pushed["digest"].as_str().unwrap();
    assert_eq!(
        pushed["reference"],
        json!(format!("{}/team/greet@{digest}", registry.host))
    );
    for line in &lines[1..] {
        run(here(line).replace("sha256:…", digest));
    }
}
