#!/usr/bin/env python3
"""The test binaries scripts/build-devbin.sh carries to the GPU machine run there from a checkout at
another path, so their sources may not find files through the build machine's paths: no
`env!("CARGO_MANIFEST_DIR")` (nor `option_env!`) in the files they are compiled from. Fixtures travel
inside the binaries (`include_bytes!`/`include_str!`) or are found relative to the working directory.

The carried binaries (keep in step with scripts/build-devbin.sh): every `gpu_*` and `vulkan_*`
integration test and what it includes from `tests/common/`, `contract_kernels`, `pack_contract`,
`ptx_fixtures`, and the unit tests of `ostinato-cuda` and `ostinato-cuda-code` (their `src/`).

Usage: check-carried-tests.py [ROOT]  (default: the repository). Exits 1 and names each file and line.
"""
import os
import re
import sys

FORBIDDEN = re.compile(r'\b(?:option_)?env!\(\s*"CARGO_MANIFEST_DIR"')
NAMED = ("contract_kernels.rs", "pack_contract.rs", "ptx_fixtures.rs")
LIB_CRATES = ("ostinato-cuda", "ostinato-cuda-code")


def carried_sources(root):
    """Every .rs file compiled into a carried test binary, as paths under `root`."""
    crates = os.path.join(root, "crates")
    for crate in sorted(os.listdir(crates)):
        tests = os.path.join(crates, crate, "tests")
        if os.path.isdir(tests):
            for name in sorted(os.listdir(tests)):
                path = os.path.join(tests, name)
                if name.endswith(".rs") and (name.startswith(("gpu_", "vulkan_")) or name in NAMED):
                    yield path
                elif name == "common" and os.path.isdir(path):
                    yield from walk_rs(path)
        if crate in LIB_CRATES:
            yield from walk_rs(os.path.join(crates, crate, "src"))


def walk_rs(top):
    for d, _, files in sorted(os.walk(top)):
        for f in sorted(files):
            if f.endswith(".rs"):
                yield os.path.join(d, f)


def violations(root):
    out = []
    for path in carried_sources(root):
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if FORBIDDEN.search(line):
                    out.append(f"{os.path.relpath(path, root)}:{n}: a carried test reads the build machine's path: {line.strip()}")
    return out


def main(argv):
    root = argv[0] if argv else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bad = violations(root)
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
