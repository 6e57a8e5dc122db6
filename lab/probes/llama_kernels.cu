// Study tool: the Llama decode kernels (crates/ostinato-llama/kernels/llama_common.cu and llama.cu) at
// Llama-3.2-1B's shapes on the GPU, launched as the step launches them (src/step.rs), side by side with
// the study variants of llama_variants.cu.
//   check  : one layer's kernels and the LM head, each against a double-precision CPU computation from
//            the kernel's own inputs (random weights, norms and cache), at several positions and
//            attention splits, twice each (the ticket counters must come back to zero); each variant
//            on the same inputs; then llama_layers_mk's step against the pack's (`mk check`).
//   kernels: each kernel alone (a graph of 16 launches over 16 layers' weights, no PDL) and back to
//            back with PDL, µs per launch and TB/s; pairs and triples of consecutive kernels too.
//   step   : the whole step (82 launches) as one captured graph, PDL on every edge and off, per
//            position, attention splits and variant (combos: rounds of gate/up tiles attention asks L2
//            for, 0 for the pack's attention; after an `f`, gate/up + down as llama_ffn_fused; after
//            a `c`, that kernel launched cooperative; after a `t`, llama_ffn_fused_t, every tile by
//            ticket, which needs no residency: the check runs it on grids larger than fit, too;
//            `o<r0>x<n>` / `O<r0>x<n>`, llama_o_pf asking L2 for gate/up's rounds before / after its
//            wait; `q`, QKV and attention as llama_qkv_attn; `w<n>` / `W<n>`, llama_attn_pfo asking L2
//            for n quarters of the layer's W_o after / before its wait; `m`, every layer as one persistent
//            kernel, llama_layers_mk of llama_layers_mk.cu, between the pack's embedding and LM head;
//            `M`, that kernel launched once a layer).
//   profile: the step twice at one position (default 1,024) with one combo, each kernel its own
//            launch with PDL, for Nsight Compute (the `ncu` stage of llama-step.sh).
//   l2     : gate/up alone with some of its tiles already in L2 against unrelated bytes there.
//   coop   : whether a cooperative launch of llama_ffn_fused, with PDL and in a captured graph, runs.
// Build (a machine without a GPU builds it with scripts/fetch-cuda-tools.sh --lab) and run on the GPU
// machine (lab/probes/llama-step.sh):
//   nvcc -O3 -arch=sm_90 -std=c++17 -Ikernels -DOST_TRIGGER=3 -o llama_kernels lab/probes/llama_kernels.cu
//   ./llama_kernels attrs|check|mkcheck|sanitize|coop|l2|kernels|step|profile [splits,...] [blocks] [combos,...] [positions,...]
#include "../../kernels/ostinato.cu"
#include "../../crates/ostinato-llama/kernels/llama_common.cu"
#include "../../crates/ostinato-llama/kernels/llama.cu"
#include "llama_variants.cu"
#include "llama_layers_mk.cu"

#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s at %d: %s\n", cudaGetErrorString(e_), __LINE__, #x); exit(1); } } while (0)

constexpr unsigned H = 2048, L = 16, NH = 32, NKV = 8, HD = 64, F = 8192, SEQ = 4352, G = NH / NKV;
// Layers allocated and vocabulary (smaller under compute-sanitizer: one layer, 4,099 rows).
static unsigned g_layers = L, V = 128256;
static bool g_sanitize = false;  // under compute-sanitizer: the check's larger grids are left out
constexpr unsigned Q = NH * HD, KV = NKV * HD, QKV = Q + 2 * KV, REC = ll_rec(HD);
constexpr float EPS = 1e-5f;

template <class T> T* dev(size_t n) { T* p; CK(cudaMalloc(&p, n * sizeof(T))); CK(cudaMemset(p, 0, n * sizeof(T))); return p; }

__global__ void fill_bf16(ll_bf16* p, size_t n, unsigned seed, float lo, float hi) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed * 0x9e3779b9u ^ (unsigned)(i >> 32); h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
    p[i] = ll_to_bf(lo + (h >> 8) * (1.0f / 16777216.0f) * (hi - lo));
  }
}
static void rnd(ll_bf16* p, size_t n, unsigned seed, float lo, float hi) { fill_bf16<<<1024, 256>>>(p, n, seed, lo, hi); CK(cudaGetLastError()); }

struct Model {
  ll_bf16 *wqkv[L], *wo[L], *wgu[L], *wd[L], *kc[L], *vc[L], *ln1[L], *ln2[L], *emb, *norm, *kv_new;
  float *x, *q, *apart, *act, *logits, *hpart, *freq;
  unsigned *tickets, *hcount, *token, *history, *fsync;
  unsigned *arrive, *seen;  // llama_qkv_attn's counters per KV head and its blocks' own words
};

static Model make_model() {
  Model m = {};
  for (unsigned l = 0; l < g_layers; l++) {
    m.wqkv[l] = dev<ll_bf16>((size_t)QKV * H); rnd(m.wqkv[l], (size_t)QKV * H, 10 * l + 1, -0.0346f, 0.0346f);
    m.wo[l] = dev<ll_bf16>((size_t)H * Q); rnd(m.wo[l], (size_t)H * Q, 10 * l + 2, -0.0346f, 0.0346f);
    m.wgu[l] = dev<ll_bf16>((size_t)2 * F * H); rnd(m.wgu[l], (size_t)2 * F * H, 10 * l + 3, -0.0346f, 0.0346f);
    m.wd[l] = dev<ll_bf16>((size_t)H * F); rnd(m.wd[l], (size_t)H * F, 10 * l + 4, -0.0346f, 0.0346f);
    m.kc[l] = dev<ll_bf16>((size_t)KV * SEQ); rnd(m.kc[l], (size_t)KV * SEQ, 10 * l + 5, -1.0f, 1.0f);
    m.vc[l] = dev<ll_bf16>((size_t)KV * SEQ); rnd(m.vc[l], (size_t)KV * SEQ, 10 * l + 6, -1.0f, 1.0f);
    m.ln1[l] = dev<ll_bf16>(H); rnd(m.ln1[l], H, 10 * l + 7, 0.5f, 1.5f);
    m.ln2[l] = dev<ll_bf16>(H); rnd(m.ln2[l], H, 10 * l + 8, 0.5f, 1.5f);
  }
  m.emb = dev<ll_bf16>((size_t)V * H); rnd(m.emb, (size_t)V * H, 99, -0.0346f, 0.0346f);
  m.norm = dev<ll_bf16>(H); rnd(m.norm, H, 98, 0.5f, 1.5f);
  m.kv_new = dev<ll_bf16>(2 * KV);
  m.x = dev<float>(H); m.q = dev<float>(Q); m.act = dev<float>(F); m.logits = dev<float>(V);
  m.apart = dev<float>((size_t)NKV * LL_MAX_SPLITS * G * REC);
  m.hpart = dev<float>(2 * 1024);
  m.freq = dev<float>(HD / 2);
  std::vector<float> f(HD / 2);
  for (unsigned j = 0; j < HD / 2; j++) f[j] = 1.0f / powf(500000.0f, 2.0f * j / HD);
  CK(cudaMemcpy(m.freq, f.data(), 4 * f.size(), cudaMemcpyHostToDevice));
  m.arrive = dev<unsigned>(NKV); m.seen = dev<unsigned>((size_t)NKV * LL_MAX_SPLITS);
  m.tickets = dev<unsigned>(4); m.hcount = dev<unsigned>(1); m.token = dev<unsigned>(1); m.history = dev<unsigned>(SEQ); m.fsync = dev<unsigned>(3 * LV_SYNC_STRIDE);
  CK(cudaDeviceSynchronize());
  return m;
}

