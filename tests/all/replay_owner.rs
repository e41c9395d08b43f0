//! A recorded result answers only the principal and tenant that made the call: the same run,
//! call id and arguments from anyone else are refused `unauthorized` (as authorization
//! refuses), the ledger notes who asked, and the owner still gets its replay — on SQLite and
//! on PostgreSQL.

use serde_json::{json, Value};

use crate::multi_host::Schema;
use crate::support::{guest, temp_config, toml_path, toolhost};

/// `toolhost call` of greet as `principal` of `tenant`, in run `R`, call `c1`.
fn greet_as(config: &str, principal: &str, tenant: &str) -> Value {
    let out = toolhost(&[
        "call",
        "--config",
        config,
        "--principal",
        principal,
        "--tenant",
        tenant,
        "--run-id",
        "R",
        "--call-id",
        "c1",
        "greet",
        r#"{"name":"alice's secret"}"#,
    ]);
    out.json()
}

fn replay_answers_only_its_caller(ledger: &str) {
    let (_dir, path) = temp_config(&format!(
        "data_dir = {}\n{ledger}\n[[component]]\npath = {}\n",
        crate::support::own_data(),
        toml_path(&guest("template")),
    ));
    let config = path.to_str().unwrap();
    let first = greet_as(config, "alice", "acme");
    assert_eq!(first["status"], json!("completed"), "{first}");
    assert_eq!(first["output"], json!("Hello, alice's secret!"));

    for (principal, tenant) in [("mallory", "evil"), ("mallory", "acme"), ("alice", "evil")] {
        let other = greet_as(config, principal, tenant);
        assert_eq!(
            other["status"],
            json!("failed"),
            "{principal}/{tenant}: {other}"
        );
        assert_eq!(other["code"], json!("unauthorized"), "{other}");
        assert!(other.get("output").is_none_or(Value::is_null), "{other}");
        assert!(!other.to_string().contains("secret"), "{other}");
    }
    let again = greet_as(config, "alice", "acme");
    assert_eq!(again, first, "the owner's replay");

    let out = toolhost(&["ledger", "--config", config, "--run", "R"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let calls = out.json()["calls"].as_array().cloned().unwrap();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let trail = calls[0]["events"].to_string();
    assert!(
        trail.contains(r#"principal \"mallory\", tenant \"evil\""#),
        "who asked is in the trail: {trail}"
    );
}

/// On the SQLite ledger.
#[test]
fn a_replay_answers_only_its_caller() {
    replay_answers_only_its_caller("");
}

/// On a PostgreSQL ledger.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
fn pg_a_replay_answers_only_its_caller() {
    let schema = Schema::new();
    replay_answers_only_its_caller(&schema.ledger_section());
}
