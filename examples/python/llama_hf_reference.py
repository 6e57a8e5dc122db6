"""A Llama checkpoint written by Hugging Face `transformers`, and `transformers`' own f32 logits for it,
for Ostinato's checkpoint check (`a_transformers_checkpoint_agrees_with_transformers` in
crates/ostinato-cuda/tests/gpu_llama.rs reads the checkpoint through `load_checkpoint` and compares).

The model is built from the Llama-3.2-1B config (or, with --shape 3b, Llama-3.2-3B's) with a fixed seed (no download), its weights rounded to
bf16 (what Ostinato runs) and written with `save_pretrained` (config.json and safetensors with
transformers' own tensor names). The reference runs the same bf16 weights in f32, over --positions
teacher-forced positions of random tokens (one forward of the whole sequence: position i sees tokens
0..=i, what decode step i computes), with RoPE's inverse frequencies in f32: `model.to(torch.bfloat16)`
rounds transformers' `inv_freq` buffer to bf16 too, which alone moves its logits by a growing amount
(printed here: the same reference with the rounded buffer). DIR/reference.bin holds
u32 positions, u32 vocab, the u32 tokens, then positions x vocab f32 logits, then the same reference's
logits with every K and V row rounded to bf16 before attention reads it (what the kernels' bf16 KV
cache computes).

    python3 examples/python/llama_hf_reference.py DIR [--positions 1024] [--shape 1b|3b]
"""

import argparse
import copy
import os
import struct

import numpy as np
import torch
import transformers.models.llama.modeling_llama as modeling_llama
from transformers import LlamaConfig, LlamaForCausalLM


def llama_3_2_1b():
    return LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                       num_key_value_heads=8, head_dim=64, vocab_size=128256, rms_norm_eps=1e-5, rope_theta=500000.0,
                       rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                     "original_max_position_embeddings": 8192},
                       max_position_embeddings=131072, tie_word_embeddings=True, attn_implementation="eager")


def llama_3_2_3b():
    """Llama-3.2-3B's public config: the 1B's but hidden 3072, 28 layers, 24 heads of dim 128."""
    c = llama_3_2_1b()
    c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.head_dim = 3072, 28, 24, 128
    return c


def rope_modules(model):
    return [m for m in model.modules() if hasattr(m, "inv_freq")]


def f32_reference(model, inv_freq):
    """The bf16 model's weights in f32, with the RoPE inverse frequencies `inv_freq` (f32)."""
    ref = copy.deepcopy(model).float()
    for m in rope_modules(ref):
        m.inv_freq = inv_freq.clone().to(m.inv_freq.device)
        if hasattr(m, "original_inv_freq"):
            m.original_inv_freq = inv_freq.clone().to(m.inv_freq.device)
    return ref


@torch.no_grad()
def logits(model, tokens):
    return model(input_ids=tokens.view(1, -1), use_cache=False).logits[0].float()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir")
    p.add_argument("--positions", type=int, default=1024)
    p.add_argument("--shape", choices=["1b", "3b"], default="1b")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(llama_3_2_1b() if args.shape == "1b" else llama_3_2_3b())
    inv_freq = rope_modules(model)[0].inv_freq.detach().clone().float()
    model = model.to(torch.bfloat16).eval()
    buffer = rope_modules(model)[0].inv_freq
    rounded = buffer.detach().float()
    print(f"inv_freq after model.to(bfloat16): {buffer.dtype}, max relative change {float(((rounded - inv_freq).abs() / inv_freq).max()):.2e}",
          flush=True)
    os.makedirs(args.dir, exist_ok=True)
    model.save_pretrained(args.dir, safe_serialization=True)
    print("saved:", sorted(os.listdir(args.dir)), flush=True)

    tokens = torch.randint(0, model.config.vocab_size, (args.positions,), generator=torch.Generator().manual_seed(7)).cuda()
    ref = f32_reference(model, inv_freq)
    want = logits(ref, tokens)
    # The trap: the same f32 reference with the bf16-rounded inverse frequencies.
    drift = f32_reference(model, rounded)
    off = logits(drift, tokens)
    scale = want.abs().amax(dim=1)
    rel = ((off - want).abs().amax(dim=1) / scale).cpu().numpy()
    for i in [0, 63, 255, 511, args.positions - 1]:
        if i < args.positions:
            print(f"  bf16 inv_freq vs f32 inv_freq at position {i}: max |Δlogit| / max |logit| {rel[i]:.3e}", flush=True)
    del drift, off
    # What the kernels' bf16 KV cache alone does: the same f32 reference with every K and V row (after
    # RoPE) rounded to bf16 before attention reads it.
    eager = modeling_llama.eager_attention_forward

    def bf16_kv(module, query, key, value, *rest, **kw):
        return eager(module, query, key.to(torch.bfloat16).float(), value.to(torch.bfloat16).float(), *rest, **kw)

    modeling_llama.eager_attention_forward = bf16_kv
    kv = logits(ref, tokens)
    modeling_llama.eager_attention_forward = eager
    rel = ((kv - want).abs().amax(dim=1) / scale).cpu().numpy()
    print(f"  bf16 K/V vs f32 K/V: max |Δlogit| / max |logit| {float(rel.max()):.3e} at position {int(rel.argmax())}, "
          f"median {float(np.median(rel)):.3e}", flush=True)
    with open(os.path.join(args.dir, "reference.bin"), "wb") as f:
        f.write(struct.pack("<II", args.positions, model.config.vocab_size))
        f.write(tokens.cpu().numpy().astype("<u4").tobytes())
        f.write(want.cpu().numpy().astype("<f4").tobytes())
        f.write(kv.cpu().numpy().astype("<f4").tobytes())
    top2 = torch.topk(want, 2, dim=1).values
    margin = ((top2[:, 0] - top2[:, 1]) / scale).cpu().numpy()
    print(f"reference: {args.positions} positions, largest |logit| {float(scale.max()):.3f}, "
          f"top-1 margin / scale median {float(np.median(margin)):.2e}", flush=True)


if __name__ == "__main__":
    main()
