//! The config `--component FILE` stands for: one component, nothing granted, no file.

use std::path::{Path, PathBuf};

use super::Config;
use crate::registry::config::ComponentConfig;

impl Config {
    /// One component with every default: no filesystem, no network, no policy (the caller may
    /// call each of its tools), the default limits and risk.
    ///
    /// Its state (ledger, approval key, compile cache) lives in `.toolhost` beside the component,
    /// as a config file's lives beside the file: the same component finds the same compile cache
    /// and ledger whatever directory a command (or an MCP client) runs it from.
    pub fn single_component(component: &Path) -> Config {
        let (base, file) = match (component.parent(), component.file_name()) {
            (Some(dir), Some(name)) if !dir.as_os_str().is_empty() => {
                (dir.to_path_buf(), PathBuf::from(name))
            }
            _ => (PathBuf::from("."), component.to_path_buf()),
        };
        let mut config = Config::parse("", &base).expect("the empty config is valid");
        config.components.push(ComponentConfig::at(file));
        config.label = Some(format!("--component {}", component.display()));
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The state directory is beside the component, wherever the command runs.
    #[test]
    fn state_lives_beside_the_component() {
        let c = Config::single_component(Path::new("/srv/tools/greet.wasm"));
        assert_eq!(c.data_dir(), Path::new("/srv/tools/.toolhost"));
        assert_eq!(c.cache_dir(), Path::new("/srv/tools/.toolhost/cache"));
        assert_eq!(c.components.len(), 1);
        assert_eq!(
            c.components[0].path.as_deref(),
            Some(Path::new("greet.wasm"))
        );
        assert!(c.components[0].fs.is_empty() && c.components[0].network.is_none());
        assert!(c.policy.is_none());
        assert_eq!(c.file_name(), "--component /srv/tools/greet.wasm");
        let here = Config::single_component(Path::new("greet.wasm"));
        assert_eq!(here.data_dir(), Path::new("./.toolhost"));
    }
}
