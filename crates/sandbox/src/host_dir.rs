//! Granted host directories as capabilities.
//!
//! A grant's directory is opened **once**, at load, by walking its path one component at a time
//! from `/` with `O_NOFOLLOW`: a symbolic link anywhere in the path is refused, so what is
//! opened is the directory the operator named and nothing a guest (or anyone) put in its place.
//! The open handle is kept for the life of the host. Every call preopens that same directory
//! again through `/proc/self/fd/N` — a name of the open handle, not of a path — so renaming the
//! directory, or replacing it with a symlink to `/`, changes nothing for later calls. Nothing on
//! the per-call path resolves a host path string.
//!
//! A per-caller directory (`{principal}`, `{tenant}` in the configured path) is opened at call
//! time *beneath* the handle of its fixed prefix, one component at a time, again refusing
//! symlinks, from names that are checked to be single plain path components.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

/// Why a granted directory could not be opened. Operator-facing.
#[derive(Debug, thiserror::Error)]
pub enum HostDirError {
    #[error("{component} is a symbolic link; grants never follow links: name the real directory")]
    Symlink { component: PathBuf },
    #[error("{component} is not a directory")]
    NotADirectory { component: PathBuf },
    #[error("cannot open {component}: {source}")]
    Open {
        component: PathBuf,
        source: io::Error,
    },
    #[error("cannot find the current directory: {0}")]
    CurrentDir(io::Error),
    #[error("the host needs /proc (Linux procfs) to hand a granted directory to a call: {0}")]
    NoProcFs(io::Error),
    #[error("{name:?} cannot name a per-caller directory: use 1 to {MAX_CALLER_COMPONENT_BYTES} of A-Z a-z 0-9 . _ - @ +, not starting with '.'")]
    BadCallerName { name: String },
}

/// The longest principal or tenant name that may become a directory name.
pub const MAX_CALLER_COMPONENT_BYTES: usize = 128;

/// A directory opened once, by handle. The handle is an `O_PATH` descriptor: it grants nothing
/// by itself (no reads), it only names the directory.
#[derive(Debug)]
pub struct HostDir {
    fd: OwnedFd,
    /// The absolute path it was opened by, free of symlinks and `.`/`..` (for messages and
    /// the load-time overlap checks; never opened again).
    path: PathBuf,
}

impl HostDir {
    /// Open `path` (relative paths against the current directory) without following a symlink
    /// in any component, and check that calls can be handed this directory through procfs.
    pub fn open(path: &Path) -> Result<HostDir, HostDirError> {
        let absolute = if path.is_absolute() {
            path.to_path_buf()
        } else {
            std::env::current_dir()
                .map_err(HostDirError::CurrentDir)?
                .join(path)
        };
        let mut here = PathBuf::from("/");
        let mut fd = open_step(rustix::fs::CWD, Path::new("/"), &here)?;
        for c in absolute.components() {
            match c {
                Component::RootDir | Component::CurDir | Component::Prefix(_) => continue,
                Component::ParentDir => {
                    here.pop();
                    fd = open_step(&fd, Path::new(".."), &here)?;
                }
                Component::Normal(name) => {
                    here.push(name);
                    fd = open_step(&fd, Path::new(name), &here)?;
                }
            }
        }
        let dir = HostDir { fd, path: here };
        dir.check_procfs()?;
        Ok(dir)
    }

    /// The symlink-free absolute path this directory was opened by.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes an unprivileged writer may still write on this directory's file system.
    pub fn free_bytes(&self) -> std::io::Result<u64> {
        let st = rustix::fs::fstatvfs(&self.fd)?;
        Ok(st.f_bavail.saturating_mul(st.f_frsize))
    }

    /// The path that names this open handle (and only it) for the life of the process.
    pub fn proc_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    /// The directory `name` directly beneath this one, created (mode 0700) when missing.
    /// `name` must be one plain component ([`check_caller_name`]); a symlink is refused.
    pub fn child(&self, name: &str) -> Result<HostDir, HostDirError> {
        check_caller_name(name)?;
        let path = self.path.join(name);
        match rustix::fs::mkdirat(&self.fd, name, Mode::RWXU) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => {
                return Err(HostDirError::Open {
                    component: path,
                    source: e.into(),
                })
            }
        }
        let fd = open_step(&self.fd, Path::new(name), &path)?;
        Ok(HostDir { fd, path })
    }

    /// `/proc/self/fd/N` must lead to this very directory, or calls could not be given it.
    fn check_procfs(&self) -> Result<(), HostDirError> {
        let via_proc = std::fs::metadata(self.proc_path()).map_err(HostDirError::NoProcFs)?;
        let own = rustix::fs::fstat(&self.fd).map_err(|e| HostDirError::NoProcFs(e.into()))?;
        use std::os::unix::fs::MetadataExt;
        if via_proc.dev() != own.st_dev || via_proc.ino() != own.st_ino {
            return Err(HostDirError::NoProcFs(io::Error::other(
                "/proc/self/fd does not name this process's descriptors",
            )));
        }
        Ok(())
    }
}

