//! The provider transport of `toolhost agent` as a user's network has it: `HTTP_PROXY`,
//! `HTTPS_PROXY` (a `CONNECT` tunnel) and `NO_PROXY` are honoured, and a server whose
//! certificate chains to a CA only the system store trusts (a company's own; here through
//! `SSL_CERT_FILE`) is reached over TLS, directly or through the tunnel.

use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::openai::{scripted, Reply};

/// greet, with a fresh ledger.
fn setup() -> (tempfile::TempDir, String) {
    let (dir, path) = crate::support::template_config();
    (dir, path.display().to_string())
}

/// `toolhost agent` against `base`, non-streamed, without proxy variables from outside.
fn agent(config: &str, base: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolhost"));
    cmd.args([
        "agent",
        "--config",
        config,
        "--base-url",
        base,
        "--model",
        "m",
    ])
    .args(["--prompt", "hello", "--no-stream"]);
    for v in [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
    ] {
        cmd.env_remove(v);
    }
    cmd
}

/// A request's head (up to the blank line, at most 1 MiB), or `None` if the peer hung up first.
async fn read_head(sock: &mut (impl tokio::io::AsyncRead + Unpin)) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 1 << 20 {
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    Some(String::from_utf8_lossy(&buf).to_string())
}

/// A whole chat-completions answer whose text is "via {who}"; the connection then closes.
async fn answer(sock: &mut (impl tokio::io::AsyncWrite + Unpin), who: &str) {
    use tokio::io::AsyncWriteExt;
    let body = format!(
        r#"{{"choices":[{{"message":{{"content":"via {who}"}},"finish_reason":"stop"}}]}}"#
    );
    let _ = sock
        .write_all(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await;
}

/// A loopback proxy that reads each connection's request head, remembers its first line, and
/// hands the connection and that line to `serve`.
async fn loopback_proxy<F, Fut>(serve: F) -> (u16, Arc<Mutex<Vec<String>>>)
where
    F: Fn(tokio::net::TcpStream, String) -> Fut + Copy + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let log = lines.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let Some(head) = read_head(&mut sock).await else {
                    return;
                };
                let line = head.lines().next().unwrap_or("").to_string();
                log.lock().unwrap().push(line.clone());
                serve(sock, line).await;
            });
        }
    });
    (port, lines)
}

/// A loopback HTTP proxy that answers every request itself with a short text reply, and
/// remembers each request line it saw.
async fn answering_proxy() -> (u16, Arc<Mutex<Vec<String>>>) {
    loopback_proxy(|mut sock, _| async move { answer(&mut sock, "the proxy").await }).await
}

/// `HTTP_PROXY` sends the model request through the proxy; `NO_PROXY` naming the endpoint's
/// host goes direct.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_environment_is_honoured() {
    let server = scripted(
        vec![Reply::Json(serde_json::json!({
            "choices": [{"message": {"content": "direct"}, "finish_reason": "stop"}]
        }))],
        None,
    )
    .await;
    let (proxy_port, seen) = answering_proxy().await;
    let (_dir, config) = setup();
    let base = server.base_url();
    let run = |no_proxy: &str| {
        let mut cmd = agent(&config, &base);
        cmd.env("HTTP_PROXY", format!("http://127.0.0.1:{proxy_port}"))
            .env("NO_PROXY", no_proxy);
        cmd
    };
    let mut through = run("example.invalid");
    let mut direct = run("127.0.0.1");
    let (a, b) =
        tokio::task::spawn_blocking(move || (through.output().unwrap(), direct.output().unwrap()))
            .await
            .unwrap();
    let a: Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(a["final_text"], "via the proxy", "{a}");
    let lines = seen.lock().unwrap().clone();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with(&format!(
            "POST http://127.0.0.1:{}/v1/chat/completions",
            server.port
        )),
        "{lines:?}"
    );
    let b: Value = serde_json::from_slice(&b.stdout).unwrap();
    assert_eq!(b["final_text"], "direct", "{b}");
    assert_eq!(server.requests().len(), 1);
}

