//! One thing wrong in a config file: where it is (`agent.terminal_tool`) and what is wrong, with
//! the fix. Each section's own type says what is wrong with it; the config layer (`crate::config`)
//! collects every problem of a file and reports them together, naming the file.

use std::fmt;

/// One problem in a config, at a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// Where: a dotted key path, with indices for arrays (`component[0].tools.greet.limits.fuel`).
    pub key: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl ConfigProblem {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> ConfigProblem {
        ConfigProblem {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// Findings as an error shows them: one, inline; several, counted (`3 problems`) and then one
/// per indented line.
pub struct Listed<'a, T> {
    pub items: &'a [T],
    /// What several are called (`problems`, `differences`).
    pub noun: &'static str,
}

impl<T: fmt::Display> fmt::Display for Listed<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.items {
            [one] => write!(f, "{one}"),
            many => {
                write!(f, "{} {}", many.len(), self.noun)?;
                for p in many {
                    write!(f, "\n  {p}")?;
                }
                Ok(())
            }
        }
    }
}

/// An error and every cause behind it (`source()`), as one line: `error: cause: cause`. A cause
/// whose text the line already holds is not repeated (some errors print their cause themselves).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut line = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = c.source();
    }
    line
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct SaysItsCause(#[source] std::io::Error);

    /// Causes are appended once; one the message already prints is not repeated.
    #[test]
    fn chains_name_every_cause_once() {
        let io = || std::io::Error::other("disk on fire");
        assert_eq!(error_chain(&Outer(io())), "outer: disk on fire");
        assert_eq!(error_chain(&SaysItsCause(io())), "outer: disk on fire");
    }
}
