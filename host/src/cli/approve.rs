//! `toolhost approve`: a human sees the call an approval runs, then says yes.
//!
//! The call is shown as the agent's terminal question shows it (tool, run, call, the
//! arguments pretty-printed with every control and reordering mark escaped), from the ledger's
//! recorded arguments or from `--arguments`, which must match the handle's call binding. The
//! token is printed only after `yes` on stdin, or with `--yes`.

use std::io::BufRead;
use std::process::ExitCode;

use serde_json::Value;

use super::report::usage_error;
use super::{EXIT_NOT_COMPLETED, EXIT_USAGE};
use crate::agent::approval::MAX_SHOWN_ARGUMENT_BYTES;
use crate::contract::terminal_safe;
use crate::Runtime;

/// Longest answer line read from stdin.
const MAX_ANSWER_BYTES: u64 = 64;

pub(super) fn approve(rt: &Runtime, handle: &str, arguments: Option<&str>, yes: bool) -> ExitCode {
    let given = match arguments.map(serde_json::from_str::<Value>).transpose() {
        Ok(v) => v,
        Err(e) => {
            crate::telemetry::say(
                tracing::Level::ERROR,
                format!("--arguments is not JSON: {e}"),
            );
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let (record, arguments) = match rt.approvals().call(handle, given.as_ref()) {
        Ok(found) => found,
        Err(e) => return usage_error(&e),
    };
    crate::telemetry::show(question(&record, &arguments, handle));
    if !yes && !confirmed() {
        crate::telemetry::say(tracing::Level::ERROR, "not approved");
        return ExitCode::from(EXIT_NOT_COMPLETED);
    }
    match rt.approvals().mint(handle) {
        Ok(token) => {
            out!("{token}");
            ExitCode::SUCCESS
        }
        Err(e) => usage_error(&e),
    }
}

/// What the human reads before answering.
fn question(record: &crate::ledger::CallRecord, arguments: &Value, handle: &str) -> String {
    let pretty = serde_json::to_string_pretty(arguments).unwrap_or_default();
    let shown = crate::contract::bounds::clip(&pretty, MAX_SHOWN_ARGUMENT_BYTES);
    let cut = if shown.len() < pretty.len() {
        format!("\n… [{} more bytes]", pretty.len() - shown.len())
    } else {
        String::new()
    };
    let expires = crate::policy::parse_handle(handle)
        .map(|(_, at)| at)
        .unwrap_or(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let validity = match expires.checked_sub(now) {
        Some(left) if left > 0 => format!("valid for {left} more seconds"),
        _ => "expired: a token minted now will be refused".to_string(),
    };
    let mut q = format!(
        "Approve this tool call?\n\ntool: {}\nrun: {}\ncall: {}\narguments:\n{}{cut}\n{validity}\n",
        terminal_safe(&record.tool),
        terminal_safe(&record.run_id),
        terminal_safe(&record.call_id),
        terminal_safe(shown),
    );
    for e in record.events.iter().filter(|e| e.stage == "authorize") {
        q.push_str(&format!("authorized: {}\n", terminal_safe(&e.detail)));
    }
    q.push_str("\nType yes to approve this exact call once (anything else refuses): ");
    q
}

/// Whether the next line of stdin says yes.
fn confirmed() -> bool {
    use std::io::Read;
    let mut line = String::new();
    let stdin = std::io::stdin();
    let mut limited = stdin.lock().take(MAX_ANSWER_BYTES);
    let mut reader = std::io::BufReader::new(&mut limited);
    if reader.read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "yes" | "y")
}
