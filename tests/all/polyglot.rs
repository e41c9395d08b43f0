//! Tools written in Python (componentize-py) and JavaScript (componentize-js) from one WIT
//! (`guest-tools/polyglot`): described by their WIT, typed through the host's JSON mapping,
//! served over MCP, and their hostile functions contained exactly as Rust guests' are.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::{json, Value};
use toolhost::{Code, Config, EpochMode, Runtime, Status};

use crate::support::{fresh_data_dir, repo, run, temp_config, toml_path, toolhost};

/// The languages the example is written in; each is `guest-tools/target/polyglot/LANG.wasm`.
const LANGS: &[&str] = &["python", "js"];

/// Every function of the example's `hostile` interface, with the test that proves it
/// contained in both languages; `every_fixture_has_a_test` fails when one is missing.
const FIXTURES: &[(&str, fn())] = &[
    ("spin", spin_is_fuel_exhausted_while_others_are_served),
    ("balloon", balloon_is_memory_exceeded),
];

/// The built example (`just build-polyglot`), compiled once per test process into the compile
/// cache beside it (`toolhost check`), so that tests do not each pay the compile.
fn polyglot(lang: &str) -> PathBuf {
    static CHECKED: OnceLock<()> = OnceLock::new();
    let path = |l: &str| repo().join(format!("guest-tools/target/polyglot/{l}.wasm"));
    CHECKED.get_or_init(|| {
        for l in LANGS {
            let p = path(l);
            assert!(
                p.is_file(),
                "{} is missing: run `just build-polyglot`",
                p.display()
            );
            let out = toolhost(&["check", p.to_str().unwrap()]);
            assert_eq!(out.status, 0, "{l}: {}", out.stderr);
        }
    });
    path(lang)
}

/// A runtime for one language's example: a ledger of its own, the compile cache beside it.
fn example_runtime(lang: &str) -> Runtime {
    example_runtime_with(lang, None)
}

/// [`example_runtime`] with `max_concurrent_calls` set, if given.
fn example_runtime_with(lang: &str, max_concurrent_calls: Option<u32>) -> Runtime {
    let wasm = polyglot(lang);
    let mut config = Config::single_component(&wasm);
    config.run.max_concurrent_calls = max_concurrent_calls;
    config.data_dir = Some(fresh_data_dir());
    config.cache_dir = Some(wasm.parent().unwrap().join(".toolhost/cache"));
    config.start(EpochMode::Ticker).expect("the example loads")
}

/// `toolhost tools` shows the author's words for every tool, in both languages, and only the
/// tools the WIT declares (not componentize-py's own `init`).
#[test]
fn tools_are_described_from_their_wit() {
    for lang in LANGS {
        let wasm = polyglot(lang);
        let out = toolhost(&["tools", "--component", wasm.to_str().unwrap()]);
        assert_eq!(out.status, 0, "{lang}: {}", out.stderr);
        let defs: Value = out.json();
        let mut names: Vec<&str> = defs
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap())
            .collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "balloon",
                "first_with_prefix",
                "position",
                "spin",
                "word_counts"
            ],
            "{lang}"
        );
        let described = |name: &str| {
            defs.as_array()
                .unwrap()
                .iter()
                .find(|d| d["name"] == name)
                .unwrap()["description"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert!(
            described("word_counts").starts_with("Count the words of `text`"),
            "{lang}: {}",
            described("word_counts")
        );
        assert_eq!(described("spin"), "Loop forever, counting.", "{lang}");
    }
}

/// Records, lists, options and results come back through the JSON mapping exactly, in both
/// languages, through `toolhost call`.
#[test]
fn typed_results_through_the_cli() {
    let text = "b a c a";
    let cases: &[(&str, Value, Value)] = &[
        (
            "word_counts",
            json!({"text": text, "top": 2}),
            json!([{"word": "a", "count": 2}, {"word": "b", "count": 1}]),
        ),
        (
            "first_with_prefix",
            json!({"text": "apple banana", "prefix": "ba"}),
            json!("banana"),
        ),
        (
            "first_with_prefix",
            json!({"text": "apple", "prefix": "x"}),
            Value::Null,
        ),
        ("position", json!({"text": text, "word": "c"}), json!(2)),
    ];
    for lang in LANGS {
        let wasm = polyglot(lang);
        let wasm = wasm.to_str().unwrap();
        for (tool, args, want) in cases {
            let out = toolhost(&["call", "--component", wasm, tool, &args.to_string()]);
            assert_eq!(out.status, 0, "{lang} {tool}: {}", out.stdout);
            assert_eq!(&out.json()["output"], want, "{lang} {tool}");
        }
        for (args, err) in [
            (json!({"text": "", "word": "a"}), "empty-text"),
            (json!({"text": "a b", "word": "z"}), "not-found"),
        ] {
            let out = toolhost(&["call", "--component", wasm, "position", &args.to_string()]);
            assert_eq!(out.status, 1, "{lang}: {}", out.stdout);
            let r = out.json();
            assert_eq!(r["code"], json!("tool_error"), "{lang}: {r}");
            assert!(r["message"].as_str().unwrap().contains(err), "{lang}: {r}");
        }
    }
}

