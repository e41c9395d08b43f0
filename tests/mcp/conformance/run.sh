#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in
# package-lock.json) against `toolhost serve --http` on loopback: `just conformance`. Then the
# newest pre-release (next/package-lock.json): its 2025-11-25 scenarios, the scenarios
# 2026-07-28 requires (expected-failures-2026.yml), and the tasks extension's
# (expected-failures-tasks.yml).
#
# Every server scenario runs; expected-failures.yml lists the checks that do not apply to a
# tools-only server (docs/mcp.md says why for each), as `scenario:check-id`. The suite exits
# non-zero when any other check fails or warns, or when a listed one starts passing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
cd "$repo"

source "$repo/tests/mcp/node-env.sh"
# The newest pre-release too (next/): its 2025-11-25 scenarios and what 2026-07-28 requires.
suite_here="$here"
here="$here/next" source "$repo/tests/mcp/node-env.sh"
here="$suite_here"

work="$(mktemp -d)"
server=""
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true; rm -rf "$work"' EXIT

# A fresh server for each suite: a suite leaves its sessions open, and one identity holds at
# most 32 (without tokens every client is the config's identity).
serve() {
    if [ -n "$server" ]; then kill $server 2>/dev/null; wait $server 2>/dev/null || true; fi
    "$repo/target/debug/toolhost" serve --config "$here/toolhost.toml" --http 127.0.0.1:0 \
        2>"$work/serve.log" &
    server=$!
    url=""
    for _ in $(seq 300); do
        url="$(grep -o 'http://[^ ]*/mcp' "$work/serve.log" || true)"
        [ -n "$url" ] && break
        kill -0 $server 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
        sleep 0.1
    done
    [ -n "$url" ] || { echo "toolhost serve did not start" >&2; cat "$work/serve.log" >&2; exit 1; }
    echo "conformance: $url" >&2
}

cd "$work" # the suite writes results/ into the working directory
# 0.1.16 reads whole scenarios only: the scenarios of the per-check list, each once.
{ echo "server:"; sed -n 's/^  - \([a-z0-9-]*\):.*$/  - \1/p' "$here/expected-failures.yml" | sort -u; } \
    >"$work/expected-scenarios.yml"
serve
node "$here/node_modules/@modelcontextprotocol/conformance/dist/index.js" server \
    --url "$url" --suite all --expected-failures "$work/expected-scenarios.yml" "$@"
next="$here/next/node_modules/@modelcontextprotocol/conformance/dist/index.js"
echo "conformance: 0.2.0-alpha.12, 2025-11-25 scenarios" >&2
serve
node "$next" server --url "$url" --suite all --spec-version 2025-11-25 \
    --expected-failures "$here/expected-failures.yml" "$@"
echo "conformance: 0.2.0-alpha.12, what 2026-07-28 requires" >&2
serve
node "$next" server --url "$url" --requirements 2026-07-28 \
    --expected-failures "$here/expected-failures-2026.yml" "$@"
# Every scenario the suite scores for 2026-07-28 (`--suite all --spec-version`, as the suite
# scores itself): the required ones and json-schema-2020-12, http-custom-header-server-validation.
echo "conformance: 0.2.0-alpha.12, every 2026-07-28 scenario" >&2
serve
node "$next" server --url "$url" --suite all --spec-version 2026-07-28 \
    --expected-failures "$here/expected-failures-2026.yml" "$@"
# The tasks extension's scenarios (not part of what 2026-07-28 requires: an extension), one by
# one against one server; expected-failures-tasks.yml lists the checks that do not apply.
echo "conformance: 0.2.0-alpha.12, the tasks extension" >&2
serve
for scenario in tasks-lifecycle tasks-capability-negotiation tasks-wire-fields \
    tasks-request-state-removal tasks-dispatch-and-envelope tasks-required-task-error \
    tasks-request-headers tasks-mrtr-input tasks-mrtr-composition tasks-status-notifications; do
    node "$next" server --url "$url" --scenario "$scenario" \
        --expected-failures "$here/expected-failures-tasks.yml" "$@"
done
