//! The official JSON Schema Test Suite (Draft 2020-12) through the host's own validator.
//!
//! Every case runs through [`Validator::compile`] + [`Validator::validate`]: the same
//! configuration the host uses for tool arguments and outputs (Draft 2020-12 forced, formats
//! asserted, unknown formats refused, every external `$ref` refused, bounded regex engine). No
//! registry of the suite's `remotes/` is loaded: a case that needs `http://localhost:1234/...`
//! is expected to fail closed at compile time, and is listed in [`SKIPPED`].
//!
//! Run: `tests/draft2020-12/*.json` (required), `tests/draft2020-12/optional/format/*.json`
//! (format assertion, which the host turns on) and `tests/draft2020-12/optional/*.json` (the
//! other optional files: big numbers, ECMA-262 regexes, unknown keywords, ...).
//!
//! The suite is data outside the project, wherever `JSON_SCHEMA_TEST_SUITE` points (`.ci/run`
//! sets it to `../shared/json-schema-test-suite` beside the checkout). The test is `#[ignore]`d,
//! so a plain `cargo test` reports it as ignored — never as passed — and `just test` runs it with
//! `--ignored` when the variable is set; set but missing, it fails.
//!
//! [`SKIPPED`] lists every case the host deliberately does not pass, with a reason. The test
//! fails on a failing case that is not listed, *and* on a listed entry that passes or matches
//! nothing, so the list stays honest. A case is one test of one schema; a failure to compile
//! the schema fails each of its tests.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;
use toolhost_registry::validate::Validator;

use crate::support::repo;

/// Folders (relative to the suite's `tests/draft2020-12/`) whose `*.json` files are run.
const FOLDERS: &[&str] = &["", "optional", "optional/format"];

/// Why the remote-reference cases fail.
const REMOTE: &str =
    "needs a document from http://localhost:1234/ (the suite's remotes/): the host refuses every \
     external $ref, so the schema fails closed at compile time";
/// Why the custom meta-schema cases fail.
const CUSTOM_META: &str =
    "declares a custom meta-schema ($schema http://localhost:1234/...): the host forces Draft \
     2020-12 and refuses other $schema values at compile time";
/// Why the unknown-format cases fail.
const UNKNOWN_FORMAT: &str =
    "the host asserts formats and refuses unknown format names at compile time (2020-12 \
     format-assertion vocabulary), so a typo cannot silently constrain nothing";
/// Why the "only an annotation by default" cases fail.
const ASSERTED: &str =
    "the host turns format assertion on (the suite's default is annotation only), so an \
     invalid value is rejected";

