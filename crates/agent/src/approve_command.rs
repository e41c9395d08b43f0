//! Approval by an operator's command (`toolhost agent --approve-with CMD`): for each call that
//! needs approval, `sh -c CMD` runs with the request as one JSON object on its stdin (see
//! `approval.rs`: tool, arguments, principal, tenant, run, call, digest, expiry) and answers on
//! its stdout with `approve` or `deny` — the bare word, or `{"decision": "approve"}`.
//!
//! Only an `approve` from a command that exits 0 approves. `deny` declines the call. A command
//! that fails, says anything else, writes more than [`MAX_ANSWER_BYTES`] or does not finish
//! within the timeout (it is killed) leaves the call `approval_required`: never approved.
//! Commands run one at a time. The command inherits toolhost's stderr and environment — it is
//! the operator's own program — except the variable that holds the model's API key, which it
//! has no use for.

use std::future::Future;
use std::pin::Pin;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Mutex;

use super::approval::request_json;
use toolhost_contract::{ApprovalAnswer, ApprovalPrompt, Approver};

/// Bytes of the command's answer read; a longer answer is no answer.
pub const MAX_ANSWER_BYTES: usize = 4096;

/// Runs the operator's command for each question.
pub struct CommandApprover {
    command: String,
    timeout: Duration,
    /// Environment variables the command does not get (the API key's).
    withheld: Vec<String>,
    /// One command at a time.
    turn: Mutex<()>,
}

impl CommandApprover {
    pub fn new(command: String, timeout: Duration) -> CommandApprover {
        CommandApprover {
            command,
            timeout,
            withheld: Vec::new(),
            turn: Mutex::new(()),
        }
    }

    /// Keep the environment variable `name` from the command.
    pub fn withholding(mut self, name: &str) -> CommandApprover {
        self.withheld.push(name.to_string());
        self
    }

    async fn question(&self, prompt: &ApprovalPrompt) -> ApprovalAnswer {
        let _turn = self.turn.lock().await;
        let mut command = tokio::process::Command::new("sh");
        for name in &self.withheld {
            command.env_remove(name);
        }
        let mut child = match command
            .arg("-c")
            .arg(&self.command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // Its own process group, so that a timeout ends whatever it started, too.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
        {
            Ok(c) => c,
            Err(_) => return ApprovalAnswer::Unavailable("the command could not be started"),
        };
        let group = child
            .id()
            .and_then(|id| rustix::process::Pid::from_raw(id as i32));
        let mut request = request_json(prompt).to_string().into_bytes();
        request.push(b'\n');
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let mut stdout = child.stdout.take().expect("stdout is piped");
        let exchange = async {
            // A command that does not read its stdin must not block the answer.
            let write = async {
                let _ = stdin.write_all(&request).await;
                drop(stdin);
            };
            let read = async {
                let mut answer = Vec::new();
                let r = (&mut stdout)
                    .take(MAX_ANSWER_BYTES as u64 + 1)
                    .read_to_end(&mut answer)
                    .await;
                r.map(|_| answer)
            };
            let ((), answer) = tokio::join!(write, read);
            let status = child.wait().await;
            (answer, status)
        };
        let (answer, status) = match tokio::time::timeout(self.timeout, exchange).await {
            Ok(done) => done,
            Err(_) => {
                if let Some(group) = group {
                    let _ =
                        rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
                }
                return ApprovalAnswer::Unavailable("the command did not answer in time");
            }
        };
        let Ok(answer) = answer else {
            return ApprovalAnswer::Unavailable("the command's answer could not be read");
        };
        if answer.len() > MAX_ANSWER_BYTES {
            return ApprovalAnswer::Unavailable("the command's answer is too long");
        }
        match decision(&answer) {
            Some(true) if status.is_ok_and(|s| s.success()) => ApprovalAnswer::Approved,
            Some(true) => ApprovalAnswer::Unavailable("the command approved but failed"),
            Some(false) => ApprovalAnswer::Declined,
            None => ApprovalAnswer::Unavailable("the command's answer was not approve or deny"),
        }
    }
}

/// `Some(true)` for approve, `Some(false)` for deny, `None` for anything else.
fn decision(answer: &[u8]) -> Option<bool> {
    let text = std::str::from_utf8(answer).ok()?.trim();
    let word = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(o)) => o.get("decision")?.as_str()?.to_string(),
        _ => text.to_string(),
    };
    match word.as_str() {
        "approve" => Some(true),
        "deny" => Some(false),
        _ => None,
    }
}

