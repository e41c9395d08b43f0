//! The one terminal outcome of a call, as a row stores it: computed by the caller before it
//! hands the write to the ledger's writer, written by the one statement that finishes the call.

use super::codec::to_sql_u64;
use super::events::event_lines;
use sha2::{Digest, Sha256};

use super::LedgerError;
use serde::Serialize;
use serde_json::value::RawValue;
use toolhost_contract::{
    ApprovalNeeded, Code, Decision, Reconciled, Stage, Status, ToolCall, ToolResult, Usage,
};

/// Everything a terminal result stores: its JSON for replay, the output's digest and size, the
/// summary columns and the content-free detail of its `record` event. Computed from the
/// [`ToolResult`] on the caller's thread, so the writer only runs SQL.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub call_id: String,
    result_json: String,
    output_digest: Option<String>,
    output_size: Option<i64>,
    status: &'static str,
    code: Option<&'static str>,
    message: String,
    diagnostic_id: Option<String>,
    /// Fuel, wall milliseconds, peak memory and output bytes, as stored.
    usage: [i64; 4],
    detail: String,
    /// When a call whose start was not committed (a `read`, see `docs/pipeline.md`) started.
    started_at_ms: Option<i64>,
}

impl Outcome {
    /// The stored form of `result`.
    pub fn of(result: &ToolResult) -> Result<Outcome, LedgerError> {
        // The output is serialized once: those bytes are digested and measured (the same
        // bytes and digest as `ToolResult::ledger_summary`) and embedded in the stored result.
        let raw = match &result.output {
            Some(out) => Some(serde_json::value::to_raw_value(out)?),
            None => None,
        };
        let output = raw.as_deref().map(|raw| {
            let text = raw.get();
            (
                hex::encode(Sha256::digest(text.as_bytes())),
                text.len() as u64,
            )
        });
        let code = result.code.map(|c| c.as_str());
        let detail = match &output {
            Some((digest, size)) => format!(
                "code {}; output sha256 {digest}, {size} bytes",
                code.unwrap_or("none")
            ),
            None => format!("code {}; no output", code.unwrap_or("none")),
        };
        let u = &result.usage;
        let (output_digest, output_size) = match output {
            Some((digest, size)) => (Some(digest), Some(to_sql_u64(size))),
            None => (None, None),
        };
        Ok(Outcome {
            call_id: result.call_id.clone(),
            result_json: stored_json(result, raw.as_deref())?,
            output_digest,
            output_size,
            status: result.status.as_str(),
            code,
            message: result.message.clone(),
            diagnostic_id: result.diagnostic_id.clone(),
            usage: [
                u.fuel_consumed,
                u.wall_ms,
                u.memory_peak_bytes,
                u.output_bytes,
            ]
            .map(to_sql_u64),
            detail,
            started_at_ms: None,
        })
    }

    /// Record that the call started at `at_ms` (unix milliseconds), for a call whose start
    /// mark is committed with its outcome.
    pub fn started_at(mut self, at_ms: Option<i64>) -> Outcome {
        self.started_at_ms = at_ms;
        self
    }

    /// What its `record` event says: the code, and the output's digest and size.
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// The `record` event of this outcome, at `now`.
    pub fn record_line(&self, now: i64) -> Result<String, LedgerError> {
        event_lines([(
            now,
            Stage::Record.as_str(),
            self.status,
            self.detail.as_str(),
        )])
    }
}

/// An outcome's stored columns, by reference, for a backend to bind its own way.
pub struct Stored<'a> {
    pub status: &'a str,
    pub code: Option<&'a str>,
    pub message: &'a str,
    pub diagnostic_id: Option<&'a str>,
    pub output_digest: Option<&'a str>,
    pub output_size: Option<i64>,
    /// Fuel, wall milliseconds, peak memory and output bytes.
    pub usage: [i64; 4],
    pub result_json: &'a str,
    pub started_at_ms: Option<i64>,
}

impl Outcome {
    /// The columns an outcome sets, as values, for each backend to bind its own way.
    pub fn stored(&self) -> Stored<'_> {
        Stored {
            status: self.status,
            code: self.code,
            message: &self.message,
            diagnostic_id: self.diagnostic_id.as_deref(),
            output_digest: self.output_digest.as_deref(),
            output_size: self.output_size,
            usage: self.usage,
            result_json: &self.result_json,
            started_at_ms: self.started_at_ms,
        }
    }
}