// ---- launches (as src/step.rs records them) --------------------------------------------------------
struct Launcher {
  cudaStream_t st;
  bool pdl;
  // A launch with the PDL attribute where `pdl`, and the cooperative attribute where `coop` (the
  // driver then guarantees every block of the grid resident at once, or refuses the launch).
  template <class... P, class... A> cudaError_t try_go(bool coop, void (*k)(P...), dim3 grid, unsigned threads, size_t smem, A... a) {
    cudaLaunchAttribute at[2];
    unsigned n = 0;
    if (pdl) { at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[n].val.programmaticStreamSerializationAllowed = 1; n++; }
    if (coop) { at[n].id = cudaLaunchAttributeCooperative; at[n].val.cooperative = 1; n++; }
    cudaLaunchConfig_t c = {};
    c.gridDim = grid; c.blockDim = dim3(threads); c.dynamicSmemBytes = smem; c.stream = st; c.attrs = at; c.numAttrs = n;
    return cudaLaunchKernelEx(&c, k, ((P)a)...);
  }
  template <class... P, class... A> void go(void (*k)(P...), dim3 grid, unsigned threads, size_t smem, A... a) { CK(try_go(false, k, grid, threads, smem, a...)); }
  template <class... P, class... A> void go_coop(void (*k)(P...), dim3 grid, unsigned threads, size_t smem, A... a) { CK(try_go(true, k, grid, threads, smem, a...)); }
};
// The choices: attention splits, the streaming projections' blocks, the rounds of gate/up's first
// tiles attention asks L2 for (0: the pack's llama_attn; else llama_attn_pf), and gate/up + down as
// llama_ffn_fused.
struct Opts {
  unsigned splits = 32, bblocks = 132, pf_rounds = 0;
  bool fused = false, coop = false;  // coop: llama_ffn_fused launched cooperative
  bool ticketed = false;             // llama_ffn_fused_t (every tile by ticket) for the fused FFN
  unsigned fused_grid = 0;           // the fused FFN's grid (0: as the other streaming kernels)
  // opf: llama_o_pf for O (else the pack's llama_o), asking L2 for gate/up's rounds opf_round0 ..
  // + opf_rounds before its wait, or after it where opf_after.
  bool opf = false, opf_after = false;
  unsigned opf_round0 = 0, opf_rounds = 0;
  bool qa = false;  // QKV and attention as llama_qkv_attn (its S splits replace `splits`)
  // wo_quarters: llama_attn_pfo for attention, asking L2 for that many quarters of W_o after its wait,
  // or before it where wo_before.
  unsigned wo_quarters = 0;
  bool wo_before = false;
  bool mk = false;        // every layer as llama_layers_mk (version 21), then the pack's LM head
  bool mk_layer = false;  // with mk: one launch a layer (16 launches, PDL between them)
};
// llama_qkv_attn's blocks a KV head: the group's (G + 2) x 32 RoPE pairs, 8 a block.
static const unsigned QA_SPLITS = (G + 2) * (HD / 2) / 8;
static unsigned o_splits(Opts o) { return o.qa ? QA_SPLITS : o.splits; }
static const unsigned PAIRS = QKV / 2;
// The streaming projections' dynamic shared memory: the stages, then (gate/up, LM head) x ⊙ ln.
static const size_t STAGES = (size_t)LB_STAGES * LB_STAGE_BYTES, NORM_SMEM = STAGES + 4 * LL_CHUNK;
// Tiles as the kernels cut them: whole units filling a stage, at most `most`.
static unsigned tiles(unsigned rows, unsigned unit_bytes, unsigned most) { unsigned r = std::max(1u, std::min(most, LB_STAGE_BYTES / unit_bytes)); return (rows + r - 1) / r; }
static const unsigned FFN_PAIRS_A_TILE = std::min(32u, LB_STAGE_BYTES / (4 * H));
static const unsigned FFN_TILES = tiles(F, 4 * H, 32), DOWN_TILES = tiles(H, 2 * F, 16);
static unsigned head_tiles() { return tiles(V, 2 * H, 64); }
static unsigned bgrid(unsigned n_tiles, Opts o) { return std::min(o.bblocks, n_tiles); }
// The (gate, up) pairs of gate/up's first `rounds` rounds of tiles (its static rounds when rounds <= LB_STATIC_ROUNDS).
static unsigned pf_pairs(Opts o) { return std::min(F, o.pf_rounds * bgrid(FFN_TILES, o) * FFN_PAIRS_A_TILE); }
static unsigned round_pairs(Opts o) { return bgrid(FFN_TILES, o) * FFN_PAIRS_A_TILE; }  // (gate, up) pairs in a round of tiles

