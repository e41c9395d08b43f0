//! `TOOLHOST_BENCH_PROFILE=telemetry_off|telemetry_on`: the pipeline with the command line's
//! subscriber installed as `toolhost` installs it — off: the default filter, nothing exported;
//! on: every span, log record and metric exported over OTLP (sampling 100%) to a loopback
//! receiver that answers 200 and discards. One process each (a subscriber is installed once per process).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;

use toolhost_telemetry::{install, Endpoint, LogFormat};

/// Install the subscriber for `what`; `on` first starts the discarding OTLP receiver.
pub fn install_for(what: &str) {
    let endpoint = (what == "telemetry_on").then(|| Endpoint::Configured(discard()));
    install(LogFormat::Human, None, endpoint.as_ref()).expect("the subscriber installs");
}

/// A loopback OTLP/HTTP receiver that reads and drops every request; its base URL.
fn discard() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().expect("a clone"));
                let mut writer = stream;
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line.trim().is_empty() {
                            break;
                        }
                        if let Some((k, v)) = line.split_once(':') {
                            if k.eq_ignore_ascii_case("content-length") {
                                length = v.trim().parse().unwrap_or(0);
                            }
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let _ = writer.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
                }
            });
        }
    });
    url
}
