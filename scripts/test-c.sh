#!/usr/bin/env bash
# The C ABI's tests: installs it under a temporary prefix (scripts/install-c.sh), builds the C and
# C++ examples against it with pkg-config and -Wall -Wextra -Werror (and record.c against the static
# library), and runs them from the repository root: on the host backend, and vulkan_free.c on whatever
# Vulkan device is found (it skips without one).
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
bash scripts/install-c.sh "$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
flags="$(pkg-config --cflags --libs ostinato)"
cc=${CC:-cc}
cxx=${CXX:-c++}
passed=0 failed=0
run() {  # name, then the command
  local name=$1; shift
  if "$@"; then passed=$((passed + 1)); else echo "FAILED: $name"; failed=$((failed + 1)); fi
}
run "build record.c" $cc -std=c11 -Wall -Wextra -Werror examples/c/record.c $flags -o "$prefix/record"
run "build errors.c" $cc -std=c11 -Wall -Wextra -Werror examples/c/errors.c $flags -o "$prefix/errors"
run "build handles.c" $cc -std=c11 -Wall -Wextra -Werror examples/c/handles.c $flags -o "$prefix/handles"
run "build ids.c" $cc -std=c11 -Wall -Wextra -Werror examples/c/ids.c $flags -o "$prefix/ids"
run "build statuses.c" $cc -std=c11 -Wall -Wextra -Werror examples/c/statuses.c $flags -o "$prefix/statuses"
run "build vulkan_free.c" $cc -std=c11 -Wall -Wextra -Werror examples/c/vulkan_free.c $flags -o "$prefix/vulkan_free"
run "build fuzz_calls.c" $cc -std=c11 -Wall -Wextra -Werror examples/c/fuzz_calls.c $flags -o "$prefix/fuzz_calls"
run "build record.cpp" $cxx -std=c++17 -Wall -Wextra -Werror examples/c/record.cpp $flags -o "$prefix/record_cpp"
run "build record.c, static" $cc -std=c11 -Wall -Wextra -Werror examples/c/record.c -I"$prefix/include" "$prefix/lib/libostinato.a" -lpthread -ldl -lm -o "$prefix/record_static"
for t in record errors handles ids statuses record_cpp record_static vulkan_free; do
  [[ -x "$prefix/$t" ]] && run "run $t" "$prefix/$t"
done
# Random call sequences, each in a child process: none may panic, abort or give Vulkan other bytes
# than the host (scripts/fuzz-campaign.sh runs many more).
[[ -x "$prefix/fuzz_calls" ]] && run "run fuzz_calls" "$prefix/fuzz_calls" 300 7
# The same recording on Vulkan (lavapipe in CI), where a Vulkan device is found.
if vk=$("$prefix/record" vulkan 2>&1); then
  passed=$((passed + 1)); echo "$vk"
elif grep -q "OST_ERR_BACKEND" <<<"$vk"; then
  echo "SKIP record.c on vulkan: $vk"
else
  echo "$vk"; echo "FAILED: run record vulkan"; failed=$((failed + 1))
fi
echo "c abi: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
