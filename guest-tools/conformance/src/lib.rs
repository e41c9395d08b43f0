//! The tools the official MCP conformance suite expects a server to offer (see the WIT docs).
wit_bindgen::generate!({
    path: ["../../wit", "wit"],
    world: "example:conformance/conformance",
    generate_all,
});

use std::time::Duration;

use exports::example::conformance::tools::Guest;
use toolhost::tool::host;

struct Conformance;

const PAUSE: Duration = Duration::from_millis(50);

impl Guest for Conformance {
    fn test_simple_text() -> String {
        "This is a simple text response for testing.".to_string()
    }

    fn test_error_handling() -> Result<String, String> {
        Err("This tool intentionally returns an error for testing".to_string())
    }

    fn test_tool_with_progress() -> String {
        for (i, done) in [0, 50, 100].into_iter().enumerate() {
            if i > 0 {
                std::thread::sleep(PAUSE);
            }
            host::progress(done, Some(100), "");
        }
        "Progress reported: 0, 50 and 100 of 100.".to_string()
    }

    fn test_tool_with_logging() -> String {
        let lines = [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed",
        ];
        for (i, line) in lines.into_iter().enumerate() {
            if i > 0 {
                std::thread::sleep(PAUSE);
            }
            host::log(host::Level::Info, line);
        }
        "Logged three lines.".to_string()
    }

    fn test_input_required_result_tampered_state() -> String {
        "approved".to_string()
    }

    fn slow_compute(seconds: u32, label: String) -> String {
        std::thread::sleep(Duration::from_secs(u64::from(seconds.min(120))));
        format!("computed {label} in {seconds} s")
    }

    fn failing_job() -> Result<String, String> {
        std::thread::sleep(Duration::from_secs(1));
        Err("the job failed, as it always does".to_string())
    }

    fn protocol_error_job() -> String {
        panic!("this job always panics")
    }

    fn confirm_delete(filename: String) -> String {
        format!("deleted {filename}")
    }
}

export!(Conformance);

/// The WIT this component was built from, embedded so the host can show its `///` docs to models.
#[link_section = "toolhost-wit"]
#[used]
static WIT: [u8; include_bytes!("../wit/world.wit").len()] = *include_bytes!("../wit/world.wit");
