//! The `[ledger]` section: how the ledger stores what happened.

use serde::{Deserialize, Serialize};

/// The `[ledger]` section.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerConfig {
    /// `normal` (default: WAL, durable across process crashes) or `full` (also across power loss).
    #[serde(default)]
    pub synchronous: Synchronous,
    /// Record argument content in the audit trail (default false: digests and sizes only).
    #[serde(default)]
    pub record_content: bool,
}

/// SQLite durability level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Synchronous {
    #[default]
    Normal,
    Full,
}

impl LedgerConfig {
    /// The ledger's open options these settings give.
    pub fn options(&self) -> super::LedgerOptions {
        super::LedgerOptions {
            synchronous_full: self.synchronous == Synchronous::Full,
            record_content: self.record_content,
        }
    }
}
