//! The config's face. Every `tests/ui/invalid/X.toml` is refused by the real binary with exit
//! status 2 and exactly the error text in `X.expected` (the repository's path shown as `$REPO`),
//! and leaves its data directory uncreated. `TOOLHOST_BLESS=1 cargo test config_ui` rewrites the
//! `.expected` files from what the binary prints; review the diff before committing it.
//!
//! `tests/ui/valid/maximal.toml` sets every key there is, and must check clean.

use std::path::{Path, PathBuf};

use crate::support::{repo, toolhost};

/// The data directory a config names (default `.toolhost`), resolved against its file.
fn data_dir(config: &Path) -> PathBuf {
    let text = std::fs::read_to_string(config).unwrap();
    let table: toml::Table = toml::from_str(&text).unwrap_or_default();
    let dir = table
        .get("data_dir")
        .and_then(|v| v.as_str())
        .unwrap_or(".toolhost");
    config.parent().unwrap().join(dir)
}

/// The binary's stderr with the repository's path (and its canonical form) as `$REPO`.
fn normalized(stderr: &str) -> String {
    let mut out = stderr.to_string();
    for root in [repo(), repo().canonicalize().unwrap()] {
        out = out.replace(&root.display().to_string(), "$REPO");
    }
    out
}

/// Every invalid config is refused with exactly its expected text, nothing created.
#[test]
fn invalid_configs_are_refused_with_their_whole_message() {
    crate::support::guest("template");
    crate::support::guest("ungranted");
    let bless = std::env::var_os("TOOLHOST_BLESS").is_some();
    let dir = repo().join("tests/ui/invalid");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    entries.sort();
    let mut failures = Vec::new();
    for path in &entries {
        let data = data_dir(path);
        assert!(
            !data.exists(),
            "{}: its data_dir {} exists before the run, so the test could not tell",
            path.display(),
            data.display()
        );
        let out = toolhost(&["tools", "--config", path.to_str().unwrap()]);
        let created = data.exists();
        if created {
            let _ = std::fs::remove_dir_all(&data);
        }
        assert!(
            !created,
            "{}: the refused config created {}",
            path.display(),
            data.display()
        );
        assert_eq!(out.status, 2, "{}: {}", path.display(), out.stderr);
        assert!(out.stdout.is_empty(), "{}: {}", path.display(), out.stdout);
        let got = normalized(&out.stderr);
        let file = path.with_extension("expected");
        if bless {
            std::fs::write(&file, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&file).unwrap_or_else(|_| {
            panic!(
                "{} has no .expected file; run with TOOLHOST_BLESS=1 to write it",
                path.display()
            )
        });
        if got != want {
            failures.push(format!(
                "{}:\n--- expected\n{want}--- got\n{got}",
                path.display()
            ));
        }
    }
    assert!(
        entries.len() >= 20,
        "only {} invalid configs",
        entries.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every `.expected` file has its config (a renamed case leaves no stale expectation).
#[test]
fn every_expectation_has_a_config() {
    let dir = repo().join("tests/ui/invalid");
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|e| e == "expected") {
            assert!(
                p.with_extension("toml").is_file(),
                "{} has no config",
                p.display()
            );
        }
    }
}

/// The maximal config (every key set) checks clean, writes nothing, and its effective settings
/// show what it set and every default.
#[test]
fn the_maximal_config_checks_clean() {
    crate::support::guest("template");
    crate::support::guest("fs-tools");
    let path = repo().join("tests/ui/valid/maximal.toml");
    let data = data_dir(&path);
    assert!(!data.exists(), "{} exists before the run", data.display());
    let out = toolhost(&["check-config", "--config", path.to_str().unwrap()]);
    let created = data.exists();
    if created {
        let _ = std::fs::remove_dir_all(&data);
    }
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(!created, "check-config created {}", data.display());
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["limits"]["fuel"], 1_000_000_000u64, "{v}");
    assert_eq!(v["run"]["max_concurrent_calls"], 8, "{v}");
    assert_eq!(v["agent"]["terminal_tool"], "say_hello", "{v}");
    assert_eq!(v["agent"]["api"], "messages", "{v}");
    assert_eq!(v["agent"]["max_output_tokens"], 2048, "{v}");
    assert_eq!(
        v["agent"]["output_limit_field"], "max_completion_tokens",
        "{v}"
    );
    assert_eq!(
        v["serve"]["allowed_origins"][0], "https://app.example.com",
        "{v}"
    );
    assert_eq!(v["ledger"]["synchronous"], "full", "{v}");
    assert_eq!(v["serve"]["tools_list_ttl_secs"], 10, "{v}");
    assert_eq!(v["serve"]["open_tasks_per_caller"], 8, "{v}");
    assert_eq!(v["serve"]["task_bytes_per_caller"], 1048576, "{v}");
    assert_eq!(v["oci"]["max_blob_bytes"], 67108864, "{v}");
    assert_eq!(
        v["oci"]["registries"]["127.0.0.1:5000"]["insecure"], true,
        "{v}"
    );
    let tools = v["tools"].as_array().unwrap();
    let hello = tools.iter().find(|t| t["name"] == "say_hello").unwrap();
    assert_eq!(hello["needs_approval"], true, "{hello}");
    assert_eq!(hello["limits"]["deadline_ms"], 500, "{hello}");
    // A secret shows where its value comes from and goes, never the value; the tool whose
    // network grant does not reach the secret's host does not get it.
    let secret = &v["component"][0]["secrets"][0];
    assert_eq!(secret["name"], "PAYMENTS_TOKEN", "{v}");
    assert_eq!(secret["hosts"][0], "127.0.0.1:9", "{v}");
    assert!(!out.stdout.contains("tok_maximal"), "{}", out.stdout);
    assert_eq!(hello["secrets"], serde_json::json!([]), "{hello}");
    assert_eq!(
        v["serve"]["oauth"]["metadata"],
        "https://mcp.example.com/.well-known/oauth-protected-resource",
        "{v}"
    );
}

