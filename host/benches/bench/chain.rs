//! What the ledger's hash chain costs one call: the ledger's work for a read call (2 commits,
//! as the pipeline commits it) on a ledger with its chain and on one whose chain triggers are
//! off, in alternating rounds of one run — on SQLite, and on PostgreSQL when a server is named.

use std::path::Path;

use toolhost::ToolResult;
use toolhost_ledger::{Ledger, LedgerOptions};

use crate::stats::Figure;
use crate::{ledger_call, Commits};

/// Rounds each ledger takes in turn.
const ROUNDS: usize = 10;

/// `(chained, bare)` samples: `calls` calls on each, `ROUNDS` rounds in turn.
fn in_turn(
    chained: &Ledger,
    bare: &Ledger,
    calls: usize,
    result: &ToolResult,
) -> (Vec<f64>, Vec<f64>) {
    let per_round = calls.div_ceil(ROUNDS);
    let (mut on, mut off) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
    for round in 0..ROUNDS {
        for i in 0..per_round {
            let id = format!("c{round}-{i}");
            on.push(ledger_call(chained, Commits::Late, &id, result));
            off.push(ledger_call(bare, Commits::Late, &id, result));
        }
    }
    (on, off)
}

/// The two figures of one backend: the chained ledger's read against the bare one's.
fn pair(backend: &str, (on, off): (Vec<f64>, Vec<f64>)) -> Vec<Figure> {
    let bare = Figure::of(
        &format!("ledger_no_chain_{backend}"),
        "µs",
        &off,
        &format!("one read call's ledger work (2 commits) on {backend}, the chain's triggers off"),
    );
    let chained = Figure::of(
        &format!("ledger_chain_{backend}"),
        "µs",
        &on,
        &format!(
            "the same with the hash chain (one link per write), one call of each in turn: \
             {:+.1} µs a call",
            crate::stats::summarize(&on).0 - crate::stats::summarize(&off).0
        ),
    )
    .against(&bare);
    vec![bare, chained]
}

/// The chain's figures: SQLite always, PostgreSQL when a server is named.
pub fn figures(dir: &Path, calls: usize, result: &ToolResult) -> Vec<Figure> {
    let open = |name: &str| {
        Ledger::open(&dir.join(name), LedgerOptions::default()).expect("the ledger opens")
    };
    let chained = open("chain-on.sqlite");
    let bare = open("chain-off.sqlite");
    let conn = rusqlite::Connection::open(dir.join("chain-off.sqlite")).expect("the file opens");
    let triggers: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .expect("the triggers are listed");
    for name in triggers {
        conn.execute_batch(&format!("DROP TRIGGER {name}"))
            .expect("the trigger is dropped");
    }
    let mut all = pair("sqlite", in_turn(&chained, &bare, calls, result));
    drop((chained, bare));
    if let Some(url) = crate::postgres::url() {
        // A thread of its own: it drives a runtime of its own, outside the bench's.
        let pg = std::thread::scope(|s| s.spawn(|| postgres(&url, calls, result)).join());
        all.extend(pg.expect("the PostgreSQL figures"));
    }
    all
}

/// The PostgreSQL pair, each ledger in a schema of its own, dropped at the end.
fn postgres(url: &str, calls: usize, result: &ToolResult) -> Vec<Figure> {
    let schema = |tag: &str| format!("bench_chain_{tag}_{}", uuid::Uuid::new_v4().simple());
    let (on, off) = (schema("on"), schema("off"));
    let config = |schema: &str| toolhost_ledger::PgConfig {
        url: url.to_owned(),
        password_env: None,
        schema: schema.to_owned(),
        ca_file: None,
    };
    let open = |schema: &str| {
        Ledger::open_postgres(
            &config(schema),
            std::time::Duration::from_secs(60),
            LedgerOptions::default(),
        )
        .expect("the ledger's server answers")
    };
    let (chained, bare) = (open(&on), open(&off));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let client = config(&off).connect().await.expect("the server answers");
        client
            .batch_execute("ALTER TABLE calls DISABLE TRIGGER chain_calls")
            .await
            .expect("the trigger is turned off");
    });
    let figures = pair("postgres", in_turn(&chained, &bare, calls, result));
    drop((chained, bare));
    runtime.block_on(async {
        crate::postgres::drop_schema(url, &on).await;
        crate::postgres::drop_schema(url, &off).await;
    });
    figures
}
