//! Components from a registry: a start that pulls the bench component from Debian's
//! `docker-registry` on loopback, checks its digests and its cosign signature and compiles it;
//! and a start from the data directory's store and the compile cache with the registry gone.

use std::ffi::OsStr;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::procs::output_of;
use super::setup::bench_component;
use super::stats::Figure;

const BINARY: &str = env!("CARGO_BIN_EXE_toolhost");

/// `docker-registry serve` on a free loopback port, stopped when dropped.
struct LocalRegistry(Child);

impl Drop for LocalRegistry {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_registry(dir: &Path) -> (LocalRegistry, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let cfg = dir.join("registry.yml");
    std::fs::write(
        &cfg,
        format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
             http:\n  addr: 127.0.0.1:{port}\n",
            dir.join("registry").display()
        ),
    )
    .expect("the registry config is written");
    let child = Command::new("docker-registry")
        .arg("serve")
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("docker-registry starts (`just setup-registry` installs it)");
    let host = format!("127.0.0.1:{port}");
    let until = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(&host).is_err() {
        assert!(
            Instant::now() < until,
            "docker-registry did not listen on {host}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (LocalRegistry(child), host)
}

fn toolhost(args: &[&OsStr]) -> Vec<u8> {
    output_of(BINARY, args)
}

/// (pulled: store and compile cache emptied before each start; from the store: both kept,
/// the registry stopped), each `toolhost call add` from process start to its result.
pub fn figures(dir: &Path, pulls: usize, starts: usize) -> (Figure, Figure) {
    let dir = dir.join("oci");
    std::fs::create_dir_all(&dir).expect("the bench directory is created");
    let (registry, host) = start_registry(&dir);
    let data = dir.join("data");
    let write_config = |component: &str| {
        let config = dir.join("oci.toml");
        std::fs::write(
            &config,
            format!(
                "data_dir = {data:?}\n[trust]\nkeys = {{ bench = \"bench.pub\" }}\nrequire = \"signed\"\n\
                 [oci.registries.\"{host}\"]\ninsecure = true\n\
                 [[component]]\noci = \"{component}\"\nrisk = \"read\"\n",
                data = data.display().to_string(),
            ),
        )
        .expect("the config is written");
        config
    };
    let tagged = format!("{host}/bench/tools:1");
    let config = write_config(&tagged);
    let pushed = toolhost(&[
        "push".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        bench_component().as_os_str(),
        tagged.as_ref(),
    ]);
    let pushed: Value = serde_json::from_slice(&pushed).expect("push prints JSON");
    let reference = pushed["reference"]
        .as_str()
        .expect("a reference")
        .to_string();
    toolhost(&["keygen".as_ref(), dir.join("bench").as_os_str()]);
    toolhost(&[
        "sign".as_ref(),
        "--key".as_ref(),
        dir.join("bench.key").as_os_str(),
        "--oci".as_ref(),
        reference.as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
    ]);
    let config = write_config(&reference);
    let call = || {
        toolhost(&[
            "call".as_ref(),
            "--config".as_ref(),
            config.as_os_str(),
            "add".as_ref(),
            r#"{"a": 1, "b": 2}"#.as_ref(),
        ])
    };
    let mut pulled = Vec::with_capacity(pulls);
    for _ in 0..pulls {
        let _ = std::fs::remove_dir_all(&data);
        let t = Instant::now();
        call();
        pulled.push(t.elapsed().as_secs_f64() * 1e3);
    }
    drop(registry);
    let mut stored = Vec::with_capacity(starts);
    for _ in 0..starts {
        let t = Instant::now();
        call();
        stored.push(t.elapsed().as_secs_f64() * 1e3);
    }
    (
        Figure::of(
            "oci_start_pulled",
            "ms",
            &pulled,
            "toolhost call: process start to the first completed call, the component pulled from a loopback registry (manifest, blob, cosign signature), digests and signature checked, compiled",
        ),
        Figure::of(
            "oci_start_from_store",
            "ms",
            &stored,
            "the same with the registry stopped: the component and its signature from the data directory's store, the compiled code from the cache",
        ),
    )
}
