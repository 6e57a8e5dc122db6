#!/usr/bin/env bash
# Regenerates crates/ostinato-capi/include/ostinato.h with cbindgen (the test that checks it for drift
# writes it when OSTINATO_WRITE_HEADER is set).
set -euo pipefail
cd "$(dirname "$0")/.."
OSTINATO_WRITE_HEADER=1 cargo test -q -p ostinato-capi --test header
echo "wrote crates/ostinato-capi/include/ostinato.h"
