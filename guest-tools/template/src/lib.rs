//! The template tool: copy this crate to start a new tool.
wit_bindgen::generate!({
    path: ["../../wit", "wit"],
    world: "example:template/template",
    generate_all,
});

use exports::example::template::tools::Guest;
use toolhost::tool::host;

struct Template;

impl Guest for Template {
    fn greet(name: String) -> String {
        host::log(host::Level::Info, "greeting");
        format!("Hello, {name}!")
    }
}

export!(Template);

/// The WIT this component was built from, embedded so the host can show its `///` docs to models.
#[link_section = "toolhost-wit"]
#[used]
static WIT: [u8; include_bytes!("../wit/world.wit").len()] = *include_bytes!("../wit/world.wit");
