//! Capability grants from the config: every granted directory opened once (as a handle, never
//! following a symlink), and the whole set checked before any component is loaded.
//!
//! Refused at load, naming the config keys:
//! - a writable grant whose directory contains (or is) another grant's directory, across all
//!   components: a tool with the first could rename or replace what the second reaches;
//! - any grant that contains, or lies inside, the host's own files: the data directory (ledger,
//!   compile cache, diagnostics), the approval key, and the config file itself.
//!
//! A host path may name the caller: a whole component `{principal}` or `{tenant}` makes a
//! per-caller grant, opened at call time beneath the fixed part before the first placeholder.
//! The checks above treat such a grant as its fixed part (the widest directory it can reach).

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use toolhost_sandbox::{check_caller_name, DirGrant, DirSource, Grant, HostDir, PathPart};

use super::config::{ComponentConfig, FsGrant, FsMode, NetworkGrant};
use super::LoadSpec;
use super::RegistryError;

/// The grants of one component: the component's own, and each tool's that replaces it.
pub struct ComponentGrants {
    pub component: Grant,
    pub tools: BTreeMap<String, Grant>,
}

/// One granted directory, for the cross-grant checks.
struct Site {
    key: String,
    dir: PathBuf,
    writable: bool,
}

/// Open and check every grant of `spec`. Nothing is loaded or created before this succeeds.
pub fn resolve_all(spec: &LoadSpec<'_>) -> Result<Vec<ComponentGrants>, RegistryError> {
    let mut sites = Vec::new();
    let mut out = Vec::new();
    for (i, c) in spec.components.iter().enumerate() {
        let at = format!("component[{i}]");
        let component = resolve(
            spec.base_dir,
            c,
            &format!("{at}.fs"),
            &c.fs,
            c.network.as_ref(),
        )?;
        add_sites(&mut sites, &format!("{at}.fs"), &c.fs, &component);
        let mut tools = BTreeMap::new();
        for (export, t) in &c.tools {
            if t.fs.is_none() && t.network.is_none() {
                continue;
            }
            let net = t.network.as_ref().or(c.network.as_ref());
            let grant = match &t.fs {
                Some(fs) => {
                    let key = format!("{at}.tools.{export}.fs");
                    let grant = resolve(spec.base_dir, c, &key, fs, net)?;
                    add_sites(&mut sites, &key, fs, &grant);
                    grant
                }
                None => with_network(component.dirs.clone(), net),
            };
            tools.insert(export.clone(), grant);
        }
        let mut component = component;
        let secrets = super::secrets::resolve(spec.base_dir, c, i)?;
        super::secrets::bind(&mut component, &secrets);
        for grant in tools.values_mut() {
            super::secrets::bind(grant, &secrets);
        }
        let grants: Vec<&Grant> = std::iter::once(&component).chain(tools.values()).collect();
        super::secrets::check_reachable(spec.base_dir, c, i, &secrets, &grants)?;
        out.push(ComponentGrants { component, tools });
    }
    check_overlaps(&sites)?;
    check_host_files(spec.host_files, &sites)?;
    Ok(out)
}

fn add_sites(sites: &mut Vec<Site>, key: &str, fs: &[FsGrant], grant: &Grant) {
    for (j, (g, d)) in fs.iter().zip(&grant.dirs).enumerate() {
        sites.push(Site {
            key: format!("{key}[{j}]"),
            dir: d.source.root().path().to_path_buf(),
            writable: g.mode == FsMode::ReadWrite,
        });
    }
}

fn resolve(
    base_dir: &Path,
    c: &ComponentConfig,
    key: &str,
    fs: &[FsGrant],
    network: Option<&NetworkGrant>,
) -> Result<Grant, RegistryError> {
    let mut dirs = Vec::new();
    for (j, g) in fs.iter().enumerate() {
        let host = base_dir.join(&g.host);
        let problem = |problem: String| RegistryError::Grant {
            path: c.label(base_dir),
            key: format!("{key}[{j}]"),
            guest: g.guest.as_str().to_string(),
            host: host.clone(),
            problem,
        };
        let (root, parts) = split_template(&host).map_err(problem)?;
        let root = HostDir::open(&root).map_err(|e| problem(e.to_string()))?;
        let root = Arc::new(root);
        let source = if parts.is_empty() {
            DirSource::Fixed(root)
        } else {
            DirSource::PerCaller { root, parts }
        };
        dirs.push(DirGrant {
            source,
            guest: g.guest.as_str().to_string(),
            writable: g.mode == FsMode::ReadWrite,
        });
    }
    Ok(with_network(dirs, network))
}