static void k_embed(Launcher& g, Model& m) { g.go(llama_embed, dim3(H / 256), 256, 0, m.x, m.emb, m.token, H); }
static void k_qkv(Launcher& g, Model& m, unsigned l, unsigned pos) {
  g.go(llama_qkv, dim3((PAIRS + LL_QKV_WARPS - 1) / LL_QKV_WARPS), LL_QKV_WARPS * 32, 0, m.q, m.kv_new, m.x, m.ln1[l], m.wqkv[l], m.freq, pos, H, NH, NKV, HD, EPS);
}
static void k_attn(Launcher& g, Model& m, unsigned l, unsigned pos, Opts o) {
  if (o.wo_quarters)
    g.go(llama_attn_pfo, dim3(o.splits, NKV), 256, 0, m.apart, m.kc[l], m.vc[l], m.q, m.kv_new, pos, NH, NKV, SEQ, o.splits, HD, m.wo[l],
         (unsigned long long)H * Q * 2 * std::min(4u, o.wo_quarters) / 4, (unsigned)o.wo_before);
  else if (o.pf_rounds)
    g.go(llama_attn_pf, dim3(o.splits, NKV), 256, 0, m.apart, m.kc[l], m.vc[l], m.q, m.kv_new, pos, NH, NKV, SEQ, o.splits, HD, m.wgu[l], F, H, pf_pairs(o));
  else g.go(llama_attn, dim3(o.splits, NKV), 256, 0, m.apart, m.kc[l], m.vc[l], m.q, m.kv_new, pos, NH, NKV, SEQ, o.splits, HD);
}
static void k_o(Launcher& g, Model& m, unsigned l, unsigned pos, Opts o) {
  if (o.opf)
    g.go(llama_o_pf, dim3(H / 64, NKV), 256, 0, m.x, m.apart, m.wo[l], H, NH, NKV, o_splits(o), pos, SEQ, HD, m.wgu[l], F, H, o.opf_round0 * round_pairs(o),
         o.opf_rounds * round_pairs(o), (unsigned)o.opf_after);
  else g.go(llama_o, dim3(H / 64, NKV), 256, 0, m.x, m.apart, m.wo[l], H, NH, NKV, o_splits(o), pos, SEQ, HD);
}
static void k_qkv_attn(Launcher& g, Model& m, unsigned l, unsigned pos) {
  g.go(llama_qkv_attn, dim3(QA_SPLITS, NKV), 256, 0, m.apart, m.kc[l], m.vc[l], m.q, m.kv_new, m.x, m.ln1[l], m.wqkv[l], m.freq, m.arrive, m.seen, pos, H,
       NH, NKV, SEQ, EPS);
}
static void k_ffn(Launcher& g, Model& m, unsigned l, Opts o) {
  g.go(llama_ffn_in, dim3(bgrid(FFN_TILES, o)), LB_THREADS, NORM_SMEM, m.act, m.tickets + 0, m.x, m.ln2[l], m.wgu[l], F, H, EPS);
}
static void k_down(Launcher& g, Model& m, unsigned l, Opts o) {
  g.go(llama_down, dim3(bgrid(DOWN_TILES, o)), LB_THREADS, STAGES, m.x, m.tickets + 1, m.wd[l], m.act, H, F);
}
static void k_ffn_fused(Launcher& g, Model& m, unsigned l, Opts o) {
  dim3 grid(o.fused_grid ? o.fused_grid : bgrid(FFN_TILES + DOWN_TILES, o));
  if (o.ticketed) g.go(llama_ffn_fused_t, grid, LB_THREADS, NORM_SMEM, m.act, m.fsync, m.x, m.ln2[l], m.wgu[l], m.wd[l], F, H, EPS);
  else if (o.coop) g.go_coop(llama_ffn_fused, grid, LB_THREADS, NORM_SMEM, m.act, m.fsync, m.x, m.ln2[l], m.wgu[l], m.wd[l], F, H, EPS);
  else g.go(llama_ffn_fused, grid, LB_THREADS, NORM_SMEM, m.act, m.fsync, m.x, m.ln2[l], m.wgu[l], m.wd[l], F, H, EPS);
}
// Whether a cooperative launch of llama_ffn_fused, with PDL and without, launches and captures into a
// graph on this device (printed; combos starting `c` need it).
static void try_coop(Model& m, Opts o) {
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  dim3 grid(bgrid(FFN_TILES + DOWN_TILES, o));
  for (int pdl = 0; pdl < 2; pdl++) {
    Launcher g{st, pdl == 1};
    cudaError_t e = g.try_go(true, llama_ffn_fused, grid, LB_THREADS, NORM_SMEM, m.act, m.fsync, m.x, m.ln2[0], m.wgu[0], m.wd[0], F, H, EPS);
    cudaError_t s = e == cudaSuccess ? cudaStreamSynchronize(st) : e;
    printf("cooperative launch%s: %s\n", pdl ? " + PDL" : "", cudaGetErrorString(s));
    cudaGraph_t gr; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    cudaError_t c = g.try_go(true, llama_ffn_fused, grid, LB_THREADS, NORM_SMEM, m.act, m.fsync, m.x, m.ln2[0], m.wgu[0], m.wd[0], F, H, EPS);
    cudaError_t end = cudaStreamEndCapture(st, &gr);
    cudaError_t inst = c == cudaSuccess && end == cudaSuccess ? cudaGraphInstantiate(&ge, gr, 0) : (c != cudaSuccess ? c : end);
    if (inst == cudaSuccess) { inst = cudaGraphLaunch(ge, st); if (inst == cudaSuccess) inst = cudaStreamSynchronize(st); cudaGraphExecDestroy(ge); }
    if (end == cudaSuccess) cudaGraphDestroy(gr);
    printf("cooperative launch%s in a captured graph: %s\n", pdl ? " + PDL" : "", cudaGetErrorString(inst));
    cudaGetLastError();
  }
  CK(cudaStreamDestroy(st));
}
// The FFN: gate/up then down, or both in one kernel.
static void k_mlp(Launcher& g, Model& m, unsigned l, Opts o) {
  if (o.fused) k_ffn_fused(g, m, l, o);
  else { k_ffn(g, m, l, o); k_down(g, m, l, o); }
}
static void k_head(Launcher& g, Model& m, unsigned pos, Opts o) {
  g.go(llama_lm_head, dim3(bgrid(head_tiles(), o)), LB_THREADS, NORM_SMEM, m.logits, m.hpart, m.hcount, m.tickets + 2, m.token, m.history, m.x, m.norm,
       m.emb, V, H, EPS, pos, SEQ);
}
// llama_layers_mk's W_o, laid out [KV head][row][256 columns] (woh[h][r][c] = wo[r][h * 256 + c]).
__global__ void mk_relayout_wo(ll_bf16* dst, const ll_bf16* src) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)H * Q; i += (size_t)gridDim.x * blockDim.x) {
    size_t h = i / ((size_t)H * 256), r = i / 256 % H, c = i % 256;
    dst[i] = src[r * Q + h * 256 + c];
  }
}
static MkParams g_mk;
static unsigned g_mk_grid = 0;
static void mk_setup(Model& m) {
  if (g_mk_grid) return;
  CK(cudaDeviceGetAttribute((int*)&g_mk_grid, cudaDevAttrMultiProcessorCount, 0));
  for (unsigned l = 0; l < g_layers; l++) {
    ll_bf16* woh = dev<ll_bf16>((size_t)H * Q);
    mk_relayout_wo<<<1024, 256>>>(woh, m.wo[l]);
    g_mk.wqkv[l] = m.wqkv[l]; g_mk.woh[l] = woh; g_mk.wgu[l] = m.wgu[l]; g_mk.wd[l] = m.wd[l]; g_mk.ln1[l] = m.ln1[l]; g_mk.ln2[l] = m.ln2[l];
    g_mk.kc[l] = m.kc[l]; g_mk.vc[l] = m.vc[l];
  }
  g_mk.x = m.x; g_mk.q = m.q; g_mk.part = m.apart; g_mk.act = m.act; g_mk.kv_new = m.kv_new; g_mk.freq = m.freq;
  g_mk.sync = dev<unsigned>(MK_SYNC_WORDS);
  g_mk.layers = g_layers; g_mk.max_seq = SEQ; g_mk.eps = EPS;
  CK(cudaDeviceSynchronize());
}
// Attention takes one block per (KV head, split): 8 x MK_S blocks, so one an SM needs that many SMs.
static bool mk_fits() { return g_mk_grid >= MK_NKV * MK_S; }
static void k_mk(Launcher& g, unsigned pos, bool per_layer) {
  MkParams p = g_mk;
  p.pos = pos;
  if (!per_layer) { g.go_coop(llama_layers_mk, dim3(g_mk_grid), MK_THREADS, MK_SMEM, p); return; }
  p.layers = 1;
  for (unsigned l = 0; l < g_layers; l++) {  // layer l's pointers in the first entries
    p.wqkv[0] = g_mk.wqkv[l]; p.woh[0] = g_mk.woh[l]; p.wgu[0] = g_mk.wgu[l]; p.wd[0] = g_mk.wd[l]; p.ln1[0] = g_mk.ln1[l]; p.ln2[0] = g_mk.ln2[l];
    p.kc[0] = g_mk.kc[l]; p.vc[0] = g_mk.vc[l];
    g.go_coop(llama_layers_mk, dim3(g_mk_grid), MK_THREADS, MK_SMEM, p);
  }
}
static void step(Launcher& g, Model& m, unsigned pos, Opts o) {
  k_embed(g, m);
  if (o.mk) { k_mk(g, pos, o.mk_layer); k_head(g, m, pos, o); return; }
  for (unsigned l = 0; l < L; l++) {
    if (o.qa) k_qkv_attn(g, m, l, pos);
    else { k_qkv(g, m, l, pos); k_attn(g, m, l, pos, o); }
    k_o(g, m, l, pos, o); k_mlp(g, m, l, o);
  }
  k_head(g, m, pos, o);
}

