# toolhost tasks. `just test` is what CI runs (via .ci/run).

set shell := ["bash", "-euo", "pipefail", "-c"]

guests := "guest-tools/target/wasm32-wasip2/release"

# List the recipes.
default:
    @just --list

# Add the wasm32-wasip2 target when it is missing.
setup:
    @rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2
    @mkdir -p workspace

# Build every guest tool component (release, wasm32-wasip2).
build-guests: setup
    @echo "just: building the guest components (wasm32-wasip2, release; minutes the first time)"
    cd guest-tools && cargo build --target wasm32-wasip2 --release

# Build the one guest the benchmarks load (a fresh clone's `just bench` skips the other eight).
build-bench-guest: setup
    cd guest-tools && cargo build --target wasm32-wasip2 --release --quiet -p bench-tools

# Build the Python and JavaScript example tools (guest-tools/polyglot) with their pinned
# toolchains, each only when its sources changed; the host embeds their WIT.
build-polyglot: setup-mcp
    cargo build
    TOOLHOST="{{justfile_directory()}}/target/debug/toolhost" bash guest-tools/polyglot/build.sh

# Build the host.
build: build-guests
    @echo "just: building the host (debug; about 5 minutes the first time on 2 cores)"
    cargo build

# The pinned clients the MCP tests drive toolhost with (the MCP SDKs, the Prometheus parser,
# Node 24 for the clients that need Node >= 22): Python in .venv (installed again when
# requirements.txt changed), TypeScript in tests/mcp/ts and tests/mcp/modern, and the mock model
# server the agent tests run against in tests/models (npm ci again when a lock file changed).
setup-mcp:
    @cmp -s tests/mcp/requirements.txt .venv/.installed-requirements.txt 2>/dev/null \
        || (python3 -m venv .venv && .venv/bin/pip install --quiet --disable-pip-version-check -r tests/mcp/requirements.txt \
            && cp tests/mcp/requirements.txt .venv/.installed-requirements.txt)
    @cmp -s tests/mcp/ts/package-lock.json tests/mcp/ts/node_modules/.installed-lock.json 2>/dev/null \
        || (npm ci --prefix tests/mcp/ts --no-audit --no-fund --loglevel=error >/dev/null \
            && cp tests/mcp/ts/package-lock.json tests/mcp/ts/node_modules/.installed-lock.json)
    @cmp -s tests/mcp/modern/package-lock.json tests/mcp/modern/node_modules/.installed-lock.json 2>/dev/null \
        || (npm ci --prefix tests/mcp/modern --no-audit --no-fund --loglevel=error >/dev/null \
            && cp tests/mcp/modern/package-lock.json tests/mcp/modern/node_modules/.installed-lock.json)
    @cmp -s tests/models/package-lock.json tests/models/node_modules/.installed-lock.json 2>/dev/null \
        || (npm ci --prefix tests/models --no-audit --no-fund --loglevel=error >/dev/null \
            && cp tests/models/package-lock.json tests/models/node_modules/.installed-lock.json)

