//! `toolhost embed-wit`: the tool author's step after componentize-py or componentize-js.

use std::path::Path;
use std::process::ExitCode;

use super::report::usage_message;
use crate::registry::embed;

/// `toolhost embed-wit COMPONENT WIT`: the component rewritten with the WIT embedded. The new
/// bytes go to a file beside it that then replaces it, so a failure leaves the original.
pub(super) fn embed_wit(component: &Path, wit: &Path) -> ExitCode {
    let bytes = match std::fs::read(component) {
        Ok(b) => b,
        Err(e) => return usage_message(format!("cannot read {}: {e}", component.display())),
    };
    let text = match std::fs::read_to_string(wit) {
        Ok(t) => t,
        Err(e) => return usage_message(format!("cannot read {}: {e}", wit.display())),
    };
    let (out, docs) = match embed::embed_wit(&bytes, &text) {
        Ok(r) => r,
        Err(embed::EmbedError::Docs(e)) => return usage_message(format!("{}: {e}", wit.display())),
        Err(e) => return usage_message(format!("{}: {e}", component.display())),
    };
    let mut temp = component.as_os_str().to_owned();
    temp.push(format!(".embed-{}", std::process::id()));
    let temp = std::path::PathBuf::from(temp);
    if let Err(e) = std::fs::write(&temp, &out).and_then(|()| std::fs::rename(&temp, component)) {
        let _ = std::fs::remove_file(&temp);
        return usage_message(format!("cannot write {}: {e}", component.display()));
    }
    crate::telemetry::say(
        tracing::Level::INFO,
        format!(
            "{}: embedded {} ({} described function{})",
            component.display(),
            wit.display(),
            docs.described(),
            if docs.described() == 1 { "" } else { "s" }
        ),
    );
    ExitCode::SUCCESS
}
