//! `notifications/tools/list_changed`: the handshake-era sessions of this server, told when a
//! reload changes the tools. A 2026-07-28 client keeps no session; it lists again when its
//! listing's cache hint runs out.

use std::sync::Mutex;

use rmcp::service::Peer;
use rmcp::RoleServer;

/// The most sessions remembered at once; sessions whose transport closed are dropped first.
pub const MAX_LISTENERS: usize = 4096;

/// The sessions to tell.
#[derive(Default)]
pub struct Listeners(Mutex<Vec<Peer<RoleServer>>>);

impl Listeners {
    /// Remember a session that completed `initialize`.
    pub fn add(&self, peer: Peer<RoleServer>) {
        let mut peers = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        peers.retain(|p| !p.is_transport_closed());
        if peers.len() >= MAX_LISTENERS {
            peers.remove(0);
        }
        peers.push(peer);
    }

    /// Tell every open session that the tools changed; how many were told.
    pub async fn tools_changed(&self) -> usize {
        let peers: Vec<Peer<RoleServer>> = {
            let mut peers = self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            peers.retain(|p| !p.is_transport_closed());
            peers.clone()
        };
        let mut told = 0;
        for p in peers {
            if p.notify_tool_list_changed().await.is_ok() {
                told += 1;
            }
        }
        told
    }
}
