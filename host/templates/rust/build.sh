#!/bin/sh
# Build {{name}}.wasm: a component for wasm32-wasip2, straight from cargo (the WIT and its docs
# are embedded by src/lib.rs).
set -eu
cd "$(dirname "$0")"
if command -v rustup >/dev/null 2>&1; then
    rustup target add wasm32-wasip2 >/dev/null 2>&1 || true
fi
cargo build --release --target wasm32-wasip2
cp "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/{{crate}}.wasm" {{name}}.wasm
