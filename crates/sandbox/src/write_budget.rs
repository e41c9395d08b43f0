//! Bytes a call may write into its writable grants: [`Limits::write_bytes`] per call, counted
//! where wasmtime-wasi writes, not from the disk's free space, so the call that writes too much
//! is the one stopped and no other caller is blamed.
//!
//! Charged before the host acts: every byte of a `descriptor.write`, of a file's output stream
//! (`write`, `blocking-write-and-flush`, zeroes, and what `splice` moves into it), the growth a
//! `set-size` asks for, and [`ENTRY_BYTES`] for each entry a call may create (`open-at` with
//! `create`, `create-directory-at`, `symlink-at`, `link-at`). A charge past the budget traps
//! before anything is written, and the executor reports `host_resources_exceeded`. Writes that
//! overwrite count like writes that grow: the budget bounds what a call does, not what it keeps.
//!
//! [`Limits::write_bytes`]: super::Limits::write_bytes

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use wasmtime::component::{Linker, Resource};
use wasmtime::StoreContextMut;
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, ErrorCode, HostDescriptor, OpenFlags, PathFlags,
};
use wasmtime_wasi::p2::{DynOutputStream, OutputStream, Pollable, StreamError, StreamResult};

use super::shadow::{answer, HostBudgetError, FILESYSTEM_TYPES};
use super::CallState;

/// What creating one directory entry (file, directory, link) is charged: one file-system block,
/// about what the entry and its inode take. Bounds the entries a call can make, which the free
/// space alone does not (an empty file takes an inode, not bytes).
pub const ENTRY_BYTES: u64 = 4096;

/// What is left of one call's write budget, shared with the call's file output streams.
#[derive(Clone, Debug)]
pub struct WriteBudget {
    left: Arc<AtomicU64>,
    limit: u64,
}

impl WriteBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> WriteBudget {
        WriteBudget {
            left: Arc::new(AtomicU64::new(limit)),
            limit,
        }
    }

    /// Take `bytes` from the budget, or take nothing and say it is spent.
    pub fn charge(&self, bytes: u64) -> Result<(), HostBudgetError> {
        self.left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(bytes)
            })
            .map(|_| ())
            .map_err(|_| HostBudgetError::Writes(self.limit))
    }

    fn charge_stream(&self, bytes: usize) -> StreamResult<()> {
        self.charge(bytes as u64)
            .map_err(|over| StreamError::Trap(wasmtime::Error::new(over)))
    }
}

/// A file's output stream that charges every byte to the call's budget before passing it on.
struct Charged {
    inner: DynOutputStream,
    budget: WriteBudget,
}

#[wasmtime_wasi::async_trait]
impl Pollable for Charged {
    async fn ready(&mut self) {
        self.inner.ready().await
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for Charged {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.budget.charge_stream(bytes.len())?;
        self.inner.write(bytes)
    }

    fn flush(&mut self) -> StreamResult<()> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        self.inner.check_write()
    }

    async fn blocking_write_and_flush(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.budget.charge_stream(bytes.len())?;
        self.inner.blocking_write_and_flush(bytes).await
    }

    fn write_zeroes(&mut self, nelem: usize) -> StreamResult<()> {
        self.budget.charge_stream(nelem)?;
        self.inner.write_zeroes(nelem)
    }