/// A Python or JavaScript infinite loop ends `fuel_exhausted`; while it runs, another call of
/// the same host completes, and after it the host serves on.
#[test]
fn spin_is_fuel_exhausted_while_others_are_served() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    for lang in LANGS {
        let host = std::sync::Arc::new(example_runtime(lang));
        rt.block_on(async {
            let spinning = {
                let host = host.clone();
                tokio::spawn(async move { run(&host, "spin", json!({})).await })
            };
            let other = run(&host, "position", json!({"text": "a b", "word": "b"})).await;
            assert_eq!(other.status, Status::Completed, "{lang}: {other:?}");
            assert!(
                !spinning.is_finished(),
                "{lang}: spin ended before the other call"
            );
            let r = spinning.await.unwrap();
            assert_eq!(r.status, Status::Failed, "{lang}: {r:?}");
            assert_eq!(r.code, Some(Code::FuelExhausted), "{lang}: {r:?}");
            assert_serves(&host, lang).await;
        });
    }
}

/// The instance pool holds as many calls as the concurrency guard admits, each at its
/// ceilings: with `max_concurrent_calls = 3`, three Python or JavaScript calls at once (each
/// instance with several memories and tables) all run to their own end (`fuel_exhausted`),
/// none is refused by the pool, and the host serves on.
#[test]
fn the_pool_holds_every_call_the_guard_admits() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    for lang in LANGS {
        let host = std::sync::Arc::new(example_runtime_with(lang, Some(3)));
        rt.block_on(async {
            let spins: Vec<_> = (0..3)
                .map(|_| {
                    let host = host.clone();
                    tokio::spawn(async move { run(&host, "spin", json!({})).await })
                })
                .collect();
            for spin in spins {
                let r = spin.await.unwrap();
                assert_eq!(r.code, Some(Code::FuelExhausted), "{lang}: {r:?}");
            }
            assert_serves(&host, lang).await;
        });
    }
}

/// A Python or JavaScript memory balloon ends `memory_exceeded` at the memory ceiling, and the
/// host serves on.
#[test]
fn balloon_is_memory_exceeded() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    for lang in LANGS {
        let host = example_runtime(lang);
        rt.block_on(async {
            let r = run(&host, "balloon", json!({"megabytes": 512})).await;
            assert_eq!(r.status, Status::Failed, "{lang}: {r:?}");
            assert_eq!(r.code, Some(Code::MemoryExceeded), "{lang}: {r:?}");
            assert!(
                r.usage.memory_peak_bytes
                    <= host.registry().get("balloon").unwrap().limits.memory_bytes,
                "{lang}: {r:?}"
            );
            assert_serves(&host, lang).await;
        });
    }
}

async fn assert_serves(host: &Runtime, lang: &str) {
    let r = run(host, "position", json!({"text": "a b c", "word": "a"})).await;
    assert_eq!(r.status, Status::Completed, "{lang}: {r:?}");
    assert_eq!(r.output, Some(json!(0)), "{lang}");
}

/// Every function of the `hostile` interface is listed in FIXTURES (so it has a test).
#[test]
fn every_fixture_has_a_test() {
    for lang in LANGS {
        let host = example_runtime(lang);
        let examples = ["word-counts", "first-with-prefix", "position"];
        let mut hostile: Vec<String> = host
            .registry()
            .tools()
            .filter(|t| !examples.contains(&t.export.as_str()))
            .map(|t| t.name.to_string())
            .collect();
        hostile.sort();
        let mut listed: Vec<String> = FIXTURES.iter().map(|(s, _)| s.to_string()).collect();
        listed.sort();
        assert_eq!(hostile, listed, "{lang}");
    }
}

/// Over MCP (the official Python SDK, stdio), each language's tools are listed with their
/// descriptions, report progress and log lines, return typed results and contain their hostile
/// functions.
#[test]
fn served_over_mcp() {
    for lang in LANGS {
        let wasm = polyglot(lang);
        let cache = wasm.parent().unwrap().join(".toolhost/cache");
        let (_dir, cfg) = temp_config(&format!(
            "data_dir = {}\ncache_dir = {}\n[[component]]\npath = {}\n",
            toml_path(&fresh_data_dir()),
            toml_path(&cache),
            toml_path(&wasm)
        ));
        let facts = crate::mcp::client(
            "polyglot",
            &[
                "--binary",
                env!("CARGO_BIN_EXE_toolhost"),
                "--config",
                cfg.to_str().unwrap(),
            ],
        )
        .facts;
        assert!(facts["progress"].as_u64().unwrap() >= 1, "{lang}: {facts}");
        assert!(facts["logged"].as_u64().unwrap() >= 1, "{lang}: {facts}");
    }
}
