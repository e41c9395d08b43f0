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

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}
