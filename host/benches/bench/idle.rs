//! Calls made after the thread slept, as a server's calls come (`*_after_idle` figures).

use std::time::Instant;

use crate::stats::micros;

/// How long the thread sleeps before each call of the `*_after_idle` figures: longer than a
/// core takes to go idle, shorter than a client's think time.
pub const IDLE_US: u64 = 300;

/// Per-call microseconds of `n` calls of `one`, each made after the thread slept [`IDLE_US`].
pub async fn after_idle<F, Fut>(n: usize, mut one: F) -> Vec<f64>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        idle(IDLE_US, false);
        let t = Instant::now();
        one(i).await;
        v.push(micros(t.elapsed()));
    }
    v
}

/// Wait `micros` between calls: spinning (the core stays busy) or asleep.
pub fn idle(micros: u64, spin: bool) {
    let d = std::time::Duration::from_micros(micros);
    if spin {
        let t = Instant::now();
        while t.elapsed() < d {
            std::hint::spin_loop();
        }
    } else if micros > 0 {
        std::thread::sleep(d);
    }
}
