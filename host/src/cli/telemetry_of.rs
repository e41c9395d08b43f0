//! The `[telemetry]` section of a command's config, read before logging starts.

use super::Command;

impl Command {
    /// The `[telemetry]` section of the command's config, read before logging starts (the
    /// exporter is part of the subscriber). A config that does not read gives the default
    /// here; the command itself reports why it does not.
    pub(super) fn telemetry(&self) -> crate::telemetry::TelemetryConfig {
        #[derive(serde::Deserialize)]
        struct Only {
            #[serde(default)]
            telemetry: crate::telemetry::TelemetryConfig,
        }
        let source = match self {
            Command::Tools { source }
            | Command::Call { source, .. }
            | Command::Approve { source, .. }
            | Command::Ledger { source, .. }
            | Command::Receipt { source, .. }
            | Command::Reconcile { source, .. }
            | Command::Serve { source, .. }
            | Command::Agent { source, .. }
            | Command::Batch { source, .. } => source,
            _ => return Default::default(),
        };
        if source.component.is_some() {
            return Default::default();
        }
        std::fs::read_to_string(&source.config)
            .ok()
            .and_then(|text| toml::from_str::<Only>(&text).ok())
            .map(|o| o.telemetry)
            .filter(|t| t.check().is_ok())
            .unwrap_or_default()
    }
}
