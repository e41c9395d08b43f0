//! JSON ↔ WIT values, strictly, for every type a tool signature can use — against a real
//! component that echoes what it receives.

use serde_json::{json, Value};
use toolhost::{Code, Runtime, Status};

use crate::support::{guest, run, runtime, temp_config, toml_path};

fn rt() -> (tempfile::TempDir, Runtime) {
    let (d, cfg) = temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\n",
        crate::support::own_data(),
        toml_path(&guest("types"))
    ));
    let rt = runtime(&cfg);
    (d, rt)
}

fn scalars() -> Value {
    json!({
        "b": true, "i8v": -128, "u8v": 255, "i16v": -32768, "u16v": 65535,
        "i32v": -2147483648i64, "u32v": 4294967295u64,
        "i64v": i64::MIN, "u64v": u64::MAX,
        "f32v": 1.5, "f64v": 0.1, "c": "é", "s": "text ✓"
    })
}

fn compound() -> Value {
    json!({
        "items": [1, 2, 3],
        "pair": ["a", -5],
        "shape": {"rect": [1.0, 2.5]},
        "colour": "green",
        "maybe": null,
        "outcome": {"err": "bad"},
        "perms": ["read", "exec"],
        "nested": [null, "point", {"circle": 2.0}]
    })
}

/// Every scalar round-trips exactly, including the extremes of s64 and u64.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scalars_round_trip_exactly() {
    let (_d, rt) = rt();
    let r = run(&rt, "echo_scalars", json!({"v": scalars()})).await;
    assert_eq!(r.status, Status::Completed, "{r:?}");
    assert_eq!(r.output, Some(scalars()));
}

/// Lists, tuples, variants, enums, options, results and flags round-trip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compounds_round_trip() {
    let (_d, rt) = rt();
    let r = run(&rt, "echo_compound", json!({"v": compound()})).await;
    assert_eq!(r.status, Status::Completed, "{r:?}");
    assert_eq!(r.output, Some(compound()));
    let mut other = compound();
    other["maybe"] = json!("x");
    other["outcome"] = json!({"ok": 7});
    other["shape"] = json!("point");
    other["perms"] = json!([]);
    let r = run(&rt, "echo_compound", json!({"v": other.clone()})).await;
    assert_eq!(r.output, Some(other), "{r:?}");
}

/// The rest of WIT: results without payloads, lists of tuples, a tuple holding a list, an
/// optional list — each round-trips, and a tuple of the wrong length or order is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remaining_types_round_trip() {
    let (_d, rt) = rt();
    let values = [
        json!({"done": {"ok": null}, "checked": {"ok": null}, "counted": {"ok": 7},
               "pairs": [["a", 0], ["b", 255]], "triple": [true, "✓", [-32768, 32767]],
               "maybe-list": [-1, 2]}),
        json!({"done": {"err": null}, "checked": {"err": "no"}, "counted": {"err": null},
               "pairs": [], "triple": [false, "x", []], "maybe-list": null}),
    ];
    for v in values {
        let r = run(&rt, "echo_rest", json!({"v": v.clone()})).await;
        assert_eq!(r.status, Status::Completed, "{r:?}");
        assert_eq!(r.output, Some(v));
    }
    let good = a_rest();
    for (field, bad) in [
        ("triple", json!([true, "x"])),
        ("triple", json!(["x", true, []])),
        ("triple", json!([true, "x", [], 1])),
        ("pairs", json!([["a", 256]])),
        ("done", json!({"ok": 1})),
        ("counted", json!({"ok": null})),
    ] {
        let mut v = good.clone();
        v[field] = bad.clone();
        let r = run(&rt, "echo_rest", json!({"v": v})).await;
        assert_eq!(r.code, Some(Code::InvalidArguments), "{field}={bad}: {r:?}");
    }
}

fn a_rest() -> Value {
    json!({"done": {"ok": null}, "checked": {"ok": null}, "counted": {"ok": 7},
           "pairs": [["a", 0]], "triple": [true, "x", []], "maybe-list": null})
}

/// Values that do not fit are refused before the guest runs, naming where and what.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mismatches_are_invalid_arguments() {
    let (_d, rt) = rt();
    let bad_scalars: &[(&str, Value, &str)] = &[
        ("u8v", json!(256), "/v/u8v"),
        ("u8v", json!(-1), "/v/u8v"),
        ("i8v", json!(1.5), "/v/i8v"),
        ("u64v", json!(-1), "/v/u64v"),
        ("i64v", json!(9.3e18), "/v/i64v"),
        ("u32v", json!("5"), "/v/u32v"),
        ("b", json!(1), "/v/b"),
        ("c", json!("ab"), "/v/c"),
        ("c", json!(""), "/v/c"),
        ("f32v", json!(1e300), "/v/f32v"),
        ("s", json!(null), "/v/s"),
    ];
    for (field, value, at) in bad_scalars {
        let mut v = scalars();
        v[*field] = value.clone();
        let r = run(&rt, "echo_scalars", json!({"v": v})).await;
        assert_eq!(
            r.code,
            Some(Code::InvalidArguments),
            "{field}={value}: {r:?}"
        );
        assert!(
            r.message.contains(&format!("{at}:")),
            "{field}={value}: {}",
            r.message
        );
        assert_eq!(r.usage.fuel_consumed, 0, "the guest ran for a refused call");
    }
    let bad_compound: &[(&str, Value)] = &[
        ("colour", json!("purple")),
        ("shape", json!({"circle": 1.0, "rect": [1.0, 1.0]})),
        ("shape", json!({"point": null})),
        ("shape", json!("circle")),
        ("pair", json!(["a"])),
        ("pair", json!(["a", 1, 2])),
        ("outcome", json!({"maybe": 1})),
        ("perms", json!(["read", "read"])),
        ("perms", json!(["root"])),
        ("items", json!({"0": 1})),
    ];
    for (field, value) in bad_compound {
        let mut v = compound();
        v[*field] = value.clone();
        let r = run(&rt, "echo_compound", json!({"v": v})).await;
        assert_eq!(
            r.code,
            Some(Code::InvalidArguments),
            "{field}={value}: {r:?}"
        );
    }
    let mut v = scalars();
    v["extra"] = json!(1);
    let r = run(&rt, "echo_scalars", json!({"v": v})).await;
    assert_eq!(r.code, Some(Code::InvalidArguments), "{r:?}");
    let mut v = scalars();
    v.as_object_mut().unwrap().remove("s");
    let r = run(&rt, "echo_scalars", json!({"v": v})).await;
    assert_eq!(r.code, Some(Code::InvalidArguments), "{r:?}");
}

