//! The approval key file: 32 random bytes, owner-only (0600), created on first use.
//!
//! Creation is atomic: the bytes are written to a private temporary file that is then hard-linked
//! into place, so two hosts starting together agree on one key and nobody reads half a key. An
//! existing key readable by group or others is refused, like an SSH private key.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::Path;

use super::PolicyError;

/// Length of the approval key, in bytes.
pub const KEY_LEN: usize = 32;

fn key_error(path: &Path, message: impl Into<String>) -> PolicyError {
    PolicyError::KeyFile {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Read the key at `path`, creating it if it does not exist.
pub(crate) fn load_or_create(path: &Path) -> Result<[u8; KEY_LEN], PolicyError> {
    match read(path) {
        Ok(key) => return Ok(key),
        Err(ReadError::Missing) => {}
        Err(ReadError::Bad(e)) => return Err(e),
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    create_dir(dir).map_err(|e| {
        key_error(
            path,
            format!("cannot create its directory {}: {e}", dir.display()),
        )
    })?;
    let key =
        random_key().map_err(|e| key_error(path, format!("cannot draw random bytes: {e}")))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "approval.key".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    let written = write_private(&tmp, &key);
    let linked = written.and_then(|()| fs::hard_link(&tmp, path));
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(key),
        // Another process created it first: use theirs.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match read(path) {
            Ok(key) => Ok(key),
            Err(ReadError::Bad(e)) => Err(e),
            Err(ReadError::Missing) => Err(key_error(path, "vanished while being created")),
        },
        Err(e) => Err(key_error(
            path,
            format!("cannot create it: {e}; check that the directory is writable"),
        )),
    }
}

enum ReadError {
    Missing,
    Bad(PolicyError),
}

fn read(path: &Path) -> Result<[u8; KEY_LEN], ReadError> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(ReadError::Missing),
        Err(e) => {
            return Err(ReadError::Bad(key_error(
                path,
                format!("cannot open it: {e}"),
            )))
        }
    };
    let meta = file
        .metadata()
        .map_err(|e| ReadError::Bad(key_error(path, format!("cannot stat it: {e}"))))?;
    if !meta.is_file() {
        return Err(ReadError::Bad(key_error(
            path,
            "is not a regular file; point policy.approval.key_file at a file",
        )));
    }
    check_private(path, &meta).map_err(ReadError::Bad)?;
    let mut bytes = Vec::with_capacity(KEY_LEN + 1);
    (&mut file)
        .take(KEY_LEN as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ReadError::Bad(key_error(path, format!("cannot read it: {e}"))))?;
    <[u8; KEY_LEN]>::try_from(bytes.as_slice()).map_err(|_| {
        ReadError::Bad(key_error(
            path,
            format!(
                "holds {}{} bytes, not {KEY_LEN}; delete it and the host makes a new key \
                 (approval tokens already minted stop working)",
                bytes.len().min(KEY_LEN),
                if bytes.len() > KEY_LEN { "+" } else { "" },
            ),
        ))
    })
}

#[cfg(unix)]
fn check_private(path: &Path, meta: &fs::Metadata) -> Result<(), PolicyError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(key_error(
            path,
            format!(
                "has mode {mode:o}, readable beyond its owner; run `chmod 600 {}`",
                path.display()
            ),
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private(_path: &Path, _meta: &fs::Metadata) -> Result<(), PolicyError> {
    Ok(())
}

fn create_dir(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

fn write_private(path: &Path, key: &[u8]) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(key)?;
    file.sync_all()
}

/// 32 bytes from the operating system's CSPRNG.
fn random_key() -> io::Result<[u8; KEY_LEN]> {
    let mut key = [0u8; KEY_LEN];
    getrandom::fill(&mut key).map_err(|e| io::Error::other(format!("no OS randomness: {e}")))?;
    Ok(key)
}

/// 32 bytes from the operating system's CSPRNG (two v4 UUIDs: 244 random bits).
#[cfg(not(unix))]
fn random_key() -> io::Result<[u8; KEY_LEN]> {
    let mut key = [0u8; KEY_LEN];
    key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key file is created with mode 0600 in a new directory and reused on the next load.
    #[test]
    fn created_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/approval.key");
        let first = load_or_create(&path).unwrap();
        let second = load_or_create(&path).unwrap();
        assert_eq!(first, second);
        assert_ne!(first, [0u8; KEY_LEN]);
        assert_eq!(fs::read(&path).unwrap(), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(path.parent().unwrap()).unwrap().count(), 1);
        // Another file gets another key.
        assert_ne!(
            load_or_create(&dir.path().join("other.key")).unwrap(),
            first
        );
    }

    /// A key of the wrong size is refused with the fix.
    #[test]
    fn wrong_size_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("approval.key");
        write_private(&path, b"short").unwrap();
        let e = load_or_create(&path).unwrap_err().to_string();
        assert!(e.contains("5 bytes") && e.contains("delete it"), "{e}");
    }

    /// A key readable by group or others is refused.
    #[cfg(unix)]
    #[test]
    fn world_readable_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("approval.key");
        load_or_create(&path).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let e = load_or_create(&path).unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
    }
}