/// Without a config's own settings, check-config prints every default.
#[test]
fn check_config_makes_defaults_explicit() {
    crate::support::guest("template");
    let (_d, cfg) = crate::support::temp_config(&format!(
        "[[component]]\npath = {}\n",
        crate::support::toml_path(&crate::support::guest("template"))
    ));
    let out = toolhost(&["check-config", "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["agent"]["max_steps"], 16, "{v}");
    assert_eq!(v["run"]["max_concurrent_calls"], 64, "{v}");
    assert_eq!(v["policy"]["default"], "allow", "{v}");
    assert_eq!(v["policy"]["approval"]["ttl_secs"], 900, "{v}");
    assert_eq!(v["serve"]["principal"], "local", "{v}");
    assert!(v["limits"]["memory_bytes"].as_u64().unwrap() > 0, "{v}");
    assert!(!cfg.parent().unwrap().join(".toolhost").exists());
}

/// A tool nobody gave a risk runs as the most its grants allow (a network grant: `external`;
/// a writable directory: `write`; nothing: `read`), never hinted harmless; a declared risk
/// wins, the tool's over its component's; check-config says each and where it came from.
#[test]
fn an_undeclared_risk_is_the_most_the_grants_allow() {
    use crate::support::{guest, toml_path};
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let text = format!(
        "[[component]]\npath = {template}\n\
         [[component]]\npath = {fs}\nfs = [{{ host = {ws}, guest = \"/workspace\", mode = \"rw\" }}]\n\
         [component.tools.read-text]\nrisk = \"read\"\n\
         [[component]]\npath = {http}\nnetwork = {{ allow = [\"127.0.0.1:9\"] }}\n\
         [[component]]\npath = {compute}\nrisk = \"destructive\"\n",
        template = toml_path(&guest("template")),
        fs = toml_path(&guest("fs-tools")),
        ws = toml_path(&ws),
        http = toml_path(&guest("http-get")),
        compute = toml_path(&guest("compute")),
    );
    let cfg = dir.path().join("toolhost.toml");
    std::fs::write(&cfg, text).unwrap();
    let out = toolhost(&["check-config", "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let tool = |name: &str| {
        let t = v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no tool {name} in {v}"));
        (
            t["risk"].as_str().unwrap().to_string(),
            t["risk_from"].as_str().unwrap().to_string(),
        )
    };
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(tool("greet"), pair("read", "grants"));
    assert_eq!(tool("write_text"), pair("write", "grants"));
    assert_eq!(tool("read_text"), pair("read", "tool"));
    assert_eq!(tool("http_get"), pair("external", "grants"));
    let compute = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["export"] != "greet" && t["risk_from"] == "component")
        .unwrap_or_else(|| panic!("no compute tool in {v}"));
    assert_eq!(compute["risk"], "destructive", "{compute}");
    assert_eq!(v["components"][0]["risk"], serde_json::Value::Null, "{v}");
    // MCP clients are hinted the same: a write through a grant is neither read-only nor
    // idempotent, a networked tool is open-world.
    let rt = crate::support::runtime(&cfg);
    let hints = |name: &str| {
        let registry = rt.registry();
        let t = registry.get(name).unwrap();
        let listed = toolhost::serve::mapping::mcp_tool(t, &t.input_schema);
        serde_json::to_value(listed).unwrap()["annotations"].clone()
    };
    let write = hints("write_text");
    assert_eq!(write["readOnlyHint"], false, "{write}");
    assert_eq!(write["idempotentHint"], false, "{write}");
    assert_eq!(hints("http_get")["openWorldHint"], true);
    assert_eq!(hints("greet")["readOnlyHint"], true);
}