// ---- check ----------------------------------------------------------------------------------------
template <class T> std::vector<T> get(const T* p, size_t n) { std::vector<T> v(n); CK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost)); return v; }
static double bf(ll_bf16 b) { unsigned u = (unsigned)b << 16; float f; memcpy(&f, &u, 4); return f; }
static ll_bf16 to_bf(float f) { unsigned u; memcpy(&u, &f, 4); u += 0x7fffu + ((u >> 16) & 1u); return (ll_bf16)(u >> 16); }
static int failures = 0;
// max |got - want| / max |want|, against tol.
static void compare(const char* what, const std::vector<double>& want, const float* got, size_t n, double tol) {
  double scale = 1e-30, diff = 0; size_t at = 0; bool finite = true;
  for (size_t i = 0; i < n; i++) { scale = std::max(scale, fabs(want[i])); if (!std::isfinite(got[i])) finite = false; if (fabs(got[i] - want[i]) > diff) { diff = fabs(got[i] - want[i]); at = i; } }
  bool ok = finite && diff / scale <= tol;
  if (!ok) failures++;
  printf("  %-34s rel %.2e (tol %.0e) at %zu: got %.6g want %.6g %s\n", what, diff / scale, tol, at, got[at], want[at], ok ? "ok" : "FAIL");
}
static std::vector<double> rmsnorm(const std::vector<float>& x, const std::vector<ll_bf16>& g) {
  double ss = 0; for (float v : x) ss += (double)v * v;
  double s = 1.0 / sqrt(ss / x.size() + EPS);
  std::vector<double> o(x.size()); for (size_t i = 0; i < x.size(); i++) o[i] = x[i] * s * bf(g[i]);
  return o;
}
template <class X> static double dot(const ll_bf16* w, const X& x, size_t k) { double s = 0; for (size_t j = 0; j < k; j++) s += bf(w[j]) * (double)x[j]; return s; }
static void poison(float* p, size_t n) { CK(cudaMemset(p, 0xff, n * 4)); }  // NaN: an unwritten output fails

static void check_layer(Model& m, unsigned pos, Opts o, int rep) {
  printf("check pos %u splits %u blocks %u (run %d)\n", pos, o.splits, o.bblocks, rep);
  cudaStream_t st; CK(cudaStreamCreate(&st));
  Launcher g{st, false};
  const unsigned l = g_layers > 3 ? 3 : 0;
  std::vector<float> x0(H);
  for (unsigned i = 0; i < H; i++) x0[i] = sinf(0.37f * i + pos + 0.1f * rep) * (1.0f + (i % 7));
  CK(cudaMemcpy(m.x, x0.data(), 4 * H, cudaMemcpyHostToDevice));
  auto wqkv = get(m.wqkv[l], (size_t)QKV * H); auto ln1 = get(m.ln1[l], H); auto ln2 = get(m.ln2[l], H);
  auto freq = get(m.freq, HD / 2);
  // QKV + RoPE
  poison(m.q, Q);
  k_qkv(g, m, l, pos); CK(cudaStreamSynchronize(st)); CK(cudaGetLastError());
  auto xn = rmsnorm(x0, ln1);
  std::vector<double> y(QKV);
  for (unsigned r = 0; r < QKV; r++) y[r] = dot(&wqkv[(size_t)r * H], xn, H);
  for (unsigned head = 0; head < NH + NKV; head++)
    for (unsigned j = 0; j < HD / 2; j++) {
      double a = y[head * HD + j], b = y[head * HD + j + 32], ang = (double)((float)pos * freq[j]);
      y[head * HD + j] = a * cos(ang) - b * sin(ang); y[head * HD + j + 32] = b * cos(ang) + a * sin(ang);
    }
  auto q = get(m.q, Q);
  compare("qkv: q", std::vector<double>(y.begin(), y.begin() + Q), q.data(), Q, 1e-4);
  auto kvn = get(m.kv_new, 2 * KV);
  std::vector<float> kvf(2 * KV); for (unsigned i = 0; i < 2 * KV; i++) kvf[i] = bf(kvn[i]);
  compare("qkv: kv_new (bf16)", std::vector<double>(y.begin() + Q, y.end()), kvf.data(), 2 * KV, 8e-3);
  // attention + O from the same x0: the pack's attention, then each variant on the same inputs
  auto kc_before = get(m.kc[l], (size_t)KV * SEQ);
  k_attn(g, m, l, pos, o); k_o(g, m, l, pos, o); CK(cudaStreamSynchronize(st)); CK(cudaGetLastError());
  auto kc = get(m.kc[l], (size_t)KV * SEQ), vc = get(m.vc[l], (size_t)KV * SEQ);
  unsigned bad_append = 0, bad_other = 0;
  for (unsigned h = 0; h < NKV; h++)
    for (unsigned d = 0; d < HD; d++) {
      size_t at = ((size_t)h * SEQ + pos) * HD + d;
      if (kc[at] != kvn[h * HD + d] || vc[at] != kvn[KV + h * HD + d]) bad_append++;
    }
  for (size_t i = 0; i < kc.size(); i++) if (kc[i] != kc_before[i] && (i / HD) % SEQ != pos) bad_other++;
  printf("  %-34s %u wrong appended, %u other rows changed %s\n", "attn: cache append", bad_append, bad_other, bad_append + bad_other ? "FAIL" : "ok");
  if (bad_append + bad_other) failures++;
  std::vector<double> at(Q);
  for (unsigned hq = 0; hq < NH; hq++) {
    unsigned h = hq / G;
    std::vector<double> s(pos + 1); double mx = -1e300;
    for (unsigned t = 0; t <= pos; t++) { double a = 0; for (unsigned d = 0; d < HD; d++) a += (double)q[hq * HD + d] * bf(kc[((size_t)h * SEQ + t) * HD + d]); s[t] = a / 8; mx = std::max(mx, s[t]); }
    double z = 0; for (auto& v : s) { v = exp(v - mx); z += v; }
    for (unsigned d = 0; d < HD; d++) { double a = 0; for (unsigned t = 0; t <= pos; t++) a += s[t] * bf(vc[((size_t)h * SEQ + t) * HD + d]); at[hq * HD + d] = a / z; }
  }
  auto wo = get(m.wo[l], (size_t)H * Q);
  std::vector<double> x1(H);
  for (unsigned r = 0; r < H; r++) x1[r] = x0[r] + dot(&wo[(size_t)r * Q], at, Q);
  auto x1g = get(m.x, H);
  compare(o.pf_rounds ? "attn_pf + o: x" : "attn + o: x", x1, x1g.data(), H, 1e-4);
  // A variant of attention + O (or of QKV + attention, where v.qa) run from the same x0: x as the
  // pack's reference.
  auto attn_o_variant = [&](const std::string& label, Opts v) {
    CK(cudaMemcpy(m.x, x0.data(), 4 * H, cudaMemcpyHostToDevice));
    poison(m.apart, (size_t)NKV * LL_MAX_SPLITS * G * REC);
    if (v.qa) { poison(m.q, Q); k_qkv_attn(g, m, l, pos); }
    else k_attn(g, m, l, pos, v);
    k_o(g, m, l, pos, v); CK(cudaStreamSynchronize(st)); CK(cudaGetLastError());
    auto xv = get(m.x, H);
    compare(label.c_str(), x1, xv.data(), H, 1e-4);
  };
  for (unsigned rounds : {0u, 3u, 6u, 64u}) {  // 64: more pairs than the layer has (clamped to all of them)
    if (rounds == o.pf_rounds) continue;
    Opts v = o; v.pf_rounds = rounds;
    attn_o_variant(rounds ? "attn_pf" + std::to_string(rounds) + " + o: x" : std::string("attn + o: x"), v);
  }
  for (auto [r0, n, after] : {std::tuple{0u, 2u, false}, {5u, 2u, false}, {5u, 4u, true}, {0u, 64u, false}}) {  // 64: clamped to the layer
    Opts v = o; v.pf_rounds = 0; v.opf = true; v.opf_round0 = r0; v.opf_rounds = n; v.opf_after = after;
    attn_o_variant("attn + o_pf" + std::to_string(r0) + "x" + std::to_string(n) + (after ? "a" : "") + ": x", v);
  }
  for (auto [quarters, before] : {std::pair{4u, false}, {2u, false}, {4u, true}, {9u, false}}) {  // 9: clamped to all of W_o
    Opts v = o; v.pf_rounds = 0; v.wo_quarters = quarters; v.wo_before = before;
    attn_o_variant(std::string(before ? "attn_W" : "attn_w") + std::to_string(quarters) + " + o: x", v);
  }
  {  // QKV and attention as one kernel per KV head (version 18), then O over its splits
    Opts v = o; v.pf_rounds = 0; v.qa = true;
    attn_o_variant("qkv_attn + o: x", v);
    auto qa = get(m.q, Q);
    compare("qkv_attn: q", std::vector<double>(y.begin(), y.begin() + Q), qa.data(), Q, 1e-4);
    unsigned err = 0; CK(cudaMemcpyFromSymbol(&err, lv_error, 4));
    printf("  %-34s %u %s\n", "qkv_attn: gave up waiting", err, err ? "FAIL" : "ok");
    if (err) failures++;
  }
  CK(cudaMemcpy(m.x, x1g.data(), 4 * H, cudaMemcpyHostToDevice));
  // FFN in
  auto wgu = get(m.wgu[l], (size_t)2 * F * H);
  poison(m.act, F);
  k_ffn(g, m, l, o); CK(cudaStreamSynchronize(st)); CK(cudaGetLastError());
  auto xn2 = rmsnorm(x1g, ln2);
  std::vector<double> act(F);
  for (unsigned r = 0; r < F; r++) { double gg = dot(&wgu[(size_t)r * H], xn2, H), uu = dot(&wgu[(size_t)(F + r) * H], xn2, H); act[r] = gg / (1 + exp(-gg)) * uu; }
  auto actg = get(m.act, F);
  compare("ffn_in: act", act, actg.data(), F, 1e-4);
  // down
  auto wd = get(m.wd[l], (size_t)H * F);
  k_down(g, m, l, o); CK(cudaStreamSynchronize(st)); CK(cudaGetLastError());
  std::vector<double> x2(H);
  for (unsigned r = 0; r < H; r++) x2[r] = x1g[r] + dot(&wd[(size_t)r * F], actg, F);
  auto x2g = get(m.x, H);
  compare("down: x", x2, x2g.data(), H, 1e-4);
  // gate/up + down as one kernel, from the same x: the same act, and x within the same tolerance; the
  // ticketed form also with grids of 4 and 16 blocks an SM, more than fit at once (the residency it
  // does without: llama_ffn_fused would trap there).
  auto fused = [&](const char* name, Opts f) {
    CK(cudaMemcpy(m.x, x1g.data(), 4 * H, cudaMemcpyHostToDevice));
    poison(m.act, F);
    k_ffn_fused(g, m, l, f); CK(cudaStreamSynchronize(st)); CK(cudaGetLastError());
    auto actf = get(m.act, F);
    compare((std::string(name) + ": act").c_str(), act, actf.data(), F, 1e-4);
    auto x2f = get(m.x, H);
    compare((std::string(name) + ": x").c_str(), x2, x2f.data(), H, 1e-4);
    auto fs = get(m.fsync, 3 * LV_SYNC_STRIDE);
    unsigned f0 = fs[0], f1 = fs[LV_SYNC_STRIDE], f2 = fs[2 * LV_SYNC_STRIDE];
    printf("  %-34s %u %u %u %s\n", (std::string(name) + ": sync after").c_str(), f0, f1, f2, f0 + f1 + f2 ? "FAIL" : "ok");
    if (f0 + f1 + f2) failures++;
  };
  fused("ffn_fused", o);
  Opts t = o;
  t.ticketed = true;
  fused("ffn_fused_t", t);
  for (unsigned per_sm : {4u, 16u}) {
    if (g_sanitize) break;
    t.fused_grid = std::min(FFN_TILES + DOWN_TILES, per_sm * o.bblocks);
    fused(per_sm == 4 ? "ffn_fused_t 4 blocks/SM" : "ffn_fused_t 16 blocks/SM", t);
  }
  auto tk = get(m.tickets, 4);
  printf("  %-34s %u %u %u %s\n", "tickets after", tk[0], tk[1], tk[2], tk[0] + tk[1] + tk[2] ? "FAIL" : "ok");
  if (tk[0] + tk[1] + tk[2]) failures++;
  CK(cudaStreamDestroy(st));
}

