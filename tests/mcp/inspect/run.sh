#!/usr/bin/env bash
# The MCP Inspector CLI (pinned in package-lock.json) lists the tools of every config in the
# repository over stdio with `--strict`: `just inspect`. Any finding fails — errors (which make
# the Inspector exit 6) and warnings alike.
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
exit $failed