# HAProxy, the load balancer the many-hosts tests (tests/all/balanced.rs) put in front of three
# hosts: Debian's package, installed when missing (as root, or through sudo).
setup-haproxy:
    @command -v haproxy >/dev/null || test -x /usr/sbin/haproxy || { \
        sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo -n"; \
        export DEBIAN_FRONTEND=noninteractive; \
        $sudo apt-get install -y -q haproxy >/dev/null 2>&1 \
        || { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q haproxy >/dev/null; }; }

# The approval console's browser tests (tests/all/console_browser.rs): Debian's chromium,
# installed when missing (as root, or through sudo), and playwright-core in tests/console to
# drive it (npm ci again when the lock file changed).
setup-console:
    @command -v chromium >/dev/null || { \
        sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo -n"; \
        export DEBIAN_FRONTEND=noninteractive; \
        $sudo apt-get install -y -q chromium >/dev/null 2>&1 \
        || { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q chromium >/dev/null; }; }
    @cmp -s tests/console/package-lock.json tests/console/node_modules/.installed-lock.json 2>/dev/null \
        || (npm ci --prefix tests/console --no-audit --no-fund --loglevel=error >/dev/null \
            && cp tests/console/package-lock.json tests/console/node_modules/.installed-lock.json)

# Debian's docker-registry (the reference OCI distribution server), which the OCI tests start
# on loopback.
setup-registry:
    @command -v docker-registry >/dev/null || { \
        sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo -n"; \
        export DEBIAN_FRONTEND=noninteractive; \
        $sudo apt-get install -y -q docker-registry >/dev/null 2>&1 \
        || { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q docker-registry >/dev/null; }; }

# The MCP Inspector CLI (--strict) over every config's tools/list; any finding fails.
inspect: build setup-mcp
    bash tests/mcp/inspect/run.sh

# The official MCP conformance suite against `toolhost serve --http` (expected-failures*.yml
# list the checks that do not apply to a tools-only server; docs/mcp.md says why).
conformance: build setup-mcp
    bash tests/mcp/conformance/run.sh

# Build guests, then run every test (unit and integration), then the MCP Inspector's strict
# schema check and the official conformance suite against the binary the tests built.
test: build-guests setup-mcp build-polyglot setup-haproxy setup-registry setup-console
    cargo test --workspace -- --test-threads 4
    if [ -n "${JSON_SCHEMA_TEST_SUITE:-}" ]; then cargo test --test all -- --ignored json_schema_suite; else echo "json_schema_suite: ignored (set JSON_SCHEMA_TEST_SUITE to the suite's directory to run it)"; fi
    if [ -n "${TOOLHOST_TEST_POSTGRES_URL:-}" ]; then cargo test --workspace --lib --test all -- --ignored pg_ --test-threads 4; else echo "PostgreSQL tests (pg_*): ignored (set TOOLHOST_TEST_POSTGRES_URL, e.g. postgres://postgres@127.0.0.1:5432/test, to run them against a server; each test uses a schema of its own)"; fi
    bash tests/mcp/inspect/run.sh
    bash tests/mcp/conformance/run.sh

# Seconds each target runs in `just fuzz` (`just fuzz_secs=600 fuzz`).
fuzz_secs := "60"
# No sanitizer: toolhost denies unsafe code and the targets drive safe parsers, so ASan would
# mostly halve the executions; 16 codegen units keep the instrumented build of wasmtime short.
# cargo-fuzz, libFuzzer, nightly; crashes land in fuzz/artifacts/<target>/ (docs/fuzzing.md).
fuzz_flags := "--sanitizer none --codegen-units 16 --target-dir fuzz/target"

# Fuzz each untrusted-input parser for fuzz_secs, one at a time (all, or the targets named).
fuzz *TARGETS: build-guests
    #!/usr/bin/env bash
    set -euo pipefail
    command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
    targets="{{TARGETS}}"
    [ -n "$targets" ] || targets="$(cargo +nightly fuzz list --fuzz-dir fuzz)"
    for t in $targets; do
        mkdir -p "fuzz/work/$t"
        cargo +nightly fuzz run --fuzz-dir fuzz {{fuzz_flags}} "$t" "fuzz/work/$t" "fuzz/corpus/$t" \
            -- -max_total_time={{fuzz_secs}} -timeout=10 -print_final_stats=1
    done

# Formatting and clippy, host and guests.
lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings
    cd guest-tools && cargo fmt --all --check && cargo clippy --target wasm32-wasip2 --release -- -D warnings

# A few real calls and a few hostile ones, as a table.
demo: build
    bash tests/demo.sh

# Serve the example tools over MCP on stdio (add `--http 127.0.0.1:8080` for Streamable HTTP).
serve *ARGS: build
    cargo run --quiet -- serve {{ARGS}}

# An agent run against a tiny scripted OpenAI-compatible server (tests/fake_model.py).
agent-demo: build
    #!/usr/bin/env bash
    set -euo pipefail
    python3 tests/fake_model.py 8766 & server=$!
    trap 'kill $server' EXIT
    sleep 1
    cargo run --quiet -- agent --base-url http://127.0.0.1:8766/v1 --model fake \
        --prompt "How many kilometres are 3 miles?"

# Benchmarks (release): the per-call floor, the pipeline over it, throughput, MCP, cold start,
# memory. Writes target/bench/report.json and report.md (`just test` runs a smoke pass); then the
# pipeline with the command line's subscriber, telemetry off and on (OTLP, every span).
bench: build-bench-guest setup-registry
    cargo bench -p toolhost --bench bench --no-run
    TOOLHOST="{{justfile_directory()}}/target/release/toolhost" bash guest-tools/polyglot/build.sh
    cargo bench -p toolhost --bench bench
    TOOLHOST_BENCH_PROFILE=telemetry_off cargo bench -p toolhost --bench bench
    TOOLHOST_BENCH_PROFILE=telemetry_on cargo bench -p toolhost --bench bench

# REV is built beside this tree (under target/bench-compare), both benches run in PAIRS
# alternating pairs, and each figure's ratio (this / REV) is printed; PROFILE runs one workload
# alone (`just bench-compare 615bbc4 5 pipeline`). See host/benches/compare.py.
# Judge this tree against another revision, by ratio, in one run.
bench-compare REV PAIRS="3" PROFILE="": build-bench-guest
    python3 host/benches/compare.py {{REV}} --pairs {{PAIRS}} {{ if PROFILE != "" { "--profile " + PROFILE } else { "" } }}

# Print the example tools' definitions.
tools: build
    cargo run --quiet -- tools
