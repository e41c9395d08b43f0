#!/bin/sh
# The one test: call the built tool through toolhost, nothing granted, and check its answer.
set -eu
cd "$(dirname "$0")"
# toolhost: $TOOLHOST, else the one on the PATH, else the binary that wrote this project.
toolhost="${TOOLHOST:-$(command -v toolhost || echo {{toolhost}})}"
out=$("$toolhost" call --component {{name}}.wasm greet '{"name":"Ada"}')
case "$out" in
    *'"completed"'*'"Hello, Ada!"'*) echo "ok: $out" ;;
    *) echo "FAILED: $out" >&2; exit 1 ;;
esac
