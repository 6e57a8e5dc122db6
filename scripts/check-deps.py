#!/usr/bin/env python3
"""The workspace's dependency rules, checked from `cargo metadata` (run by .ci/run):

- the core (`ostinato`) depends on no other workspace crate;
- a backend crate (`ostinato-host`, `ostinato-cuda`, `ostinato-vulkan`, later `ostinato-hsa`) depends
  on the core only, except as a dev-dependency (the test kit);
- the runtime depends on the core and backends, never on a shell or the benchmark;
- a shell (`ostinato-cli`, `ostinato-capi`, `ostinato-py`, `ostinato-preload`) reaches backends only
  through the runtime (it may also use the core and the benchmark);
- the test kit is only ever a dev-dependency;
- a simulator (`ostinato-aql-sim`: the simulated AQL packet processor) is a test tool, never a backend:
  it depends on the core, backends and (as a dev-dependency) the test kit only; the runtime may use it
  only as an optional dependency (behind a cargo feature); any other crate only as a dev-dependency
  (a backend not even so: its tests live in the simulator's crate).
Exits 1 and names each broken rule.
"""
import json
import subprocess
import sys

CORE = "ostinato"
BACKENDS = {"ostinato-host", "ostinato-cuda", "ostinato-vulkan", "ostinato-hsa"}
RUNTIME = "ostinato-runtime"
SHELLS = {"ostinato-cli", "ostinato-capi", "ostinato-py", "ostinato-preload"}
TESTKIT = "ostinato-testkit"
SIMULATORS = {"ostinato-aql-sim"}
BENCH = "ostinato-bench"


def main() -> int:
    members = {}
    # The workspace, and the Python extension (its own cargo project under python/, built by maturin).
    for manifest in ([], ["--manifest-path", "python/Cargo.toml"]):
        meta = json.loads(subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline", *manifest], check=True, capture_output=True, text=True).stdout)
        members.update({p["name"]: p for p in meta["packages"]})
    broken = []
    for name, pkg in members.items():
        for dep in pkg["dependencies"]:
            target, dev = dep["name"], dep.get("kind") == "dev"
            if target not in members:
                continue
            if target == TESTKIT and not dev and name != TESTKIT:
                broken.append(f"{name} depends on the test kit as a {dep.get('kind') or 'normal'} dependency (dev-dependency only)")
            if target in SIMULATORS:
                if name in BACKENDS:
                    broken.append(f"backend {name} depends on the simulator {target}: a simulator is a test tool, never part of a backend")
                elif name == RUNTIME and not dev and not dep.get("optional"):
                    broken.append(f"the runtime depends on the simulator {target} unconditionally: only behind a cargo feature (an optional dependency)")
                elif name != RUNTIME and not dev:
                    broken.append(f"{name} depends on the simulator {target} as a {dep.get('kind') or 'normal'} dependency (a test tool: dev-dependency, or the runtime's optional one)")
            if name in SIMULATORS and not dev and target not in BACKENDS and target != CORE:
                broken.append(f"the simulator {name} depends on {target}: a simulator stands on the core and the backends only")
            if dev:
                continue
            if name == CORE:
                broken.append(f"the core depends on {target}: it must name no backend or shell")
            elif name in BACKENDS and target != CORE and target not in SIMULATORS:
                broken.append(f"backend {name} depends on {target}: a backend depends on the core only")
            elif name == RUNTIME and (target in SHELLS or target == BENCH):
                broken.append(f"the runtime depends on {target}: shells call the runtime, not the other way")
            elif name in SHELLS and target in BACKENDS:
                broken.append(f"shell {name} depends on backend {target} directly: shells reach backends through the runtime")
    for b in broken:
        print(f"dependency rule broken: {b}", file=sys.stderr)
    print(f"dependency rules: {len(members)} crates checked, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