/// Cases the host deliberately does not pass: (file relative to `tests/draft2020-12/`,
/// schema description, `"<schema description> :: <test description>"` for one test, or `"*"`
/// for the whole file, reason).
const SKIPPED: &[(&str, &str, &str)] = &[
    ("refRemote.json", "*", REMOTE),
    ("dynamicRef.json", "strict-tree schema, guards against misspelled properties", REMOTE),
    ("dynamicRef.json", "tests for implementation dynamic anchor and reference link", REMOTE),
    ("dynamicRef.json", "$ref and $dynamicAnchor are independent of order - $defs first", REMOTE),
    ("dynamicRef.json", "$ref and $dynamicAnchor are independent of order - $ref first", REMOTE),
    ("dynamicRef.json", "$ref to $dynamicRef finds detached $dynamicAnchor", REMOTE),
    ("optional/cross-draft.json", "refs to historic drafts are processed as historic drafts", REMOTE),
    ("vocabulary.json", "*", CUSTOM_META),
    ("optional/format-assertion.json", "*", CUSTOM_META),
    ("optional/format/unknown.json", "*", UNKNOWN_FORMAT),
    ("format.json", "email format :: invalid email string is only an annotation by default", ASSERTED),
    ("format.json", "idn-email format :: invalid idn-email string is only an annotation by default", ASSERTED),
    ("format.json", "regex format :: invalid regex string is only an annotation by default", ASSERTED),
    ("format.json", "ipv4 format :: invalid ipv4 string is only an annotation by default", ASSERTED),
    ("format.json", "ipv6 format :: invalid ipv6 string is only an annotation by default", ASSERTED),
    ("format.json", "idn-hostname format :: invalid idn-hostname string is only an annotation by default", ASSERTED),
    ("format.json", "hostname format :: invalid hostname string is only an annotation by default", ASSERTED),
    ("format.json", "date format :: invalid date string is only an annotation by default", ASSERTED),
    ("format.json", "date-time format :: invalid date-time string is only an annotation by default", ASSERTED),
    ("format.json", "time format :: invalid time string is only an annotation by default", ASSERTED),
    ("format.json", "json-pointer format :: invalid json-pointer string is only an annotation by default", ASSERTED),
    ("format.json", "relative-json-pointer format :: invalid relative-json-pointer string is only an annotation by default", ASSERTED),
    ("format.json", "iri format :: invalid iri string is only an annotation by default", ASSERTED),
    ("format.json", "iri-reference format :: invalid iri-reference string is only an annotation by default", ASSERTED),
    ("format.json", "uri format :: invalid uri string is only an annotation by default", ASSERTED),
    ("format.json", "uri-reference format :: invalid uri-reference string is only an annotation by default", ASSERTED),
    ("format.json", "uri-template format :: invalid uri-template string is only an annotation by default", ASSERTED),
    ("format.json", "uuid format :: invalid uuid string is only an annotation by default", ASSERTED),
    ("format.json", "duration format :: invalid duration string is only an annotation by default", ASSERTED),
];

/// The outcome of one test of one schema.
struct Case {
    file: String,
    group: String,
    test: String,
    /// `None` when the case passed, else what went wrong.
    failure: Option<String>,
}

impl Case {
    fn is_listed_by(&self, (file, case, _): &(&str, &str, &str)) -> bool {
        *file == self.file
            && (*case == "*"
                || *case == self.group
                || *case == format!("{} :: {}", self.group, self.test))
    }
}

/// The suite's directory: `JSON_SCHEMA_TEST_SUITE`, relative paths against the repository.
fn suite_root() -> PathBuf {
    let path = std::env::var_os("JSON_SCHEMA_TEST_SUITE").expect(
        "set JSON_SCHEMA_TEST_SUITE to the JSON Schema Test Suite's directory \
         (.ci/run sets ../shared/json-schema-test-suite)",
    );
    repo().join(PathBuf::from(path))
}

/// The `*.json` files of one folder, sorted, as (name relative to `draft2020-12/`, path).
fn files(base: &Path, folder: &str) -> Vec<(String, PathBuf)> {
    let dir = base.join(folder);
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let rel = if folder.is_empty() {
                name
            } else {
                format!("{folder}/{name}")
            };
            (rel, p)
        })
        .collect();
    out.sort();
    out
}

/// Run every test of every schema in one suite file.
fn run_file(rel: &str, path: &Path, cases: &mut Vec<Case>) {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let groups: Vec<Value> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for group in &groups {
        let description = group["description"].as_str().expect("schema description");
        let compiled = Validator::compile(&group["schema"]);
        for test in group["tests"].as_array().expect("tests") {
            let expected = test["valid"].as_bool().expect("valid");
            let failure = match &compiled {
                Err(e) => Some(format!("schema does not compile: {e}")),
                Ok(validator) => match (validator.validate(&test["data"]), expected) {
                    (Ok(()), true) | (Err(_), false) => None,
                    (Ok(()), false) => Some("accepted an invalid instance".to_owned()),
                    (Err(violations), true) => Some(format!(
                        "rejected a valid instance: {}",
                        violations
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join("; ")
                    )),
                },
            };
            cases.push(Case {
                file: rel.to_owned(),
                group: description.to_owned(),
                test: test["description"]
                    .as_str()
                    .expect("test description")
                    .to_owned(),
                failure,
            });
        }
    }
}