/// A TLS server on loopback whose certificate (for 127.0.0.1) is signed by a fresh CA; returns
/// its port and the CA certificate (PEM). It answers every request with a short text reply.
async fn tls_server() -> (u16, String) {
    use tokio::io::AsyncWriteExt;
    let certs = crate::certs::loopback();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![certs.cert_der.clone().into()],
        rustls::pki_types::PrivateKeyDer::Pkcs8(certs.key_der.clone().into()),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(sock).await else {
                    return; // a client that does not trust us hangs up here
                };
                if read_head(&mut tls).await.is_some() {
                    answer(&mut tls, "TLS").await;
                }
                let _ = tls.shutdown().await;
            });
        }
    });
    (port, certs.ca_pem)
}

/// A server certificate from a CA that only the system store knows (`SSL_CERT_FILE`, where a
/// company CA is installed) is trusted beside the bundled roots; without it the same server
/// is refused with the certificate named as the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_company_ca_in_the_system_store_is_trusted() {
    let (port, ca_pem) = tls_server().await;
    let (dir, config) = setup();
    let ca_file = dir.path().join("company-ca.pem");
    std::fs::write(&ca_file, ca_pem).unwrap();
    let base = format!("https://127.0.0.1:{port}/v1");
    let mut trusted = agent(&config, &base);
    trusted.env("SSL_CERT_FILE", &ca_file);
    let mut untrusted = agent(&config, &base);
    untrusted.env("SSL_CERT_FILE", dir.path().join("no-such-file.pem"));
    let (a, b) = tokio::task::spawn_blocking(move || {
        (trusted.output().unwrap(), untrusted.output().unwrap())
    })
    .await
    .unwrap();
    let a: Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(a["stopped_by"], "finished", "{a}");
    assert_eq!(a["final_text"], "via TLS", "{a}");
    let b: Value = serde_json::from_slice(&b.stdout).unwrap();
    assert_eq!(b["stopped_by"], "provider_error", "{b}");
    let detail = b["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("connect_failed") && detail.contains("certificate"),
        "{detail}"
    );
}

/// A loopback proxy that tunnels `CONNECT host:port` (what a client does for `https` through
/// `HTTPS_PROXY`) and remembers each request line it saw.
async fn tunnelling_proxy() -> (u16, Arc<Mutex<Vec<String>>>) {
    loopback_proxy(|mut sock, line| async move {
        use tokio::io::AsyncWriteExt;
        let Some(target) = line
            .strip_prefix("CONNECT ")
            .and_then(|r| r.split(' ').next())
        else {
            return;
        };
        let Ok(mut upstream) = tokio::net::TcpStream::connect(target).await else {
            return;
        };
        let ok = b"HTTP/1.1 200 Connection established\r\n\r\n";
        if sock.write_all(ok).await.is_ok() {
            let _ = tokio::io::copy_bidirectional(&mut sock, &mut upstream).await;
        }
    })
    .await
}

/// `HTTPS_PROXY`: an `https` endpoint is reached through a `CONNECT` tunnel, and TLS inside it
/// is still verified end to end (the server's certificate against the company CA).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_goes_through_the_proxy_tunnel() {
    let (tls_port, ca_pem) = tls_server().await;
    let (proxy_port, seen) = tunnelling_proxy().await;
    let (dir, config) = setup();
    let ca_file = dir.path().join("company-ca.pem");
    std::fs::write(&ca_file, ca_pem).unwrap();
    let base = format!("https://127.0.0.1:{tls_port}/v1");
    let mut cmd = agent(&config, &base);
    cmd.env("SSL_CERT_FILE", &ca_file)
        .env("HTTPS_PROXY", format!("http://127.0.0.1:{proxy_port}"));
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["final_text"], "via TLS", "{summary}");
    let lines = seen.lock().unwrap().clone();
    assert_eq!(
        lines,
        [format!("CONNECT 127.0.0.1:{tls_port} HTTP/1.1")],
        "{lines:?}"
    );
}
