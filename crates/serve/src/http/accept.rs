//! Accepting connections: each made ready to serve, and the wait before the next accept
//! when the host has run out of descriptors or kernel memory.

use std::time::Duration;

use tokio::net::TcpStream;

/// An accepted connection made ready to serve: `TCP_NODELAY`, because a response is several
/// writes (SSE headers, the event, the end of the chunked body) and with Nagle's algorithm each
/// after the first waits for the client's delayed ACK — about 40 ms per request on a kept-alive
/// connection.
pub(super) fn accepted(stream: TcpStream) -> std::io::Result<TcpStream> {
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Whether an accept error means the host is out of a resource (descriptors, kernel memory)
/// rather than that one connection failed.
pub(super) fn is_resource_exhaustion(e: &std::io::Error) -> bool {
    use rustix::io::Errno;
    let Some(raw) = e.raw_os_error() else {
        return false;
    };
    [Errno::MFILE, Errno::NFILE, Errno::NOBUFS, Errno::NOMEM]
        .iter()
        .any(|errno| errno.raw_os_error() == raw)
}

/// The first wait after an accept failed for want of resources.
pub const ACCEPT_BACKOFF_FIRST: Duration = Duration::from_millis(5);
/// The longest wait between accepts while resources stay exhausted.
pub const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Waits between accepts while the host is out of descriptors: doubling from
/// [`ACCEPT_BACKOFF_FIRST`] to [`ACCEPT_BACKOFF_MAX`], back to the first after an accept works.
#[derive(Debug, Default)]
pub(super) struct AcceptBackoff {
    failures: u32,
}

impl AcceptBackoff {
    pub(super) fn next_wait(&mut self) -> Duration {
        let wait = ACCEPT_BACKOFF_FIRST
            .saturating_mul(1 << self.failures.min(16))
            .min(ACCEPT_BACKOFF_MAX);
        self.failures = self.failures.saturating_add(1);
        wait
    }

    pub(super) fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits double from the first to the cap and start again after a success; only running
    /// out of descriptors or memory counts as exhaustion.
    #[test]
    fn accept_backoff_doubles_to_its_cap() {
        let mut b = AcceptBackoff::default();
        let waits: Vec<Duration> = (0..10).map(|_| b.next_wait()).collect();
        assert_eq!(waits[0], ACCEPT_BACKOFF_FIRST);
        assert_eq!(waits[1], ACCEPT_BACKOFF_FIRST * 2);
        assert!(waits.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(waits[9], ACCEPT_BACKOFF_MAX);
        b.reset();
        assert_eq!(b.next_wait(), ACCEPT_BACKOFF_FIRST);
        let emfile = std::io::Error::from_raw_os_error(rustix::io::Errno::MFILE.raw_os_error());
        assert!(is_resource_exhaustion(&emfile));
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(!is_resource_exhaustion(&reset));
    }

    /// Every connection the listener hands to hyper has Nagle's algorithm off.
    #[tokio::test]
    async fn accepted_connections_have_nodelay() {
        use tokio::net::TcpListener;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(TcpStream::connect(addr));
        let (stream, _) = listener.accept().await.unwrap();
        assert!(!stream.nodelay().unwrap(), "the default is Nagle on");
        assert!(accepted(stream).unwrap().nodelay().unwrap());
        drop(client.await.unwrap().unwrap());
    }
}
