use std::path::Path;

use serde_json::json;

use super::*;

fn definition(name: &str, description: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: description.into(),
        input_schema: json!({"type": "object", "properties": {"x": {"type": "integer"}}}),
        output_schema: json!({"type": "string"}),
        risk: Risk::Read,
    }
}

fn component(source: &str, bytes: &[u8], defs: &[ToolDefinition]) -> ComponentPin {
    ComponentPin {
        source: source.into(),
        manifest: None,
        sha256: Sha256Digest::of(bytes),
        tools: defs
            .iter()
            .map(|d| (d.name.clone(), ToolPin::of(d)))
            .collect(),
    }
}

fn lock(components: Vec<ComponentPin>) -> Lock {
    Lock {
        version: LOCK_VERSION,
        components,
    }
}

/// The definition digest is SHA-256 over the definition's canonical JSON, as documented.
#[test]
fn the_definition_digest_is_over_its_jcs_form() {
    let d = definition("t", "Does t.");
    let text = r#"{"description":"Does t.","inputSchema":{"properties":{"x":{"type":"integer"}},"type":"object"},"name":"t","outputSchema":{"type":"string"},"risk":"read"}"#;
    assert_eq!(definition_digest(&d), Sha256Digest::of(text.as_bytes()));
}

/// A lock written as text reads back the same, and its header says how to update it.
#[test]
fn a_lock_round_trips_through_its_text() {
    let l = lock(vec![
        component(
            "a.wasm",
            b"a",
            &[definition("t", "T."), definition("u", "U.")],
        ),
        component("b.wasm", b"b", &[]),
    ]);
    let text = l.to_text();
    assert!(text.starts_with("# toolhost.lock"), "{text}");
    assert!(text.contains("toolhost lock --update"), "{text}");
    assert_eq!(Lock::parse(&text, Path::new("x.lock")).unwrap(), l);
}

/// Every kind of difference is found and named, in the config's order.
#[test]
fn each_difference_is_named() {
    let locked = lock(vec![
        component(
            "a.wasm",
            b"a",
            &[definition("t", "T."), definition("gone", "G.")],
        ),
        component("old.wasm", b"o", &[]),
    ]);
    let mut changed = definition("t", "T, now with more.");
    changed.risk = Risk::Write;
    let now = lock(vec![
        component("a.wasm", b"a2", &[changed, definition("new", "N.")]),
        component("c.wasm", b"c", &[]),
    ]);
    let found: Vec<String> = locked
        .differences(&now)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        found,
        [
            format!(
                "component a.wasm: its bytes changed (locked sha256:{}…, now sha256:{}…)",
                Sha256Digest::of(b"a").short(),
                Sha256Digest::of(b"a2").short()
            ),
            "component a.wasm: tool `new` added".into(),
            "component a.wasm: tool `t`: description, risk changed".into(),
            "component a.wasm: tool `gone` removed".into(),
            "component c.wasm: not in the lock".into(),
            "component old.wasm: in the lock, but the config does not load it".into(),
        ]
    );
    assert!(locked.differences(&locked).is_empty());
}

/// A source named twice pairs with its pins in order: swapping nothing changes nothing, and a
/// third use is not in the lock.
#[test]
fn a_source_named_twice_pairs_in_order() {
    let one = component("a.wasm", b"a", &[definition("t", "T.")]);
    let two = component("a.wasm", b"a", &[definition("t2", "T.")]);
    let locked = lock(vec![one.clone(), two.clone()]);
    assert!(locked
        .differences(&lock(vec![one.clone(), two.clone()]))
        .is_empty());
    let three = lock(vec![one.clone(), two, one]);
    assert_eq!(
        locked.differences(&three),
        [LockProblem::Unlocked {
            source: "a.wasm".into()
        }]
    );
}

/// A mismatch error names the file, every problem and the command that accepts the change.
#[test]
fn a_mismatch_says_how_to_accept_it() {
    let locked = lock(vec![component("a.wasm", b"a", &[definition("t", "T.")])]);
    let now = lock(vec![component(
        "a.wasm",
        b"a",
        &[definition("t", "Other.")],
    )]);
    let e = locked
        .check(Path::new("/x/toolhost.lock"), &now)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "/x/toolhost.lock does not match what the config loads (accept a change of yours with \
         `toolhost lock --update`): component a.wasm: tool `t`: description changed"
    );
    assert!(locked.check(Path::new("x"), &locked).is_ok());
}

/// A file that is not a lock, one of another version, one with a bad digest, and a missing
/// file each get their own answer.
#[test]
fn bad_lock_files_are_named() {
    let p = Path::new("t.lock");
    let e = Lock::parse("version = 2\n", p).unwrap_err();
    assert!(matches!(e, LockError::Version { found: 2, .. }), "{e}");
    let e = Lock::parse("[[component]]\n", p).unwrap_err();
    assert!(e.to_string().contains("no `version`"), "{e}");
    let e = Lock::parse(
        "version = 1\n[[component]]\nsource = \"a\"\nsha256 = \"sha256:00\"\n",
        p,
    )
    .unwrap_err();
    assert!(e.to_string().contains("64 lowercase hex"), "{e}");
    let e = Lock::parse("version = 1\nextra = 1\n", p).unwrap_err();
    assert!(e.to_string().contains("extra"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    assert!(Lock::read(&dir.path().join("none.lock")).unwrap().is_none());
    let l = lock(vec![component("a.wasm", b"a", &[definition("t", "T.")])]);
    let path = dir.path().join("toolhost.lock");
    l.write(&path).unwrap();
    assert_eq!(Lock::read(&path).unwrap(), Some(l));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

/// An `oci =` component pins its manifest too; the same bytes under another manifest (a tag
/// moved to a re-push) are a difference of their own, and the pin reads back from the text.
#[test]
fn a_moved_manifest_is_named_and_round_trips() {
    let mut pinned = component("oci:127.0.0.1:5000/t:1", b"a", &[]);
    pinned.manifest = Some(Sha256Digest::of(b"m1"));
    let locked = lock(vec![pinned.clone()]);
    let text = locked.to_text();
    assert!(
        text.contains(&format!("manifest = \"{}\"", Sha256Digest::of(b"m1"))),
        "{text}"
    );
    assert_eq!(Lock::parse(&text, Path::new("x.lock")).unwrap(), locked);
    assert_eq!(
        locked.manifest_of("oci:127.0.0.1:5000/t:1"),
        Some(&Sha256Digest::of(b"m1"))
    );
    pinned.manifest = Some(Sha256Digest::of(b"m2"));
    let found: Vec<String> = locked
        .differences(&lock(vec![pinned]))
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        found,
        vec![format!(
            "component oci:127.0.0.1:5000/t:1: its manifest changed (locked sha256:{}…, now sha256:{}…)",
            Sha256Digest::of(b"m1").short(),
            Sha256Digest::of(b"m2").short()
        )]
    );
}
