#!/usr/bin/env bash
# Builds the C ABI and installs it under PREFIX: lib/libostinato.so, lib/libostinato.a,
# include/ostinato.h and lib/pkgconfig/ostinato.pc, so that
#   cc app.c $(PKG_CONFIG_PATH=PREFIX/lib/pkgconfig pkg-config --cflags --libs ostinato)
# builds an engine against it. Usage: scripts/install-c.sh PREFIX
# OSTINATO_CARGO_PROFILE picks another cargo profile than release (the C tests install the dev build).
set -euo pipefail
PREFIX=${1:?usage: scripts/install-c.sh PREFIX}
cd "$(dirname "$0")/.."
profile=${OSTINATO_CARGO_PROFILE:-release}
cargo build --profile "$profile" -p ostinato-capi
# Where cargo put the artifacts (CARGO_TARGET_DIR, a config's target-dir, or ./target; the dev profile's
# folder is debug).
target=$(bash scripts/target-dir.sh)
[[ $profile == dev ]] && out=$target/debug || out=$target/$profile
mkdir -p "$PREFIX/lib/pkgconfig" "$PREFIX/include"
PREFIX=$(cd "$PREFIX" && pwd)
install -m 0755 "$out/libostinato_capi.so" "$PREFIX/lib/libostinato.so"
install -m 0644 "$out/libostinato_capi.a" "$PREFIX/lib/libostinato.a"
install -m 0644 crates/ostinato-capi/include/ostinato.h "$PREFIX/include/ostinato.h"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
cat > "$PREFIX/lib/pkgconfig/ostinato.pc" <<PC
prefix=$PREFIX
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: ostinato
Description: Record a GPU kernel DAG once, replay it as one retained submission (C ABI)
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lostinato
Libs.private: -lpthread -ldl -lm
PC
echo "installed ostinato $version under $PREFIX"