impl Approver for CommandApprover {
    fn channel(&self) -> toolhost_contract::Approvers {
        toolhost_contract::Approvers::Operator
    }

    fn source(&self) -> String {
        "the --approve-with command".into()
    }

    fn ask<'a>(
        &'a self,
        prompt: &'a ApprovalPrompt,
    ) -> Pin<Box<dyn Future<Output = ApprovalAnswer> + Send + 'a>> {
        Box::pin(self.question(prompt))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt() -> ApprovalPrompt {
        crate::approval::tests::prompt(r#"{"path":"a"}"#)
    }

    /// A withheld variable (in toolhost, the API key's) is not in the command's environment;
    /// others are. (CARGO_MANIFEST_DIR stands in for the key: cargo sets it for every test.)
    #[tokio::test]
    async fn the_key_is_withheld() {
        let var = "CARGO_MANIFEST_DIR";
        assert!(std::env::var(var).is_ok());
        let cmd = format!(r#"[ -z "${var}" ] && [ -n "$PATH" ] && echo approve || echo deny"#);
        let a = CommandApprover::new(cmd.clone(), Duration::from_secs(30)).withholding(var);
        assert_eq!(a.ask(&prompt()).await, ApprovalAnswer::Approved);
        let a = CommandApprover::new(cmd, Duration::from_secs(30));
        assert_eq!(a.ask(&prompt()).await, ApprovalAnswer::Declined);
    }

    async fn ask(command: &str, timeout: Duration) -> ApprovalAnswer {
        CommandApprover::new(command.into(), timeout)
            .ask(&prompt())
            .await
    }

    /// The answers a command can give, and what each means.
    #[tokio::test]
    async fn answers() {
        let t = Duration::from_secs(30);
        assert_eq!(ask("echo approve", t).await, ApprovalAnswer::Approved);
        assert_eq!(
            ask(r#"echo '{"decision":"approve"}'"#, t).await,
            ApprovalAnswer::Approved
        );
        assert_eq!(ask("echo deny", t).await, ApprovalAnswer::Declined);
        assert_eq!(
            ask("echo yes", t).await,
            ApprovalAnswer::Unavailable("the command's answer was not approve or deny")
        );
        assert_eq!(
            ask("echo approve; exit 3", t).await,
            ApprovalAnswer::Unavailable("the command approved but failed")
        );
        assert_eq!(
            ask("head -c 5000 /dev/zero | tr '\\0' a", t).await,
            ApprovalAnswer::Unavailable("the command's answer is too long")
        );
        assert!(matches!(
            ask("exit 0", t).await,
            ApprovalAnswer::Unavailable(_)
        ));
    }

    /// The command reads the request on its stdin: here it approves only the expected tool
    /// and digest.
    #[tokio::test]
    async fn the_request_is_on_stdin() {
        let cmd = r#"grep -q '"tool":"delete_file"' && echo approve || echo deny"#;
        assert_eq!(
            ask(cmd, Duration::from_secs(30)).await,
            ApprovalAnswer::Approved
        );
        let cmd = r#"grep -q '"tool":"other"' && echo approve || echo deny"#;
        assert_eq!(
            ask(cmd, Duration::from_secs(30)).await,
            ApprovalAnswer::Declined
        );
    }

    /// A command that hangs is killed at the timeout and approves nothing (real clock, the
    /// command would sleep far longer than the test waits).
    #[tokio::test]
    async fn a_hanging_command_is_no_answer() {
        let started = std::time::Instant::now();
        assert_eq!(
            ask("sleep 60; echo approve", Duration::from_millis(300)).await,
            ApprovalAnswer::Unavailable("the command did not answer in time")
        );
        assert!(started.elapsed() < Duration::from_secs(30));
    }
}
