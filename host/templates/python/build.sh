#!/bin/sh
# Build {{name}}.wasm from app.py with componentize-py (pinned, in .venv), then embed the WIT
# with its docs: componentize-py drops them, and they are the tools' descriptions.
set -eu
cd "$(dirname "$0")"
# toolhost: $TOOLHOST, else the one on the PATH, else the binary that wrote this project.
toolhost="${TOOLHOST:-$(command -v toolhost || echo {{toolhost}})}"
if [ ! -x .venv/bin/componentize-py ]; then
    python3 -m venv .venv
    .venv/bin/pip install --quiet componentize-py==0.25.1
fi
.venv/bin/componentize-py -d wit -w {{name}} componentize app -o {{name}}.wasm
"$toolhost" embed-wit {{name}}.wasm wit/world.wit
# Compile it once into the cache its calls read (.toolhost/cache), so no call pays for it.
"$toolhost" check {{name}}.wasm >/dev/null