static void check_head(Model& m, Opts o) {
  printf("check lm head blocks %u\n", o.bblocks);
  cudaStream_t st; CK(cudaStreamCreate(&st));
  Launcher g{st, false};
  std::vector<float> x(H);
  for (unsigned i = 0; i < H; i++) x[i] = cosf(0.11f * i) * 3.0f;
  CK(cudaMemcpy(m.x, x.data(), 4 * H, cudaMemcpyHostToDevice));
  auto emb = get(m.emb, (size_t)V * H); auto norm = get(m.norm, H);
  // A planted tie: rows 777 and V - 5 equal, both larger than every other row.
  const unsigned tie = V - 5;
  for (unsigned j = 0; j < H; j++) emb[(size_t)777 * H + j] = emb[(size_t)tie * H + j] = to_bf(x[j] > 0 ? 0.5f : -0.5f);
  CK(cudaMemcpy(m.emb + (size_t)777 * H, &emb[(size_t)777 * H], 2 * H, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(m.emb + (size_t)tie * H, &emb[(size_t)tie * H], 2 * H, cudaMemcpyHostToDevice));
  auto xn = rmsnorm(x, norm);
  std::vector<double> want(V);
  for (unsigned r = 0; r < V; r++) want[r] = dot(&emb[(size_t)r * H], xn, H);
  for (int rep = 0; rep < 2; rep++) {
    poison(m.logits, V);
    const unsigned pos = 5 + rep;
    k_head(g, m, pos, o); CK(cudaStreamSynchronize(st)); CK(cudaGetLastError());
    auto got = get(m.logits, V);
    compare("lm head: logits", want, got.data(), V, 1e-4);
    unsigned best = 0; for (unsigned r = 1; r < V; r++) if (got[r] > got[best]) best = r;
    unsigned tok = get(m.token, 1)[0], hist = get(m.history, SEQ)[pos], hc = get(m.hcount, 1)[0], tk = get(m.tickets, 4)[2];
    bool ok = tok == best && best == 777 && hist == tok && hc == 0 && tk == 0;
    if (!ok) failures++;
    printf("  %-34s token %u history %u argmax %u, counter %u ticket %u %s\n", "lm head: greedy token (planted tie)", tok, hist, best, hc, tk, ok ? "ok" : "FAIL");
  }
  CK(cudaStreamDestroy(st));
}

// ---- timing ---------------------------------------------------------------------------------------
static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
template <class Body> static float graph_us(cudaStream_t st, int reps, Body body) {
  cudaGraph_t g; cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  body();
  CK(cudaStreamEndCapture(st, &g)); CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int r = 0; r < reps + 3; r++) {
    CK(cudaEventRecord(a, st)); CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(b, st)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); if (r >= 3) t.push_back(ms * 1e3f);
  }
  CK(cudaGetLastError());
  CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
  return median(t);
}

static void warm(Model& m, cudaStream_t st) {  // clocks up
  Launcher g{st, false};
  for (int i = 0; i < 400; i++) k_ffn(g, m, i % g_layers, Opts());
  CK(cudaStreamSynchronize(st));
}

// The device's peak memory bandwidth (TB/s): memory clock x bus width, two transfers a clock, as the
// driver reports them (main sets it; an H200 of the pool reports 4.81, its datasheet says 4.8).
static double g_peak_tb = 0;