fn with_network(dirs: Vec<DirGrant>, network: Option<&NetworkGrant>) -> Grant {
    Grant {
        dirs,
        network: toolhost_sandbox::Allowlist::new(
            network.map(|n| n.allow.clone()).unwrap_or_default(),
        ),
        dns: network.is_some_and(|n| n.dns),
        secrets: Default::default(),
    }
}

/// The fixed part of a host path and the per-caller parts after it (empty for a fixed grant).
fn split_template(host: &Path) -> Result<(PathBuf, Vec<PathPart>), String> {
    let mut root = PathBuf::new();
    let mut parts = Vec::new();
    for c in host.components() {
        let text = c.as_os_str().to_string_lossy();
        let part = match text.as_ref() {
            "{principal}" => Some(PathPart::Principal),
            "{tenant}" => Some(PathPart::Tenant),
            t if t.contains(['{', '}']) => {
                return Err(format!(
                    "has {t:?}: `{{principal}}` and `{{tenant}}` must each be a whole path \
                     component, like \"users/{{tenant}}/{{principal}}\""
                ))
            }
            _ => None,
        };
        match (part, parts.is_empty()) {
            (Some(p), _) => parts.push(p),
            (None, true) => root.push(c),
            (None, false) => {
                let Component::Normal(name) = c else {
                    return Err("has '.' or '..' after a placeholder; remove it".into());
                };
                let name = name.to_string_lossy().into_owned();
                check_caller_name(&name).map_err(|e| e.to_string())?;
                parts.push(PathPart::Literal(name));
            }
        }
    }
    Ok((root, parts))
}

/// A writable grant may not contain or equal another grant's directory.
fn check_overlaps(sites: &[Site]) -> Result<(), RegistryError> {
    for w in sites.iter().filter(|s| s.writable) {
        if let Some(other) = sites
            .iter()
            .find(|o| o.key != w.key && o.dir.starts_with(&w.dir))
        {
            return Err(RegistryError::GrantOverlap {
                writable: w.key.clone(),
                writable_dir: w.dir.clone(),
                other: other.key.clone(),
                other_dir: other.dir.clone(),
            });
        }
    }
    Ok(())
}

/// No grant may contain or lie inside a host file.
fn check_host_files(
    files: &[(&'static str, PathBuf)],
    sites: &[Site],
) -> Result<(), RegistryError> {
    for s in sites {
        for (what, file) in files {
            if file.starts_with(&s.dir) || s.dir.starts_with(file) {
                return Err(RegistryError::GrantOverHostFile {
                    key: s.key.clone(),
                    dir: s.dir.clone(),
                    what,
                    file: file.clone(),
                });
            }
        }
    }
    Ok(())
}

/// `p` made absolute with its longest existing ancestor's symlinks resolved, the rest appended
/// without `.`/`..`.
pub fn real_path(p: &Path) -> PathBuf {
    let absolute = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let mut rest = Vec::new();
    let mut at = absolute.as_path();
    loop {
        if let Ok(real) = at.canonicalize() {
            let mut out = real;
            for c in rest.iter().rev() {
                match c {
                    Component::ParentDir => {
                        out.pop();
                    }
                    Component::Normal(n) => out.push(n),
                    _ => {}
                }
            }
            return out;
        }
        match (at.parent(), at.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                at = parent;
            }
            _ => return absolute.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Placeholders are whole components; the fixed part ends at the first one.
    #[test]
    fn templates_split_at_the_first_placeholder() {
        let (root, parts) =
            split_template(Path::new("/srv/users/{tenant}/{principal}/notes")).unwrap();
        assert_eq!(root, Path::new("/srv/users"));
        assert_eq!(
            parts,
            vec![
                PathPart::Tenant,
                PathPart::Principal,
                PathPart::Literal("notes".into())
            ]
        );
        assert!(split_template(Path::new("/srv/u-{principal}")).is_err());
        assert!(split_template(Path::new("/srv/{principal}/../x")).is_err());
        let (root, parts) = split_template(Path::new("/srv/plain")).unwrap();
        assert_eq!((root.as_path(), parts.len()), (Path::new("/srv/plain"), 0));
    }

    /// A path that does not exist yet resolves through its existing ancestor's real location.
    #[test]
    fn real_path_resolves_the_existing_ancestor() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("real")).unwrap();
        std::os::unix::fs::symlink(t.path().join("real"), t.path().join("link")).unwrap();
        let got = real_path(&t.path().join("link/not-yet/../data"));
        assert_eq!(got, t.path().canonicalize().unwrap().join("real/data"));
    }
}
