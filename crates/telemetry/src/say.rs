//! What the command line itself says on stderr — its errors, warnings, the addresses it serves
//! on, a run's summary — in the format of the log lines: `toolhost: …` lines, or, with
//! `--log-format json`, one JSON object per line shaped as the JSON log lines are
//! (`timestamp`, `level`, `target`, `fields.message`), so that stderr holds only JSON.
//! Never filtered by the log level: it is the command's own output, not a log event.

use std::fmt::Display;
use std::sync::OnceLock;

use tracing::Level;

use super::LogFormat;

/// The format chosen on the command line, set once by [`super::install`].
static FORMAT: OnceLock<LogFormat> = OnceLock::new();

/// Choose the format [`say`] writes in (the first choice holds).
pub(super) fn choose(format: LogFormat) {
    let _ = FORMAT.set(format);
}

/// One line of the command's own output on stderr, at `level`.
pub fn say(level: Level, message: impl Display) {
    eprintln!(
        "{}",
        line(FORMAT.get().copied().unwrap_or_default(), level, &message)
    );
}

/// Text for a person at the terminal (a question to answer) on stderr: as written in the human
/// format, as one JSON line (level `INFO`) in the JSON format.
pub fn show(text: impl Display) {
    match FORMAT.get().copied().unwrap_or_default() {
        LogFormat::Human => eprintln!("{text}"),
        LogFormat::Json => say(Level::INFO, text),
    }
}

/// [`say`]'s line, without the newline.
fn line(format: LogFormat, level: Level, message: &dyn Display) -> String {
    match format {
        LogFormat::Human if level == Level::WARN => format!("toolhost: warning: {message}"),
        LogFormat::Human => format!("toolhost: {message}"),
        LogFormat::Json => serde_json::json!({
            "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "level": level.as_str(),
            "target": "toolhost",
            "fields": {"message": message.to_string()},
        })
        .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A human line is `toolhost: …` (warnings say so); a JSON line is one object whose
    /// message is the text, escaped as JSON needs.
    #[test]
    fn lines_follow_the_format() {
        assert_eq!(
            line(LogFormat::Human, Level::ERROR, &"no config"),
            "toolhost: no config"
        );
        assert_eq!(
            line(LogFormat::Human, Level::WARN, &"low"),
            "toolhost: warning: low"
        );
        let json = line(LogFormat::Json, Level::INFO, &"a \"quoted\"\nline");
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["level"], "INFO");
        assert_eq!(v["target"], "toolhost");
        assert_eq!(v["fields"]["message"], "a \"quoted\"\nline");
        assert!(!json.contains('\n'));
    }
}
