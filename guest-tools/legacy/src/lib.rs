//! A tool built against `toolhost:tool@0.1.0` (the frozen copy in `wit/compat/`), never
//! updated: the host must keep loading and running it.
wit_bindgen::generate!({
    path: ["../../wit/compat/tool-0.1.0.wit", "wit"],
    world: "example:legacy/legacy",
    generate_all,
});

use exports::example::legacy::tools::Guest;
use toolhost::tool::host;

struct Legacy;

impl Guest for Legacy {
    fn greet(name: String) -> String {
        host::progress(1, Some(2), "greeting");
        host::log(host::Level::Info, "greeting from toolhost:tool@0.1.0");
        format!("Hello, {name}!")
    }
}

export!(Legacy);

/// The WIT this component was built from, embedded so the host can show its `///` docs to models.
#[link_section = "toolhost-wit"]
#[used]
static WIT: [u8; include_bytes!("../wit/world.wit").len()] = *include_bytes!("../wit/world.wit");
