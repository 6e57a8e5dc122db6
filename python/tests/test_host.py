"""The Python package on the host backend: the spellings of the README, graph files, errors."""

import os
import struct

import numpy as np
import pytest

import ostinato

REPO = os.path.join(os.path.dirname(__file__), "..", "..")


def mix_graph():
    g = ostinato.Graph()
    a = g.buffer("a", 4096, init="iota")
    mix = g.kernel("mix", [("out", "read_write"), ("inp", "read"), ("n_out", "u32"), ("n_in", "u32"), ("salt", "u32")],
                   host="builtin:mix", cuda="builtin:mix")
    salt = g.slot("salt", "u32", 7)
    g.launch(mix, grid=(1, 1, 1), block=(256, 1, 1), out=a[0:1024], inp=a[1024:2048], n_out=256, n_in=256, salt=salt)
    g.launch(mix, grid=(1,), block=(256,), out=a[1024:2048], inp=a[2048:3072], n_out=256, n_in=256, salt=3)
    g.launch(mix, grid=(1,), block=(256,), out=a[0:1024], inp=a[1024:2048], n_out=256, n_in=256, salt=salt)
    return g


def expected(replays, salts):
    w = list(range(1024))
    for r in range(replays):
        s = salts[r]
        for i in range(256):
            w[i] = (w[i] * 3 + w[256 + i] + s) & 0xFFFFFFFF
        for i in range(256):
            w[256 + i] = (w[256 + i] * 3 + w[512 + i] + 3) & 0xFFFFFFFF
        for i in range(256):
            w[i] = (w[i] * 3 + w[256 + i] + s) & 0xFFFFFFFF
    return w


def test_record_plan_replay_patch_read():
    g = mix_graph()
    plan = g.plan()
    # node 0 writes a[0:1024) and reads a[1024:2048), which node 1 writes (WAR); node 2 after both.
    assert plan.edges == [(0, 1), (1, 2)]
    assert "WAR" in plan.explain()
    ex = plan.instantiate("host")
    salts = [7, 9, 9, 9]
    ex.replay(1)
    ex.set_slot("salt", 9)
    ex.replay(3)
    ex.wait()
    words = struct.unpack("<1024I", ex.read("a"))
    assert list(words) == expected(4, salts)


def test_write_takes_numpy_and_read_gives_bytes():
    ex = mix_graph().plan().instantiate("host")
    ex.write("a", ostinato.as_bytes(np.arange(1024, dtype=np.uint32)[::-1].copy()))
    got = np.frombuffer(ex.read("a", offset=4092, length=4), dtype=np.uint32)
    assert got[0] == 0
    assert ex.backend == "host"


def test_graph_files_load_and_run():
    g = ostinato.load(os.path.join(REPO, "examples", "mix.toml"))
    plan = g.plan()
    assert plan.nodes == 5
    ex = plan.instantiate("host")
    ex.replay(4)
    ex.wait()
    assert len(ex.read("a")) == 4096


