//! A registry that misbehaves, scripted on loopback: each misbehaviour a real registry never
//! shows (bytes that are not their digest, a manifest or a component over its cap, many layers,
//! no answer, a redirect to another host, something other than a component) is refused with its
//! own message before anything is compiled or run.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::oci::oci_config;
use crate::support::{greet_ada, guest, sha256_digest as sha256, toolhost};

/// How the scripted registry answers one kind of request.
#[derive(Clone)]
enum Answer {
    /// This body, with a `content-length` or chunked.
    Body { bytes: Vec<u8>, chunked: bool },
    /// Nothing, for a minute.
    Never,
    /// A redirect to `location`.
    Redirect(String),
}

/// What the scripted registry serves: manifests and blobs, whatever the path names.
#[derive(Clone)]
struct Script {
    manifest: Answer,
    blob: Answer,
}

/// An OCI manifest with these layers, each `(media type, digest, size)`.
fn manifest(layers: &[(&str, &str, usize)]) -> Vec<u8> {
    let config = b"{}";
    serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": sha256(config), "size": 2},
        "layers": layers.iter().map(|(t, d, s)| json!({"mediaType": t, "digest": d, "size": s})).collect::<Vec<_>>(),
    }))
    .unwrap()
}

/// The template component's manifest and bytes.
fn template() -> (Vec<u8>, Vec<u8>) {
    let wasm = std::fs::read(guest("template")).unwrap();
    let m = manifest(&[("application/wasm", &sha256(&wasm), wasm.len())]);
    (m, wasm)
}

/// Serve `script` on `ip` (a loopback address); at most 64 connections, each on a thread.
fn serve(ip: &str, script: Script) -> String {
    let listener = TcpListener::bind((ip, 0)).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(64) {
            let Ok(conn) = conn else { return };
            let script = script.clone();
            std::thread::spawn(move || answer(conn, &script));
        }
    });
    addr
}