/// Check outcomes against a skip list: how many failures it covers, and every problem (a failure
/// it does not list, an entry that passes or matches nothing), one a line.
fn audit(cases: &[Case], skipped: &[(&str, &str, &str)]) -> (usize, String) {
    let mut problems = String::new();
    let mut covered = 0;
    for case in cases {
        let Some(failure) = &case.failure else {
            continue;
        };
        if skipped.iter().any(|entry| case.is_listed_by(entry)) {
            covered += 1;
        } else {
            writeln!(
                problems,
                "FAILED (not in SKIPPED) {} / {} / {}: {failure}",
                case.file, case.group, case.test
            )
            .unwrap();
        }
    }
    for entry in skipped {
        let (file, case, reason) = entry;
        if reason.is_empty() {
            writeln!(problems, "SKIPPED entry {file} / {case} has no reason").unwrap();
        }
        let listed: Vec<&Case> = cases.iter().filter(|c| c.is_listed_by(entry)).collect();
        if listed.is_empty() {
            writeln!(problems, "SKIPPED entry {file} / {case} matches no case").unwrap();
        } else if listed.iter().all(|c| c.failure.is_none()) {
            writeln!(
                problems,
                "SKIPPED entry {file} / {case} passes now: remove it from SKIPPED"
            )
            .unwrap();
        }
    }
    (covered, problems)
}

/// Every Draft 2020-12 suite case passes through the host's validator, except those listed in
/// `SKIPPED` (which must still fail).
#[test]
#[ignore = "needs JSON_SCHEMA_TEST_SUITE (the suite's directory); `just test` runs it when set"]
fn json_schema_suite() {
    let root = suite_root();
    let base = root.join("tests/draft2020-12");
    assert!(
        base.is_dir(),
        "JSON_SCHEMA_TEST_SUITE is set, but {} is not the suite (no tests/draft2020-12)",
        root.display()
    );

    let mut cases = Vec::new();
    let mut file_count = 0;
    for folder in FOLDERS {
        for (rel, path) in files(&base, folder) {
            file_count += 1;
            run_file(&rel, &path, &mut cases);
        }
    }

    let (skipped, problems) = audit(&cases, SKIPPED);
    let passed = cases.iter().filter(|c| c.failure.is_none()).count();
    println!(
        "json_schema_suite: {file_count} files, {} cases: {passed} passed, {skipped} skipped \
         (listed in SKIPPED), {} unexpected failures",
        cases.len(),
        cases.len() - passed - skipped
    );
    assert!(problems.is_empty(), "json_schema_suite:\n{problems}");
}

/// The audit flags an unlisted failure, a listed entry that passes, and an entry matching nothing.
#[test]
fn json_schema_suite_skip_list_stays_honest() {
    let case = |group: &str, test: &str, failure: Option<&str>| Case {
        file: "f.json".to_owned(),
        group: group.to_owned(),
        test: test.to_owned(),
        failure: failure.map(str::to_owned),
    };
    let cases = [
        case("g1", "t1", Some("boom")),
        case("g1", "t2", None),
        case("g2", "t1", None),
        case("g3", "t1", Some("boom")),
    ];
    let (covered, problems) = audit(
        &cases,
        &[
            ("f.json", "g1", "partly failing group"),
            ("f.json", "g2 :: t1", "passes now"),
            ("f.json", "nothing", "stale"),
        ],
    );
    assert_eq!(covered, 1);
    assert!(
        problems.contains("FAILED (not in SKIPPED) f.json / g3 / t1"),
        "{problems}"
    );
    assert!(
        problems.contains("f.json / g2 :: t1 passes now"),
        "{problems}"
    );
    assert!(
        problems.contains("f.json / nothing matches no case"),
        "{problems}"
    );
    assert_eq!(problems.lines().count(), 3, "{problems}");
    assert_eq!(
        audit(&cases[..2], &[("f.json", "*", "r")]),
        (1, String::new())
    );
}
