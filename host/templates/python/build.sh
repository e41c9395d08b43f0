#!/bin/sh
# Build {{name}}.wasm from app.py with componentize-py (pinned, in .venv), then embed the WIT
# with its docs: componentize-py drops them, and they are the tools' descriptions.
set -eu
cd "$(dirname "$0")"
if [ ! -x .venv/bin/componentize-py ]; then
    python3 -m venv .venv
    .venv/bin/pip install --quiet componentize-py==0.25.1
fi
.venv/bin/componentize-py -d wit -w {{name}} componentize app -o {{name}}.wasm
"${TOOLHOST:-toolhost}" embed-wit {{name}}.wasm wit/world.wit