fn answer(mut conn: TcpStream, script: &Script) {
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let line = String::from_utf8_lossy(&head)
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    let path = line.split(' ').nth(1).unwrap_or("");
    let a = if path.contains("/manifests/") {
        &script.manifest
    } else if path.contains("/blobs/") {
        &script.blob
    } else {
        let _ = conn
            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        return;
    };
    let _ = match a {
        Answer::Never => {
            std::thread::sleep(Duration::from_secs(60));
            Ok(())
        }
        Answer::Redirect(to) => conn.write_all(
            format!("HTTP/1.1 307 Temporary Redirect\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").as_bytes(),
        ),
        Answer::Body { bytes, chunked: false } => conn
            .write_all(format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", bytes.len()).as_bytes())
            .and_then(|_| conn.write_all(bytes)),
        Answer::Body { bytes, chunked: true } => {
            let mut out = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n".to_vec();
            for c in bytes.chunks(4096) {
                out.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
                out.extend_from_slice(c);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
            conn.write_all(&out)
        }
    };
}

fn body(bytes: Vec<u8>) -> Answer {
    Answer::Body {
        bytes,
        chunked: false,
    }
}

/// A config for the scripted registry at `addr`, the component named by `digest`.
fn config(dir: &Path, addr: &str, digest: &str, oci: &str) -> PathBuf {
    oci_config(dir, addr, &format!("{addr}/evil/tool@{digest}"), oci)
}

/// `greet` under `oci` settings against `script`: refused (exit 2) with `says` in the message,
/// nothing run, and nothing stored.
fn refused(script: Script, digest: &str, oci: &str, says: &str) {
    let addr = serve("127.0.0.1", script);
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &addr, digest, oci);
    let out = greet_ada(&config);
    assert_eq!(out.status, 2, "{}", out.stdout);
    assert!(out.stdout.is_empty(), "nothing ran: {}", out.stdout);
    assert!(out.stderr.contains(says), "{says:?} not in: {}", out.stderr);
    assert!(!dir.path().join("data/oci").exists(), "nothing stored");
}

/// A component whose bytes are not the digest its manifest names, and a manifest whose bytes
/// are not the digest the config names, are each refused naming both digests.
#[test]
fn bytes_that_are_not_their_digest_are_refused() {
    let (m, wasm) = template();
    let mut other = wasm.clone();
    other[100] ^= 1;
    refused(
        Script {
            manifest: body(m.clone()),
            blob: body(other.clone()),
        },
        &sha256(&m),
        "",
        &format!(
            "the registry sent bytes whose digest is {}, not {}",
            sha256(&other),
            sha256(&wasm)
        ),
    );
    let forged = manifest(&[("application/wasm", &sha256(&other), other.len())]);
    refused(
        Script {
            manifest: body(forged.clone()),
            blob: body(other),
        },
        &sha256(&m),
        "",
        &format!(
            "the registry sent bytes whose digest is {}, not {}",
            sha256(&forged),
            sha256(&m)
        ),
    );
}

/// A manifest over `max_manifest_bytes`, declared or streamed, and a component over
/// `max_blob_bytes`, declared in its manifest or streamed past a smaller declared size.
#[test]
fn manifests_and_components_over_their_caps_are_refused() {
    let (m, wasm) = template();
    let mut big = m.clone();
    big.extend(std::iter::repeat_n(b' ', 4096));
    for chunked in [false, true] {
        refused(
            Script {
                manifest: Answer::Body {
                    bytes: big.clone(),
                    chunked,
                },
                blob: body(wasm.clone()),
            },
            &sha256(&big),
            "max_manifest_bytes = 1024",
            "is larger than the 1024-byte cap (`[oci] max_manifest_bytes`)",
        );
    }
    refused(
        Script {
            manifest: body(m.clone()),
            blob: body(wasm.clone()),
        },
        &sha256(&m),
        "max_blob_bytes = 1000",
        &format!(
            "({} bytes) is larger than the 1000-byte cap (`[oci] max_blob_bytes`)",
            wasm.len()
        ),
    );
    let small = manifest(&[("application/wasm", &sha256(&wasm), 10)]);
    refused(
        Script {
            manifest: body(small.clone()),
            blob: Answer::Body {
                bytes: wasm,
                chunked: true,
            },
        },
        &sha256(&small),
        "max_blob_bytes = 1000",
        "is larger than the 1000-byte cap (`[oci] max_blob_bytes`)",
    );
}

/// Many layers, a layer that is not Wasm, and JSON that is not a manifest are not components.
#[test]
fn artifacts_that_are_not_one_component_are_refused() {
    let (_, wasm) = template();
    let d = sha256(&wasm);
    let many = manifest(&[("application/wasm", d.as_str(), wasm.len()); 3]);
    refused(
        Script { manifest: body(many.clone()), blob: body(wasm.clone()) },
        &sha256(&many),
        "",
        "is not a Wasm component artifact: it has 3 layers; a component artifact has exactly one, `application/wasm`",
    );
    let tar = manifest(&[(
        "application/vnd.oci.image.layer.v1.tar+gzip",
        d.as_str(),
        wasm.len(),
    )]);
    refused(
        Script {
            manifest: body(tar.clone()),
            blob: body(wasm.clone()),
        },
        &sha256(&tar),
        "",
        "its layer is `application/vnd.oci.image.layer.v1.tar+gzip`, not `application/wasm`",
    );
    let junk = b"{\"hello\": 1}".to_vec();
    refused(
        Script {
            manifest: body(junk.clone()),
            blob: body(wasm),
        },
        &sha256(&junk),
        "",
        "its manifest is not an OCI image manifest",
    );
}

/// A registry that accepts the connection and never answers is given up on at `timeout_secs`.
#[test]
fn a_registry_that_never_answers_is_given_up_on() {
    let (m, wasm) = template();
    let started = Instant::now();
    refused(
        Script {
            manifest: Answer::Never,
            blob: body(wasm),
        },
        &sha256(&m),
        "timeout_secs = 1",
        "did not finish within 1 s (`[oci] timeout_secs`)",
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// A redirect to another host is refused unless the operator names that host in
/// `redirect_hosts`; then it is followed and the component runs.
#[test]
fn a_redirect_to_another_host_is_refused_unless_allowed() {
    let (m, wasm) = template();
    let elsewhere = serve(
        "127.0.0.2",
        Script {
            manifest: body(Vec::new()),
            blob: body(wasm.clone()),
        },
    );
    let to = format!("http://{elsewhere}/v2/evil/tool/blobs/{}", sha256(&wasm));
    let script = Script {
        manifest: body(m.clone()),
        blob: Answer::Redirect(to),
    };
    refused(
        script.clone(),
        &sha256(&m),
        "",
        "redirected to 127.0.0.2, another host; allow it with `redirect_hosts`",
    );

    let addr = serve("127.0.0.1", script);
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &addr, &sha256(&m), "");
    let text = std::fs::read_to_string(&config).unwrap().replace(
        "insecure = true\n",
        &format!("insecure = true\nredirect_hosts = [\"{elsewhere}\"]\n"),
    );
    std::fs::write(&config, text).unwrap();
    let out = greet_ada(&config);
    assert_eq!(out.status, 0, "{}", out.stderr);
}

/// `sign --oci` adds to the signatures already in the registry; when what is there does not
/// read as a signature manifest, it refuses and uploads nothing rather than replace it.
#[test]
fn a_signature_manifest_that_does_not_read_is_never_replaced() {
    let (m, wasm) = template();
    let addr = serve(
        "127.0.0.1",
        Script {
            manifest: body(br#"{"layers": 5}"#.to_vec()),
            blob: body(wasm),
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &addr, &sha256(&m), "");
    let key = dir.path().join("team");
    assert_eq!(toolhost(&["keygen", key.to_str().unwrap()]).status, 0);
    let out = toolhost(&[
        "sign",
        "--key",
        key.with_extension("key").to_str().unwrap(),
        "--oci",
        &format!("{addr}/evil/tool@{}", sha256(&m)),
        "--config",
        config.to_str().unwrap(),
    ]);
    assert_eq!(out.status, 1, "{}", out.stdout);
    assert!(
        out.stderr
            .contains("not a signature manifest; nothing was added"),
        "{}",
        out.stderr
    );
}

/// A reload whose registry misbehaves is refused, and the host keeps serving what it had: a
/// component that is not its digest is refused naming both digests; a registry that never
/// answers is given up on at `timeout_secs`, while calls are served all the while.
#[test]
fn a_reload_from_a_hostile_registry_keeps_what_was_served() {
    use crate::mcp::Raw;
    use crate::reload::{greet, kill_hup, refusal_logged};
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("toolhost.toml");
    std::fs::write(
        &file,
        format!(
            "data_dir = \"data\"\n[[component]]\npath = {}\n",
            crate::support::toml_path(&guest("template"))
        ),
    )
    .unwrap();
    let mut raw = Raw::start(&file);
    raw.initialize("2025-11-25");
    let mut seen = Vec::new();
    let served = |r: Value| r["result"]["isError"] == json!(false);
    assert!(served(greet(&mut raw, 1, &mut seen)));

    let (m, wasm) = template();
    let mut other = wasm.clone();
    other[100] ^= 1;
    let addr = serve(
        "127.0.0.1",
        Script {
            manifest: body(m.clone()),
            blob: body(other.clone()),
        },
    );
    config(dir.path(), &addr, &sha256(&m), "");
    kill_hup(raw.pid());
    let said = refusal_logged(&raw).join("\n");
    let says = format!(
        "the registry sent bytes whose digest is {}, not {}",
        sha256(&other),
        sha256(&wasm)
    );
    assert!(said.contains(&says), "{says:?} not in: {said}");
    assert!(served(greet(&mut raw, 2, &mut seen)));

    let addr = serve(
        "127.0.0.1",
        Script {
            manifest: Answer::Never,
            blob: body(wasm),
        },
    );
    config(dir.path(), &addr, &sha256(&m), "timeout_secs = 2");
    kill_hup(raw.pid());
    let until = Instant::now() + Duration::from_secs(60);
    let mut said = Vec::new();
    let mut id = 10;
    while !said.iter().any(|l: &String| l.contains("reload refused")) {
        assert!(Instant::now() < until, "no refusal logged: {said:?}");
        assert!(served(greet(&mut raw, id, &mut seen)), "call {id}");
        id += 1;
        std::thread::sleep(Duration::from_millis(50));
        said.extend(raw.stderr_lines());
    }
    let said = said.join("\n");
    assert!(
        said.contains("did not finish within 2 s (`[oci] timeout_secs`)"),
        "{said}"
    );
    assert!(id > 10, "no call was made while the reload waited");
    assert!(served(greet(&mut raw, 1_000, &mut seen)));
    assert!(!dir.path().join("data/oci").exists(), "nothing stored");
}
