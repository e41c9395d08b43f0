//! Approval by the human at the terminal `toolhost agent` runs in: when stdin and stderr are
//! both terminals, a call that needs approval is shown on stderr (see `approval.rs`) and only
//! a typed `yes` approves it; `no` declines it.
//!
//! Questions are asked one at a time (a step's calls may need approval at once). Whatever was
//! typed before a question appeared is thrown away — both what a reader already took and
//! what the terminal still holds — so a `yes` typed ahead never approves a call the human has
//! not seen. A closed terminal, no answer in time, or three answers that are neither yes nor
//! no leave the call `approval_required` (never approved).

use std::future::Future;
use std::io::{BufRead, Write};
use std::pin::Pin;
use std::time::Duration;

use tokio::sync::{mpsc, Mutex};

use super::approval::question;
use toolhost_contract::{ApprovalAnswer, ApprovalPrompt, Approver};

/// Bytes of one answer line read; the rest of a longer line is another (unclear) answer.
const MAX_ANSWER_BYTES: u64 = 1024;
/// Answers that are neither yes nor no before the question is given up.
const MAX_UNCLEAR_ANSWERS: u32 = 3;

/// Asks at a terminal (or, in tests, any line reader and writer).
pub struct TerminalApprover {
    /// Lines as the reader thread read them; `None` when the input closed.
    lines: Mutex<mpsc::UnboundedReceiver<Option<String>>>,
    output: std::sync::Mutex<Box<dyn Write + Send>>,
    /// Throws away what the terminal holds unread (type-ahead).
    flush_input: fn(),
    timeout: Duration,
}

impl TerminalApprover {
    /// The process's terminal, when stdin and stderr both are one.
    pub fn from_terminal(timeout: Duration) -> Option<TerminalApprover> {
        use std::io::IsTerminal;
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            return None;
        }
        Some(TerminalApprover::new(
            std::io::BufReader::new(std::io::stdin()),
            Box::new(std::io::stderr()),
            flush_terminal_input,
            timeout,
        ))
    }

    /// Ask on `output`, read answers from `input` (on a thread of its own: a blocking read
    /// never holds an async worker).
    pub fn new(
        input: impl BufRead + Send + 'static,
        output: Box<dyn Write + Send>,
        flush_input: fn(),
        timeout: Duration,
    ) -> TerminalApprover {
        let (tx, rx) = mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("toolhost-approval-input".into())
            .spawn(move || read_lines(input, tx))
            .expect("a thread for the terminal's answers starts");
        TerminalApprover {
            lines: Mutex::new(rx),
            output: std::sync::Mutex::new(output),
            flush_input,
            timeout,
        }
    }

    fn say(&self, text: &str) {
        let mut out = self.output.lock().unwrap_or_else(|e| e.into_inner());
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }

    async fn question(&self, prompt: &ApprovalPrompt) -> ApprovalAnswer {
        let mut lines = self.lines.lock().await;
        // Type-ahead: what the reader took before the question, and what the terminal holds.
        while let Ok(line) = lines.try_recv() {
            if line.is_none() {
                return ApprovalAnswer::Unavailable("the terminal's input is closed");
            }
        }
        (self.flush_input)();
        self.say(&question(prompt));
        for _ in 0..MAX_UNCLEAR_ANSWERS {
            self.say("Approve this call? Type yes to run it, no to refuse it: ");
            let line = match tokio::time::timeout(self.timeout, lines.recv()).await {
                Err(_) => {
                    self.say("\n(no answer in time: the call is not approved)\n");
                    return ApprovalAnswer::Unavailable("no answer in time");
                }
                Ok(None | Some(None)) => {
                    return ApprovalAnswer::Unavailable("the terminal's input is closed")
                }
                Ok(Some(Some(line))) => line,
            };
            match line.trim().to_ascii_lowercase().as_str() {
                "yes" => return ApprovalAnswer::Approved,
                "no" => return ApprovalAnswer::Declined,
                _ => self.say("Please type yes or no.\n"),
            }
        }
        ApprovalAnswer::Unavailable("no clear yes or no")
    }
}

impl Approver for TerminalApprover {
    fn channel(&self) -> toolhost_contract::Approvers {
        toolhost_contract::Approvers::Operator
    }

    fn source(&self) -> String {
        "the terminal".into()
    }

    fn ask<'a>(
        &'a self,
        prompt: &'a ApprovalPrompt,
    ) -> Pin<Box<dyn Future<Output = ApprovalAnswer> + Send + 'a>> {
        Box::pin(self.question(prompt))
    }
}

