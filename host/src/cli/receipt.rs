//! `toolhost receipt`: a finished call's signed receipt, the public key that checks it, and
//! the offline check itself (`crates/ledger/src/receipt.rs` says what a receipt holds).

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::json;

use super::report::{usage_error, usage_message};
use super::{Source, EXIT_NOT_COMPLETED};
use crate::ledger::{caller_tag, read_statement, PublicReceiptKey, ReceiptError, ReceiptKey};
use crate::{Config, EpochMode};

#[derive(Subcommand)]
pub enum Action {
    /// Check a receipt offline with the host's public key alone: exit 0 printing what it says,
    /// 1 when it was altered, signed by another key or is not a receipt.
    Verify {
        /// The host's public receipt key (PEM), as `toolhost receipt key` prints it.
        #[arg(long)]
        key: PathBuf,
        /// Also check that the call was made by this principal (with --tenant).
        #[arg(long, requires = "tenant")]
        principal: Option<String>,
        /// The tenant of --principal.
        #[arg(long, requires = "principal")]
        tenant: Option<String>,
        /// The receipt (`-` for standard input).
        file: PathBuf,
    },
    /// Print the host's public receipt key (PEM), making the key pair when there is none.
    Key {
        /// The private key (default: `receipt.key` in the data directory).
        #[arg(long)]
        key: Option<PathBuf>,
    },
}

/// The private key `--key` names, else the data directory's of `config`.
fn private_key(config: &Config, key: Option<PathBuf>) -> Result<ReceiptKey, ExitCode> {
    let path = key.unwrap_or_else(|| config.data_dir().join("receipt.key"));
    ReceiptKey::load_or_create(&path).map_err(|e| usage_error(&e))
}

/// `toolhost receipt RUN CALL`: print the signed receipt of a finished call, reading the
/// config once for the key's place and the host it starts.
pub fn issue(source: &Source, key: Option<PathBuf>, run: &str, call: &str) -> ExitCode {
    let config = match source.config() {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    let key = match private_key(&config, key) {
        Ok(k) => k,
        Err(code) => return code,
    };
    let rt = match config.start(EpochMode::Ticker) {
        Ok(rt) => rt,
        Err(e) => return usage_error(&e),
    };
    let now = crate::ledger::now_ms();
    match rt.ledger().receipt(run, call, &key, now) {
        Ok(envelope) => {
            out!(
                "{}",
                serde_json::to_string(&envelope).expect("an envelope serializes")
            );
            ExitCode::SUCCESS
        }
        Err(e @ ReceiptError::Tampered { .. }) | Err(e @ ReceiptError::NotFinished { .. }) => {
            crate::telemetry::say(tracing::Level::ERROR, e.to_string());
            ExitCode::from(EXIT_NOT_COMPLETED)
        }
        Err(e) => usage_error(&e),
    }
}

/// `toolhost receipt verify` and `toolhost receipt key`.
pub fn run(source: &Source, action: Action) -> ExitCode {
    match action {
        Action::Key { key } => match source
            .config()
            .map_err(|e| usage_error(&e))
            .and_then(|config| private_key(&config, key))
        {
            Ok(k) => {
                print!("{}", k.public_pem());
                ExitCode::SUCCESS
            }
            Err(code) => code,
        },
        Action::Verify {
            key,
            principal,
            tenant,
            file,
        } => verify(&key, principal.zip(tenant), &file),
    }
}

fn verify(key: &Path, caller: Option<(String, String)>, file: &Path) -> ExitCode {
    let public = match PublicReceiptKey::read(key) {
        Ok(k) => k,
        Err(e) => return usage_error(&e),
    };
    let limit = crate::ledger::MAX_RECEIPT_BYTES as u64 + 1;
    let mut bytes = Vec::new();
    let read = if file == Path::new("-") {
        std::io::stdin().take(limit).read_to_end(&mut bytes)
    } else {
        std::fs::File::open(file).and_then(|f| f.take(limit).read_to_end(&mut bytes))
    };
    if let Err(e) = read {
        return usage_message(format!("{}: {e}", file.display()));
    }
    let checked = public
        .open(&bytes)
        .and_then(|statement| read_statement(&statement));
    let statement = match checked {
        Ok(s) => s,
        Err(e) => {
            crate::telemetry::say(tracing::Level::ERROR, e.to_string());
            return ExitCode::from(EXIT_NOT_COMPLETED);
        }
    };
    let p = &statement["predicate"];
    if let Some((principal, tenant)) = caller {
        if p["caller"]["tag"] != caller_tag(&principal, &tenant) {
            crate::telemetry::say(
                tracing::Level::ERROR,
                format!(
                    "the receipt is genuine, but its call was not made by principal \
                     {principal:?} of tenant {tenant:?}"
                ),
            );
            return ExitCode::from(EXIT_NOT_COMPLETED);
        }
    }
    out!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "valid": true,
            "key": public.id(),
            "run_id": p["run_id"],
            "call_id": p["call_id"],
            "tool": p["tool"],
            "status": p["outcome"]["status"],
            "statement": statement,
        }))
        .expect("a statement serializes")
    );
    ExitCode::SUCCESS
}
