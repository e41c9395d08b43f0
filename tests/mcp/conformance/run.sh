#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in
# package-lock.json) against `toolhost serve --http` on loopback: `just conformance`.
#
# Every server scenario runs; expected-failures.yml lists the ones that do not apply to a
# tools-only server (docs/mcp.md says why for each). The suite exits non-zero when a scenario
# outside that list fails, or when one inside it starts passing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
cd "$repo"

source "$repo/tests/mcp/node-env.sh"

work="$(mktemp -d)"
target/debug/toolhost serve --config "$here/toolhost.toml" --http 127.0.0.1:0 2>"$work/serve.log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true; rm -rf "$work"' EXIT
url=""
for _ in $(seq 300); do
    url="$(grep -o 'http://[^ ]*/mcp' "$work/serve.log" || true)"
    [ -n "$url" ] && break
    kill -0 $server 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
    sleep 0.1
done
[ -n "$url" ] || { echo "toolhost serve did not start" >&2; cat "$work/serve.log" >&2; exit 1; }
echo "conformance: $url" >&2

cd "$work" # the suite writes results/ into the working directory
node "$here/node_modules/@modelcontextprotocol/conformance/dist/index.js" server \
    --url "$url" --suite all --expected-failures "$here/expected-failures.yml" "$@"
