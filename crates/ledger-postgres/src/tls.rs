//! TLS to the database: used when the url says `sslmode=require` (otherwise the connection is
//! plain, as on loopback). The server's certificate must chain to Mozilla's roots, the
//! system's store (`SSL_CERT_FILE`/`SSL_CERT_DIR` honoured) or the CAs of `[ledger] ca_file`,
//! and name the host the url gives: with `require` a certificate is verified, never taken on
//! trust.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use toolhost_ledger_store::LedgerError;

/// The connector for `settings`: `None` for a plain connection, else TLS verified as above.
pub(super) fn connector(
    settings: &tokio_postgres::Config,
    ca_file: Option<&Path>,
) -> Result<Option<MakeRustlsConnect>, LedgerError> {
    if settings.get_ssl_mode() != SslMode::Require {
        return Ok(None);
    }
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    // Unreadable entries of the system store are skipped, as every TLS client does.
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    if let Some(path) = ca_file {
        let pem = std::fs::read(path).map_err(|e| {
            LedgerError::Unsupported(format!("`[ledger] ca_file` {}: {e}", path.display()))
        })?;
        let mut found = 0;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| {
                LedgerError::Unsupported(format!("`[ledger] ca_file` {}: {e}", path.display()))
            })?;
            roots.add(cert).map_err(|e| {
                LedgerError::Unsupported(format!("`[ledger] ca_file` {}: {e}", path.display()))
            })?;
            found += 1;
        }
        if found == 0 {
            return Err(LedgerError::Unsupported(format!(
                "`[ledger] ca_file` {}: no PEM certificate in it",
                path.display()
            )));
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| LedgerError::Unsupported(format!("TLS: {e}")))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Some(MakeRustlsConnect::new(config)))
}
