//! cosign signatures of `oci =` components, in a real registry (Debian's `docker-registry`):
//! `toolhost sign --oci` adds one beside the component as cosign does, and a host whose
//! `[trust]` asks for one runs the component only when a trusted key signed its manifest.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;

use serde_json::json;

use crate::oci::{oci_config, push, LocalRegistry};
use crate::support::{greet_ada, guest, redescribe_greet, toolhost};

/// One HTTP/1.1 exchange with the registry: (status, body).
fn exchange(
    host: &str,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {host}\r\naccept: application/vnd.oci.image.manifest.v1+json\r\n\
         content-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let status = String::from_utf8_lossy(&out[9..12]).parse().unwrap();
    (status, out[split + 4..].to_vec())
}

fn keygen(dir: &Path, name: &str) {
    let out = toolhost(&["keygen", dir.join(name).to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
}

fn sign(dir: &Path, key: &str, config: &Path, reference: &str) {
    let key = dir.join(format!("{key}.key"));
    let out = toolhost(&[
        "sign",
        "--key",
        key.to_str().unwrap(),
        "--oci",
        reference,
        "--config",
        config.to_str().unwrap(),
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
}

fn refused_because(config: &Path, why: &str) {
    let out = greet_ada(config);
    assert_eq!(out.status, 2, "{}", out.stdout);
    assert!(out.stdout.is_empty(), "nothing ran: {}", out.stdout);
    assert!(out.stderr.contains(why), "{why:?} not in: {}", out.stderr);
}

/// Unsigned, signed for another manifest, and signed by an untrusted key are each refused with
/// its own message; signed by the trusted key it runs, `verify --oci` agrees, and it runs again
/// with the registry gone (the signatures kept in the store are checked again).
#[test]
fn a_registry_component_runs_only_when_a_trusted_key_signed_it() {
    let mut registry = LocalRegistry::start();
    let dir = tempfile::tempdir().unwrap();
    keygen(dir.path(), "team");
    keygen(dir.path(), "other");
    let tagged = format!("{}/tools/greet:1.0", registry.host);
    let config = oci_config(dir.path(), &registry.host, &tagged, "");
    let d = push(&config, &guest("template"), &tagged);
    let moved = dir.path().join("moved.wasm");
    std::fs::copy(guest("template"), &moved).unwrap();
    redescribe_greet(&moved, "Greets someone, signed elsewhere.");
    let d2 = push(
        &config,
        &moved,
        &format!("{}/tools/greet:2.0", registry.host),
    );
    let reference = format!("{}/tools/greet@{d}", registry.host);
    let config = oci_config(dir.path(), &registry.host, &reference, "");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("{text}[trust]\nkeys = {{ team = \"team.pub\" }}\nrequire = \"signed\"\n"),
    )
    .unwrap();
    let hex = |d: &str| d["sha256:".len()..].to_string();

    refused_because(
        &config,
        &format!("it is not signed in its registry (no sha256-{}.sig); sign it with `toolhost sign --oci`", hex(&d)),
    );

    // The trusted key's signature of the other manifest, put where this one's would be.
    sign(
        dir.path(),
        "team",
        &config,
        &format!("{}/tools/greet@{d2}", registry.host),
    );
    let (status, copied) = exchange(
        &registry.host,
        "GET",
        &format!("/v2/tools/greet/manifests/sha256-{}.sig", hex(&d2)),
        "text/plain",
        b"",
    );
    assert_eq!(status, 200);
    let (status, _) = exchange(
        &registry.host,
        "PUT",
        &format!("/v2/tools/greet/manifests/sha256-{}.sig", hex(&d)),
        "application/vnd.oci.image.manifest.v1+json",
        &copied,
    );
    assert_eq!(status, 201);
    refused_because(
        &config,
        &format!(
            "its signature is for other bytes (signed sha256:{}…",
            &hex(&d2)[..12]
        ),
    );

    sign(dir.path(), "other", &config, &reference);
    refused_because(
        &config,
        "its 1 signature(s) in the registry verify under none of the keys [trust] trusts for it",
    );

    sign(dir.path(), "team", &config, &reference);
    let out = greet_ada(&config);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let checked = toolhost(&["check-config", "--config", config.to_str().unwrap()]);
    assert_eq!(
        checked.json()["component"][0]["verified_signer"],
        json!("team")
    );
    let verify = |key: &str| {
        toolhost(&[
            "verify",
            "--key",
            dir.path().join(key).to_str().unwrap(),
            "--oci",
            &reference,
            "--config",
            config.to_str().unwrap(),
        ])
    };
    assert_eq!(verify("team.pub").json()["verified"], json!(true));

    registry.stop();
    let out = greet_ada(&config);
    assert_eq!(
        out.status, 0,
        "offline, with the stored signatures: {}",
        out.stderr
    );
}