def test_errors_name_the_culprit_and_leave_nothing_half_built():
    g = ostinato.Graph()
    x = g.buffer("x", 64)
    with pytest.raises(ostinato.Error, match="declared twice"):
        g.buffer("x", 64)
    with pytest.raises(ostinato.Error, match="not an identifier"):
        g.buffer("../escaped", 64)
    with pytest.raises(ostinato.Error, match="slice end 128 lies outside its 64 bytes"):
        x[0:128]
    k = g.kernel("add_one", [("x", "read_write"), ("n", "u32")], host="builtin:add_one")
    with pytest.raises(ostinato.Error, match="neither an access"):
        g.kernel("bad", [("x", "readwrite")])
    with pytest.raises(ostinato.Error, match="missing arg `n`"):
        g.launch(k, grid=(1,), block=(16,), x=x)
    with pytest.raises(ostinato.Error, match="no param `m`"):
        g.launch(k, grid=(1,), block=(16,), x=x, n=16, m=1)
    with pytest.raises(ostinato.Error, match="param `n`"):
        g.launch(k, grid=(1,), block=(16,), x=x, n=-1)
    assert g.nodes == 0, "a refused launch records nothing"
    g.launch(k, grid=(1,), block=(16,), x=x, n=16)
    ex = g.plan().instantiate("host")
    with pytest.raises(ostinato.Error, match="unknown slot `salt`"):
        ex.set_slot("salt", 1)
    with pytest.raises(ostinato.Error, match="unknown buffer `y`"):
        ex.read("y")
    with pytest.raises(ostinato.Error, match="no implementation for the cuda backend|no CUDA driver"):
        g.plan().instantiate("cuda")
    with pytest.raises(ostinato.Error, match="no such backend"):
        g.plan().instantiate("metal")
    with pytest.raises(ostinato.Error, match="option `fusion`: `sometimes` is not one of auto, on, off"):
        g.plan().instantiate("host", fusion="sometimes")
    with pytest.raises(ostinato.Error, match=r"mix\.toml:\d+|cannot read"):
        ostinato.load("/nonexistent/mix.toml")


def test_a_slot_of_the_wrong_type_is_refused():
    g = mix_graph()
    ex = g.plan().instantiate("host")
    with pytest.raises(ostinato.Error, match="slot `salt`"):
        ex.set_slot("salt", -5)
    with pytest.raises(ostinato.Error, match="slot `salt`"):
        ex.set_slot("salt", 1.5)


SHRUNK_LLAMA = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64,
                "intermediate_size": 256, "vocab_size": 512, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
                "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                 "original_max_position_embeddings": 8192}, "tie_word_embeddings": True}


def test_llama_step_runs_on_the_host_and_writes_the_greedy_token():
    g, data = ostinato.llama_step(SHRUNK_LLAMA, max_seq=32)
    assert set(data) == {"rope_freq"} and len(data["rope_freq"]) == 4 * 32
    names = {n for n, _ in ostinato._ostinato.names(g)[0]}
    assert {"embed", "layers.1.wqkv", "layers.0.kcache", "token", "logits"} <= names
    ex = g.plan().instantiate("host")
    for name, bytes_ in data.items():
        ex.write(name, bytes_)
    outs = []
    for pos, token in enumerate([5, 17, 300]):
        ex.write("token", struct.pack("<I", token))
        ex.set_slot("pos", pos)
        ex.replay()
        ex.wait()
        logits = np.frombuffer(ex.read("logits"), dtype=np.float32)
        assert logits.shape == (512,) and np.isfinite(logits).all()
        assert struct.unpack("<I", ex.read("token"))[0] == int(np.argmax(logits))
        outs.append(logits.copy())
    assert not np.array_equal(outs[0], outs[1]), "the step depends on token and position"


def test_llama_step_takes_the_streamed_output_projection_with_the_same_logits():
    logits = {}
    for form in ["registers", "stream"]:
        g, data = ostinato.llama_step(SHRUNK_LLAMA, max_seq=32, o_proj=form)
        ex = g.plan().instantiate("host")
        for name, bytes_ in data.items():
            ex.write(name, bytes_)
        ex.write("token", struct.pack("<I", 17))
        ex.set_slot("pos", 3)
        ex.replay()
        ex.wait()
        logits[form] = np.frombuffer(ex.read("logits"), dtype=np.float32).copy()
    # The same twins' arithmetic either way: the merge and the projection in the same order.
    np.testing.assert_array_equal(logits["registers"], logits["stream"])
    with pytest.raises(ostinato.Error, match="o_proj"):
        ostinato.llama_step(SHRUNK_LLAMA, o_proj="sideways")


