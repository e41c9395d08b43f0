//! How the command line reports: a registry's warnings, and a usage error (exit 2). A leaf
//! that every command's file uses.

use std::process::ExitCode;

use crate::registry::Registry;

use super::EXIT_USAGE;

pub(super) fn warn(reg: &Registry) {
    for w in &reg.warnings {
        crate::telemetry::say(tracing::Level::WARN, w);
    }
}

/// A bad command line, config or component: the error and every cause behind it, exit 2.
pub(super) fn usage_error(e: &dyn std::error::Error) -> ExitCode {
    usage_message(crate::contract::error_chain(e))
}

/// A bad command line or input file, said in one message: exit 2.
pub(super) fn usage_message(what: impl std::fmt::Display) -> ExitCode {
    crate::telemetry::say(tracing::Level::ERROR, what);
    ExitCode::from(EXIT_USAGE)
}
