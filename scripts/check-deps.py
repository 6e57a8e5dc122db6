#!/usr/bin/env python3
"""The workspace's dependency rules, checked from `cargo metadata` (run by .ci/run).

Every workspace crate (and the Python extension under python/) has a role, and each role may depend
on these roles only (dev-dependencies are free but for the test kit rule):

- core (`ostinato`): nothing of the workspace; it names no backend, pack or shell;
- code analysis (`ostinato-cuda-code`: reading NVIDIA kernel code without a driver session): the core
  only; it names no backend;
- backend (`ostinato-host`, `ostinato-cuda`, `ostinato-vulkan`, `ostinato-hsa`): the core, and the code
  analysis;
- simulator (`ostinato-aql-sim`: the simulated AQL packet processor): a test tool that plays a device
  behind a backend's own trait: the core and the backends (the one it plays for, the host backend
  whose kernels it runs). It is a dependency of the runtime only behind a cargo feature (an optional
  dependency, for `run --simulate`), of any other crate only as a dev-dependency, of a backend never
  (its tests live in the simulator's crate);
- pack (`ostinato-llama`): the core, and the host backend for its host twins' types; a backend never
  names a pack, and a pack never names another backend;
- runtime (`ostinato-runtime`): the core, the code analysis, backends and simulators, never a pack,
  shell or the bench;
- bench (`ostinato-bench`): the core, the runtime, packs, the code analysis and backends (its Ostinato
  arms and the raw baselines beside them), never a shell;
- shell (`ostinato-cli`, `ostinato-capi`, `ostinato-py`): the core, the runtime, packs and the bench;
  backends only through the runtime;
- interposer (`ostinato-preload`: the LD_PRELOAD shell over an application's own CUDA graphs): the
  core, the runtime and the code analysis (it reads the code the application loads, with no driver
  session of Ostinato's own); backends only through the runtime, never a pack or the bench;
- test kit (`ostinato-testkit`): only ever a dev-dependency.

A crate of no known role is an error too: a new crate must be given one here.

Usage: check-deps.py [--metadata FILE]  (FILE: `{"packages": [...]}` in cargo metadata's form, for
tests that plant a violation; default: the workspace's own metadata). Exits 1 and names each broken rule.
"""
import json
import subprocess
import sys

ROLES = {
    "ostinato": "core",
    "ostinato-cuda-code": "code analysis",
    "ostinato-host": "backend",
    "ostinato-cuda": "backend",
    "ostinato-vulkan": "backend",
    "ostinato-hsa": "backend",
    "ostinato-aql-sim": "simulator",
    "ostinato-llama": "pack",
    "ostinato-runtime": "runtime",
    "ostinato-bench": "bench",
    "ostinato-cli": "shell",
    "ostinato-capi": "shell",
    "ostinato-py": "shell",
    "ostinato-preload": "interposer",
    "ostinato-testkit": "testkit",
}

# role -> roles it may depend on (normal and build dependencies).
ALLOWED = {
    "core": set(),
    "code analysis": {"core"},
    "backend": {"core", "code analysis"},
    "simulator": {"core", "backend"},
    "pack": {"core", "host-backend"},
    "runtime": {"core", "code analysis", "backend", "simulator"},
    "bench": {"core", "runtime", "pack", "code analysis", "backend"},
    "shell": {"core", "runtime", "pack", "bench"},
    "interposer": {"core", "runtime", "code analysis"},
    "testkit": {"core", "backend", "simulator", "runtime", "pack"},
}

WHY = {
    "core": "the core names no backend, pack or shell",
    "code analysis": "the code analysis depends on the core only (it needs no driver session and names no backend)",
    "backend": "a backend depends on the core and the code analysis only",
    "simulator": "a simulator depends on the core and the backends it plays for",
    "pack": "a pack depends on the core and the host backend (its twins' types) only",
    "runtime": "the runtime never depends on a pack, a shell or the bench",
    "bench": "the bench never depends on a shell",
    "shell": "shells reach backends through the runtime",
    "interposer": "the interposer depends on the core, the runtime and the code analysis only (backends through the runtime)",
    "testkit": "the test kit is a test tool",
}


def role_of(name):
    return ROLES.get(name)


def target_roles(target):
    """The roles a dependency on `target` counts as (the host backend is also `host-backend`)."""
    r = {role_of(target)}
    if target == "ostinato-host":
        r.add("host-backend")
    return r


def broken_rules(packages):
    members = {p["name"]: p for p in packages}
    broken = []
    for name, pkg in sorted(members.items()):
        role = role_of(name)
        if role is None:
            broken.append(f"crate {name} has no role in scripts/check-deps.py (give it one)")
            continue
        for dep in pkg["dependencies"]:
            target, kind = dep["name"], dep.get("kind")
            if target not in members:
                continue
            if role_of(target) == "testkit" and kind != "dev" and role != "testkit":
                broken.append(f"{name} depends on the test kit {target} as a {kind or 'normal'} dependency (dev-dependency only)")
                continue
            if role_of(target) == "simulator":
                if role == "backend":
                    broken.append(f"backend {name} depends on the simulator {target}: a simulator is a test tool, never part of a backend")
                    continue
                if kind != "dev" and role == "runtime" and not dep.get("optional"):
                    broken.append(f"the runtime depends on the simulator {target} unconditionally: only behind a cargo feature (an optional dependency)")
                    continue
                if kind != "dev" and role != "runtime":
                    broken.append(f"{name} depends on the simulator {target} as a {kind or 'normal'} dependency (a test tool: a dev-dependency, or the runtime's optional one)")
                    continue
            if kind == "dev":
                continue
            if not (target_roles(target) & ALLOWED[role]):
                broken.append(f"{role} {name} depends on {role_of(target) or 'unclassified'} {target}: {WHY[role]}")
    return broken


def workspace_packages():
    packages = {}
    # The workspace, and the Python extension (its own cargo project under python/, built by maturin).
    for manifest in ([], ["--manifest-path", "python/Cargo.toml"]):
        meta = json.loads(subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline", *manifest], check=True, capture_output=True, text=True).stdout)
        packages.update({p["name"]: p for p in meta["packages"]})
    return list(packages.values())


def main(argv):
    if len(argv) == 2 and argv[0] == "--metadata":
        with open(argv[1]) as f:
            packages = json.load(f)["packages"]
    elif not argv:
        packages = workspace_packages()
    else:
        print("usage: check-deps.py [--metadata FILE]", file=sys.stderr)
        return 2
    broken = broken_rules(packages)
    for b in broken:
        print(f"dependency rule broken: {b}", file=sys.stderr)
    print(f"dependency rules: {len(packages)} crates checked, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
