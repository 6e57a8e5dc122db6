//! Launch geometry of the step's kernels, from the model's shape: grids, block sizes, dynamic shared
//! memory and the streaming projections' tiles, as `kernels/llama.cu` and `kernels/llama_stream.cu`
//! compute them (each function names the CUDA it mirrors), and the per-block tile maps of the kernels
//! whose blocks touch bytes fixed by their index (QKV, attention, the output projection).

use ostinato::{TileMap, TileRange};

use crate::LlamaConfig;

/// Threads of the attention and output-projection blocks (LL_THREADS).
pub const LL_THREADS: u32 = 256;
/// Rows of the output projection per block (kernels/llama.cu: ll_o).
pub const O_ROWS: u32 = 64;
/// Threads of a streaming projection's block: 8 consumer warps and a producer warp (LB_THREADS).
pub const STREAM_THREADS: u32 = 288;
/// Bytes of weights a streaming block keeps in flight, its ring of stages (LB_BUDGET).
pub const STREAM_BUDGET: u32 = 192 * 1024;
/// The tile size a streaming projection aims at (LB_STAGE_BYTES), dot products per tile at most
/// (LB_MAX_UNITS) and the consumer warps they share out over (LB_CONSUMERS).
const STREAM_TILE_BYTES: u32 = 32 * 1024;
const STREAM_MAX_UNITS: u32 = 64;
const STREAM_CONSUMERS: u32 = 8;

/// Query heads per KV head.
pub fn group(c: &LlamaConfig) -> u32 {
    c.heads / c.kv_heads
}

/// Warps of a `llama_qkv` block, one RoPE pair of rows each: head_dim / 16, so that a head's pairs
/// take 8 blocks (and an attention block waits for 8 blocks per head it reads).
pub fn qkv_warps(c: &LlamaConfig) -> u32 {
    c.head_dim / 16
}

/// `llama_qkv`'s grid: (pairs of a head / warps, heads + 2 kv_heads).
pub fn qkv_grid(c: &LlamaConfig) -> [u32; 3] {
    [c.head_dim / 2 / qkv_warps(c), c.heads + 2 * c.kv_heads, 1]
}

/// `llama_qkv`'s dynamic shared memory: the normed input (whole passes of 2,048 floats) and the
/// warps' sums.
pub fn qkv_smem(c: &LlamaConfig) -> u32 {
    4 * (2048 * c.hidden.div_ceil(2048) + 8)
}

/// `llama_attn`'s dynamic shared memory: per warp and query head the max and the sum, then per warp,
/// head and lane the head_dim / 32 weighted sums.
pub fn attn_smem(c: &LlamaConfig) -> u32 {
    let (g, warps) = (group(c), LL_THREADS / 32);
    4 * (2 * warps * g + warps * g * 32 * (c.head_dim / 32))
}

/// `llama_o`'s dynamic shared memory: the KV head's `splits` × group partial records, then its merged
/// attention output.
pub fn o_smem(c: &LlamaConfig, splits: u32) -> u32 {
    let g = group(c);
    4 * (splits * g * (4 + c.head_dim) + g * c.head_dim)
}

/// `llama_o`'s grid: (ceil(hidden / 64), kv_heads).
pub fn o_grid(c: &LlamaConfig) -> [u32; 3] {
    [c.hidden.div_ceil(O_ROWS), c.kv_heads, 1]
}

/// Chunks of a row of `k` columns in the streaming projections (lb_chunks): 1, 2 or 4.
pub fn chunks(k: u32) -> u32 {
    match k {
        0..=2048 => 1,
        2049..=4096 => 2,
        _ => 4,
    }
}

/// Units per tile (lb_per_tile): the most whole units of `unit_bytes` with `dots` dot products each
/// that fit a tile, whose dot products share out evenly over the consumer warps where such a count
/// exists.
pub fn units_per_tile(unit_bytes: u32, dots: u32) -> u32 {
    let most = (STREAM_TILE_BYTES / unit_bytes).min(STREAM_MAX_UNITS / dots).max(1);
    (1..=most).rev().find(|c| c * dots % STREAM_CONSUMERS == 0).unwrap_or(most)
}

