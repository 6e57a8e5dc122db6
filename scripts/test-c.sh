#!/usr/bin/env bash
# The C ABI's tests: installs it under a temporary prefix (scripts/install-c.sh, the dev profile's build:
# debug assertions and overflow checks on, and it reuses what `cargo test --workspace` compiled, where a
# release build would compile every dependency again; scripts/fuzz-campaign.sh runs the release
# library), builds the C and C++ examples against it with pkg-config and -Wall -Wextra -Werror
# (and record.c against the static library), and runs them from the repository root: on the host
# backend, and vulkan_free.c and record.c on whatever Vulkan device is found (they skip without one);
# then the graph-API interposer's C tests against a table driver.
# Each step prints a line as it starts; each test its time.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
say() { echo "test-c: $* [$((SECONDS - start)) s]"; }
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
say "building the C library (cargo build --profile dev -p ostinato-capi: about 2 min on 2 cores after cargo test --workspace, 4 from scratch) and installing it under $prefix"
OSTINATO_CARGO_PROFILE=dev bash scripts/install-c.sh "$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
flags="$(pkg-config --cflags --libs ostinato)"
cc=${CC:-cc}
cxx=${CXX:-c++}
passed=0 failed=0
run() {  # name, then the command
  local name=$1 t0=$SECONDS; shift
  if "$@"; then passed=$((passed + 1)); echo "ok   $name ($((SECONDS - t0)) s)"; else echo "FAILED: $name"; failed=$((failed + 1)); fi
}
say "building the examples against the installed library (cc and c++, -Wall -Wextra -Werror)"
for t in record errors handles ids statuses vulkan_free fuzz_calls; do
  run "build $t.c" $cc -std=c11 -Wall -Wextra -Werror examples/c/$t.c $flags -o "$prefix/$t"
done
run "build record.cpp" $cxx -std=c++17 -Wall -Wextra -Werror examples/c/record.cpp $flags -o "$prefix/record_cpp"
run "build record.c, static" $cc -std=c11 -Wall -Wextra -Werror examples/c/record.c -I"$prefix/include" "$prefix/lib/libostinato.a" -lpthread -ldl -lm -o "$prefix/record_static"
say "running the examples"
for t in record errors handles ids statuses record_cpp record_static vulkan_free; do
  [[ -x "$prefix/$t" ]] && run "run $t" "$prefix/$t"
done
# Random call sequences, each in a child process: none may panic, abort or give Vulkan other bytes
# than the host (scripts/fuzz-campaign.sh runs many more).
[[ -x "$prefix/fuzz_calls" ]] && run "run fuzz_calls (300 call sequences)" "$prefix/fuzz_calls" 300 7
# The same recording on Vulkan (lavapipe in CI), where a Vulkan device is found.
if vk=$("$prefix/record" vulkan 2>&1); then
  passed=$((passed + 1)); echo "ok   run record on vulkan: $vk"
elif grep -q "OST_ERR_BACKEND" <<<"$vk"; then
  echo "SKIP record.c on vulkan: $vk"
else
  echo "$vk"; echo "FAILED: run record vulkan"; failed=$((failed + 1))
fi
# The graph-API interposer (LD_PRELOAD) end to end against a table driver, from C programs that reach
# the driver as cudart does (dlopen, cuGetProcAddress) and as code linked to libcuda does (by name).
say "building the interposer (cargo build -p ostinato-preload) and running its C tests against a table driver"
if cargo build -q -p ostinato-preload; then
  run "interposer: tests/fake_driver/run.sh" bash crates/ostinato-preload/tests/fake_driver/run.sh "$(bash scripts/target-dir.sh)/debug/libostinato_preload.so"
else
  echo "FAILED: build the interposer"; failed=$((failed + 1))
fi
say "c abi: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
