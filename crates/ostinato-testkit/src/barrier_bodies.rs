//! A kernel with a block barrier (a shared-memory tree sum) and a program of its launches, for the
//! tests of bodies that fuse only alone in their block: ten independent launches of 64 blocks, six of
//! one block, then a dependent pair of one block each (the second sums the first's output). The CUDA
//! unit tests group and compile it with NVRTC; the GPU tests run it against [`block_sum_of`].

use ostinato::{Access, Arg, BufferId, Graph, KernelSig, Launch, Scalar, ScalarType};

/// `block_sum(out, x, n)`: block `b`'s tree sum (256 threads) of `x[i] · 2654435761 + b` over its
/// elements `i < n`, xor `gridDim.x << 16`, into `out[b]`; a barrier per level of the tree, and every
/// thread but the first returning early after the last one.
pub const BLOCK_SUM_CU: &str = r#"
extern "C" __global__ void block_sum(unsigned* out, const unsigned* x, unsigned n) {
  __shared__ unsigned s[256];
  unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? x[i] * 2654435761u + blockIdx.x : 0u;
  __syncthreads();
  for (unsigned o = blockDim.x / 2; o > 0; o >>= 1) {
    if (t < o) s[t] += s[t + o];
    __syncthreads();
  }
  if (t != 0) return;
  out[blockIdx.x] = s[0] ^ (gridDim.x << 16);
}
"#;

pub fn block_sum_sig() -> KernelSig {
    KernelSig::new("block_sum").buffer("out", Access::Write).buffer("x", Access::Read).scalar("n", ScalarType::U32)
}

/// What `block_sum` writes for `x` (its first `n` words read) over `blocks` blocks.
pub fn block_sum_of(x: &[u32], n: usize, blocks: u32) -> Vec<u32> {
    (0..blocks)
        .map(|b| {
            let sum = (0..256u32).fold(0u32, |s, t| {
                let i = (b * 256 + t) as usize;
                let v = if i < n { x[i].wrapping_mul(2654435761).wrapping_add(b) } else { 0 };
                s.wrapping_add(v)
            });
            sum ^ (blocks << 16)
        })
        .collect()
}

/// One `block_sum` launch of the program: its input (`words` of it read), its output, its blocks.
#[derive(Clone, Copy, Debug)]
pub struct SumLaunch {
    pub x: BufferId,
    pub words: u32,
    pub out: BufferId,
    pub blocks: u32,
}

/// The program: `independent` (ten of 64 blocks, six of one), then the pair (`pair[0]` sums launch
/// 15's input, `pair[1]` sums `pair[0]`'s one word).
pub struct BarrierProgram {
    pub graph: Graph,
    pub independent: Vec<SumLaunch>,
    pub pair: [SumLaunch; 2],
}

impl BarrierProgram {
    pub fn new() -> BarrierProgram {
        let mut g = Graph::new();
        let k = g.add_kernel(block_sum_sig()).expect("a fresh graph");
        let mut independent = Vec::new();
        for (i, blocks) in [64u32; 10].into_iter().chain([1; 6]).enumerate() {
            let x = g.add_buffer(format!("x{i}"), 4 * u64::from(blocks) * 256).expect("a fresh name");
            let out = g.add_buffer(format!("out{i}"), 4 * u64::from(blocks)).expect("a fresh name");
            independent.push(SumLaunch { x, words: blocks * 256 - 7 * i as u32, out, blocks });
        }
        let first = g.add_buffer("pair0", 4).expect("a fresh name");
        let second = g.add_buffer("pair1", 4).expect("a fresh name");
        let pair = [SumLaunch { x: independent[15].x, words: 256, out: first, blocks: 1 }, SumLaunch { x: first, words: 1, out: second, blocks: 1 }];
        for l in independent.iter().chain(&pair) {
            let args = [Arg::Whole(l.out), Arg::Whole(l.x), Arg::Scalar(Scalar::u32(l.words))];
            g.add_launch(k, Launch::linear(l.blocks, 256), &args, &[]).expect("a valid launch");
        }
        BarrierProgram { graph: g, independent, pair }
    }

    /// Each independent launch's input (all its buffer's words).
    pub fn inputs(&self) -> Vec<Vec<u32>> {
        self.independent.iter().enumerate().map(|(i, l)| (0..l.blocks * 256).map(|j| j.wrapping_mul(40503) ^ ((i as u32) << 20)).collect()).collect()
    }

    /// What every launch writes for [`BarrierProgram::inputs`]: the independent ones, then the pair.
    pub fn outputs(&self) -> Vec<Vec<u32>> {
        let inputs = self.inputs();
        let mut out: Vec<Vec<u32>> = self.independent.iter().zip(&inputs).map(|(l, x)| block_sum_of(x, l.words as usize, l.blocks)).collect();
        let first = block_sum_of(&inputs[15], 256, 1);
        let second = block_sum_of(&first, 1, 1);
        out.extend([first, second]);
        out
    }
}

impl Default for BarrierProgram {
    fn default() -> Self {
        Self::new()
    }
}
