//! The `toolhost` command: parses its arguments and runs them with the library
//! ([`toolhost::cli`], which says why the commands live there).

use clap::Parser;

fn main() -> std::process::ExitCode {
    toolhost::cli::Cli::parse().run()
}