/// Forward lines (each cut at [`MAX_ANSWER_BYTES`]) until the input ends or nobody listens.
fn read_lines(mut input: impl BufRead, tx: mpsc::UnboundedSender<Option<String>>) {
    loop {
        let mut line = Vec::new();
        match std::io::Read::take(&mut input, MAX_ANSWER_BYTES).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => {
                let _ = tx.send(None);
                return;
            }
            Ok(_) => {
                let text = String::from_utf8_lossy(&line).into_owned();
                if tx.send(Some(text)).is_err() {
                    return;
                }
            }
        }
    }
}

/// Discard what the terminal on stdin holds unread.
fn flush_terminal_input() {
    let _ = rustix::termios::tcflush(std::io::stdin(), rustix::termios::QueueSelector::IFlush);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn prompt() -> ApprovalPrompt {
        crate::approval::tests::prompt(r#"{"path":"a"}"#)
    }

    /// A pipe whose writing end the test holds: lines arrive when the test sends them.
    struct Fed(std::sync::mpsc::Receiver<Vec<u8>>, Vec<u8>);

    impl Read for Fed {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.1.is_empty() {
                match self.0.recv() {
                    Ok(b) => self.1 = b,
                    Err(_) => return Ok(0),
                }
            }
            let n = buf.len().min(self.1.len());
            buf[..n].copy_from_slice(&self.1[..n]);
            self.1.drain(..n);
            Ok(n)
        }
    }

    /// What the approver wrote, shared with the test.
    #[derive(Clone, Default)]
    struct Screen(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Screen {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Screen {
        fn asked(&self) -> usize {
            String::from_utf8_lossy(&self.0.lock().unwrap())
                .matches("Type yes")
                .count()
        }
    }

    struct Term {
        a: std::sync::Arc<TerminalApprover>,
        keys: std::sync::mpsc::Sender<Vec<u8>>,
        screen: Screen,
    }

    fn approver(timeout: Duration) -> Term {
        let (keys, rx) = std::sync::mpsc::channel();
        let input = std::io::BufReader::new(Fed(rx, Vec::new()));
        let screen = Screen::default();
        let a = TerminalApprover::new(input, Box::new(screen.clone()), || {}, timeout);
        Term {
            a: std::sync::Arc::new(a),
            keys,
            screen,
        }
    }

    impl Term {
        /// Ask, and type each of `answers` once the question (or its repeat) is on screen.
        async fn ask(&self, answers: &[&str]) -> ApprovalAnswer {
            let a = self.a.clone();
            let before = self.screen.asked();
            let asking = tokio::spawn(async move { a.ask(&prompt()).await });
            for (i, answer) in answers.iter().enumerate() {
                for _ in 0..2500 {
                    if self.screen.asked() > before + i {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                self.keys.send(format!("{answer}\n").into_bytes()).unwrap();
            }
            asking.await.unwrap()
        }
    }

    /// Wait (bounded) until the reader thread has forwarded what was sent.
    async fn settle(a: &TerminalApprover, n: usize) {
        for _ in 0..500 {
            if a.lines.lock().await.len() >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        panic!("the reader did not forward {n} line(s)");
    }

    /// Only "yes" approves and "no" declines; unclear answers are asked again, then given up.
    #[tokio::test]
    async fn only_an_explicit_yes_approves() {
        let t = approver(Duration::from_secs(30));
        assert_eq!(t.ask(&["YES"]).await, ApprovalAnswer::Approved);
        assert_eq!(t.ask(&[" no "]).await, ApprovalAnswer::Declined);
        assert_eq!(
            t.ask(&["y", "sure", "ok"]).await,
            ApprovalAnswer::Unavailable("no clear yes or no")
        );
    }

    /// A "yes" typed before the question appeared does not approve it.
    #[tokio::test]
    async fn type_ahead_is_thrown_away() {
        let t = approver(Duration::from_millis(300));
        t.keys.send(b"yes\n".to_vec()).unwrap();
        settle(&t.a, 1).await;
        assert_eq!(
            t.ask(&[]).await,
            ApprovalAnswer::Unavailable("no answer in time")
        );
    }

    /// A closed input is no answer.
    #[tokio::test]
    async fn closed_input() {
        let t = approver(Duration::from_secs(30));
        let Term { a, keys, .. } = t;
        drop(keys);
        assert_eq!(
            a.ask(&prompt()).await,
            ApprovalAnswer::Unavailable("the terminal's input is closed")
        );
    }
}
