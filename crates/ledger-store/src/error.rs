//! [`LedgerError`]: every way a ledger operation can fail.
//!
//! A ledger error is an operator problem (a broken file, a misuse of the API), never something
//! to show a model: the runtime turns it into a `host_error` result and logs the detail.

/// Why a ledger operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The database refused the operation or could not be reached: SQLite (an I/O error, busy
    /// past the timeout, a constraint) or the PostgreSQL server (a statement refused, a
    /// connection refused). `backend` is "database" for SQLite and "server" for PostgreSQL;
    /// `message` is the driver's own, with the server's innermost cause ("invalid peer
    /// certificate: UnknownIssuer", "Connection refused"), which its message leaves out. Each
    /// backend converts its driver's errors (`sqlite/`, `postgres/`).
    #[error("ledger {backend} error: {message}")]
    Database {
        backend: &'static str,
        message: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// The ledger's directory could not be created.
    #[error("ledger directory: {0}")]
    Io(#[from] std::io::Error),

    /// A value could not be encoded for storage.
    #[error("ledger encoding: {0}")]
    Encode(#[from] serde_json::Error),

    /// The call already has its one terminal outcome; the record was left unchanged.
    #[error("call {run_id}/{call_id} already has a terminal outcome")]
    AlreadyFinished { run_id: String, call_id: String },

    /// No call with this (run_id, call_id) was admitted.
    #[error("call {run_id}/{call_id} was never admitted")]
    UnknownCall { run_id: String, call_id: String },

    /// The result handed to `finish` names another call than the one it finishes.
    #[error("result for call {result_call_id:?} handed to finish for {run_id}/{call_id}")]
    ResultMismatch {
        run_id: String,
        call_id: String,
        result_call_id: String,
    },

    /// The database was written by a newer toolhost whose schema this build does not know.
    #[error("ledger schema version {found} is newer than this build supports ({supported})")]
    SchemaTooNew { found: i64, supported: i64 },

    /// The database could not be set up as the ledger requires (e.g. no WAL on this filesystem).
    #[error("ledger setup: {0}")]
    Unsupported(String),

    /// A key or name is longer than its bound (`contract::bounds`); nothing was written. The
    /// runtime refuses such calls before they reach the ledger: this is the backstop.
    #[error("ledger {field} is longer than {max} bytes; nothing was written")]
    TooLong { field: &'static str, max: usize },

    /// The transaction that held this write failed as a whole (a failed commit fails every
    /// write committed with it), or the ledger's writer has stopped: nothing of it is recorded.
    #[error("ledger commit failed: {0}")]
    Commit(String),

    /// Only a call that ended `outcome_unknown` can be reconciled; this one ended otherwise (or
    /// has no outcome yet). Nothing was written.
    #[error("call {run_id}/{call_id} ended {ended}, not outcome_unknown: only a call whose outcome the host lost can be reconciled")]
    NotOutcomeUnknown {
        run_id: String,
        call_id: String,
        ended: String,
    },

    /// The call was reconciled before; its first reconciliation stands. Nothing was written.
    #[error("call {run_id}/{call_id} is already reconciled; a reconciliation is never replaced")]
    AlreadyReconciled { run_id: String, call_id: String },

    /// A reconciliation the ledger refuses as given (an empty reason, a code that cannot
    /// describe it). Nothing was written.
    #[error("reconciliation refused: {0}")]
    BadReconciliation(String),

    /// A stored row does not decode (hand-edited or damaged file).
    #[error("ledger record is corrupt: {0}")]
    Corrupt(String),
}

/// `TooLong` unless `run_id`, `call_id` and `tool` are within their bounds: every row the ledger
/// creates is keyed by them, so this runs before each insert.
pub fn check_key(run_id: &str, call_id: &str, tool: &str) -> Result<(), LedgerError> {
    use toolhost_contract::bounds::{MAX_CALL_ID_BYTES, MAX_RUN_ID_BYTES, MAX_TOOL_NAME_CHARS};
    // A name of at most MAX_TOOL_NAME_CHARS characters has at most four bytes for each.
    let limits = [
        ("run id", run_id, MAX_RUN_ID_BYTES),
        ("call id", call_id, MAX_CALL_ID_BYTES),
        ("tool name", tool, 4 * MAX_TOOL_NAME_CHARS),
    ];
    for (field, value, max) in limits {
        if value.len() > max {
            return Err(LedgerError::TooLong { field, max });
        }
    }
    Ok(())
}

impl LedgerError {
    /// `UnknownCall` for `(run_id, call_id)`.
    pub fn unknown(run_id: &str, call_id: &str) -> Self {
        LedgerError::UnknownCall {
            run_id: run_id.to_owned(),
            call_id: call_id.to_owned(),
        }
    }

    /// `AlreadyReconciled` for `(run_id, call_id)`.
    pub fn reconciled(run_id: &str, call_id: &str) -> Self {
        LedgerError::AlreadyReconciled {
            run_id: run_id.to_owned(),
            call_id: call_id.to_owned(),
        }
    }

    /// `AlreadyFinished` for `(run_id, call_id)`.
    pub fn finished(run_id: &str, call_id: &str) -> Self {
        LedgerError::AlreadyFinished {
            run_id: run_id.to_owned(),
            call_id: call_id.to_owned(),
        }
    }
}
