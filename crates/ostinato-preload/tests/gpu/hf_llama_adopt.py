"""A transformers Llama decode step with a static cache, captured by torch.cuda.CUDAGraph, unchanged, run
under the graph-API interposer (LD_PRELOAD=libostinato_preload.so).

The model has Llama-3.2-1B's shape (hidden 2048, 16 layers, 32 heads, 8 KV heads, intermediate 8192,
vocabulary 128,256, bf16, SDPA attention) with seeded random weights (no download), a prompt is
prefilled into a `StaticCache`, and one decode step (static input id, cache position and position id;
transformers' static layers advance their own fill count on the GPU) is captured several times in one
process (`--captures`; by default adoption off — the native replay —, on, and off again: the spread
between two instantiations of the same step). The replays' logits are compared bit for bit at one position, and the replays timed
side by side (µs per replay of back-to-back replays, median of bursts, arm order rotated). The step's
kernels are PyTorch's and cuBLAS's; where the interposer cannot read one (they ship machine code
only) the graph passes through, and the log says why: then every arm runs the application's own
executable graph.

    LD_PRELOAD=.devbin/libostinato_preload.so OSTINATO_PRELOAD_LOG=hf.jsonl \\
        python3 crates/ostinato-preload/tests/gpu/hf_llama_adopt.py [--json out.json]
"""

import argparse
import json
import os
import platform
import statistics

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM, StaticCache

from adopt_common import adoption_switch, instantiate_lines, print_graphs, print_rows, side_by_side, summary, warm_up


def at_prompt(cache, length):
    """Sets every layer's fill count to `length` (the next step writes position `length`)."""
    for layer in cache.layers:
        if not hasattr(layer, "cumulative_length"):
            raise SystemExit("this transformers' StaticLayer has no cumulative_length: the replays cannot be compared at one position")
        layer.cumulative_length.fill_(length)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=128, help="tokens prefilled; the step decodes the next position")
    ap.add_argument("--max-len", type=int, default=4096, help="the static cache's length")
    ap.add_argument("--replays", type=int, default=20, help="replays per timed burst")
    ap.add_argument("--bursts", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--captures", default="native,adopted,native",
                    help="the captures, in order, each native (adoption off) or adopted (on); two of a kind show the spread")
    ap.add_argument("--json", default="hf_llama_adopt.json")
    args = ap.parse_args()
    kinds = args.captures.split(",")
    if not kinds or any(k not in ("native", "adopted") for k in kinds) or kinds[0] != "native":
        raise SystemExit("--captures: a comma-separated list of native and adopted, the first native")
    # transformers' StaticLayer keeps its own fill count on the GPU: every step, replays included, appends
    # a position, so the cache must hold the prompt, the warm-ups and every replay.
    steps = 3 + len(kinds) + len(kinds) * args.rounds * (args.bursts * args.replays + 10)
    if args.prompt < 1 or args.prompt + steps > args.max_len:
        raise SystemExit(f"--max-len {args.max_len}: the prompt ({args.prompt}) and {steps} steps do not fit")
    set_adopt = adoption_switch()

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=args.layers, num_attention_heads=32,
                         num_key_value_heads=8, head_dim=64, vocab_size=128256, max_position_embeddings=131072,
                         rope_theta=500000.0, tie_word_embeddings=True, attn_implementation="sdpa")
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    cache = StaticCache(config=config, max_cache_len=args.max_len)
    prompt = torch.randint(0, config.vocab_size, (1, args.prompt), device="cuda")
    token = torch.randint(0, config.vocab_size, (1, 1), device="cuda")
    position = torch.tensor([args.prompt], device="cuda")

    def step():
        return model(input_ids=token, past_key_values=cache, cache_position=position, position_ids=position[None], use_cache=True).logits

    with torch.inference_mode():
        model(input_ids=prompt, past_key_values=cache, cache_position=torch.arange(args.prompt, device="cuda"), use_cache=True)
        warm_up(step)

        log = os.environ.get("OSTINATO_PRELOAD_LOG")
        seen = len(instantiate_lines(log))
        graphs, outs = {}, {}
        for i, kind in enumerate(kinds):
            name = f"{i + 1}. torch.cuda.CUDAGraph, {kind}"
            set_adopt(int(kind == "adopted"))
            graphs[name] = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graphs[name]):
                outs[name] = step()
        set_adopt(0)
        lines = instantiate_lines(log)[seen:]

        logits = {}
        for name, g in graphs.items():
            at_prompt(cache, args.prompt + 3)  # every replay decodes the same position over the same cache
            g.replay()
            torch.cuda.synchronize()
            logits[name] = outs[name].clone()
        names = list(graphs)
        equal = all(torch.equal(logits[names[0]], logits[name]) for name in names[1:])
        rows = side_by_side({name: g.replay for name, g in graphs.items()}, args.replays, args.bursts, args.rounds)

    summaries = [summary(line) for line in lines]
    print("transformers Llama decode step (Llama-3.2-1B shape, %d layers, bf16, SDPA), static cache of %d, position %d"
          % (args.layers, args.max_len, args.prompt))
    print_graphs(summaries, names)
    print_rows(rows, {names[0]: "", **{name: "logits bitwise equal to the first" if equal else "logits DIFFER" for name in names[1:]}})
    median = lambda kind: statistics.median(r["us_per_replay"] for r, k in zip(rows, kinds) if k == kind)
    report = {
        "workload": {"model": "LlamaForCausalLM, Llama-3.2-1B shape, random weights", "layers": args.layers, "dtype": "bfloat16",
                     "attention": "sdpa", "static_cache": args.max_len, "position": args.prompt},
        "protocol": {"replays_per_burst": args.replays, "bursts_per_round": args.bursts, "rounds": args.rounds,
                     "statistic": "median of bursts", "clock": "time.perf_counter around back-to-back replays and a device synchronize"},
        "graphs": summaries,
        "provenance": {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
                       "transformers": transformers.__version__, "python": platform.python_version()},
        "rows": rows,
        "logits_bitwise_equal": equal,
        "adopted_vs_native": median("native") / median("adopted") if "adopted" in kinds else None,
    }
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1)
    print("wrote", args.json)
    if not equal:
        raise SystemExit("the adopted capture's logits differ from the native one's")
    if log and (len(summaries) != len(kinds) or any((g["adoption"] == "off") != (k == "native") for g, k in zip(summaries, kinds))):
        raise SystemExit(f"the log's instantiate lines are not the captures': {summaries}")


if __name__ == "__main__":
    main()
