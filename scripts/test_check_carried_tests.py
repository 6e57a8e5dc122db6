#!/usr/bin/env python3
"""Mutation tests of scripts/check-carried-tests.py: the repository passes, and a carried test (a
`gpu_*` file, a `tests/common` helper, the CUDA crate's own source) planted with a read through the
build machine's path is caught naming file and line; a CPU-only test may keep one."""
import importlib.util
import os
import shutil
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("check_carried", os.path.join(HERE, "check-carried-tests.py"))
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)

PLANT = 'let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/x.bin");\n'


class CheckCarriedTests(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp()
        for rel in ["crates/ostinato-cuda/tests/common/mod.rs", "crates/ostinato-cuda/tests/gpu_x.rs", "crates/ostinato-cuda/src/lib.rs",
                    "crates/ostinato-cli/tests/cli.rs", "crates/ostinato-llama/tests/pack_contract.rs"]:
            path = os.path.join(self.root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write("// fine\n")

    def tearDown(self):
        shutil.rmtree(self.root)

    def plant(self, rel):
        with open(os.path.join(self.root, rel), "a", encoding="utf-8") as f:
            f.write(PLANT)

    def test_the_repository_passes(self):
        self.assertEqual(check.violations(os.path.dirname(HERE)), [])

    def test_each_carried_place_is_caught_with_file_and_line(self):
        for rel in ["crates/ostinato-cuda/tests/gpu_x.rs", "crates/ostinato-cuda/tests/common/mod.rs", "crates/ostinato-cuda/src/lib.rs",
                    "crates/ostinato-llama/tests/pack_contract.rs"]:
            self.tearDown()
            self.setUp()
            self.plant(rel)
            bad = check.violations(self.root)
            self.assertEqual(len(bad), 1, bad)
            self.assertTrue(bad[0].startswith(rel + ":2:"), bad)

    def test_a_cpu_only_test_may_read_its_checkout(self):
        self.plant("crates/ostinato-cli/tests/cli.rs")
        self.assertEqual(check.violations(self.root), [])


if __name__ == "__main__":
    unittest.main()
