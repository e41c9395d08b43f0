#!/usr/bin/env bash
# Build the polyglot example tools in Python (componentize-py) and JavaScript (componentize-js)
# into guest-tools/target/polyglot/{python,js}.wasm, then embed their WIT with the toolhost
# binary named by $TOOLHOST. Each is rebuilt only when its inputs changed (a stamp holds their
# SHA-256); both toolchains are pinned (requirements.txt, js/package-lock.json).
set -euo pipefail
cd "$(dirname "$0")"
repo=$(cd ../.. && pwd)
out=$repo/guest-tools/target/polyglot
toolhost=${TOOLHOST:?set TOOLHOST to the toolhost binary}
mkdir -p "$out/wit/deps/toolhost"
cp world.wit "$out/wit/world.wit"
cp "$repo/wit/tool.wit" "$out/wit/deps/toolhost/tool.wit"

# Whether $1.wasm is missing or older than its inputs (the rest of the arguments).
stale() {
    local name=$1
    shift
    local sum
    sum=$(cat "$@" | sha256sum | cut -d' ' -f1)
    [ -f "$out/$name.wasm" ] && [ "$(cat "$out/$name.stamp" 2>/dev/null)" = "$sum" ] && return 1
    echo "$sum" > "$out/$name.stamp.next"
}

if stale python world.wit "$repo/wit/tool.wit" python/app.py requirements.txt; then
    if ! "$repo/.venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('componentize-py') != '0.25.1')" 2>/dev/null; then
        echo "polyglot: installing componentize-py 0.25.1 into .venv" >&2
        [ -x "$repo/.venv/bin/pip" ] || python3 -m venv "$repo/.venv"
        "$repo/.venv/bin/pip" install --quiet --disable-pip-version-check -r requirements.txt
    fi
    echo "polyglot: building python.wasm (componentize-py, about 20 s)" >&2
    "$repo/.venv/bin/componentize-py" -q -d "$out/wit" -w polyglot componentize app -p python -o "$out/python.wasm"
    "$toolhost" embed-wit "$out/python.wasm" "$out/wit/world.wit"
    mv "$out/python.stamp.next" "$out/python.stamp"
fi

if stale js world.wit "$repo/wit/tool.wit" js/tools.js js/package-lock.json; then
    if ! cmp -s js/package-lock.json js/node_modules/.installed-lock.json; then
        echo "polyglot: installing componentize-js (npm ci)" >&2
        npm ci --prefix js --no-audit --no-fund --loglevel=error >/dev/null
        cp js/package-lock.json js/node_modules/.installed-lock.json
    fi
    echo "polyglot: building js.wasm (componentize-js, about 30 s)" >&2
    # `-d http fetch-event`: no wasi:http import, which toolhost links only with a network grant.
    js/node_modules/.bin/componentize-js js/tools.js -w "$out/wit" -n polyglot -d http fetch-event -o "$out/js.wasm" >/dev/null
    "$toolhost" embed-wit "$out/js.wasm" "$out/wit/world.wit"
    mv "$out/js.stamp.next" "$out/js.stamp"
fi
