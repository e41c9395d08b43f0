//! What a call's handles cost the host, bounded per call.
//!
//! A guest's linear memory is counted by the limiter; what its handles make the host hold is
//! not. Every host resource of a call (descriptor, stream, pollable, socket, HTTP request, body
//! or fields) is an entry of the call's `ResourceTable`, and each kind's host-side cost is
//! bounded here:
//! - the number of entries ([`MAX_HOST_HANDLES_PER_CALL`], lowered by the descriptor limit, see
//!   `descriptors.rs`): one entry holds at most one host file descriptor;
//! - directory listings, which wasmtime-wasi reads whole into host memory when the stream is
//!   opened: their bytes ([`MAX_LISTING_BYTES_PER_CALL`]), counted before the listing is read;
//! - outgoing HTTP bodies ([`HTTP_BODY_CHUNK_BYTES`] per write, two writes buffered), header
//!   fields ([`HTTP_FIELDS_BYTES`]) and requests in flight ([`MAX_HTTP_REQUESTS_IN_FLIGHT`]),
//!   set in `network.rs`;
//! - file and socket streams: wasmtime-wasi buffers at most 64 KiB per stream.
//!
//! A call past the handle or the listing bound traps, and the executor reports
//! `host_resources_exceeded`.

use std::collections::HashMap;
use std::os::fd::AsFd;

use wasmtime::component::{Linker, Resource, ResourceTableError};
use wasmtime::StoreContextMut;
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{ErrorCode, HostDescriptor};
use wasmtime_wasi::p2::ReaddirIterator;

use super::shadow::{answer, HostBudgetError, FILESYSTEM_TYPES};
use super::write_budget::WriteBudget;
use super::CallState;

/// The most host resources (table entries) one call may hold at once. Each holds at most one
/// host file descriptor and a bounded amount of host memory (64 KiB of stream buffer, 32 KiB
/// of body buffer, 16 KiB of fields), so this bounds both. Real tools hold a few dozen: a
/// `wasi:http` request in flight takes about ten.
pub const MAX_HOST_HANDLES_PER_CALL: usize = 256;

/// The most bytes of directory listings one call may hold at once (each entry counted as its
/// name plus [`LISTING_ENTRY_BYTES`]): about 100,000 entries of 20-byte names.
pub const MAX_LISTING_BYTES_PER_CALL: u64 = 8 << 20;

/// What the host keeps per listed entry besides its name: the entry, its place in the listing
/// and the name's allocation.
pub const LISTING_ENTRY_BYTES: u64 = 64;

/// The largest write into an outgoing HTTP body; the host buffers at most two of them per body
/// (wasmtime-wasi-http's default is 1 MiB each).
pub const HTTP_BODY_CHUNK_BYTES: usize = 16 << 10;

/// The most bytes of header names and values one `wasi:http` fields value may hold
/// (wasmtime-wasi-http's default is 128 KiB).
pub const HTTP_FIELDS_BYTES: usize = 16 << 10;

/// The most outgoing HTTP requests one call may have in flight (each a connection with its own
/// buffers and descriptor); the next is refused `connection-limit-reached`.
pub const MAX_HTTP_REQUESTS_IN_FLIGHT: usize = 8;

/// The host budget of one call: the listings it holds, by table entry, and what it may still
/// write.
#[derive(Debug)]
pub struct HostBudget {
    /// Live listing streams (by table index) and what each was charged.
    listings: HashMap<u32, u64>,
    /// What is left of the call's write budget (`write_budget.rs`).
    pub(super) writes: WriteBudget,
}

impl HostBudget {
    /// A budget that lets the call write `write_bytes` into its writable grants.
    pub fn new(write_bytes: u64) -> HostBudget {
        HostBudget {
            listings: HashMap::new(),
            writes: WriteBudget::new(write_bytes),
        }
    }