    async fn write_ready(&mut self) -> StreamResult<usize> {
        self.inner.write_ready().await
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}

type Answer<T> = wasmtime::Result<(Result<T, ErrorCode>,)>;

/// Charge `bytes` to the call of `store`, or trap.
fn charge(store: &mut StoreContextMut<'_, CallState>, bytes: u64) -> wasmtime::Result<()> {
    store
        .data()
        .budget
        .writes
        .charge(bytes)
        .map_err(wasmtime::Error::new)
}

/// Replace the write paths of `wasi:filesystem` in `linker` with ones that charge the call's
/// write budget first.
pub(super) fn charge_writes(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut types = linker.instance(FILESYSTEM_TYPES)?;
    types.func_wrap_async(
        "[method]descriptor.write",
        |mut store: StoreContextMut<'_, CallState>,
         (fd, buf, offset): (Resource<Descriptor>, Vec<u8>, u64)| {
            Box::new(async move {
                charge(&mut store, buf.len() as u64)?;
                answer(
                    HostDescriptor::write(&mut store.data_mut().filesystem(), fd, buf, offset)
                        .await,
                )
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.write-via-stream",
        |mut store: StoreContextMut<'_, CallState>, (fd, offset): (Resource<Descriptor>, u64)| {
            Box::new(async move {
                let opened = HostDescriptor::write_via_stream(
                    &mut store.data_mut().filesystem(),
                    fd,
                    offset,
                );
                charged_stream(&mut store, opened)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.append-via-stream",
        |mut store: StoreContextMut<'_, CallState>, (fd,): (Resource<Descriptor>,)| {
            Box::new(async move {
                let opened =
                    HostDescriptor::append_via_stream(&mut store.data_mut().filesystem(), fd);
                charged_stream(&mut store, opened)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.set-size",
        |mut store: StoreContextMut<'_, CallState>, (fd, size): (Resource<Descriptor>, u64)| {
            Box::new(async move {
                let file = match store.data_mut().table.get(&fd)? {
                    Descriptor::File(f) => Some(f.file.clone()),
                    Descriptor::Dir(_) => None,
                };
                if let Some(file) = file {
                    let len = tokio::task::spawn_blocking(move || file.metadata().map(|m| m.len()))
                        .await
                        .map_err(wasmtime::Error::new)?;
                    let Ok(len) = len else {
                        return Ok((Err(ErrorCode::Io),));
                    };
                    charge(&mut store, size.saturating_sub(len))?;
                }
                answer(HostDescriptor::set_size(&mut store.data_mut().filesystem(), fd, size).await)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store: StoreContextMut<'_, CallState>,
         (fd, path_flags, path, oflags, flags): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )| {
            Box::new(async move {
                if oflags.contains(OpenFlags::CREATE) {
                    charge(&mut store, ENTRY_BYTES)?;
                }
                let mut fs = store.data_mut().filesystem();
                answer(HostDescriptor::open_at(&mut fs, fd, path_flags, path, oflags, flags).await)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.create-directory-at",
        |mut store: StoreContextMut<'_, CallState>, (fd, path): (Resource<Descriptor>, String)| {
            Box::new(async move {
                charge(&mut store, ENTRY_BYTES)?;
                let mut fs = store.data_mut().filesystem();
                answer(HostDescriptor::create_directory_at(&mut fs, fd, path).await)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.symlink-at",
        |mut store: StoreContextMut<'_, CallState>,
         (fd, target, path): (Resource<Descriptor>, String, String)| {
            Box::new(async move {
                charge(&mut store, ENTRY_BYTES)?;
                let mut fs = store.data_mut().filesystem();
                answer(HostDescriptor::symlink_at(&mut fs, fd, target, path).await)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.link-at",
        |mut store: StoreContextMut<'_, CallState>,
         (fd, old_flags, old_path, new_fd, new_path): (
            Resource<Descriptor>,
            PathFlags,
            String,
            Resource<Descriptor>,
            String,
        )| {
            Box::new(async move {
                charge(&mut store, ENTRY_BYTES)?;
                let mut fs = store.data_mut().filesystem();
                answer(
                    HostDescriptor::link_at(&mut fs, fd, old_flags, old_path, new_fd, new_path)
                        .await,
                )
            })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// The stream wasmtime-wasi opened, put back in the table behind the call's budget.
fn charged_stream(
    store: &mut StoreContextMut<'_, CallState>,
    opened: Result<Resource<DynOutputStream>, wasmtime_wasi::p2::FsError>,
) -> Answer<Resource<DynOutputStream>> {
    let opened = match opened {
        Ok(s) => s,
        Err(e) => return answer(Err(e)),
    };
    let state = store.data_mut();
    let inner = state.table.delete(opened)?;
    let charged: DynOutputStream = Box::new(Charged {
        inner,
        budget: state.budget.writes.clone(),
    });
    Ok((Ok(state.table.push(charged)?),))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A charge takes from what is left, a charge past it takes nothing, and every clone
    /// shares one budget.
    #[test]
    fn charges_share_one_budget_and_stop_at_it() {
        let budget = WriteBudget::new(10);
        let stream_side = budget.clone();
        budget.charge(4).unwrap();
        stream_side.charge(6).unwrap();
        assert_eq!(budget.charge(1), Err(HostBudgetError::Writes(10)));
        let budget = WriteBudget::new(10);
        assert_eq!(budget.charge(11), Err(HostBudgetError::Writes(10)));
        budget.charge(10).unwrap();
    }
}
