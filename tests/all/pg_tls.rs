//! TLS to the ledger's database: with `sslmode=require` a host connects over TLS and verifies
//! the server's certificate — against `[ledger] ca_file` here, a CA only this test knows — and
//! refuses a server whose certificate it cannot verify. Uses a PostgreSQL server of the test's
//! own (`pg_restart.rs`), with TLS on. Ignored unless run with `--ignored pg_`.

use std::path::Path;

use serde_json::json;

use crate::pg_restart::PrivateServer;
use crate::support::{guest, toml_path};

/// A host config on `url` (schema `s`) with `greet`, trusting `ca` (a file beside the config)
/// when given.
fn config(dir: &Path, url: &str, ca: Option<&str>) -> std::path::PathBuf {
    let ca = ca.map_or(String::new(), |f| format!("ca_file = {f:?}\n"));
    let text = format!(
        "data_dir = {data}\n[ledger]\nurl = {url:?}\nschema = \"s\"\n{ca}\
         [[component]]\npath = {template}\n",
        data = crate::support::own_data(),
        template = toml_path(&guest("template")),
    );
    let path = dir.join(format!("toolhost-{}.toml", ca.len()));
    std::fs::write(&path, text).unwrap();
    path
}

/// `sslmode=require` with the server's CA in `ca_file`: the host's every connection is TLS
/// (the server's own view, `pg_stat_ssl`) and calls are recorded; without the CA the host
/// refuses to start, naming the certificate; `check-config` names a missing `ca_file`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL's server programs (run with --ignored pg_)"]
async fn pg_the_ledger_connection_is_tls_and_verified() {
    let certs = crate::certs::loopback();
    let (cert, key) = (certs.cert_pem.clone(), certs.key_pem.clone());
    let pg = tokio::task::spawn_blocking(move || {
        PrivateServer::start_with(|dir| {
            std::fs::write(dir.join("server.crt"), cert).unwrap();
            let key_path = dir.join("server.key");
            std::fs::write(&key_path, key).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600)).unwrap();
            format!(
                "-c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                dir.join("server.crt").display(),
                key_path.display()
            )
        })
    })
    .await
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("company-ca.pem"), &certs.ca_pem).unwrap();
    let url = format!("{}?sslmode=require", pg.url());

    let trusted = config(work.path(), &url, Some("company-ca.pem"));
    let rt = tokio::task::spawn_blocking(move || crate::support::runtime(&trusted))
        .await
        .unwrap();
    let r = rt
        .call(&toolhost::ToolCall {
            call_id: "over-tls".into(),
            name: "greet".into(),
            arguments: json!({"name": "TLS"}),
        })
        .await;
    assert_eq!(r.status.as_str(), "completed", "{r:?}");

    // The server's view of the host's connections.
    let mut probe = toolhost_ledger::PgConfig {
        url: url.clone(),
        password_env: None,
        schema: "s".into(),
        ca_file: Some(work.path().join("company-ca.pem")),
    };
    let client = probe.connect().await.unwrap();
    let row = client
        .query_one(
            "SELECT count(*) FILTER (WHERE s.ssl), count(*) FILTER (WHERE NOT s.ssl)
             FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
             WHERE a.application_name = 'toolhost'",
            &[],
        )
        .await
        .unwrap();
    let (tls, plain): (i64, i64) = (row.get(0), row.get(1));
    assert!(
        tls >= 2,
        "{tls} TLS connections (the host's and this probe's)"
    );
    assert_eq!(plain, 0, "a plain connection from a host");
    drop(client);
    drop(rt);

    // Without the CA: the server's certificate cannot be verified, the host does not start.
    let untrusted = config(work.path(), &url, None);
    let err = tokio::task::spawn_blocking(move || {
        let mut loaded = toolhost::Config::load(&untrusted).unwrap();
        loaded.data_dir = Some(crate::support::fresh_data_dir());
        loaded
            .start(toolhost::EpochMode::Ticker)
            .map(|_| ())
            .unwrap_err()
    })
    .await
    .unwrap();
    let text = err.to_string();
    assert!(
        text.contains("TLS handshake") && text.contains("UnknownIssuer"),
        "{text}"
    );

    // A ca_file that is not there is a config problem, found without connecting.
    probe.ca_file = Some(work.path().join("missing.pem"));
    let e = probe.check().unwrap_err().to_string();
    assert!(e.contains("ca_file") && e.contains("missing.pem"), "{e}");
}
