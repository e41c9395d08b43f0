//! The {{name}} tool component: each function of the exported `tools` interface is a tool.
wit_bindgen::generate!({
    path: "wit",
    world: "local:{{name}}/{{name}}",
    generate_all,
});

use exports::local::{{crate}}::tools::Guest;
use toolhost::tool::host;

struct Tools;

impl Guest for Tools {
    fn greet(name: String) -> String {
        // Who called and which call this is, from the host (never from the arguments). A tool
        // that changes something elsewhere sends `ctx.idempotency_key` with its request (e.g. an
        // `Idempotency-Key` header), so that a retry of this call cannot do it twice.
        let ctx = host::context();
        let line = format!("greeting for {} (key {})", ctx.principal, ctx.idempotency_key);
        host::log(host::Level::Info, &line);
        format!("Hello, {name}!")
    }
}

export!(Tools);

/// The WIT this component was built from, embedded so that the host can show its `///` docs
/// to models (a component binary keeps types, not docs).
#[link_section = "toolhost-wit"]
#[used]
static WIT: [u8; include_bytes!("../wit/world.wit").len()] = *include_bytes!("../wit/world.wit");
