#!/usr/bin/env python3
"""Mutation tests of scripts/check-deps.py: the workspace's real metadata passes, and each planted
violation (one dependency added to the real graph) is caught with a message naming both crates."""
import copy
import importlib.util
import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("check_deps", os.path.join(HERE, "check-deps.py"))
check_deps = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_deps)


def plant(packages, crate, dep, kind=None):
    """A copy of `packages` in which `crate` depends on `dep` (a dependency of `kind`)."""
    out = copy.deepcopy(packages)
    for p in out:
        if p["name"] == crate:
            p["dependencies"].append({"name": dep, "kind": kind})
            return out
    raise KeyError(crate)


class CheckDeps(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.chdir(os.path.dirname(HERE))
        cls.packages = check_deps.workspace_packages()

    def assert_caught(self, crate, dep, kind=None, words=()):
        broken = check_deps.broken_rules(plant(self.packages, crate, dep, kind))
        self.assertTrue(broken, f"{crate} -> {dep} was not caught")
        hit = [b for b in broken if crate in b and dep in b]
        self.assertTrue(hit, f"no message names {crate} and {dep}: {broken}")
        for w in words:
            self.assertIn(w, hit[0])

    def test_the_workspace_keeps_every_rule(self):
        self.assertEqual(check_deps.broken_rules(self.packages), [])

    def test_backend_to_backend(self):
        self.assert_caught("ostinato-cuda", "ostinato-vulkan", words=["backend"])
        self.assert_caught("ostinato-vulkan", "ostinato-host", words=["backend"])

    def test_code_analysis_to_anything_but_the_core(self):
        self.assert_caught("ostinato-cuda-code", "ostinato-cuda", words=["code analysis", "names no backend"])
        self.assert_caught("ostinato-cuda-code", "ostinato-runtime", words=["code analysis"])
        self.assert_caught("ostinato-cuda-code", "ostinato-llama")
        # Who may use it: any backend, the runtime and the bench; not a pack, not a shell.
        for crate in ("ostinato-vulkan", "ostinato-runtime", "ostinato-bench"):
            self.assertEqual(check_deps.broken_rules(plant(self.packages, crate, "ostinato-cuda-code")), [], crate)
        self.assert_caught("ostinato-llama", "ostinato-cuda-code", words=["pack"])
        self.assert_caught("ostinato-cli", "ostinato-cuda-code", words=["shell"])

    def test_backend_to_domain_pack(self):
        self.assert_caught("ostinato-cuda", "ostinato-llama", words=["backend", "pack"])
        self.assert_caught("ostinato-host", "ostinato-llama")

    def test_cli_to_backend(self):
        self.assert_caught("ostinato-cli", "ostinato-cuda", words=["through the runtime"])
        self.assert_caught("ostinato-capi", "ostinato-host")

    def test_core_to_anything(self):
        self.assert_caught("ostinato", "ostinato-host", words=["core"])

    def test_pack_to_a_gpu_backend_or_the_runtime(self):
        self.assert_caught("ostinato-llama", "ostinato-cuda", words=["pack"])
        self.assert_caught("ostinato-llama", "ostinato-runtime")

    def test_runtime_to_pack_shell_or_bench(self):
        self.assert_caught("ostinato-runtime", "ostinato-llama", words=["runtime"])
        self.assert_caught("ostinato-runtime", "ostinato-bench")
        self.assert_caught("ostinato-runtime", "ostinato-cli")

    def test_bench_to_shell(self):
        self.assert_caught("ostinato-bench", "ostinato-cli", words=["bench"])

    def test_interposer_reads_code_and_reaches_backends_through_the_runtime(self):
        for dep in ("ostinato-runtime", "ostinato-cuda-code", "ostinato"):
            self.assertEqual(check_deps.broken_rules(plant(self.packages, "ostinato-preload", dep)), [], dep)
        self.assert_caught("ostinato-preload", "ostinato-cuda", words=["interposer", "through the runtime"])
        self.assert_caught("ostinato-preload", "ostinato-llama", words=["interposer"])
        self.assert_caught("ostinato-preload", "ostinato-bench", words=["interposer"])
        self.assert_caught("ostinato-preload", "ostinato-cli", words=["interposer"])
        # Nothing builds on the interposer: a shell or the runtime naming it is caught.
        self.assert_caught("ostinato-cli", "ostinato-preload", words=["shell"])
        self.assert_caught("ostinato-runtime", "ostinato-preload", words=["runtime"])

    def test_test_kit_only_as_a_dev_dependency(self):
        self.assert_caught("ostinato-cuda", "ostinato-testkit", kind=None, words=["dev-dependency only"])
        self.assert_caught("ostinato-runtime", "ostinato-testkit", kind="build")
        self.assertEqual(check_deps.broken_rules(plant(self.packages, "ostinato-runtime", "ostinato-testkit", kind="dev")), [])

    def test_the_simulator_stays_a_test_tool(self):
        self.assert_caught("ostinato-hsa", "ostinato-aql-sim", kind="dev", words=["never part of a backend"])
        self.assert_caught("ostinato-cli", "ostinato-aql-sim", words=["dev-dependency, or the runtime's optional one"])
        self.assert_caught("ostinato-aql-sim", "ostinato-runtime", words=["simulator"])
        packages = copy.deepcopy(self.packages)
        for p in packages:
            if p["name"] == "ostinato-runtime":
                for d in p["dependencies"]:
                    if d["name"] == "ostinato-aql-sim":
                        d["optional"] = False
        broken = check_deps.broken_rules(packages)
        self.assertTrue(any("unconditionally" in b for b in broken), broken)

    def test_a_crate_of_no_role(self):
        packages = copy.deepcopy(self.packages) + [{"name": "ostinato-new", "dependencies": []}]
        broken = check_deps.broken_rules(packages)
        self.assertTrue(any("ostinato-new" in b and "no role" in b for b in broken), broken)


if __name__ == "__main__":
    unittest.main()
