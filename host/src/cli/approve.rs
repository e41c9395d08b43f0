//! `toolhost approve`: a human sees the call an approval runs, then says yes.
//!
//! The call is shown as every front end shows a pending call (`contract::pending`: tool, risk,
//! run, call, the arguments pretty-printed with every control, invisible mark and look-alike
//! letter made visible), from the ledger's recorded arguments or from `--arguments`, which must
//! match the handle's call binding. The
//! token is printed only after `yes` on stdin, or with `--yes`.

use std::io::BufRead;
use std::process::ExitCode;

use serde_json::Value;

use super::report::usage_error;
use super::{EXIT_NOT_COMPLETED, EXIT_USAGE};
use crate::contract::for_human;
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
    crate::telemetry::show(question(rt, &record, &arguments, handle));
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

/// What the human reads before answering: the one rendering of a pending call
/// ([`crate::contract::Pending`]), whether the approval can still be used, and what authorized
/// the call.
fn question(
    rt: &Runtime,
    record: &crate::ledger::CallRecord,
    canonical: &str,
    handle: &str,
) -> String {
    let (digest, expires) = crate::policy::parse_handle(handle).unwrap_or_default();
    let pending = crate::contract::Pending {
        tool: &record.tool,
        risk: rt.registry().get(&record.tool).map(|t| t.risk),
        canonical_arguments: canonical,
        caller: None,
        run_id: &record.run_id,
        call_id: &record.call_id,
        digest: &digest,
        expires_at: expires,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let validity = match expires.checked_sub(now) {
        Some(left) if left > 0 => format!("valid for {left} more seconds"),
        _ => "expired: a token minted now will be refused".to_string(),
    };
    let mut q = format!("Approve this tool call?\n\n{}{validity}\n", pending.text());
    for e in record.events.iter().filter(|e| e.stage == "authorize") {
        q.push_str(&format!("authorized: {}\n", for_human(&e.detail)));
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
