//! The checkpoint loader on a tiny Hugging Face checkpoint the test writes: every buffer gets its
//! tensors' bytes (rows concatenated, f32 rounded to bf16), and a config that does not match, a missing
//! tensor, a misshapen one are each refused naming the culprit.

use std::collections::HashMap;
use std::path::Path;

use ostinato_llama::{load_checkpoint, LlamaConfig};
use safetensors::tensor::TensorView;
use safetensors::Dtype;

fn config_json(c: &LlamaConfig) -> String {
    format!(
        r#"{{"architectures": ["LlamaForCausalLM"], "hidden_size": {}, "num_hidden_layers": {}, "num_attention_heads": {},
        "num_key_value_heads": {}, "head_dim": {}, "intermediate_size": {}, "vocab_size": {}, "rms_norm_eps": 1e-05,
        "rope_theta": 500000.0, "rope_scaling": {{"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192, "rope_type": "llama3"}}, "tie_word_embeddings": true}}"#,
        c.hidden, c.layers, c.heads, c.kv_heads, c.head_dim, c.ffn, c.vocab
    )
}

/// Every tensor of a Llama checkpoint for `c`, element i of tensor t holding bf16(t * 1000 + i) / 1e4;
/// `mlp.down_proj` of layer 1 stored as f32 to exercise the conversion.
fn tensors(c: &LlamaConfig) -> Vec<(String, Dtype, Vec<usize>, Vec<u8>)> {
    let (h, q, kv, f, v) = (c.hidden as usize, (c.heads * c.head_dim) as usize, (c.kv_heads * c.head_dim) as usize, c.ffn as usize, c.vocab as usize);
    let mut names: Vec<(String, Vec<usize>)> = vec![("model.embed_tokens.weight".into(), vec![v, h]), ("model.norm.weight".into(), vec![h])];
    for l in 0..c.layers {
        for (n, s) in [
            ("input_layernorm", vec![h]),
            ("self_attn.q_proj", vec![q, h]),
            ("self_attn.k_proj", vec![kv, h]),
            ("self_attn.v_proj", vec![kv, h]),
            ("self_attn.o_proj", vec![h, q]),
            ("post_attention_layernorm", vec![h]),
            ("mlp.gate_proj", vec![f, h]),
            ("mlp.up_proj", vec![f, h]),
            ("mlp.down_proj", vec![h, f]),
        ] {
            names.push((format!("model.layers.{l}.{n}.weight"), s));
        }
    }
    names
        .into_iter()
        .enumerate()
        .map(|(t, (name, shape))| {
            let n: usize = shape.iter().product();
            let vals = (0..n).map(|i| ((t * 1000 + i) % 65_536) as f32 / 1e4);
            if name == "model.layers.1.mlp.down_proj.weight" {
                (name, Dtype::F32, shape, vals.flat_map(f32::to_le_bytes).collect())
            } else {
                (name, Dtype::BF16, shape, vals.flat_map(|x| half::bf16::from_f32(x).to_le_bytes()).collect())
            }
        })
        .collect()
}

fn write(dir: &Path, c: &LlamaConfig, tensors: &[(String, Dtype, Vec<usize>, Vec<u8>)]) {
    std::fs::write(dir.join("config.json"), config_json(c)).unwrap();
    // Two shards, as large checkpoints come.
    let (a, b) = tensors.split_at(tensors.len() / 2);
    for (i, part) in [a, b].into_iter().enumerate() {
        let views: Vec<(String, TensorView<'_>)> = part.iter().map(|(n, d, s, bytes)| (n.clone(), TensorView::new(*d, s.clone(), bytes).unwrap())).collect();
        safetensors::tensor::serialize_to_file(views, None::<HashMap<String, String>>, &dir.join(format!("model-0000{i}.safetensors"))).unwrap();
    }
}

#[test]
fn a_checkpoint_fills_every_weight_buffer() {
    let c = LlamaConfig::shrunk(32);
    let dir = tempfile::tempdir().unwrap();
    let ts = tensors(&c);
    write(dir.path(), &c, &ts);
    let loaded: HashMap<String, Vec<u8>> = load_checkpoint(dir.path(), &c).unwrap().into_iter().collect();
    let bytes = |name: &str| ts.iter().find(|t| t.0 == name).map(|t| t.3.clone()).unwrap();
    assert_eq!(loaded["embed"], bytes("model.embed_tokens.weight"));
    let qkv =
        [bytes("model.layers.0.self_attn.q_proj.weight"), bytes("model.layers.0.self_attn.k_proj.weight"), bytes("model.layers.0.self_attn.v_proj.weight")]
            .concat();
    assert_eq!(loaded["layers.0.wqkv"], qkv, "q, k and v rows concatenated");
    assert_eq!(loaded["layers.1.wgu"], [bytes("model.layers.1.mlp.gate_proj.weight"), bytes("model.layers.1.mlp.up_proj.weight")].concat());
    let f32_down = bytes("model.layers.1.mlp.down_proj.weight");
    let want: Vec<u8> = f32_down.chunks_exact(4).flat_map(|b| half::bf16::from_f32(f32::from_le_bytes([b[0], b[1], b[2], b[3]])).to_le_bytes()).collect();
    assert_eq!(loaded["layers.1.wd"], want, "f32 rounded to bf16");
    assert_eq!(loaded.len(), 2 + 6 * c.layers as usize);
    // The step's buffers have exactly these sizes.
    let step = ostinato_llama::record(&c, Default::default()).unwrap();
    for b in step.graph.buffers() {
        if let Some(data) = loaded.get(&b.name) {
            assert_eq!(data.len() as u64, b.size, "{}", b.name);
        }
    }
}

#[test]
fn a_mismatched_config_a_missing_tensor_and_a_wrong_shape_are_named() {
    let c = LlamaConfig::shrunk(32);
    let dir = tempfile::tempdir().unwrap();
    let ts = tensors(&c);
    write(dir.path(), &c, &ts);
    let other = LlamaConfig { ffn: 512, ..c };
    let e = load_checkpoint(dir.path(), &other).unwrap_err().to_string();
    assert!(e.contains("config.json") && e.contains("`intermediate_size` is 256") && e.contains("512"), "{e}");

    let missing: Vec<_> = ts.iter().filter(|t| t.0 != "model.layers.1.self_attn.k_proj.weight").cloned().collect();
    let dir2 = tempfile::tempdir().unwrap();
    write(dir2.path(), &c, &missing);
    let e = load_checkpoint(dir2.path(), &c).unwrap_err().to_string();
    assert!(e.contains("`model.layers.1.self_attn.k_proj.weight`") && e.contains("missing") && e.contains("layers.1.wqkv"), "{e}");

    let mut bad = ts.clone();
    let norm = bad.iter_mut().find(|t| t.0 == "model.norm.weight").unwrap();
    norm.2 = vec![c.hidden as usize / 2, 2];
    let dir3 = tempfile::tempdir().unwrap();
    write(dir3.path(), &c, &bad);
    let e = load_checkpoint(dir3.path(), &c).unwrap_err().to_string();
    assert!(e.contains("`model.norm.weight` has shape [64, 2]") && e.contains("[128]"), "{e}");

    let empty = tempfile::tempdir().unwrap();
    let e = load_checkpoint(empty.path(), &c).unwrap_err().to_string();
    assert!(e.contains("config.json"), "{e}");
}