static void time_kernels(Model& m, unsigned pos, Opts o, bool all) {
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  warm(m, st);
  printf("kernels at pos %u, splits %u, blocks %u: us per launch (16 launches over 16 layers in a graph)\n", pos, o.splits, o.bblocks);
  auto row = [&](const std::string& name, double bytes, auto launch) {
    float t[2];
    for (int pdl = 0; pdl < 2; pdl++) {
      Launcher g{st, pdl == 1};
      t[pdl] = graph_us(st, 20, [&] { for (unsigned l = 0; l < L; l++) launch(g, l); }) / L;
    }
    printf("  %-20s %6.1f MB  alone %7.2f us %5.2f TB/s %3.0f%% | back-to-back PDL %7.2f us %3.0f%%\n", name.c_str(), bytes / 1e6, t[0], bytes / t[0] / 1e6,
           bytes / t[0] / 1e6 / g_peak_tb * 100, t[1], bytes / t[1] / 1e6 / g_peak_tb * 100);
  };
  const double ab = 4.0 * KV * (pos + 1), ob = 2.0 * H * Q, fb = 4.0 * F * H, qb = 2.0 * QKV * H;
  o.pf_rounds = 0;
  row("llama_attn", ab, [&](Launcher& g, unsigned l) { k_attn(g, m, l, pos, o); });
  row("attn+o", ob + ab, [&](Launcher& g, unsigned l) { k_attn(g, m, l, pos, o); k_o(g, m, l, pos, o); });
  row("attn+o+ffn_in", fb + ob + ab, [&](Launcher& g, unsigned l) { k_attn(g, m, l, pos, o); k_o(g, m, l, pos, o); k_ffn(g, m, l, o); });
  for (unsigned rounds : {2u, 4u, 6u}) {
    Opts v = o; v.pf_rounds = rounds;
    std::string r = std::to_string(rounds);
    row("attn_pf" + r, ab, [&](Launcher& g, unsigned l) { k_attn(g, m, l, pos, v); });
    row("attn_pf" + r + "+o+ffn_in", fb + ob + ab, [&](Launcher& g, unsigned l) { k_attn(g, m, l, pos, v); k_o(g, m, l, pos, v); k_ffn(g, m, l, v); });
  }
  for (auto [r0, n, after] : {std::tuple{0u, 0u, false}, {0u, 2u, false}, {5u, 2u, false}, {5u, 4u, false}, {5u, 2u, true}, {5u, 4u, true}}) {
    Opts v = o; v.opf = true; v.opf_round0 = r0; v.opf_rounds = n; v.opf_after = after;
    std::string r = "o_pf" + std::to_string(r0) + "x" + std::to_string(n) + (after ? "a" : "");
    row("attn+" + r, ob + ab, [&](Launcher& g, unsigned l) { k_attn(g, m, l, pos, o); k_o(g, m, l, pos, v); });
    row("attn+" + r + "+ffn_in", fb + ob + ab, [&](Launcher& g, unsigned l) { k_attn(g, m, l, pos, o); k_o(g, m, l, pos, v); k_ffn(g, m, l, v); });
  }
  for (auto [quarters, before] : {std::pair{4u, false}, {2u, false}, {4u, true}}) {
    Opts v = o; v.wo_quarters = quarters; v.wo_before = before;
    std::string r = std::string(before ? "attn_W" : "attn_w") + std::to_string(quarters);
    row(r, ab, [&](Launcher& g, unsigned l) { k_attn(g, m, l, pos, v); });
    row(r + "+o", ob + ab, [&](Launcher& g, unsigned l) { k_attn(g, m, l, pos, v); k_o(g, m, l, pos, v); });
    row(r + "+o+ffn_in", fb + ob + ab, [&](Launcher& g, unsigned l) { k_attn(g, m, l, pos, v); k_o(g, m, l, pos, v); k_ffn(g, m, l, v); });
    row("qkv+" + r + "+o", qb + ab + ob, [&](Launcher& g, unsigned l) { k_qkv(g, m, l, pos); k_attn(g, m, l, pos, v); k_o(g, m, l, pos, v); });
  }
  {
    Opts v = o; v.qa = true;
    const double lb = qb + ab + ob + 6.0 * F * H;
    row("qkv+attn+o", qb + ab + ob, [&](Launcher& g, unsigned l) { k_qkv(g, m, l, pos); k_attn(g, m, l, pos, o); k_o(g, m, l, pos, o); });
    row("qkv_attn+o", qb + ab + ob, [&](Launcher& g, unsigned l) { k_qkv_attn(g, m, l, pos); k_o(g, m, l, pos, v); });
    row("qkv+attn+o+ffn_in+down", lb, [&](Launcher& g, unsigned l) { k_qkv(g, m, l, pos); k_attn(g, m, l, pos, o); k_o(g, m, l, pos, o); k_mlp(g, m, l, o); });
    row("qkv_attn+o+ffn_in+down", lb, [&](Launcher& g, unsigned l) { k_qkv_attn(g, m, l, pos); k_o(g, m, l, pos, v); k_mlp(g, m, l, v); });
  }
  if (!all) { CK(cudaStreamDestroy(st)); return; }
  row("llama_qkv", 2.0 * QKV * H, [&](Launcher& g, unsigned l) { k_qkv(g, m, l, pos); });
  row("llama_o", ob, [&](Launcher& g, unsigned l) { k_o(g, m, l, pos, o); });
  row("ffn_in", fb, [&](Launcher& g, unsigned l) { k_ffn(g, m, l, o); });
  row("down", 2.0 * H * F, [&](Launcher& g, unsigned l) { k_down(g, m, l, o); });
  row("ffn_in+down", 6.0 * F * H, [&](Launcher& g, unsigned l) { k_ffn(g, m, l, o); k_down(g, m, l, o); });
  row("ffn_fused", 6.0 * F * H, [&](Launcher& g, unsigned l) { k_ffn_fused(g, m, l, o); });
  Opts t = o;
  t.ticketed = true;
  row("ffn_fused_t", 6.0 * F * H, [&](Launcher& g, unsigned l) { k_ffn_fused(g, m, l, t); });
  row("o+ffn_in+down", ob + 6.0 * F * H, [&](Launcher& g, unsigned l) { k_o(g, m, l, pos, o); k_ffn(g, m, l, o); k_down(g, m, l, o); });
  row("o+ffn_fused", ob + 6.0 * F * H, [&](Launcher& g, unsigned l) { k_o(g, m, l, pos, o); k_ffn_fused(g, m, l, o); });
  row("o+ffn_fused_t", ob + 6.0 * F * H, [&](Launcher& g, unsigned l) { k_o(g, m, l, pos, o); k_ffn_fused(g, m, l, t); });
  Opts both = o;
  both.pf_rounds = 6;
  row("attn+o+ffn_in+down", ab + ob + 6.0 * F * H, [&](Launcher& g, unsigned l) { k_attn(g, m, l, pos, o); k_o(g, m, l, pos, o); k_ffn(g, m, l, o); k_down(g, m, l, o); });
  row("attn_pf6+o+ffn_fused", ab + ob + 6.0 * F * H, [&](Launcher& g, unsigned l) { k_attn(g, m, l, pos, both); k_o(g, m, l, pos, both); k_ffn_fused(g, m, l, both); });
  both.ticketed = true;
  row("attn_pf6+o+ffn_fused_t", ab + ob + 6.0 * F * H, [&](Launcher& g, unsigned l) { k_attn(g, m, l, pos, both); k_o(g, m, l, pos, both); k_ffn_fused(g, m, l, both); });
  row("lm_head", 2.0 * V * H, [&](Launcher& g, unsigned) { k_head(g, m, pos, o); });
  CK(cudaStreamDestroy(st));
}