    /// Forget listings whose streams the guest dropped (their table entry is gone or reused).
    fn prune(&mut self, table: &mut wasmtime::component::ResourceTable) {
        self.listings.retain(|rep, _| {
            table
                .get_any_mut(*rep)
                .is_ok_and(|entry| entry.is::<ReaddirIterator>())
        });
    }

    /// Bytes left for listings once dropped streams are forgotten.
    fn listing_room(&mut self, table: &mut wasmtime::component::ResourceTable) -> u64 {
        self.prune(table);
        let held: u64 = self.listings.values().sum();
        MAX_LISTING_BYTES_PER_CALL.saturating_sub(held)
    }
}

/// The table error a full table raises, as the executor recognizes it.
pub fn is_table_full(e: &wasmtime::Error) -> bool {
    matches!(
        e.downcast_ref::<ResourceTableError>(),
        Some(ResourceTableError::Full)
    )
}

/// Replace `read-directory` in `linker` with one that charges the listing to the call's budget
/// before wasmtime-wasi reads it.
pub(super) fn charge_listings(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker.instance(FILESYSTEM_TYPES)?.func_wrap_async(
        "[method]descriptor.read-directory",
        |mut store: StoreContextMut<'_, CallState>, (fd,): (Resource<Descriptor>,)| {
            Box::new(async move { read_directory(&mut store, fd).await })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

type Listing = Result<Resource<ReaddirIterator>, ErrorCode>;

async fn read_directory(
    store: &mut StoreContextMut<'_, CallState>,
    fd: Resource<Descriptor>,
) -> wasmtime::Result<(Listing,)> {
    let state = store.data_mut();
    let dir = match state.table.get(&fd)? {
        Descriptor::Dir(d) => Some(d.dir.clone()),
        Descriptor::File(_) => None,
    };
    let mut cost = 0;
    if let Some(dir) = dir {
        let room = state.budget.listing_room(&mut state.table);
        let counted = tokio::task::spawn_blocking(move || listing_cost(&dir, room))
            .await
            .map_err(wasmtime::Error::new)?;
        cost = match counted {
            Ok(Some(cost)) => cost,
            Ok(None) => {
                return Err(wasmtime::Error::new(HostBudgetError::Listings(
                    MAX_LISTING_BYTES_PER_CALL,
                )))
            }
            Err(_) => return Ok((Err(ErrorCode::Io),)),
        };
    }
    let state = store.data_mut();
    let listed = HostDescriptor::read_directory(&mut state.filesystem(), fd).await;
    answer(listed.inspect(|stream| {
        state.budget.listings.insert(stream.rep(), cost);
    }))
}

/// What listing `dir` costs the host, or `None` once it passes `room` (counting stops there).
fn listing_cost(dir: &std::fs::File, room: u64) -> std::io::Result<Option<u64>> {
    use rustix::fs::{openat, Dir, Mode, OFlags};
    let fd = openat(
        dir.as_fd(),
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut cost: u64 = 0;
    for entry in Dir::read_from(&fd)? {
        let entry = entry?;
        cost += LISTING_ENTRY_BYTES + entry.file_name().to_bytes().len() as u64;
        if cost > room {
            return Ok(None);
        }
    }
    Ok(Some(cost))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listing is charged per entry, and counting stops as soon as the room is passed.
    #[test]
    fn listing_cost_counts_names_and_stops_at_the_room() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..10 {
            std::fs::write(dir.path().join(format!("f{i:03}")), b"").unwrap();
        }
        let handle = std::fs::File::open(dir.path()).unwrap();
        // Ten names of 4 bytes, plus `.` and `..`.
        let all =
            10 * (LISTING_ENTRY_BYTES + 4) + LISTING_ENTRY_BYTES + 1 + LISTING_ENTRY_BYTES + 2;
        assert_eq!(listing_cost(&handle, u64::MAX).unwrap(), Some(all));
        assert_eq!(listing_cost(&handle, all).unwrap(), Some(all));
        assert_eq!(listing_cost(&handle, all - 1).unwrap(), None);
    }
}
