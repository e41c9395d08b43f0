//! What tests of the ledger's file need (feature `testing`): an edit made as someone holding
//! the file would make it.

use std::path::Path;

use rusqlite::Connection;

/// Run `sql` on the ledger file at `path` with the chain's triggers dropped around it and made
/// again after, in one transaction: an edit no link records, as a writer of the file without
/// toolhost's SQL functions would make it. Returns how many triggers were set aside. Panics on
/// any failure (it is a test's tool).
pub fn edit_past_triggers(path: &Path, sql: &str) -> usize {
    let mut conn = Connection::open(path).expect("the ledger file opens");
    let tx = conn.transaction().expect("a transaction");
    let triggers: Vec<(String, String)> = tx
        .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")
        .and_then(|mut s| {
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()
        })
        .expect("the triggers are listed");
    for (name, _) in &triggers {
        tx.execute_batch(&format!("DROP TRIGGER {name}"))
            .expect("the trigger is dropped");
    }
    tx.execute_batch(sql).expect("the edit runs");
    for (_, made) in &triggers {
        tx.execute_batch(made).expect("the trigger is made again");
    }
    tx.commit().expect("the edit commits");
    triggers.len()
}