def test_llama_step_refuses_a_config_the_kernels_do_not_support_naming_the_field():
    with pytest.raises(ostinato.Error, match="head_dim"):
        ostinato.llama_step(dict(SHRUNK_LLAMA, head_dim=96))
    with pytest.raises(ostinato.Error, match="num_key_value_heads"):
        ostinato.llama_step(dict(SHRUNK_LLAMA, num_key_value_heads=3))
    with pytest.raises(ostinato.Error, match="hidden_size"):
        ostinato.llama_step(dict(SHRUNK_LLAMA, hidden_size=4096))
    # Llama-3.2-3B's head shape (head dim 128, three query heads a KV head) is one the kernels take.
    g, _ = ostinato.llama_step(dict(SHRUNK_LLAMA, hidden_size=384, num_attention_heads=3, head_dim=128), max_seq=32)
    assert "layers.0.wqkv" in {n for n, _ in ostinato._ostinato.names(g)[0]}


def test_bind_reads_dlpack_and_refuses_memory_a_cuda_kernel_cannot_address():
    g = ostinato.Graph()
    g.buffer("x", 1024)
    plan = g.plan()
    host_array = np.zeros(256, dtype=np.float32)  # a DLPack producer on the CPU
    with pytest.raises(ostinato.Error, match=r"bind `x`: the DLPack tensor lives on device type 1"):
        plan.instantiate("cuda", bind={"x": host_array})
    with pytest.raises(ostinato.Error, match=r"neither __cuda_array_interface__ nor __dlpack__"):
        plan.instantiate("cuda", bind={"x": b"\0" * 1024})


def test_buffers_on_two_devices_and_an_all_reduce_between_them():
    import struct
    g = ostinato.Graph()
    x0 = g.buffer("x0", 64, init="f32:1.5")
    x1 = g.buffer("x1", 64, init="f32:2", device=1)
    n = g.collective("all_reduce", "f32", send=[x0, x1], recv=[x0, x1])
    assert n == 0
    ex = g.plan().instantiate("host")
    ex.replay(1)
    ex.wait()
    assert struct.unpack("16f", ex.read("x1")) == (3.5,) * 16
    with pytest.raises(ostinato.Error, match="rank 0 sends from `x0` on device 0 but receives into `x1` on device 1"):
        g.collective("all_reduce", "f32", send=[x0, x1], recv=[x1, x0])
    with pytest.raises(ostinato.Error, match="`all_sum` is not all_reduce"):
        g.collective("all_sum", "f32", send=[x0], recv=[x0])
    with pytest.raises(ostinato.Error, match="lies on its root's device"):
        g.buffer("v", 8, view_of=(x1, 0), device=0)


def test_infer_reads_the_access_from_the_kernels_code_and_vouched_is_spelled_out():
    g = ostinato.Graph()
    x = g.buffer("x", 1024)
    # The host built-in is its own specification: x is read_write.
    k = g.kernel("add_one", [("x", "infer"), ("n", "u32")], host="builtin:add_one")
    for _ in range(3):
        g.launch(k, grid=(1,), block=(256,), x=x, n=256)
    p = g.plan()
    assert p.edges == [(0, 1), (1, 2)]
    assert "RAW+WAR+WAW" in p.explain()
    ex = p.instantiate("host")
    ex.replay()
    ex.wait()
    assert struct.unpack("<f", ex.read("x", 0, 4))[0] == 3.0
    # A vouched declaration is accepted; `infer` cannot be vouched for.
    g.kernel("mix", [("out", "read_write", "vouched"), ("inp", "read"), ("n_out", "u32"), ("n_in", "u32"), ("salt", "u32")], host="builtin:mix")
    with pytest.raises(ostinato.Error, match="vouches for a declared mode"):
        g.kernel("bad", [("x", "infer", "vouched")])
    # A kernel with nothing to read its access from cannot be planned.
    g2 = ostinato.Graph()
    y = g2.buffer("y", 64)
    k2 = g2.kernel("nobody", [("y", "infer")])
    g2.launch(k2, grid=(1,), block=(1,), y=y)
    with pytest.raises(ostinato.Error, match="declared `infer`"):
        g2.plan()
