#!/bin/sh
# The one test: call the built tool through toolhost, nothing granted, and check its answer.
set -eu
cd "$(dirname "$0")"
out=$("${TOOLHOST:-toolhost}" call --component {{name}}.wasm greet '{"name":"Ada"}')
case "$out" in
    *'"completed"'*'"Hello, Ada!"'*) echo "ok: $out" ;;
    *) echo "FAILED: $out" >&2; exit 1 ;;
esac