/// Open one component beneath `at` as an `O_PATH` handle, refusing a symlink (with `O_PATH`,
/// `O_NOFOLLOW` opens the link itself, which `fstat` then reveals) and anything not a directory.
fn open_step(at: impl AsFd, name: &Path, shown: &Path) -> Result<OwnedFd, HostDirError> {
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd =
        rustix::fs::openat(at, name, flags, Mode::empty()).map_err(|e| HostDirError::Open {
            component: shown.to_path_buf(),
            source: e.into(),
        })?;
    let st = rustix::fs::fstat(&fd).map_err(|e| HostDirError::Open {
        component: shown.to_path_buf(),
        source: e.into(),
    })?;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => Ok(fd),
        FileType::Symlink => Err(HostDirError::Symlink {
            component: shown.to_path_buf(),
        }),
        _ => Err(HostDirError::NotADirectory {
            component: shown.to_path_buf(),
        }),
    }
}

/// A principal or tenant usable as one directory name: 1–128 bytes of `A-Z a-z 0-9 . _ - @ +`,
/// not starting with `.` (so never `.`, `..` or a hidden name), no `/`, no NUL.
pub fn check_caller_name(name: &str) -> Result<(), HostDirError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_CALLER_COMPONENT_BYTES
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'@' | b'+'));
    if ok {
        Ok(())
    } else {
        Err(HostDirError::BadCallerName {
            name: name.chars().take(MAX_CALLER_COMPONENT_BYTES).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A symlink in the middle or at the end of a grant path is refused, naming the link.
    #[test]
    fn symlinks_anywhere_in_the_path_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("real");
        std::fs::create_dir_all(real.join("inner")).unwrap();
        std::os::unix::fs::symlink(&real, t.path().join("link")).unwrap();
        let err = HostDir::open(&t.path().join("link/inner")).unwrap_err();
        assert!(
            matches!(&err, HostDirError::Symlink { component } if component.ends_with("link")),
            "{err}"
        );
        let err = HostDir::open(&t.path().join("link")).unwrap_err();
        assert!(matches!(err, HostDirError::Symlink { .. }), "{err}");
        let ok = HostDir::open(&real.join("inner/../inner")).unwrap();
        assert_eq!(
            ok.path(),
            t.path().join("real/inner").canonicalize().unwrap()
        );
    }

    /// Once open, the handle keeps naming the same directory after the path is renamed and
    /// replaced with a symlink to `/`.
    #[test]
    fn the_handle_survives_a_swap_of_its_path() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("grant");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("mine.txt"), "mine").unwrap();
        let held = HostDir::open(&dir).unwrap();
        std::fs::rename(&dir, t.path().join("moved")).unwrap();
        std::os::unix::fs::symlink("/", &dir).unwrap();
        let via = held.proc_path();
        assert_eq!(
            std::fs::read_to_string(via.join("mine.txt")).unwrap(),
            "mine"
        );
        assert!(!via.join("etc").exists());
    }

    /// Caller names that are not one plain component are refused; children are created once.
    #[test]
    fn caller_names_are_single_plain_components() {
        for bad in ["", ".", "..", ".hidden", "a/b", "a\0b", "../x", "é"] {
            assert!(check_caller_name(bad).is_err(), "{bad:?}");
        }
        let long = "a".repeat(MAX_CALLER_COMPONENT_BYTES + 1);
        assert!(check_caller_name(&long).is_err());
        let t = tempfile::tempdir().unwrap();
        let root = HostDir::open(t.path()).unwrap();
        let alice = root.child("alice@acme.example").unwrap();
        assert!(t.path().join("alice@acme.example").is_dir());
        assert_eq!(alice.path(), root.path().join("alice@acme.example"));
        std::os::unix::fs::symlink("/", t.path().join("mallory")).unwrap();
        assert!(matches!(
            root.child("mallory").unwrap_err(),
            HostDirError::Symlink { .. }
        ));
    }
}
