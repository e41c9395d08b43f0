//! Benchmark tools: `add` (the floor), `echo-items` (JSON-heavy) and `fill` (memory).
wit_bindgen::generate!({
    path: ["../../wit", "wit"],
    world: "example:bench/bench",
    generate_all,
});

use exports::example::bench::tools::{Guest, Item};

struct Bench;

impl Guest for Bench {
    fn add(a: i64, b: i64) -> i64 {
        a.wrapping_add(b)
    }

    fn echo_items(items: Vec<Item>) -> Vec<Item> {
        items
            .into_iter()
            .map(|mut i| {
                i.score *= 2.0;
                i
            })
            .collect()
    }

    fn fill(bytes: u64) -> u64 {
        const PAGE: usize = 4096;
        let n = usize::try_from(bytes).unwrap_or(usize::MAX);
        let mut v: Vec<u8> = Vec::new();
        if v.try_reserve_exact(n).is_err() {
            return 0;
        }
        v.resize(n, 0);
        for i in (0..n).step_by(PAGE) {
            v[i] = 1;
        }
        std::hint::black_box(&v);
        n as u64
    }
}

export!(Bench);

/// The WIT this component was built from, embedded so the host can show its `///` docs.
#[link_section = "toolhost-wit"]
#[used]
static WIT: [u8; include_bytes!("../wit/world.wit").len()] = *include_bytes!("../wit/world.wit");
