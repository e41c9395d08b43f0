//! Untrusted argument JSON on the command line: `toolhost call`'s arguments and `toolhost batch`'s
//! proposals file, both parsed with the one strict parse ([`strict_json`]).
//!
//! A repeated key inside one proposal's `arguments` ends that proposal `invalid_arguments`
//! (recorded, like any refusal) while the others run; a repeated key anywhere else in the file
//! makes the file unusable (exit 2), as any other malformed file does.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::contract::strict_json::{self, KeyPath, Segment, StrictJsonError};
use crate::runtime::batch::Proposal;
use crate::runtime::MAX_INPUT_BYTES;
use crate::{Code, RunContext, Runtime, ToolCall, ToolResult, Usage};

/// `toolhost call`'s arguments: at most [`MAX_INPUT_BYTES`], strict JSON.
pub(super) fn parse_arguments(text: &str) -> Result<Value, String> {
    if text.len() > MAX_INPUT_BYTES {
        return Err(format!(
            "the arguments are larger than {MAX_INPUT_BYTES} bytes"
        ));
    }
    strict_json::parse(text.as_bytes()).map_err(|e| arguments_message(&e))
}

/// What a model or a person is told about arguments that did not parse.
fn arguments_message(e: &StrictJsonError) -> String {
    match e {
        StrictJsonError::DuplicateKey(path) => format!("the arguments repeat the key {path}"),
        e => format!("the arguments are not valid JSON: {e}"),
    }
}

/// A proposals file: the proposals in order, and for each one whose arguments repeat a key,
/// that key's path within its arguments.
pub(super) struct Batch {
    pub proposals: Vec<Proposal>,
    pub repeated: BTreeMap<usize, KeyPath>,
}

/// Parse a proposals file strictly.
pub(super) fn parse_batch(text: &[u8]) -> Result<Batch, String> {
    let mut repeated = BTreeMap::new();
    let value = strict_json::parse_with(text, &mut |path| match path {
        [Segment::Index(i), arguments, within @ ..] if arguments.is_key("arguments") => {
            if !within.is_empty() {
                repeated
                    .entry(*i)
                    .or_insert_with(|| KeyPath(within.to_vec()));
            }
            !within.is_empty()
        }
        _ => false,
    })
    .map_err(|e| e.to_string())?;
    let proposals = serde_json::from_value(value).map_err(|e| e.to_string())?;
    Ok(Batch {
        proposals,
        repeated,
    })
}

/// Run a batch: proposals whose arguments repeat a key are refused (and recorded), the rest run
/// as one batch. Results are in proposal order.
pub(super) async fn run_batch(rt: &Runtime, ctx: &RunContext, batch: &Batch) -> Vec<ToolResult> {
    let runnable: Vec<Proposal> = batch
        .proposals
        .iter()
        .enumerate()
        .filter(|(i, _)| !batch.repeated.contains_key(i))
        .map(|(_, p)| p.clone())
        .collect();
    let mut ran = rt.run_batch(ctx, &runnable).await.into_iter();
    let mut results = Vec::with_capacity(batch.proposals.len());
    for (i, p) in batch.proposals.iter().enumerate() {
        results.push(match batch.repeated.get(&i) {
            Some(path) => {
                let call = ToolCall {
                    arguments: Value::Null,
                    ..p.call.clone()
                };
                let message = arguments_message(&StrictJsonError::DuplicateKey(path.clone()));
                let r =
                    ToolResult::failed(&call, Code::InvalidArguments, message, Usage::default());
                rt.refuse(ctx, &call, r).await
            }
            None => ran.next().expect("one result per runnable proposal"),
        });
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `toolhost call` arguments with a repeated key are refused, naming the key.
    #[test]
    fn call_arguments_refuse_repeated_keys() {
        assert_eq!(
            parse_arguments(r#"{"value": 3, "value": 4}"#),
            Err("the arguments repeat the key /value".to_string())
        );
        assert_eq!(parse_arguments(r#"{"value": 3}"#), Ok(json!({"value": 3})));
        assert!(parse_arguments("{\"x\": 1e400}")
            .unwrap_err()
            .starts_with("the arguments are not valid JSON"));
    }

    /// In a batch file a repeat inside one proposal's arguments marks that proposal only; a
    /// repeat anywhere else makes the file unusable.
    #[test]
    fn batch_repeats_mark_one_proposal_or_refuse_the_file() {
        let b = parse_batch(
            br#"[{"call_id":"a","name":"t","arguments":{"x":1}},
                 {"call_id":"b","name":"t","arguments":{"x":1,"y":{"z":1,"z":2},"x":2}}]"#,
        )
        .unwrap();
        assert_eq!(b.proposals.len(), 2);
        assert_eq!(b.repeated.len(), 1);
        assert_eq!(b.repeated[&1].pointer(), "/y/z");
        for bad in [
            &br#"[{"call_id":"a","call_id":"b","name":"t","arguments":{}}]"#[..],
            br#"[{"call_id":"a","name":"t","arguments":{},"arguments":{}}]"#,
        ] {
            let e = parse_batch(bad).err().expect("refused");
            assert!(e.contains("appears more than once"), "{e}");
        }
    }
}
