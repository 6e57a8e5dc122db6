//! The model's shape: Llama-3.2-1B's by default, any Llama-family config the kernels support, read from
//! a Hugging Face `config.json` or written by hand (the host backend's shrunk dims).

use serde::Deserialize;

use crate::LlamaError;

/// Llama 3's RoPE frequency scaling (`rope_scaling` with `rope_type = "llama3"`).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
pub struct RopeScaling {
    pub factor: f64,
    pub low_freq_factor: f64,
    pub high_freq_factor: f64,
    pub original_max_position_embeddings: f64,
}

/// A Llama decoder's dimensions and constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LlamaConfig {
    pub hidden: u32,
    pub layers: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    pub ffn: u32,
    pub vocab: u32,
    pub rms_eps: f32,
    pub rope_theta: f64,
    pub rope_scaling: Option<RopeScaling>,
    /// The LM head is the embedding matrix (Llama-3.2-1B ties them).
    pub tied_embeddings: bool,
    /// KV-cache capacity in positions (not a model constant: what the step is recorded for).
    pub max_seq: u32,
}

impl LlamaConfig {
    /// Llama-3.2-1B (its public `config.json`), with a KV cache of `max_seq` positions.
    pub const fn llama_3_2_1b(max_seq: u32) -> LlamaConfig {
        LlamaConfig {
            hidden: 2048,
            layers: 16,
            heads: 32,
            kv_heads: 8,
            head_dim: 64,
            ffn: 8192,
            vocab: 128_256,
            rms_eps: 1e-5,
            rope_theta: 500_000.0,
            rope_scaling: Some(RopeScaling { factor: 32.0, low_freq_factor: 1.0, high_freq_factor: 4.0, original_max_position_embeddings: 8192.0 }),
            tied_embeddings: true,
            max_seq,
        }
    }

    /// Llama-3.2-3B (its public `config.json`: hidden 3072, 28 layers, 24 query heads over 8 KV heads,
    /// head dim 128, FFN 8192, tied embeddings), with a KV cache of `max_seq` positions.
    pub const fn llama_3_2_3b(max_seq: u32) -> LlamaConfig {
        LlamaConfig { hidden: 3072, layers: 28, heads: 24, kv_heads: 8, head_dim: 128, ..LlamaConfig::llama_3_2_1b(max_seq) }
    }

    /// The same structure shrunk for the host backend and CI: hidden 128, 2 layers, 4 heads over 2 KV
    /// heads, FFN 256, vocab 512.
    pub const fn shrunk(max_seq: u32) -> LlamaConfig {
        LlamaConfig { hidden: 128, layers: 2, heads: 2, kv_heads: 1, head_dim: 64, ffn: 256, vocab: 512, ..LlamaConfig::llama_3_2_1b(max_seq) }
    }

