//! What the sandbox's shadowed `wasi:filesystem` functions share (`host_budget.rs`,
//! `write_budget.rs`): the interface they replace, how a result becomes the guest's answer,
//! and which of the call's host budgets a call went over.

use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::FsError;

/// Which host budget a call went over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HostBudgetError {
    #[error("the call held more host handles than its budget of {0}")]
    Handles(usize),
    #[error("the call held more directory listings than its budget of {0} bytes")]
    Listings(u64),
    #[error("a file system the call may write to has less than its reserve of {0} bytes free")]
    Disk(u64),
    #[error("the call wrote more than its budget of {0} bytes into its writable grants")]
    Writes(u64),
}

/// The `wasi:filesystem` interface whose functions the sandbox shadows (`host_budget.rs`,
/// `write_budget.rs`).
pub(super) const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";

/// What a shadowed `wasi:filesystem` function returns for wasmtime-wasi's result: its error
/// code for the guest, or its trap.
pub(super) fn answer<T>(r: Result<T, FsError>) -> wasmtime::Result<(Result<T, ErrorCode>,)> {
    match r {
        Ok(v) => Ok((Ok(v),)),
        Err(e) => Ok((Err(e.downcast()?),)),
    }
}
