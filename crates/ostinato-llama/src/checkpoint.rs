//! Hugging Face checkpoints: `config.json` and `*.safetensors` in one directory, read into the step's
//! buffers. The config must be the one the step is recorded for (a mismatch names the field); every
//! tensor the step needs must be there with its exact shape (a missing or misshapen one is named).
//! bf16 tensors are taken as they are; f32 and f16 ones are rounded to bf16 (nearest even).

use std::collections::HashMap;
use std::path::Path;

use safetensors::{Dtype, SafeTensors};

use crate::{LlamaConfig, LlamaError};

/// A checkpoint tensor's name and shape.
type Tensor = (String, Vec<usize>);

/// The step's weight buffers (by buffer name) and the checkpoint tensors each is made of, rows
/// concatenated in order, with each tensor's expected shape.
fn layout(c: &LlamaConfig) -> Vec<(String, Vec<Tensor>)> {
    let (h, q, kv, f, v) = (c.hidden as usize, (c.heads * c.head_dim) as usize, (c.kv_heads * c.head_dim) as usize, c.ffn as usize, c.vocab as usize);
    let mut out = vec![
        ("embed".to_string(), vec![("model.embed_tokens.weight".to_string(), vec![v, h])]),
        ("norm".to_string(), vec![("model.norm.weight".to_string(), vec![h])]),
    ];
    for l in 0..c.layers {
        let t = |name: &str, shape: Vec<usize>| (format!("model.layers.{l}.{name}.weight"), shape);
        out.push((format!("layers.{l}.ln1"), vec![t("input_layernorm", vec![h])]));
        out.push((format!("layers.{l}.wqkv"), vec![t("self_attn.q_proj", vec![q, h]), t("self_attn.k_proj", vec![kv, h]), t("self_attn.v_proj", vec![kv, h])]));
        out.push((format!("layers.{l}.wo"), vec![t("self_attn.o_proj", vec![h, q])]));
        out.push((format!("layers.{l}.ln2"), vec![t("post_attention_layernorm", vec![h])]));
        out.push((format!("layers.{l}.wgu"), vec![t("mlp.gate_proj", vec![f, h]), t("mlp.up_proj", vec![f, h])]));
        out.push((format!("layers.{l}.wd"), vec![t("mlp.down_proj", vec![h, f])]));
    }
    out
}

fn to_bf16(dtype: Dtype, data: &[u8]) -> Option<Vec<u8>> {
    let round = |x: f32| half::bf16::from_f32(x).to_le_bytes();
    match dtype {
        Dtype::BF16 => Some(data.to_vec()),
        Dtype::F32 => Some(data.chunks_exact(4).flat_map(|b| round(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))).collect()),
        Dtype::F16 => Some(data.chunks_exact(2).flat_map(|b| round(half::f16::from_le_bytes([b[0], b[1]]).to_f32())).collect()),
        _ => None,
    }
}

/// Reads the checkpoint in `dir` for a step recorded for `want`: (buffer name, bytes) for every weight
/// buffer of the step.
pub fn load(dir: &Path, want: &LlamaConfig) -> Result<Vec<(String, Vec<u8>)>, LlamaError> {
    let err = |path: &Path, reason: String| LlamaError::Checkpoint { path: path.display().to_string(), reason };
    let cfg_path = dir.join("config.json");
    let text = std::fs::read_to_string(&cfg_path).map_err(|e| err(&cfg_path, e.to_string()))?;
    let got = LlamaConfig::from_hf_json(&text, want.max_seq).map_err(|e| err(&cfg_path, e.to_string()))?;
    if let Some((field, have, expect)) = got.mismatch(want) {
        return Err(err(&cfg_path, format!("`{field}` is {have}, but the step is recorded for {expect}")));
    }
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| err(dir, e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(err(dir, "no *.safetensors file".into()));
    }
    let blobs: Vec<(std::path::PathBuf, Vec<u8>)> =
        files.into_iter().map(|p| std::fs::read(&p).map(|b| (p.clone(), b)).map_err(|e| err(&p, e.to_string()))).collect::<Result<_, _>>()?;
    let mut index: HashMap<String, (usize, safetensors::tensor::TensorView<'_>)> = HashMap::new();
    let mut parsed = Vec::with_capacity(blobs.len());
    for (path, bytes) in &blobs {
        parsed.push(SafeTensors::deserialize(bytes).map_err(|e| err(path, e.to_string()))?);
    }
    for (i, st) in parsed.iter().enumerate() {
        for (name, view) in st.tensors() {
            index.insert(name, (i, view));
        }
    }
    let mut out = Vec::new();
    for (buffer, parts) in layout(want) {
        let mut bytes = Vec::new();
        for (name, shape) in parts {
            let (file, view) = index.get(&name).ok_or_else(|| err(dir, format!("tensor `{name}` (for buffer `{buffer}`) is missing")))?;
            let at = &blobs[*file].0;
            if view.shape() != shape.as_slice() {
                return Err(err(at, format!("tensor `{name}` has shape {:?}, the step needs {shape:?}", view.shape())));
            }
            let data =
                to_bf16(view.dtype(), view.data()).ok_or_else(|| err(at, format!("tensor `{name}` is {:?}: bf16, f16 or f32 expected", view.dtype())))?;
            bytes.extend_from_slice(&data);
        }
        out.push((buffer, bytes));
    }
    Ok(out)
}
