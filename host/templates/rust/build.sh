#!/bin/sh
# Build {{name}}.wasm: a component for wasm32-wasip2, straight from cargo (the WIT and its docs
# are embedded by src/lib.rs).
set -eu
cd "$(dirname "$0")"
# toolhost: $TOOLHOST, else the one on the PATH, else the binary that wrote this project.
toolhost="${TOOLHOST:-$(command -v toolhost || echo {{toolhost}})}"
if command -v rustup >/dev/null 2>&1; then
    rustup target add wasm32-wasip2 >/dev/null 2>&1 || true
fi
cargo build --release --target wasm32-wasip2
cp "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/{{crate}}.wasm" {{name}}.wasm
# Compile it once into the cache its calls read (.toolhost/cache), so no call pays for it.
"$toolhost" check {{name}}.wasm >/dev/null
