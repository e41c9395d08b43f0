#!/bin/sh
# Build {{name}}.wasm from tool.js with componentize-js (pinned in package.json), then embed
# the WIT with its docs: componentize-js drops them, and they are the tools' descriptions.
set -eu
cd "$(dirname "$0")"
# toolhost: $TOOLHOST, else the one on the PATH, else the binary that wrote this project.
toolhost="${TOOLHOST:-$(command -v toolhost || echo {{toolhost}})}"
if [ ! -x node_modules/.bin/componentize-js ]; then
    npm install --no-audit --no-fund --silent
fi
# `-d http fetch-event` drops the wasi:http imports the JavaScript engine adds for fetch():
# toolhost links wasi:http only for a tool with a network grant. Keep them (remove this flag)
# only for a tool that sends HTTP requests, and grant it the hosts it needs.
node_modules/.bin/componentize-js tool.js -w wit -n {{name}} -d http fetch-event -o {{name}}.wasm
"$toolhost" embed-wit {{name}}.wasm wit/world.wit
# Compile it once into the cache its calls read (.toolhost/cache), so no call pays for it.
"$toolhost" check {{name}}.wasm >/dev/null