/// Stages of a streaming ring of tiles of `tile_bytes` (lb_ring): as many as the budget holds, 1 to 8.
pub fn stages(tile_bytes: u32) -> u32 {
    (STREAM_BUDGET / tile_bytes.next_multiple_of(128)).clamp(1, 8)
}

/// The streaming projections' tiles: (gate/up, down, LM head).
pub fn stream_tiles(c: &LlamaConfig) -> [u32; 3] {
    let (qh, qf) = (chunks(c.hidden), chunks(c.ffn));
    [c.ffn.div_ceil(units_per_tile(4 * c.hidden, 2 * qh)), c.hidden.div_ceil(units_per_tile(2 * c.ffn, qf)), c.vocab.div_ceil(units_per_tile(2 * c.hidden, qh))]
}

/// Dynamic shared memory of a streaming projection: the ring's budget, then (gate/up and the LM head,
/// `normed`) the normed input in whole 2,048-float passes.
pub fn stream_smem(c: &LlamaConfig, normed: bool) -> u32 {
    STREAM_BUDGET + if normed { 8192 * c.hidden.div_ceil(2048) } else { 0 }
}

/// The tile maps of one launch, by param name.
pub type Maps = Vec<(&'static str, TileMap)>;

fn map(ranges: Vec<TileRange>) -> TileMap {
    TileMap::new(ranges).expect("the step's tile maps have 1 or 2 ranges of non-overlapping rows")
}

/// `llama_qkv` block (x, y) (head y, RoPE pairs x·W .. x·W + W): writes those pairs' two rows of `qkv`
/// (f32), reads their rows of `wqkv` and their RoPE frequencies; `x` and `ln` whole.
pub fn qkv_maps(c: &LlamaConfig) -> Maps {
    let (w, hd, half, row) = (qkv_warps(c) as u64, c.head_dim as u64, c.head_dim as u64 / 2, 2 * c.hidden as u64);
    vec![
        ("qkv", map(vec![TileRange::span(0, [4 * w, 4 * hd, 0], 4 * w).with_rows(2, 4 * half)])),
        ("wqkv", map(vec![TileRange::span(0, [w * row, hd * row, 0], w * row).with_rows(2, half * row)])),
        ("rope_freq", map(vec![TileRange::span(0, [4 * w, 0, 0], 4 * w)])),
    ]
}

/// `llama_attn` block (s, h) (split s of KV head h): writes its partial records (one per query head of
/// the group), reads its query heads' rows and head h's new K and V rows of `qkv`.
pub fn attn_maps(c: &LlamaConfig, splits: u32) -> Maps {
    let (g, hd, rec) = (group(c) as u64, c.head_dim as u64, 4 + c.head_dim as u64);
    // The caches carry no map: no other node of a step touches a layer's cache (no relation needs
    // one), and which rows a split reads depends on the position in ways the PTX check cannot always
    // bound (a map it cannot verify would be refused on a patch of the position).
    vec![
        ("part", map(vec![TileRange::span(0, [4 * rec * g, 4 * rec * g * splits as u64, 0], 4 * rec * g)])),
        (
            "qkv",
            map(vec![
                TileRange::span(0, [0, 4 * g * hd, 0], 4 * g * hd),
                TileRange::span(4 * c.heads as u64 * hd, [0, 4 * hd, 0], 4 * hd).with_rows(2, 4 * c.kv_heads as u64 * hd),
            ]),
        ),
    ]
}

/// `llama_o` block (b, h) (rows 64 b .. 64 b + 64, KV head h's columns): reads head h's partial
/// records; where the rows divide into whole blocks, adds into its rows of x and reads their columns
/// of head h in W_o (otherwise the last block's rows would leave the slice: those two stay unmapped,
/// touched anywhere by every block).
pub fn o_maps(c: &LlamaConfig, splits: u32) -> Maps {
    let (g, hd, rec) = (group(c) as u64, c.head_dim as u64, 4 + c.head_dim as u64);
    let mut maps = vec![("part", map(vec![TileRange::span(0, [0, 4 * rec * g * splits as u64, 0], 4 * rec * g * splits as u64)]))];
    if c.hidden % O_ROWS == 0 {
        let (rows, row) = (O_ROWS as u64, 2 * (c.heads * c.head_dim) as u64);
        maps.push(("x", map(vec![TileRange::span(0, [4 * rows, 0, 0], 4 * rows)])));
        maps.push(("w", map(vec![TileRange::span(0, [rows * row, 2 * g * hd, 0], 2 * g * hd).with_rows(rows, row)])));
    }
    maps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_1b_geometry_is_the_measured_one() {
        let c = LlamaConfig::llama_3_2_1b(1024);
        // 4 (gate, up) pairs, 2 down rows, 8 LM-head rows of 32 KiB; six stages of 32 KiB.
        assert_eq!(stream_tiles(&c), [2048, 1024, 16032]);
        assert_eq!((units_per_tile(16384, 4), units_per_tile(4096, 1)), (2, 8));
        assert_eq!(units_per_tile(8192, 2), 4);
        assert_eq!(stages(32768), 6);
        assert_eq!((qkv_grid(&c), qkv_warps(&c)), ([8, 48, 1], 4));
        assert_eq!(o_grid(&c), [32, 8, 1]);
        assert_eq!((qkv_smem(&c), attn_smem(&c), o_smem(&c, 16)), (8224, 8448, 18432));
    }

    #[test]
    fn other_shapes_get_full_tiles_that_share_out_evenly() {
        let c = LlamaConfig::llama_3_2_3b(1024);
        // hidden 3072: a row is two chunks of 1,536 columns; 2 pairs (24 KiB) and 4 LM-head rows (24
        // KiB) make 8 dot products a tile; eight stages of them fill the budget.
        assert_eq!(chunks(3072), 2);
        assert_eq!(units_per_tile(4 * 3072, 4), 2);
        assert_eq!(units_per_tile(2 * 3072, 2), 4);
        assert_eq!(stages(24 * 1024), 8);
        assert_eq!(stream_tiles(&c), [4096, 1536, 32064]);
        assert_eq!((qkv_grid(&c), qkv_warps(&c)), ([8, 40, 1], 8));
        // An FFN of 5,632 (TinyLlama's): four equal chunks of 1,408 columns, 2 rows a tile.
        assert_eq!(units_per_tile(2 * 5632, 4), 2);
        for (unit, dots) in [(1024, 1), (2048, 1), (4096, 2), (12288, 4), (16384, 4), (8192, 2), (6144, 2), (4 * 2056, 4), (2 * 2056, 2)] {
            let u = units_per_tile(unit, dots);
            assert!(u * unit <= STREAM_TILE_BYTES && u * dots <= STREAM_MAX_UNITS && u * dots % STREAM_CONSUMERS == 0, "{unit} {dots}: {u}");
        }
    }

    #[test]
    fn every_map_lies_inside_its_slice() {
        for c in [LlamaConfig::llama_3_2_1b(256), LlamaConfig::llama_3_2_3b(256), LlamaConfig::shrunk(64), LlamaConfig::shrunk_wide(64)] {
            let (g, hd, rec) = (group(&c) as u64, c.head_dim as u64, 4 + c.head_dim as u64);
            let qkv = 4 * (c.heads + 2 * c.kv_heads) as u64 * hd;
            for (name, m) in qkv_maps(&c) {
                let len = match name {
                    "qkv" => qkv,
                    "wqkv" => qkv / 4 * 2 * c.hidden as u64,
                    _ => 2 * hd,
                };
                m.check_within(qkv_grid(&c), len).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            let part = 4 * rec * g * 16 * c.kv_heads as u64;
            for (name, m) in attn_maps(&c, 16) {
                let len = match name {
                    "part" => part,
                    "qkv" => qkv,
                    _ => 2 * c.max_seq as u64 * hd * c.kv_heads as u64,
                };
                m.check_within([16, c.kv_heads, 1], len).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            for (name, m) in o_maps(&c, 16) {
                let len = match name {
                    "part" => part,
                    "x" => 4 * c.hidden as u64,
                    _ => 2 * c.hidden as u64 * (c.heads * c.head_dim) as u64,
                };
                m.check_within(o_grid(&c), len).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
    }
}
