#!/usr/bin/env bash
# The MCP Inspector CLI (pinned in package-lock.json) lists the tools of every config in the
# repository over stdio with `--strict`: `just inspect`. Any finding fails — errors (which make
# the Inspector exit 6) and warnings alike. Then it calls a task tool in its default mode.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
cd "$repo"

source "$repo/tests/mcp/node-env.sh"

inspector="$here/node_modules/@modelcontextprotocol/inspector/clients/cli/build/index.js"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=0
for config in toolhost.toml tests/fixtures/adversarial.toml tests/mcp/inspect/every-type.toml \
    tests/mcp/conformance/toolhost.toml; do
    status=0
    MCP_CATALOG_PATH="$work/catalog.json" node "$inspector" --method tools/list --strict -- \
        "$repo/target/debug/toolhost" serve --config "$repo/$config" \
        >"$work/tools.json" 2>"$work/stderr" || status=$?
    tools="$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).tools.length)' "$work/tools.json" 2>/dev/null || echo "?")"
    findings="$(grep -cE '^(Error|Warning): tool' "$work/stderr" || true)"
    echo "inspect: $config: $tools tools, exit $status, $findings findings"
    if [ "$status" -ne 0 ] || [ "$findings" -ne 0 ] || [ "$tools" = "?" ]; then
        grep -vE 'MCP session [^ ]+ started' "$work/stderr" >&2 || true
        failed=1
    fi
done
# The Inspector in its default mode declares the tasks extension in its 2025-11-25 session:
# a call of a task tool must come back in that era's shape (the call runs in the request).
status=0
MCP_CATALOG_PATH="$work/catalog.json" node "$inspector" --method tools/call \
    --tool-name slow_compute --tool-arg seconds=0 --tool-arg label=inspector -- \
    "$repo/target/debug/toolhost" serve --config "$repo/tests/mcp/conformance/toolhost.toml" \
    >"$work/call.json" 2>"$work/stderr" || status=$?
result="$(node -e 'const r = JSON.parse(require("fs").readFileSync(process.argv[1])); console.log(r.isError === false ? r.structuredContent.result : "failed")' "$work/call.json" 2>/dev/null || echo "?")"
echo "inspect: a task tool in a handshake session: exit $status, $result"
if [ "$status" -ne 0 ] || [ "$result" != "computed inspector in 0 s" ]; then
    cat "$work/call.json" >&2
    grep -vE 'MCP session [^ ]+ started' "$work/stderr" >&2 || true
    failed=1
fi
exit $failed