    /// Reads a Hugging Face `config.json`; `max_seq` is the cache the step is recorded for.
    pub fn from_hf_json(text: &str, max_seq: u32) -> Result<LlamaConfig, LlamaError> {
        #[derive(Deserialize)]
        struct Hf {
            hidden_size: u32,
            num_hidden_layers: u32,
            num_attention_heads: u32,
            num_key_value_heads: Option<u32>,
            head_dim: Option<u32>,
            intermediate_size: u32,
            vocab_size: u32,
            rms_norm_eps: f32,
            rope_theta: Option<f64>,
            rope_scaling: Option<serde_json::Value>,
            /// transformers 5 spells theta and scaling together here.
            rope_parameters: Option<serde_json::Value>,
            tie_word_embeddings: Option<bool>,
        }
        let bad = |field: &str, reason: String| LlamaError::Config { field: field.to_string(), reason };
        let hf: Hf = serde_json::from_str(text).map_err(|e| bad("config.json", e.to_string()))?;
        let (field, rope) = match (&hf.rope_parameters, &hf.rope_scaling) {
            (Some(p), _) if !p.is_null() => ("rope_parameters", Some(p.clone())),
            (_, Some(s)) if !s.is_null() => ("rope_scaling", Some(s.clone())),
            _ => ("rope_scaling", None),
        };
        let rope_theta = rope.as_ref().and_then(|v| v.get("rope_theta")).and_then(|t| t.as_f64()).or(hf.rope_theta);
        let rope_scaling = match rope {
            None => None,
            Some(v) => match v.get("rope_type").or_else(|| v.get("type")).and_then(|t| t.as_str()).unwrap_or("") {
                "default" => None,
                "llama3" => Some(serde_json::from_value(v).map_err(|e| bad(field, e.to_string()))?),
                kind => return Err(bad(&format!("{field}.rope_type"), format!("`{kind}` is not supported (`llama3` or `default`)"))),
            },
        };
        let c = LlamaConfig {
            hidden: hf.hidden_size,
            layers: hf.num_hidden_layers,
            heads: hf.num_attention_heads,
            kv_heads: hf.num_key_value_heads.unwrap_or(hf.num_attention_heads),
            head_dim: hf.head_dim.unwrap_or(hf.hidden_size / hf.num_attention_heads.max(1)),
            ffn: hf.intermediate_size,
            vocab: hf.vocab_size,
            rms_eps: hf.rms_norm_eps,
            rope_theta: rope_theta.unwrap_or(10_000.0),
            rope_scaling,
            tied_embeddings: hf.tie_word_embeddings.unwrap_or(false),
            max_seq,
        };
        c.validate()?;
        Ok(c)
    }

