//! The network allowlist: `host:port` entries, the one list raw sockets and `wasi:http` are
//! both checked against (`network.rs`), and a secret's hosts (`secrets.rs`).

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use wasmtime_wasi::sockets::SocketAddrUse;

use serde::Deserialize;
use std::fmt;

/// A `host:port` network allowlist entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(try_from = "String")]
pub struct HostPort {
    /// Lower-cased host name or IP literal (IPv6 without brackets).
    pub host: String,
    pub port: u16,
}

impl TryFrom<String> for HostPort {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let hint = || {
            format!("network entry {s:?} must be \"host:port\", like \"127.0.0.1:8080\", \"example.com:443\" or \"[::1]:80\"")
        };
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (h, p) = rest.split_once("]:").ok_or_else(hint)?;
            h.parse::<std::net::Ipv6Addr>().map_err(|_| hint())?;
            (h.to_string(), p)
        } else {
            let (h, p) = s.rsplit_once(':').ok_or_else(hint)?;
            let valid = !h.is_empty()
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
            if !valid {
                return Err(hint());
            }
            (h.to_ascii_lowercase(), p)
        };
        let port: u16 = port.parse().map_err(|_| hint())?;
        if port == 0 {
            return Err(hint());
        }
        Ok(HostPort { host, port })
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// The `host:port` entries a call may reach. Empty means no network at all.
#[derive(Debug, Clone, Default)]
pub struct Allowlist {
    entries: Arc<Vec<HostPort>>,
}

impl Allowlist {
    pub fn new(entries: Vec<HostPort>) -> Self {
        Allowlist {
            entries: Arc::new(entries),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, in config order.
    pub fn entries(&self) -> &[HostPort] {
        &self.entries
    }

    /// Whether `entry` is on the list (by [`Allowlist::allows_authority`]).
    pub fn allows(&self, entry: &HostPort) -> bool {
        self.allows_authority(&entry.host, entry.port)
    }

    /// Whether a request to `host:port` (a URL's authority) is allowed: the host must match an
    /// entry exactly (names case-insensitively, IP literals by value).
    pub fn allows_authority(&self, host: &str, port: u16) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let ip = host.parse::<IpAddr>().ok();
        self.entries.iter().any(|e| {
            e.port == port
                && match (ip, e.host.parse::<IpAddr>().ok()) {
                    (Some(a), Some(b)) => a == b,
                    (None, None) => e.host.eq_ignore_ascii_case(host),
                    _ => false,
                }
        })
    }

    /// Whether a raw socket may connect to `addr`: an IP entry must match it, or a name entry
    /// must resolve to it.
    pub async fn allows_socket(&self, addr: SocketAddr) -> bool {
        for e in self.entries.iter().filter(|e| e.port == addr.port()) {
            match e.host.parse::<IpAddr>() {
                Ok(ip) if ip == addr.ip() => return true,
                Ok(_) => {}
                Err(_) => {
                    if let Ok(mut addrs) = tokio::net::lookup_host((e.host.as_str(), e.port)).await
                    {
                        if addrs.any(|a| a.ip() == addr.ip()) {
                            return true;
                        }
                    }
                }
            }
        }
        false
    }

    /// The socket address check for `WasiCtxBuilder::socket_addr_check`: connects only to the
    /// allowlist; binds only the implicit wildcard bind a connect performs; nothing else.
    pub fn socket_check(
        &self,
    ) -> impl Fn(SocketAddr, SocketAddrUse) -> Pin<Box<dyn Future<Output = bool> + Send + Sync>>
           + Send
           + Sync
           + 'static {
        let list = self.clone();
        move |addr, usage| {
            let list = list.clone();
            Box::pin(async move {
                match usage {
                    SocketAddrUse::TcpConnect => list.allows_socket(addr).await,
                    SocketAddrUse::TcpBind => addr.ip().is_unspecified() && addr.port() == 0,
                    _ => false,
                }
            })
        }
    }
}
