//! When `toolhost serve` reloads its tools (`config::reload`): on each `SIGHUP`, and with
//! `--watch` when a file it loaded from changes (the config, its lock, a component file). A
//! reload that fails is logged and counted, and the running tools stay.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use super::Source;

/// How often `--watch` looks at the files. A change is reloaded once two looks in a row agree,
/// so a file still being written is not read half-way.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// Start reloading `shared`'s tools from `source` on `SIGHUP` (and on a change of its files
/// with `watch`). Stops when the guard drops.
pub(super) fn start(
    source: Source,
    shared: crate::serve::Shared,
    watch: bool,
) -> Result<tokio_util::sync::DropGuard, ExitCode> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangups = signal(SignalKind::hangup())
        .map_err(|e| super::report::usage_message(format!("cannot watch for SIGHUP: {e}")))?;
    let stop = tokio_util::sync::CancellationToken::new();
    let stopped = stop.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(WATCH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut files = Watched::of(&source);
        let mut last = files.look();
        let mut changed: Option<Vec<Look>> = None;
        loop {
            tokio::select! {
                _ = stopped.cancelled() => return,
                got = hangups.recv() => if got.is_none() { return },
                _ = tick.tick(), if watch => {
                    let now = files.look();
                    if now == last || changed.as_ref() != Some(&now) {
                        changed = (now != last).then_some(now);
                        continue;
                    }
                }
            }
            changed = None;
            files = reload(&source, &shared).await;
            last = files.look();
        }
    });
    Ok(stop.drop_guard())
}

/// Read the config again and swap in its tools; log and count the outcome. Returns the files
/// that read named, for `--watch` to look at next (the config is read once per reload, off the
/// async workers).
async fn reload(source: &Source, shared: &crate::serve::Shared) -> Watched {
    let (read, rt) = (source.clone(), shared.runtime.clone());
    let done = tokio::task::spawn_blocking(move || {
        let config = read.config();
        let watched = Watched::named_by(&read, config.as_ref().ok());
        let outcome = config
            .map_err(|e| crate::contract::error_chain(&e))
            .and_then(|c| {
                crate::config::reload(&c, &rt).map_err(|e| crate::contract::error_chain(&e))
            });
        (watched, outcome)
    })
    .await;
    let (watched, outcome) = match done {
        Ok(done) => done,
        Err(e) => (
            Watched::named_by(source, None),
            Err(format!("the reload stopped: {e}")),
        ),
    };
    match outcome {
        Ok(r) => {
            crate::telemetry::metrics().reload("applied");
            let told = shared.listeners.tools_changed().await;
            crate::telemetry::say(
                tracing::Level::INFO,
                format!(
                    "reloaded: {} tools (added: {:?}, removed: {:?}, replaced: {:?}); \
                     {told} sessions told",
                    r.tools, r.added, r.removed, r.replaced
                ),
            );
        }
        Err(why) => {
            crate::telemetry::metrics().reload("refused");
            crate::telemetry::say(
                tracing::Level::ERROR,
                format!("reload refused, still serving the previous tools: {why}"),
            );
        }
    }
    watched
}

/// The files a reload reads: the config, and when it parses, its lock and its component files.
struct Watched {
    files: Vec<PathBuf>,
}

/// What one look at a file saw: its size, modification time and inode, or that it is missing.
type Look = Option<(u64, Option<SystemTime>, u64)>;

impl Watched {
    fn of(source: &Source) -> Watched {
        Watched::named_by(source, source.config().as_ref().ok())
    }

    /// The source's file, and when its config was read (`config`), its lock and components.
    fn named_by(source: &Source, config: Option<&crate::config::Config>) -> Watched {
        let mut files = vec![source.file()];
        if let Some(config) = config {
            files.extend(config.lock_path());
            files.extend(
                config
                    .components
                    .iter()
                    .filter_map(|c| c.path.as_ref())
                    .map(|p| config.base_dir.join(p)),
            );
        }
        Watched { files }
    }

    fn look(&self) -> Vec<Look> {
        use std::os::unix::fs::MetadataExt;
        self.files
            .iter()
            .map(|f| {
                let m = std::fs::metadata(f).ok()?;
                Some((m.len(), m.modified().ok(), m.ino()))
            })
            .collect()
    }
}
