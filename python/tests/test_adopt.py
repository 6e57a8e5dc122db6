"""`ostinato.adopt` without a GPU: refused where the interposer is not loaded; end to end under the
interposer against its table driver (crates/ostinato-preload/tests/fake_driver/fake_cuda.c), with a
graph object that instantiates and launches through that driver as torch.cuda.CUDAGraph does."""

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

import ostinato

ROOT = pathlib.Path(__file__).resolve().parents[2]
FAKE = ROOT / "crates" / "ostinato-preload" / "tests" / "fake_driver" / "fake_cuda.c"
FATBIN = ROOT / "crates" / "ostinato-preload" / "tests" / "fixtures" / "scale_plain.fatbin"


def test_allocations_merge_where_they_overlap_and_drop_empty_ones():
    from ostinato._adopt import _merged

    pairs = [(0x3000, 0x100), (0x1000, 0x800), (0x1400, 0x800), (0x1c00, 0x10), (0x5000, 0), (0x1c10, 0x10)]
    # 0x1000+0x800 and 0x1400+0x800 overlap: one extent to 0x1c00; 0x1c00 touches it: its own.
    assert _merged(pairs) == [(0x1000, 0xc00), (0x1c00, 0x10), (0x1c10, 0x10), (0x3000, 0x100)]
    assert _merged([]) == []


def test_adopt_without_the_interposer_says_how_to_load_it():
    with pytest.raises(ostinato.UnsupportedError, match="LD_PRELOAD=.*libostinato_preload.so"):
        ostinato.adopt(object())


def preload_library():
    """The interposer: OSTINATO_PRELOAD_SO (scripts/test-python.sh sets it), else the workspace's debug build."""
    named = os.environ.get("OSTINATO_PRELOAD_SO")
    if named:
        assert pathlib.Path(named).is_file(), f"OSTINATO_PRELOAD_SO={named} is not a file"
        return named
    built = ROOT / "target" / "debug" / "libostinato_preload.so"
    if not built.is_file():
        pytest.skip(f"no interposer built ({built}: cargo build -p ostinato-preload)")
    return str(built)


SCRIPT = textwrap.dedent("""
    import ctypes, sys
    import ostinato
    fake = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
    image = open(sys.argv[2], "rb").read()
    module = ctypes.c_void_p()
    assert fake.cuModuleLoadData(ctypes.byref(module), image) == 0

    class Graph:
        # What ostinato.adopt asks of a torch.cuda.CUDAGraph(keep_graph=True).
        def __init__(self):
            self.exec = ctypes.c_void_p()
        def raw_cuda_graph_exec(self):
            return self.exec.value or 0
        def instantiate(self):
            assert fake.cuGraphInstantiateWithFlags(ctypes.byref(self.exec), ctypes.c_void_p(0x9000), ctypes.c_ulonglong(0)) == 0
        def replay(self):
            assert fake.cuGraphLaunch(self.exec, None) == 0

    g = Graph()
    a = ostinato.adopt(g)
    a.replay()
    g.replay()
    print(repr(a))
    print(a.status, a.adopted, ctypes.c_int.in_dll(fake, "launches").value)
    print(a.explain())
    try:
        ostinato.adopt(g, allocations=[(0x1000, 0x100)])
        print("readopt: no error")
    except ostinato.StateError as e:
        print("readopt:", e)
""")


def test_adopt_instantiates_through_the_interposer_and_explains_each_captured_edge(tmp_path):
    lib = preload_library()
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        pytest.skip("no C compiler for the table driver")
    fake = tmp_path / "libfake.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(fake), str(FAKE)], check=True)
    env = dict(os.environ, LD_PRELOAD=lib, OSTINATO_PRELOAD_LOG=str(tmp_path / "log.jsonl"))
    env.pop("OSTINATO_PRELOAD_ADOPT", None)
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(fake), str(FATBIN)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    # The table driver's graph: a memset and `scale` joined by a programmatic edge, already what the
    # adoption would submit: nothing to gain, so the application's own graph runs (both replays).
    assert lines[0] == "<ostinato.Adoption not_adopted (the adopted graph's edges are the captured ones: nothing to gain)>", lines
    assert lines[1] == "not_adopted False 2", lines
    assert lines[2].startswith("2 nodes, 1 captured edges; adoptable; adoption not_adopted"), lines
    assert lines[3] == "  0 (memset) -> 1 (kernel scale) (captured programmatic): kept, programmatic", lines
    # The table driver clones no graph: no replica to adopt again from, said so.
    assert lines[-1].startswith("readopt: ostinato.adopt: the interposer has no replica of executable graph"), lines
