//! `toolhost lock`: write the lock beside a config (`crates/registry/src/lock.rs` says what it
//! pins), or say how what the config loads differs from it.

use std::process::ExitCode;

use serde_json::json;

use super::report::{usage_error, usage_message, warn};
use super::EXIT_NOT_COMPLETED;
use crate::registry::lock::Lock;
use crate::EpochMode;

/// Write the lock when there is none, or with `update` when it differs; otherwise compare. The
/// answer is one JSON object: the file, its `state` (`written`, `unchanged`, `updated`,
/// `differs`) and each change. Exit 1 when the lock differs and `update` was not given.
pub(super) fn lock(config: &std::path::Path, update: bool) -> ExitCode {
    let loaded = match crate::Config::load(config) {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    let Some(path) = loaded.lock_path() else {
        return usage_message("`toolhost lock` needs a config file");
    };
    let checked = match crate::config::check_unlocked(&loaded, EpochMode::Manual) {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    warn(&checked.registry);
    let now = checked.registry.lock();
    let old = match Lock::read(&path) {
        Ok(old) => old,
        // A lock that does not read is replaced only when asked.
        Err(e) if !update => return usage_error(&e),
        Err(_) => None,
    };
    let changes: Vec<String> = old
        .as_ref()
        .map(|o| {
            o.differences(&now)
                .iter()
                .map(ToString::to_string)
                .collect()
        })
        .unwrap_or_default();
    let state = match (&old, changes.is_empty(), update) {
        (None, _, _) => "written",
        (Some(_), true, _) => "unchanged",
        (Some(_), false, true) => "updated",
        (Some(_), false, false) => "differs",
    };
    if matches!(state, "written" | "updated") {
        if let Err(e) = now.write(&path) {
            return usage_error(&e);
        }
    }
    out!(
        "{}",
        json!({
            "file": path.display().to_string(),
            "state": state,
            "components": now.components.len(),
            "tools": now.components.iter().map(|c| c.tools.len()).sum::<usize>(),
            "changes": changes,
        })
    );
    if state == "differs" {
        crate::telemetry::say(
            tracing::Level::ERROR,
            format!(
                "{} differs from what the config loads; accept the changes with `toolhost lock --update`",
                path.display()
            ),
        );
        ExitCode::from(EXIT_NOT_COMPLETED)
    } else {
        ExitCode::SUCCESS
    }
}