// Whether gate/up reads its tiles faster where they are already in L2: gate/up alone (no PDL) right
// after l2_touch has read rounds r0 .. r0 + n - 1 of its tiles (both the gate and the up rows of those
// pairs), against right after l2_touch has read as many bytes of unrelated memory (the LM head's
// weights, a different part each layer): the same kernel before it, the same L2 traffic, only the
// residency of its own bytes differs. µs between an event after the touch and one after gate/up, median
// over 16 layers x reps; the gain against the control beside what those bytes take at the peak.
static void time_l2(Model& m, Opts o) {
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  warm(m, st);
  unsigned* sink = dev<unsigned>(1);
  const unsigned rp = round_pairs(o);
  cudaEvent_t e1, e2; CK(cudaEventCreate(&e1)); CK(cudaEventCreate(&e2));
  Launcher g{st, false};
  auto run = [&](unsigned r0, unsigned n, bool control) {
    unsigned p0 = std::min(F, r0 * rp), pairs = std::min(F - p0, n * rp);
    unsigned long long half = (unsigned long long)pairs * H * 2, n16 = half / 16;  // bytes of each of the two ranges
    std::vector<float> t;
    for (int rep = 0; rep < 6; rep++)
      for (unsigned l = 0; l < L; l++) {
        const uint4 *a, *b;
        if (control) {
          const char* base = (const char*)m.emb + (((unsigned long long)l * 2 * half) % ((unsigned long long)V * H * 2 - 2 * half) & ~15ull);
          a = (const uint4*)base; b = (const uint4*)(base + half);
        } else {
          a = (const uint4*)(m.wgu[l] + (size_t)p0 * H); b = (const uint4*)(m.wgu[l] + ((size_t)F + p0) * H);
        }
        l2_touch<<<1056, 256, 0, st>>>(a, b, n16, sink);
        CK(cudaEventRecord(e1, st)); k_ffn(g, m, l, o); CK(cudaEventRecord(e2, st)); CK(cudaEventSynchronize(e2));
        float ms; CK(cudaEventElapsedTime(&ms, e1, e2)); if (rep > 0) t.push_back(ms * 1e3f);
      }
    CK(cudaGetLastError());
    return std::make_pair(median(t), 2.0 * half);
  };
  printf("l2: gate/up alone after its own tiles were read into L2, against after as many unrelated bytes (rounds of %u pairs, %.2f MB)\n", rp,
         4.0 * rp * H / 1e6);
  for (auto [r0, n] : {std::pair{0u, 2u}, {5u, 2u}, {0u, 5u}, {5u, 5u}, {0u, 10u}}) {
    auto [own, bytes] = run(r0, n, false);
    auto [other, _] = run(r0, n, true);
    printf("  l2 rounds %2u..%2u %6.1f MB: own %7.2f us  control %7.2f us  gain %5.2f us (the bytes at peak: %5.2f us)\n", r0, r0 + n - 1, bytes / 1e6, own,
           other, other - own, bytes / g_peak_tb / 1e6);
  }
  CK(cudaFree(sink)); CK(cudaEventDestroy(e1)); CK(cudaEventDestroy(e2)); CK(cudaStreamDestroy(st));
}

// A combo: the rounds of gate/up's first tiles attention asks L2 for (0: the pack's attention), after
// an `f` for gate/up + down as one kernel, after a `c` for that kernel launched cooperative, after a
// `t` for it with every tile by ticket (llama_ffn_fused_t): "0", "6", "f0", "f6", "c6", "t6"; or
// llama_o_pf asking L2 for gate/up's rounds r0 .. r0 + n - 1 before its wait ("o<r0>x<n>") or after it
// ("O<r0>x<n>").
static Opts combo(const std::string& c, Opts o) {
  if (c == "m" || c == "M") { o.mk = true; o.mk_layer = c == "M"; return o; }  // llama_layers_mk: every layer in one launch, or one a layer
  if (c == "q") { o.qa = true; return o; }  // QKV and attention as llama_qkv_attn
  if (!c.empty() && (c[0] == 'w' || c[0] == 'W')) {  // "w4": attention asks L2 for all of W_o after its wait; "W4" before it
    o.wo_quarters = (unsigned)atoi(c.c_str() + 1);
    o.wo_before = c[0] == 'W';
    return o;
  }
  if (!c.empty() && (c[0] == 'o' || c[0] == 'O')) {  // "o5x2": O asks L2 for gate/up's rounds 5 and 6 before its wait; "O5x2" after it
    const char* x = strchr(c.c_str(), 'x');
    o.opf = true;
    o.opf_round0 = (unsigned)atoi(c.c_str() + 1);
    o.opf_rounds = x ? (unsigned)atoi(x + 1) : 1u;
    o.opf_after = c[0] == 'O';
    return o;
  }
  o.coop = !c.empty() && c[0] == 'c';
  o.ticketed = !c.empty() && c[0] == 't';
  o.fused = o.coop || o.ticketed || (!c.empty() && c[0] == 'f');
  o.pf_rounds = (unsigned)atoi(c.c_str() + (o.fused ? 1 : 0));
  return o;
}
static void time_step(Model& m, std::vector<unsigned> splits, Opts base, std::vector<std::string> combos, std::vector<unsigned> positions) {
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  warm(m, st);
  double weights = 2.0 * (L * ((double)QKV * H + H * Q + 2.0 * F * H + H * F + 2.0 * H) + H + (double)V * H);
  for (unsigned pos : positions)
    for (unsigned s : splits)
      for (auto& c : combos) {
        Opts o = combo(c, base); o.splits = s;
        if (o.mk && !mk_fits()) continue;
        float t[2];
        for (int pdl = 0; pdl < 2; pdl++) { Launcher g{st, pdl == 1}; t[pdl] = graph_us(st, 30, [&] { step(g, m, pos, o); }); }
        double bytes = weights + 4.0 * L * KV * (pos + 1);
        printf("step %-4s pos %4u splits %2u: PDL %7.1f us (%.2f TB/s, %2.0f%% of %.2f)  no PDL %7.1f us  PDL gain %.3fx\n", c.c_str(), pos, s, t[1],
               bytes / t[1] / 1e6, bytes / t[1] / 1e6 / g_peak_tb * 100, g_peak_tb, t[0], t[0] / t[1]);
      }
  CK(cudaStreamDestroy(st));
}

