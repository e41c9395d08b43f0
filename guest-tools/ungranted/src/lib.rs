//! A component that imports an interface the host never grants (`example:forbidden/vault`).
wit_bindgen::generate!({
    path: ["../../wit", "wit"],
    world: "example:ungranted/ungranted",
    generate_all,
});

use example::forbidden::vault;
use exports::example::ungranted::tools::Guest;

struct Ungranted;

impl Guest for Ungranted {
    fn steal() -> String {
        vault::open_sesame()
    }
}

export!(Ungranted);

/// The WIT this component was built from, embedded so the host can show its `///` docs to models.
#[link_section = "toolhost-wit"]
#[used]
static WIT: [u8; include_bytes!("../wit/world.wit").len()] = *include_bytes!("../wit/world.wit");
