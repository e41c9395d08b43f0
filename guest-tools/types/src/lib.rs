//! Echo tools over every WIT type, for the host's JSON ↔ value mapping tests.
wit_bindgen::generate!({
    path: ["../../wit", "wit"],
    world: "example:types/types",
    generate_all,
});

use exports::example::types::tools::{Colour, Compound, Guest, Rest, Scalars};

struct Types;

impl Guest for Types {
    fn echo_scalars(v: Scalars) -> Scalars {
        v
    }
    fn echo_compound(v: Compound) -> Compound {
        v
    }
    fn echo_rest(v: Rest) -> Rest {
        v
    }
    fn sqrt(x: f64) -> f64 {
        x.sqrt()
    }
    fn nothing() {}
    fn maybe_fail(fail: bool) -> Result<String, Colour> {
        if fail {
            Err(Colour::Blue)
        } else {
            Ok("fine".to_string())
        }
    }
}

export!(Types);

/// The WIT this component was built from, embedded so the host can show its docs.
#[link_section = "toolhost-wit"]
#[used]
static WIT: [u8; include_bytes!("../wit/world.wit").len()] = *include_bytes!("../wit/world.wit");