/// A NaN result has no JSON form: invalid_output, never a bogus number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nan_output_is_invalid_output() {
    let (_d, rt) = rt();
    let r = run(&rt, "sqrt", json!({"x": 4.0})).await;
    assert_eq!(r.output, Some(json!(2.0)));
    let r = run(&rt, "sqrt", json!({"x": -1.0})).await;
    assert_eq!(r.code, Some(Code::InvalidOutput), "{r:?}");
    assert!(r.output.is_none());
}

/// No result is `null`; `result<T, E>` maps `err` to tool_error and `ok` to the output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unit_and_result_returns() {
    let (_d, rt) = rt();
    let r = run(&rt, "nothing", json!({})).await;
    assert_eq!((r.status, r.output), (Status::Completed, Some(Value::Null)));
    let r = run(&rt, "maybe_fail", json!({"fail": false})).await;
    assert_eq!(r.output, Some(json!("fine")));
    let r = run(&rt, "maybe_fail", json!({"fail": true})).await;
    assert_eq!(r.code, Some(Code::ToolError));
    assert!(r.message.contains("blue"), "{}", r.message);
}

/// The derived schemas say exactly what the mapping accepts.
#[test]
fn schemas_match_the_mapping() {
    let (_d, rt) = rt();
    let registry = rt.registry();
    let t = registry.get("echo_compound").unwrap();
    let v = &t.input_schema["properties"]["v"];
    assert_eq!(v["additionalProperties"], json!(false));
    assert_eq!(
        v["properties"]["colour"],
        json!({"type": "string", "enum": ["red", "green", "blue"]})
    );
    assert_eq!(v["properties"]["perms"]["uniqueItems"], json!(true));
    // A tuple is closed by its length, not by a bare `items: false` (strict clients refuse it).
    assert!(v["properties"]["pair"].get("items").is_none());
    assert_eq!(v["properties"]["pair"]["maxItems"], json!(2));
    assert_eq!(v["properties"]["pair"]["minItems"], json!(2));
    assert_eq!(
        v["properties"]["maybe"]["anyOf"][0],
        json!({"type": "null"})
    );
    let shape = &v["properties"]["shape"]["oneOf"];
    assert_eq!(shape[0], json!({"const": "point"}));
    assert_eq!(shape[1]["required"], json!(["circle"]));
    let registry = rt.registry();
    let s = &registry.get("echo_scalars").unwrap().input_schema["properties"]["v"]["properties"];
    assert_eq!(s["u64v"]["maximum"], json!(u64::MAX));
    assert_eq!(s["i64v"]["minimum"], json!(i64::MIN));
    assert_eq!(s["c"]["maxLength"], json!(1));
    let registry = rt.registry();
    let nothing = registry.get("nothing").unwrap();
    assert_eq!(nothing.output_schema["type"], json!("null"));
    assert_eq!(nothing.input_schema["required"], json!([]));
    let registry = rt.registry();
    let mf = registry.get("maybe_fail").unwrap();
    assert_eq!(mf.output_schema["type"], json!("string"));
}

/// An operator refinement narrows the input (a value WIT allows is refused before the guest
/// runs) and the output (a value the guest returns that breaks it is invalid_output, never
/// shown).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refinements_narrow_input_and_output() {
    let (_d, cfg) = temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\n[component.tools.sqrt]\nrefine = {{ input = {{ properties = {{ x = {{ maximum = 100 }} }} }}, output = {{ maximum = 5 }} }}\n",
        crate::support::own_data(),
        toml_path(&guest("types"))
    ));
    let rt = runtime(&cfg);
    let r = run(&rt, "sqrt", json!({"x": 16.0})).await;
    assert_eq!(r.output, Some(json!(4.0)), "{r:?}");
    let r = run(&rt, "sqrt", json!({"x": 101.0})).await;
    assert_eq!(r.code, Some(Code::InvalidArguments), "{r:?}");
    assert_eq!(r.usage.fuel_consumed, 0);
    let r = run(&rt, "sqrt", json!({"x": 49.0})).await;
    assert_eq!(r.code, Some(Code::InvalidOutput), "{r:?}");
    assert!(r.output.is_none());
    let registry = rt.registry();
    let s = &registry.get("sqrt").unwrap().input_schema;
    assert_eq!(s["type"], json!("object"));
}