    /// The first field (by its `config.json` name) where `self` differs from `want`.
    pub fn mismatch(&self, want: &LlamaConfig) -> Option<(&'static str, String, String)> {
        let fields: [(&'static str, String, String); 11] = [
            ("hidden_size", self.hidden.to_string(), want.hidden.to_string()),
            ("num_hidden_layers", self.layers.to_string(), want.layers.to_string()),
            ("num_attention_heads", self.heads.to_string(), want.heads.to_string()),
            ("num_key_value_heads", self.kv_heads.to_string(), want.kv_heads.to_string()),
            ("head_dim", self.head_dim.to_string(), want.head_dim.to_string()),
            ("intermediate_size", self.ffn.to_string(), want.ffn.to_string()),
            ("vocab_size", self.vocab.to_string(), want.vocab.to_string()),
            ("rms_norm_eps", self.rms_eps.to_string(), want.rms_eps.to_string()),
            ("rope_theta", self.rope_theta.to_string(), want.rope_theta.to_string()),
            ("rope_scaling", format!("{:?}", self.rope_scaling), format!("{:?}", want.rope_scaling)),
            ("tie_word_embeddings", self.tied_embeddings.to_string(), want.tied_embeddings.to_string()),
        ];
        fields.into_iter().find(|(_, a, b)| a != b)
    }

    /// Checks what the kernels support (`kernels/llama.cu`), naming the field.
    pub fn validate(&self) -> Result<(), LlamaError> {
        let bad = |field: &str, reason: &str| Err(LlamaError::Config { field: field.to_string(), reason: reason.to_string() });
        let q = self.heads.checked_mul(self.head_dim);
        if self.head_dim != 64 && self.head_dim != 128 {
            return bad("head_dim", "the attention kernel is written for head_dim 64 or 128");
        }
        if self.kv_heads == 0 || self.heads % self.kv_heads != 0 || ![1, 2, 3, 4, 8].contains(&(self.heads / self.kv_heads)) {
            return bad("num_key_value_heads", "must divide num_attention_heads into groups of 1, 2, 3, 4 or 8");
        }
        if self.hidden == 0 || self.hidden % 8 != 0 || self.hidden > 3072 {
            return bad("hidden_size", "must be a positive multiple of 8, at most 3072 (the widest QKV entry: 12 loads of 16 bytes a lane)");
        }
        if q.is_none_or(|q| q > 8192) {
            return bad("num_attention_heads", "num_attention_heads * head_dim must be at most 8192");
        }
        if self.ffn == 0 || self.ffn % 8 != 0 || self.ffn > 8192 {
            return bad("intermediate_size", "must be a positive multiple of 8, at most 8192");
        }
        if self.layers == 0 || self.vocab == 0 {
            return bad(if self.layers == 0 { "num_hidden_layers" } else { "vocab_size" }, "must be positive");
        }
        if !self.tied_embeddings {
            return bad("tie_word_embeddings", "the step reads the LM head from the embedding matrix (tied embeddings)");
        }
        if self.max_seq == 0 {
            return bad("max_seq", "the KV cache needs at least one position");
        }
        Ok(())
    }

    /// RoPE's inverse frequencies per rotated pair (head_dim / 2 of them), with Llama 3's scaling,
    /// computed as `transformers` does (f32 base powers, the scaling in f32).
    pub fn rope_freq(&self) -> Vec<f32> {
        let half = self.head_dim / 2;
        (0..half)
            .map(|j| {
                let inv = 1.0 / (self.rope_theta as f32).powf((2 * j) as f32 / self.head_dim as f32);
                match self.rope_scaling {
                    None => inv,
                    Some(s) => {
                        let (factor, low, high, orig) =
                            (s.factor as f32, s.low_freq_factor as f32, s.high_freq_factor as f32, s.original_max_position_embeddings as f32);
                        let wavelen = 2.0 * std::f32::consts::PI / inv;
                        if wavelen < orig / high {
                            inv
                        } else if wavelen > orig / low {
                            inv / factor
                        } else {
                            let smooth = (orig / wavelen - low) / (high - low);
                            (1.0 - smooth) * inv / factor + smooth * inv
                        }
                    }
                }
            })
            .collect()
    }

    /// Bytes of weights one step reads (the embedding row aside): every layer's projections and norms,
    /// the final norm and the LM head.
    pub fn weight_bytes(&self) -> u64 {
        let (h, q, kv, f) = (self.hidden as u64, (self.heads * self.head_dim) as u64, (self.kv_heads * self.head_dim) as u64, self.ffn as u64);
        let layer = (q + 2 * kv) * h + h * q + 2 * f * h + h * f + 2 * h;
        2 * (self.layers as u64 * layer + h + self.vocab as u64 * h)
    }

    /// Bytes one launch of kernel `kernel` of the step reads from weights and cache at `pos` (its input
    /// vector aside): what its bandwidth is measured by. `None` for a kernel not of the step.
    pub fn kernel_bytes(&self, kernel: &str, pos: u32) -> Option<u64> {
        let (h, q, kv, f, v) =
            (self.hidden as u64, (self.heads * self.head_dim) as u64, (self.kv_heads * self.head_dim) as u64, self.ffn as u64, self.vocab as u64);
        Some(match kernel {
            "llama_embed" => 2 * h,
            "llama_qkv" | "llama_qkv_h3072" => 2 * ((q + 2 * kv) * h + h),
            "llama_attn" | "llama_attn_hd128" => self.kv_bytes(pos) / self.layers as u64,
            "llama_o" | "llama_o_hd128" => 2 * h * q,
            "llama_ffn_in" => 2 * (2 * f * h + h),
            "llama_down" => 2 * h * f,
            "llama_lm_head" => 2 * (v * h + h),
            _ => return None,
        })
    }

    /// Bytes of KV cache one step at `pos` reads (rows 0..=pos of every layer's K and V).
    pub fn kv_bytes(&self, pos: u32) -> u64 {
        2 * 2 * self.layers as u64 * self.kv_heads as u64 * self.head_dim as u64 * (pos.min(self.max_seq - 1) as u64 + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_3_2_1b_weighs_what_the_model_card_says() {
        let c = LlamaConfig::llama_3_2_1b(1024);
        c.validate().unwrap();
        // 1.236 B parameters with the tied head counted once; the step reads the head as well.
        assert_eq!(c.weight_bytes(), 2 * (16 * (3072 * 2048 + 2048 * 2048 + 2 * 8192 * 2048 + 2048 * 8192 + 2 * 2048) + 2048 + 128_256 * 2048));
        assert!((c.weight_bytes() as f64 / 1e9 - 2.47).abs() < 0.01, "{}", c.weight_bytes());
        LlamaConfig::shrunk(64).validate().unwrap();
        // Llama-3.2-3B: 3.21 B parameters, the tied head counted once.
        let c = LlamaConfig::llama_3_2_3b(1024);
        c.validate().unwrap();
        let params = (c.weight_bytes() / 2) as f64 / 1e9;
        assert!((params - 3.21).abs() < 0.01, "{params}");
    }

    #[test]
    fn llama3_rope_scaling_matches_the_reference_values() {
        let f = LlamaConfig::llama_3_2_1b(1024).rope_freq();
        assert_eq!(f.len(), 32);
        // High frequencies unscaled, low ones divided by 32 (wavelengths past 8192 positions).
        assert_eq!(f[0], 1.0);
        let unscaled = |j: u32| 1.0 / 500_000f32.powf((2 * j) as f32 / 64.0);
        assert!((f[4] - unscaled(4)).abs() < 1e-9);
        assert!((f[31] - unscaled(31) / 32.0).abs() < 1e-12);
        assert!(f.windows(2).all(|w| w[1] < w[0]));
    }

    #[test]
    fn hf_config_round_trip_and_errors_name_the_field() {
        let json = r#"{"hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 64, "intermediate_size": 8192, "vocab_size": 128256, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
            "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"},
            "tie_word_embeddings": true, "torch_dtype": "bfloat16"}"#;
        let c = LlamaConfig::from_hf_json(json, 1024).unwrap();
        assert_eq!(c, LlamaConfig::llama_3_2_1b(1024));
        let e = LlamaConfig::from_hf_json(&json.replace("\"head_dim\": 64", "\"head_dim\": 96"), 1024).unwrap_err();
        assert!(e.to_string().contains("head_dim"), "{e}");
        let e = LlamaConfig::from_hf_json(&json.replace("\"num_key_value_heads\": 8", "\"num_key_value_heads\": 5"), 1024).unwrap_err();
        assert!(e.to_string().contains("num_key_value_heads"), "{e}");
        let e = LlamaConfig::from_hf_json(&json.replace("\"hidden_size\": 2048", "\"hidden_size\": 4096"), 1024).unwrap_err();
        assert!(e.to_string().contains("hidden_size"), "{e}");
        // Llama-3.2-3B's public config.json.
        let three = json
            .replace("\"hidden_size\": 2048", "\"hidden_size\": 3072")
            .replace("\"num_hidden_layers\": 16", "\"num_hidden_layers\": 28")
            .replace("\"num_attention_heads\": 32", "\"num_attention_heads\": 24")
            .replace("\"head_dim\": 64", "\"head_dim\": 128");
        assert_eq!(LlamaConfig::from_hf_json(&three, 1024).unwrap(), LlamaConfig::llama_3_2_3b(1024));
        let e = LlamaConfig::from_hf_json(&json.replace("llama3", "yarn"), 1024).unwrap_err();
        assert!(e.to_string().contains("rope_scaling.rope_type"), "{e}");
        // transformers 5 spells theta and scaling as `rope_parameters`.
        let v5 = json.replace("\"rope_theta\": 500000.0,", "").replace("\"rope_scaling\": {", "\"rope_parameters\": {\"rope_theta\": 500000.0, ");
        assert_eq!(LlamaConfig::from_hf_json(&v5, 1024).unwrap(), c, "{v5}");
        let other = LlamaConfig { ffn: 4096, ..c };
        assert_eq!(other.mismatch(&c).map(|m| m.0), Some("intermediate_size"));
        assert_eq!(c.mismatch(&c), None);
    }
}