// llama_layers_mk's step against the pack's on the same inputs (the pack's kernels are checked against
// double precision above): x after the layers, the logits and the token; its counters back at zero and
// no wait given up.
static void check_mk(Model& m) {
  if (!mk_fits()) { printf("mk check skipped: %u SMs, llama_layers_mk needs %u\n", g_mk_grid, MK_NKV * MK_S); return; }
  cudaStream_t st; CK(cudaStreamCreate(&st));
  Launcher g{st, true};
  std::vector<unsigned> poss = g_sanitize ? std::vector<unsigned>{5, 300} : std::vector<unsigned>{0, 1, 37, 129, 1024, 4095};
  for (unsigned pos : poss)
    for (int rep = 0; rep < 2; rep++) {
      unsigned tok = (977u * pos + 31u * rep + 5u) % V, tr = 0;
      std::vector<float> xr, lr;
      for (int v = 0; v < 3; v++) {
        Opts o; o.mk = v > 0; o.mk_layer = v == 2;
        CK(cudaMemcpy(m.token, &tok, 4, cudaMemcpyHostToDevice));
        poison(m.logits, V);
        step(g, m, pos, o);
        CK(cudaStreamSynchronize(st)); CK(cudaGetLastError());
        auto x = get(m.x, H); auto lg = get(m.logits, V); auto t = get(m.token, 1);
        if (v == 0) { xr = x; lr = lg; tr = t[0]; continue; }
        printf("mk check pos %u (run %d%s)\n", pos, rep, v == 2 ? ", a launch a layer" : "");
        compare("x after the layers (mk vs pack)", std::vector<double>(xr.begin(), xr.end()), x.data(), H, 1e-4);
        compare("logits (mk vs pack)", std::vector<double>(lr.begin(), lr.end()), lg.data(), V, 1e-4);
        printf("  token %u (pack %u)\n", t[0], tr);
      }
    }
  auto sync = get(g_mk.sync, MK_SYNC_WORDS);
  unsigned dirty = 0, gave = sync[(MK_MAX_LAYERS * MK_WORDS + 1) * MK_LINE];
  for (unsigned c = 0; c < MK_MAX_LAYERS * MK_WORDS + 1; c++) dirty += sync[c * MK_LINE] != 0;
  printf("mk counters left nonzero %u, waits given up %u: %s\n", dirty, gave, dirty || gave ? "FAIL" : "ok");
  if (dirty || gave) failures++;
  CK(cudaStreamDestroy(st));
}

template <class T> static std::vector<T> list(const char* s, std::vector<T> def) {
  if (!s) return def;
  std::vector<T> v;
  for (const char* p = s; *p;) {
    const char* e = strchr(p, ',');
    std::string item = e ? std::string(p, e) : std::string(p);
    if constexpr (std::is_same<T, unsigned>::value) v.push_back(strtoul(item.c_str(), nullptr, 10)); else v.push_back(item);
    p = e ? e + 1 : p + strlen(p);
  }
  return v.empty() ? def : v;  // an empty argument takes the default: callers index the first item
}

int main(int argc, char** argv) {
  std::string what = argc > 1 ? argv[1] : "step";
  int sms = 0; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int mem_khz = 0, bus_bits = 0;
  CK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0));
  CK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0));
  g_peak_tb = 2.0 * mem_khz * 1e3 * bus_bits / 8 / 1e12;
  if (g_peak_tb <= 0) { fprintf(stderr, "the driver reports no memory clock or bus width\n"); return 2; }
  printf("memory peak %.2f TB/s (%d MHz x %d bits x 2)\n", g_peak_tb, mem_khz / 1000, bus_bits);
  for (const void* f : {(const void*)llama_ffn_in, (const void*)llama_down, (const void*)llama_lm_head, (const void*)llama_ffn_fused,
                        (const void*)llama_ffn_fused_t})
    CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)NORM_SMEM));
  cudaFuncAttributes fa;
  int bulk_occ = 0;
  struct Fn { const char* name; const void* f; int threads; size_t smem; };
  for (auto [name, f, threads, smem] : std::vector<Fn>{
           {"qkv", (const void*)llama_qkv, LL_QKV_WARPS * 32, 0}, {"attn", (const void*)llama_attn, 256, 0},
           {"attn_pf", (const void*)llama_attn_pf, 256, 0}, {"attn_pfo", (const void*)llama_attn_pfo, 256, 0}, {"qkv_attn", (const void*)llama_qkv_attn, 256, 0}, {"o", (const void*)llama_o, 256, 0},
           {"ffn_in", (const void*)llama_ffn_in, LB_THREADS, NORM_SMEM}, {"down", (const void*)llama_down, LB_THREADS, STAGES},
           {"lm_head", (const void*)llama_lm_head, LB_THREADS, NORM_SMEM}, {"ffn_fused", (const void*)llama_ffn_fused, LB_THREADS, NORM_SMEM},
           {"ffn_fused_t", (const void*)llama_ffn_fused_t, LB_THREADS, NORM_SMEM}}) {
    CK(cudaFuncGetAttributes(&fa, f));
    int occ = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, f, threads, smem));
    if (smem) bulk_occ = occ;
    printf("%-12s regs %3d smem %6zu + %6zu dynamic local %zu blocks/SM %d\n", name, fa.numRegs, fa.sharedSizeBytes, smem, fa.localSizeBytes, occ);
  }
  CK(cudaFuncSetAttribute((const void*)llama_layers_mk, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)MK_SMEM));
  CK(cudaFuncGetAttributes(&fa, (const void*)llama_layers_mk));
  int mk_occ = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&mk_occ, (const void*)llama_layers_mk, MK_THREADS, MK_SMEM));
  printf("%-12s regs %3d smem %6zu + %6zu dynamic local %zu blocks/SM %d\n", "layers_mk", fa.numRegs, fa.sharedSizeBytes, (size_t)MK_SMEM, fa.localSizeBytes, mk_occ);
  printf("bulk: %d stages x %d bytes, %d blocks/SM, static rounds %d\n", LB_STAGES, LB_STAGE_BYTES, bulk_occ, LB_STATIC_ROUNDS);
  if (what == "attrs") return bulk_occ > 0 ? 0 : 1;
  if (what == "sanitize") { g_layers = 1; V = 4099; g_sanitize = true; }
  Model m = make_model();
  mk_setup(m);
  auto splits = list<unsigned>(argc > 2 ? argv[2] : nullptr, {32});
  Opts base;
  base.bblocks = argc > 3 && atoi(argv[3]) > 0 ? (unsigned)atoi(argv[3]) : (unsigned)std::max(1, bulk_occ * sms);
  auto combos = list<std::string>(argc > 4 ? argv[4] : nullptr, {"0", "6", "f0", "f6"});
  if (what == "check" || what == "sanitize") {
    std::vector<unsigned> poss = what == "check" ? std::vector<unsigned>{0, 1, 37, 1024, 4095} : std::vector<unsigned>{5, 300};
    for (unsigned s : splits)
      for (unsigned pos : poss)
        for (int rep = 0; rep < 2; rep++) { Opts o = base; o.splits = s; check_layer(m, pos, o, rep); }
    check_head(m, base);
    check_mk(m);
    printf("%s: %d failures\n", what.c_str(), failures);
    return failures ? 1 : 0;
  }
  if (what == "mkcheck") {  // llama_layers_mk's step against the pack's only
    check_mk(m);
    printf("mkcheck: %d failures\n", failures);
    return failures ? 1 : 0;
  }
  if (what == "l2") {
    Opts o = base; o.splits = splits[0];
    time_l2(m, o);
    return 0;
  }
  if (what == "coop") {
    try_coop(m, base);
    return 0;
  }
  if (what == "kernels") {
    for (unsigned pos : {1024u, 128u, 4096u}) { Opts o = base; o.splits = splits[0]; time_kernels(m, pos, o, pos == 1024); }
    return 0;
  }
  if (what == "profile") {  // the step twice at one position (default 1,024) with the first combo, launch by launch (for ncu)
    unsigned pos = list<unsigned>(argc > 5 ? argv[5] : nullptr, {1024})[0];
    cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    Opts o = combo(combos[0], base); o.splits = splits[0];
    if (o.mk && !mk_fits()) { printf("profile skipped: %u SMs, llama_layers_mk needs %u\n", g_mk_grid, MK_NKV * MK_S); return 0; }
    Launcher g{st, true};
    for (int rep = 0; rep < 2; rep++) step(g, m, pos, o);
    CK(cudaStreamSynchronize(st)); CK(cudaGetLastError()); CK(cudaStreamDestroy(st));
    return 0;
  }
  auto positions = list<unsigned>(argc > 5 ? argv[5] : nullptr, {128, 1024, 4096});
  time_step(m, splits, base, combos, positions);
  return 0;
}