/// The SHA-256 (lowercase hex) and length of `value` as compact JSON.
/// `serde_json::to_string(result)`, with the output taken from `output`, its serialized form.
fn stored_json(result: &ToolResult, output: Option<&RawValue>) -> Result<String, LedgerError> {
    // Every field named: a field added to ToolResult fails to compile here until it is stored.
    let ToolResult {
        call_id,
        tool,
        status,
        code,
        output: _,
        message,
        diagnostic_id,
        approval,
        usage,
        reconciled,
        // Not stored: a mark of the answer, set when a stored result is returned again.
        replayed: _,
    } = result;
    let stored = StoredResult {
        call_id,
        tool,
        status: *status,
        code: *code,
        output,
        message,
        diagnostic_id: diagnostic_id.as_deref(),
        approval: approval.as_ref(),
        usage,
        reconciled: reconciled.as_ref(),
    };
    Ok(serde_json::to_string(&stored)?)
}

/// [`ToolResult`]'s serialized form, field for field (tested equal), borrowing its parts.
#[derive(Serialize)]
struct StoredResult<'a> {
    call_id: &'a str,
    tool: &'a str,
    status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<Code>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<&'a RawValue>,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    diagnostic_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    approval: Option<&'a ApprovalNeeded>,
    usage: &'a Usage,
    #[serde(skip_serializing_if = "Option::is_none")]
    reconciled: Option<&'a Reconciled>,
}

/// The model-safe message of a call that recovery closed.
pub const OUTCOME_UNKNOWN_MESSAGE: &str =
    "the host stopped before this call finished; its effect is unknown";

/// What closing a lost call writes: its `outcome_unknown` outcome and its `recover` event,
/// saying `why` the call (which was `state`) is closed.
pub fn closing(
    call_id: &str,
    tool: String,
    why: &str,
    state: &str,
    now: i64,
) -> Result<(Outcome, String), LedgerError> {
    let outcome = Outcome::of(&outcome_unknown(call_id, tool))?;
    let detail =
        format!("{why} while this call was {state}; closed as outcome_unknown, never re-run");
    let lines = event_lines([(
        now,
        Stage::Recover.as_str(),
        Decision::OutcomeUnknown.as_str(),
        detail.as_str(),
    )])?;
    Ok((outcome, lines))
}

/// The result recovery records for a call the host lost track of.
fn outcome_unknown(call_id: &str, tool: String) -> ToolResult {
    let call = ToolCall {
        call_id: call_id.to_owned(),
        name: tool,
        arguments: serde_json::Value::Null,
    };
    // Built from the contract's constructor so that fields added later get their defaults.
    let mut result = ToolResult::failed(
        &call,
        Code::HostError,
        OUTCOME_UNKNOWN_MESSAGE,
        Usage::default(),
    );
    result.status = Status::OutcomeUnknown;
    result.code = None;
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolhost_contract::ToolCall;

    fn call() -> ToolCall {
        ToolCall {
            call_id: "c-1".into(),
            name: "echo".into(),
            arguments: json!({}),
        }
    }

    /// The stored result is byte for byte `serde_json::to_string` of the result (what replay
    /// reads back), and the output digest and size are those of the output's own bytes, for
    /// every shape a result takes.
    #[test]
    fn stored_result_is_the_serialized_result() {
        let usage = Usage {
            fuel_consumed: 7,
            wall_ms: 1,
            memory_peak_bytes: 65536,
            output_bytes: 12,
        };
        let completed = |v| ToolResult::completed(&call(), v, usage);
        let mut with_diagnostic = ToolResult::failed(&call(), Code::GuestTrap, "crashed", usage);
        with_diagnostic.diagnostic_id = Some("d-9".into());
        let mut approval = ToolResult::failed(&call(), Code::ApprovalRequired, "ask", usage);
        approval.approval = Some(ApprovalNeeded {
            handle: "h".into(),
            expires_at: 5,
        });
        let mut reconciled = completed(json!({"charge": "ch_1"}));
        reconciled.reconciled = Some(toolhost_contract::Reconciled { at_ms: 17 });
        let results = [
            reconciled,
            completed(json!(null)),
            completed(json!({"z": [1, 2.5, "x\n\u{2028}"], "a": {"é": true}})),
            completed(json!((0..500)
                .map(|i| format!("item {i}"))
                .collect::<Vec<_>>())),
            ToolResult::failed(&call(), Code::InvalidArguments, "bad \"x\"", usage),
            with_diagnostic,
            approval,
        ];
        for r in results {
            let o = Outcome::of(&r).unwrap();
            assert_eq!(o.result_json, serde_json::to_string(&r).unwrap());
            match &r.output {
                Some(out) => {
                    let bytes = serde_json::to_vec(out).unwrap();
                    assert_eq!(
                        o.output_digest.as_deref(),
                        Some(hex::encode(Sha256::digest(&bytes)).as_str())
                    );
                    assert_eq!(o.output_size, Some(bytes.len() as i64));
                }
                None => assert_eq!((o.output_digest, o.output_size), (None, None)),
            }
        }
    }
}
