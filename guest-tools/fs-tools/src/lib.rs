//! File tools working inside the preopened `/workspace` directory.
wit_bindgen::generate!({
    path: ["../../wit", "wit"],
    world: "example:fs-tools/fs-tools",
    generate_all,
});

use exports::example::fs_tools::tools::{Entry, EntryKind, Guest, WriteReport};
use std::fs;
use std::io::{self, ErrorKind, Read, Write};
use std::path::PathBuf;

/// The directory relative paths are resolved in.
const WORKSPACE: &str = "/workspace";
/// The largest file `read-text` returns.
const MAX_READ: u64 = 1024 * 1024;

struct FsTools;

/// Resolve a path as the tools document: relative paths live under `/workspace`.
fn resolve(path: &str) -> PathBuf {
    if path.starts_with('/') {
        PathBuf::from(path)
    } else if path.is_empty() || path == "." {
        PathBuf::from(WORKSPACE)
    } else {
        PathBuf::from(WORKSPACE).join(path)
    }
}

/// A short, host-detail-free description of an I/O error, naming the path as the caller gave it.
fn describe(err: &io::Error, path: &str) -> String {
    let reason = match err.kind() {
        ErrorKind::NotFound => "not found",
        ErrorKind::PermissionDenied => "permission denied",
        ErrorKind::AlreadyExists => "already exists",
        ErrorKind::IsADirectory => "is a directory",
        ErrorKind::NotADirectory => "not a directory",
        ErrorKind::ReadOnlyFilesystem => "permission denied",
        ErrorKind::InvalidInput | ErrorKind::InvalidFilename => "invalid path",
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded => "no space left",
        ErrorKind::FileTooLarge => "too large",
        ErrorKind::Unsupported => "not supported",
        _ => "I/O error",
    };
    format!("{reason}: {path}")
}

impl Guest for FsTools {
    fn read_text(path: String) -> Result<String, String> {
        let full = resolve(&path);
        let file = fs::File::open(&full).map_err(|e| describe(&e, &path))?;
        let meta = file.metadata().map_err(|e| describe(&e, &path))?;
        if meta.is_dir() {
            return Err(format!("is a directory: {path}"));
        }
        if meta.len() > MAX_READ {
            return Err(format!(
                "too large: {path} ({} bytes, limit {MAX_READ})",
                meta.len()
            ));
        }
        // The size can change between the check and the read: never read past the limit.
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(MAX_READ + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| describe(&e, &path))?;
        if bytes.len() as u64 > MAX_READ {
            return Err(format!("too large: {path} (over {MAX_READ} bytes)"));
        }
        String::from_utf8(bytes).map_err(|e| {
            format!(
                "not UTF-8 text: {path} (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            )
        })
    }

    fn list_dir(path: String) -> Result<Vec<Entry>, String> {
        let full = resolve(&path);
        let mut entries = Vec::new();
        for item in fs::read_dir(&full).map_err(|e| describe(&e, &path))? {
            let item = item.map_err(|e| describe(&e, &path))?;
            let name = item.file_name().to_string_lossy().into_owned();
            // `DirEntry::metadata` does not follow symlinks.
            let (kind, size) = match item.metadata() {
                Ok(meta) => {
                    let ft = meta.file_type();
                    let kind = if ft.is_symlink() {
                        EntryKind::Symlink
                    } else if ft.is_dir() {
                        EntryKind::Directory
                    } else if ft.is_file() {
                        EntryKind::File
                    } else {
                        EntryKind::Other
                    };
                    (kind, meta.len())
                }
                Err(_) => (EntryKind::Other, 0),
            };
            entries.push(Entry { name, kind, size });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    fn write_text(path: String, content: String) -> Result<WriteReport, String> {
        let full = resolve(&path);
        // Try to create first so `created` is exact even if the file appears concurrently.
        let (mut file, created) = match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&full)
        {
            Ok(file) => (file, true),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                let file = fs::OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(&full)
                    .map_err(|e| describe(&e, &path))?;
                (file, false)
            }
            Err(e) => return Err(describe(&e, &path)),
        };
        file.write_all(content.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|e| describe(&e, &path))?;
        Ok(WriteReport {
            created,
            bytes_written: content.len() as u64,
        })
    }
}

export!(FsTools);

/// The WIT this component was built from, embedded so the host can show its `///` docs to models.
#[link_section = "toolhost-wit"]
#[used]
static WIT: [u8; include_bytes!("../wit/world.wit").len()] = *include_bytes!("../wit/world.wit");
