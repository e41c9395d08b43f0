//! What toolhost's ledger stores, and the two interfaces every backend implements.
//!
//! This crate is the ledger's lowest layer: values and interfaces, no driver and no policy
//! of when to write. The backends (`toolhost-ledger-sqlite`, `toolhost-ledger-postgres`)
//! implement [`Store`] and [`Backend`]; the facade (`toolhost-ledger`) holds them as trait
//! objects and never names a driver.
//!
//! # Layout
//!
//! - `error.rs`: [`LedgerError`], every way a ledger operation fails;
//! - `codec.rs`: contract values as columns and back;
//! - `events.rs`, `outcome.rs`, `verdicts.rs`, `task_record.rs`, `limits.rs`: the stored
//!   values (audit events, the one outcome, reconciliations, tasks, budgets and rates);
//! - `chain.rs`: the hash chain over every write, and [`chain::verify`] (`chain_findings.rs`:
//!   what it finds);
//! - `write.rs`: [`Backend`], the call path's writes applied as a group in one transaction;
//! - `store.rs`: [`Store`], everything else stored and read.

pub mod chain;
mod chain_findings;
pub mod codec;
pub mod error;
pub mod events;
pub mod limits;
pub mod outcome;
pub mod store;
pub mod task_record;
pub mod verdicts;
pub mod write;

pub use codec::now_ms;
pub use error::LedgerError;
pub use events::{CallRecord, CallState, EventRecord, PendingEvent, ReconciliationRecord};
pub use store::{LedgerOptions, Store, TokenSpend, TranscriptEntry};
pub use write::{Admission, Applied, Backend, CallKey, Write};
