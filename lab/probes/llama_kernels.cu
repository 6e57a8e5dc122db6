// Study tool: the Llama decode kernels (the pack's llama.cu and llama_stream.cu) on the GPU at
// Llama-3.2-1B's shape (LLAMA_SHAPE=3b: Llama-3.2-3B's), beside the study variants of
// llama_variants.cu (per-head hand-offs: O consuming its head's partials as they land, QKV and
// attention fused per KV head).
//   check   : one layer's kernels and the LM head, each against a double-precision CPU computation from
//             the kernel's own inputs (random weights, norms and cache), at several positions and
//             attention splits, twice each (the ticket counters must come back to zero, the outputs are
//             poisoned with NaN first); the variants against the same references.
//   kernels : each kernel alone (a graph of L launches over L layers' weights, no PDL) and back to back
//             with PDL, µs per launch and % of 4.8 TB/s.
//   step    : the whole step as one captured graph, PDL on every edge and off, per position, splits and
//             combo (base: the pack; flag: attention and O with per-head counters; fused: QKV +
//             attention fused per KV head, then the pack's O; fusedflag: fused, then O on counters).
//   designs : one table at position 1,024: the kernels alone and back to back, the pairs and triples of
//             every design, the step per combo at 128 and 1,024.
// Build and run on the GPU machine (lab/probes/llama-step.sh):
//   nvcc -O3 -arch=sm_90 -std=c++17 -Ikernels -Icrates/ostinato-llama/kernels -DOST_TRIGGER=3 -o llama_kernels lab/probes/llama_kernels.cu
//   [LLAMA_SHAPE=3b] ./llama_kernels attrs|check|sanitize|kernels|step|designs [splits,...] [blocks] [combos,...] [positions,...]
#include "../../kernels/ostinato.cu"
#include "../../crates/ostinato-llama/kernels/llama.cu"
#include "../../crates/ostinato-llama/kernels/llama_stream.cu"
#include "llama_variants.cu"

#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s at %d: %s\n", cudaGetErrorString(e_), __LINE__, #x); exit(1); } } while (0)

// The shape (set in main from LLAMA_SHAPE), the cache capacity, the layers allocated and the vocabulary
// (smaller under compute-sanitizer: one layer, 4,099 rows).
static unsigned H = 2048, L = 16, NH = 32, NKV = 8, HD = 64, F = 8192, V = 128256, G = 4, Q = 2048, KV = 512, ROWS = 3072;
static const unsigned SEQ = 4352;
static unsigned g_layers = 16;
static const float EPS = 1e-5f;
static void set_shape(const char* s) {
  if (s && std::string(s) == "3b") { H = 3072; L = 28; NH = 24; NKV = 8; HD = 128; }
  G = NH / NKV; Q = NH * HD; KV = NKV * HD; ROWS = (NH + 2 * NKV) * HD; g_layers = L;
}

template <class T> T* dev(size_t n) { T* p; CK(cudaMalloc(&p, n * sizeof(T))); CK(cudaMemset(p, 0, n * sizeof(T))); return p; }

__global__ void fill_bf16(ll_bf16* p, size_t n, unsigned seed, float lo, float hi) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed * 0x9e3779b9u ^ (unsigned)(i >> 32); h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
    p[i] = ll_to_bf(lo + (h >> 8) * (1.0f / 16777216.0f) * (hi - lo));
  }
}
static void rnd(ll_bf16* p, size_t n, unsigned seed, float lo, float hi) { fill_bf16<<<1024, 256>>>(p, n, seed, lo, hi); CK(cudaGetLastError()); }

struct Layer {
  ll_bf16 *wqkv, *wo, *wgu, *wd, *kc, *vc, *ln1, *ln2;
  float* part;                      // the layer's attention partials (up to LL_MAX_SPLITS splits)
  unsigned *done, *seen_o, *arrive, *seen_qa;  // the variants' counters (per KV head) and runs (per block)
};
struct Model {
  std::vector<Layer> l;
  ll_bf16 *emb, *norm;
  float *x, *qkv, *act, *logits, *hpart, *freq;
  unsigned *tickets, *hcount, *token, *trace;
};

static Model make_model() {
  Model m;
  m.l.resize(g_layers);
  for (unsigned l = 0; l < g_layers; l++) {
    Layer& y = m.l[l];
    y.wqkv = dev<ll_bf16>((size_t)ROWS * H); rnd(y.wqkv, (size_t)ROWS * H, 10 * l + 1, -0.0346f, 0.0346f);
    y.wo = dev<ll_bf16>((size_t)H * Q); rnd(y.wo, (size_t)H * Q, 10 * l + 2, -0.0346f, 0.0346f);
    y.wgu = dev<ll_bf16>((size_t)2 * F * H); rnd(y.wgu, (size_t)2 * F * H, 10 * l + 3, -0.0346f, 0.0346f);
    y.wd = dev<ll_bf16>((size_t)H * F); rnd(y.wd, (size_t)H * F, 10 * l + 4, -0.0346f, 0.0346f);
    y.kc = dev<ll_bf16>((size_t)KV * SEQ); rnd(y.kc, (size_t)KV * SEQ, 10 * l + 5, -1.0f, 1.0f);
    y.vc = dev<ll_bf16>((size_t)KV * SEQ); rnd(y.vc, (size_t)KV * SEQ, 10 * l + 6, -1.0f, 1.0f);
    y.ln1 = dev<ll_bf16>(H); rnd(y.ln1, H, 10 * l + 7, 0.5f, 1.5f);
    y.ln2 = dev<ll_bf16>(H); rnd(y.ln2, H, 10 * l + 8, 0.5f, 1.5f);
    y.part = dev<float>((size_t)NKV * 64 * G * (4 + HD));
    y.done = dev<unsigned>(NKV); y.seen_o = dev<unsigned>(64 * NKV); y.arrive = dev<unsigned>(NKV); y.seen_qa = dev<unsigned>(64 * NKV);
  }
  m.emb = dev<ll_bf16>((size_t)V * H); rnd(m.emb, (size_t)V * H, 99, -0.0346f, 0.0346f);
  m.norm = dev<ll_bf16>(H); rnd(m.norm, H, 98, 0.5f, 1.5f);
  m.x = dev<float>(H); m.qkv = dev<float>(ROWS); m.act = dev<float>(F); m.logits = dev<float>(V);
  m.hpart = dev<float>(4 * 1024);
  m.freq = dev<float>(HD / 2);
  std::vector<float> f(HD / 2);
  for (unsigned j = 0; j < HD / 2; j++) f[j] = 1.0f / powf(500000.0f, 2.0f * j / HD);
  CK(cudaMemcpy(m.freq, f.data(), 4 * f.size(), cudaMemcpyHostToDevice));
  m.tickets = dev<unsigned>(4); m.hcount = dev<unsigned>(1); m.token = dev<unsigned>(1); m.trace = dev<unsigned>(4 * SEQ);
  CK(cudaDeviceSynchronize());
  return m;
}

// ---- launches (the geometry of crates/ostinato-llama/src/geometry.rs) ------------------------------
struct Launcher {
  cudaStream_t st;
  bool pdl;
  template <class... P, class... A> void go(void (*k)(P...), dim3 grid, unsigned threads, size_t smem, A... a) {
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t c = {};
    c.gridDim = grid; c.blockDim = dim3(threads); c.dynamicSmemBytes = smem; c.stream = st; c.attrs = at; c.numAttrs = pdl ? 1 : 0;
    CK(cudaLaunchKernelEx(&c, k, ((P)a)...));
  }
};
// Per-step choices: the attention + output projection pair (base, flag), or QKV + attention fused
// (fused: then llama_o; fusedflag: then llama_o_flag).
struct Opts {
  unsigned splits = 16, bblocks = 132;
  std::string combo = "base";
};
static unsigned chunks(unsigned k) { return k <= 2048 ? 1 : k <= 4096 ? 2 : 4; }
static unsigned per_tile(unsigned unit, unsigned dots) {
  unsigned most = std::max(1u, std::min(LB_STAGE_BYTES / unit, LB_MAX_UNITS / dots));
  for (unsigned c = most; c >= 1; c--) if (c * dots % LB_CONSUMERS == 0) return c;
  return most;
}
static unsigned qkv_warps() { return HD / 16; }
static size_t qkv_smem() { return 4 * (2048 * ((H + 2047) / 2048) + 8); }
static size_t attn_smem() { return 4 * (16 * G + 8 * G * HD); }
static size_t o_smem(unsigned splits) { return 4 * (splits * G * (4 + HD) + G * HD); }
static size_t stream_smem(bool normed) { return LB_BUDGET + (normed ? 8192 * ((H + 2047) / 2048) : 0); }
static unsigned ffn_tiles() { return (F + per_tile(4 * H, 2 * chunks(H)) - 1) / per_tile(4 * H, 2 * chunks(H)); }
static unsigned down_tiles() { return (H + per_tile(2 * F, chunks(F)) - 1) / per_tile(2 * F, chunks(F)); }
static unsigned head_tiles() { return (V + per_tile(2 * H, chunks(H)) - 1) / per_tile(2 * H, chunks(H)); }
// The fused kernel's blocks per KV head: (G + 2) heads' RoPE pairs, 8 a block.
static unsigned fused_splits() { return (G + 2) * (HD / 2) / 8; }
static bool g_fused_fits = false;

static void k_embed(Launcher& g, Model& m) { g.go(llama_embed, dim3((H + 255) / 256), 256, 0, m.x, m.emb, m.token, H); }
static void k_qkv(Launcher& g, Model& m, unsigned l, unsigned pos) {
  g.go(llama_qkv, dim3(HD / 2 / qkv_warps(), NH + 2 * NKV), 32 * qkv_warps(), qkv_smem(), m.qkv, m.x, m.l[l].ln1, m.l[l].wqkv, m.freq, pos, H, NH, NKV, HD, EPS);
}
static void k_attn(Launcher& g, Model& m, unsigned l, unsigned pos, const Opts& o) {
  Layer& y = m.l[l];
  if (o.combo == "flag") g.go(llama_attn_flag, dim3(o.splits, NKV), 256, attn_smem(), y.part, y.kc, y.vc, m.qkv, y.done, pos, NH, NKV, SEQ, o.splits, HD);
  else g.go(llama_attn, dim3(o.splits, NKV), 256, attn_smem(), y.part, y.kc, y.vc, m.qkv, pos, NH, NKV, SEQ, o.splits, HD);
}
static void k_fused(Launcher& g, Model& m, unsigned l, unsigned pos, bool flag) {
  Layer& y = m.l[l];
  g.go(llama_qkv_attn, dim3(fused_splits(), NKV), 256, std::max(qkv_smem(), attn_smem()), y.part, y.kc, y.vc, m.qkv, m.x, y.ln1, y.wqkv, m.freq, y.arrive,
       y.seen_qa, flag ? y.done : (unsigned*)nullptr, pos, H, NH, NKV, SEQ, EPS);
}
static void k_o(Launcher& g, Model& m, unsigned l, const Opts& o, unsigned splits) {
  Layer& y = m.l[l];
  bool flag = o.combo == "flag" || o.combo == "fusedflag";
  if (flag) g.go(llama_o_flag, dim3(H / 64, NKV), 256, o_smem(splits), m.x, y.part, y.wo, y.done, y.seen_o, H, NH, NKV, splits, HD);
  else g.go(llama_o, dim3(H / 64, NKV), 256, o_smem(splits), m.x, y.part, y.wo, H, NH, NKV, splits, HD);
}
// Attention (or QKV + attention) and O of layer l as the combo has them.
static void k_attn_o(Launcher& g, Model& m, unsigned l, unsigned pos, const Opts& o) {
  bool fused = o.combo == "fused" || o.combo == "fusedflag";
  if (fused) { k_fused(g, m, l, pos, o.combo == "fusedflag"); k_o(g, m, l, o, fused_splits()); }
  else { k_qkv(g, m, l, pos); k_attn(g, m, l, pos, o); k_o(g, m, l, o, o.splits); }
}
static void k_ffn(Launcher& g, Model& m, unsigned l, const Opts& o) {
  g.go(llama_ffn_in, dim3(std::min(o.bblocks, ffn_tiles())), LB_THREADS, stream_smem(true), m.act, m.tickets + 0, m.x, m.l[l].ln2, m.l[l].wgu, F, H, EPS);
}
static void k_down(Launcher& g, Model& m, unsigned l, const Opts& o) {
  g.go(llama_down, dim3(std::min(o.bblocks, down_tiles())), LB_THREADS, stream_smem(false), m.x, m.tickets + 1, m.l[l].wd, m.act, H, F);
}
static void k_head(Launcher& g, Model& m, unsigned pos, const Opts& o) {
  g.go(llama_lm_head, dim3(std::min(o.bblocks, head_tiles())), LB_THREADS, stream_smem(true), m.logits, m.hpart, m.hcount, m.tickets + 2, m.token, m.trace, m.x,
       m.norm, m.emb, pos, SEQ, V, H, EPS);
}
static void step(Launcher& g, Model& m, unsigned pos, const Opts& o) {
  k_embed(g, m);
  for (unsigned l = 0; l < L; l++) { k_attn_o(g, m, l, pos, o); k_ffn(g, m, l, o); k_down(g, m, l, o); }
  k_head(g, m, pos, o);
}

// ---- check ----------------------------------------------------------------------------------------
template <class T> std::vector<T> get(const T* p, size_t n) { std::vector<T> v(n); CK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost)); return v; }
static double bf(ll_bf16 b) { unsigned u = (unsigned)b << 16; float f; memcpy(&f, &u, 4); return f; }
static ll_bf16 to_bf(float f) { unsigned u; memcpy(&u, &f, 4); u += 0x7fffu + ((u >> 16) & 1u); return (ll_bf16)(u >> 16); }
static int failures = 0;
static void verdict(const char* what, bool ok, const std::string& detail) {
  if (!ok) failures++;
  printf("  %-34s %s %s\n", what, detail.c_str(), ok ? "ok" : "FAIL");
}
// max |got - want| / max |want|, against tol.
static void compare(const char* what, const std::vector<double>& want, const float* got, size_t n, double tol) {
  double scale = 1e-30, diff = 0; size_t at = 0; bool finite = true;
  for (size_t i = 0; i < n; i++) { scale = std::max(scale, fabs(want[i])); if (!std::isfinite(got[i])) finite = false; if (fabs(got[i] - want[i]) > diff) { diff = fabs(got[i] - want[i]); at = i; } }
  char d[160]; snprintf(d, sizeof d, "rel %.2e (tol %.0e) at %zu: got %.6g want %.6g", diff / scale, tol, at, got[at], want[at]);
  verdict(what, finite && diff / scale <= tol, d);
}
static std::vector<double> rmsnorm(const std::vector<float>& x, const std::vector<ll_bf16>& g) {
  double ss = 0; for (float v : x) ss += (double)v * v;
  double s = 1.0 / sqrt(ss / x.size() + EPS);
  std::vector<double> o(x.size()); for (size_t i = 0; i < x.size(); i++) o[i] = x[i] * s * bf(g[i]);
  return o;
}
template <class X> static double dot(const ll_bf16* w, const X& x, size_t k) { double s = 0; for (size_t j = 0; j < k; j++) s += bf(w[j]) * (double)x[j]; return s; }
static void poison(float* p, size_t n) { CK(cudaMemset(p, 0xff, n * 4)); }  // NaN: an unwritten output fails

// x0 + Wo · attention(q, cache) for layer l, from the cache as it is now (the row at pos appended).
static std::vector<double> attn_o_ref(Model& m, unsigned l, unsigned pos, const std::vector<float>& x0, const std::vector<float>& q) {
  auto kc = get(m.l[l].kc, (size_t)KV * SEQ), vc = get(m.l[l].vc, (size_t)KV * SEQ);
  std::vector<double> at(Q);
  double scale = 1.0 / sqrt((double)HD);
  for (unsigned hq = 0; hq < NH; hq++) {
    unsigned h = hq / G;
    std::vector<double> s(pos + 1); double mx = -1e300;
    for (unsigned t = 0; t <= pos; t++) { double a = 0; for (unsigned d = 0; d < HD; d++) a += (double)q[hq * HD + d] * bf(kc[((size_t)h * SEQ + t) * HD + d]); s[t] = a * scale; mx = std::max(mx, s[t]); }
    double z = 0; for (auto& v : s) { v = exp(v - mx); z += v; }
    for (unsigned d = 0; d < HD; d++) { double a = 0; for (unsigned t = 0; t <= pos; t++) a += s[t] * bf(vc[((size_t)h * SEQ + t) * HD + d]); at[hq * HD + d] = a / z; }
  }
  auto wo = get(m.l[l].wo, (size_t)H * Q);
  std::vector<double> x1(H);
  for (unsigned r = 0; r < H; r++) x1[r] = x0[r] + dot(&wo[(size_t)r * Q], at, Q);
  return x1;
}

static void check_layer(Model& m, unsigned pos, Opts o, int rep) {
  printf("check pos %u splits %u blocks %u (run %d)\n", pos, o.splits, o.bblocks, rep);
  cudaStream_t st; CK(cudaStreamCreate(&st));
  Launcher g{st, false};
  const unsigned l = g_layers > 3 ? 3 : 0;
  std::vector<float> x0(H);
  for (unsigned i = 0; i < H; i++) x0[i] = sinf(0.37f * i + pos + 0.1f * rep) * (1.0f + (i % 7));
  CK(cudaMemcpy(m.x, x0.data(), 4 * H, cudaMemcpyHostToDevice));
  auto wqkv = get(m.l[l].wqkv, (size_t)ROWS * H); auto ln1 = get(m.l[l].ln1, H); auto ln2 = get(m.l[l].ln2, H);
  auto freq = get(m.freq, HD / 2);
  // QKV + RoPE: every row (q, then the new K and V rows) in f32
  poison(m.qkv, ROWS);
  k_qkv(g, m, l, pos); CK(cudaStreamSynchronize(st)); CK(cudaGetLastError());
  auto xn = rmsnorm(x0, ln1);
  std::vector<double> y(ROWS);
  for (unsigned r = 0; r < ROWS; r++) y[r] = dot(&wqkv[(size_t)r * H], xn, H);
  for (unsigned head = 0; head < NH + NKV; head++)
    for (unsigned j = 0; j < HD / 2; j++) {
      double a = y[head * HD + j], b = y[head * HD + j + HD / 2], ang = (double)((float)pos * freq[j]);
      y[head * HD + j] = a * cos(ang) - b * sin(ang); y[head * HD + j + HD / 2] = b * cos(ang) + a * sin(ang);
    }
  auto qkv = get(m.qkv, ROWS);
  compare("qkv: q, k, v rows", y, qkv.data(), ROWS, 1e-4);
  std::vector<float> q(qkv.begin(), qkv.begin() + Q);
  // attention + O (the pack's pair), from x0
  auto kc_before = get(m.l[l].kc, (size_t)KV * SEQ);
  Opts base = o; base.combo = "base";
  k_attn(g, m, l, pos, base); k_o(g, m, l, base, o.splits); CK(cudaStreamSynchronize(st)); CK(cudaGetLastError());
  auto kc = get(m.l[l].kc, (size_t)KV * SEQ), vc = get(m.l[l].vc, (size_t)KV * SEQ);
  unsigned bad_append = 0, bad_other = 0;
  for (unsigned h = 0; h < NKV; h++)
    for (unsigned d = 0; d < HD; d++) {
      size_t at = ((size_t)h * SEQ + pos) * HD + d;
      if (kc[at] != to_bf(qkv[Q + h * HD + d]) || vc[at] != to_bf(qkv[Q + KV + h * HD + d])) bad_append++;
    }
  for (size_t i = 0; i < kc.size(); i++) if (kc[i] != kc_before[i] && (i / HD) % SEQ != pos) bad_other++;
  verdict("attn: cache append", bad_append + bad_other == 0, std::to_string(bad_append) + " wrong appended, " + std::to_string(bad_other) + " other rows changed");
  auto x1 = attn_o_ref(m, l, pos, x0, q);
  auto x1g = get(m.x, H);
  compare("attn + o: x", x1, x1g.data(), H, 1e-4);
  // The variants from the same x0 (and the same appended cache): the flag pair; the fused QKV +
  // attention with the pack's O and with the flag O (where its grid fits at once).
  std::vector<std::string> variants = {"flag"};
  if (g_fused_fits && H <= 2048) { variants.push_back("fused"); variants.push_back("fusedflag"); }
  for (auto& v : variants) {
    Opts w = o; w.combo = v;
    CK(cudaMemcpy(m.x, x0.data(), 4 * H, cudaMemcpyHostToDevice));
    poison(m.qkv, ROWS);  // every variant writes qkv again
    k_attn_o(g, m, l, pos, w); CK(cudaStreamSynchronize(st)); CK(cudaGetLastError());
    auto xv = get(m.x, H);
    compare((v + ": x").c_str(), x1, xv.data(), H, 1e-4);
    unsigned err = 0; CK(cudaMemcpyFromSymbol(&err, lv_error, 4));
    verdict((v + ": counters").c_str(), err == 0, err ? "a wait gave up" : "every wait met");
  }
  CK(cudaMemcpy(m.x, x1g.data(), 4 * H, cudaMemcpyHostToDevice));
  // FFN in
  auto wgu = get(m.l[l].wgu, (size_t)2 * F * H);
  poison(m.act, F);
  k_ffn(g, m, l, o); CK(cudaStreamSynchronize(st)); CK(cudaGetLastError());
  auto xn2 = rmsnorm(x1g, ln2);
  std::vector<double> act(F);
  for (unsigned r = 0; r < F; r++) { double gg = dot(&wgu[(size_t)r * H], xn2, H), uu = dot(&wgu[(size_t)(F + r) * H], xn2, H); act[r] = gg / (1 + exp(-gg)) * uu; }
  auto actg = get(m.act, F);
  compare("ffn_in: act", act, actg.data(), F, 1e-4);
  // down
  auto wd = get(m.l[l].wd, (size_t)H * F);
  k_down(g, m, l, o); CK(cudaStreamSynchronize(st)); CK(cudaGetLastError());
  std::vector<double> x2(H);
  for (unsigned r = 0; r < H; r++) x2[r] = x1g[r] + dot(&wd[(size_t)r * F], actg, F);
  auto x2g = get(m.x, H);
  compare("down: x", x2, x2g.data(), H, 1e-4);
  auto tk = get(m.tickets, 4);
  verdict("tickets after", tk[0] + tk[1] + tk[2] == 0, std::to_string(tk[0]) + " " + std::to_string(tk[1]) + " " + std::to_string(tk[2]));
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
    const unsigned pos = 7 + rep;
    k_head(g, m, pos, o); CK(cudaStreamSynchronize(st)); CK(cudaGetLastError());
    auto got = get(m.logits, V);
    compare("lm head: logits", want, got.data(), V, 1e-4);
    unsigned best = 0; for (unsigned r = 1; r < V; r++) if (got[r] > got[best]) best = r;
    float second = -3.402823466e38f, scale = 0; for (unsigned r = 0; r < V; r++) { if (r != best) second = std::max(second, got[r]); scale = std::max(scale, fabsf(got[r])); }
    unsigned tok = get(m.token, 1)[0], hc = get(m.hcount, 1)[0], tk = get(m.tickets, 4)[2];
    auto row = get(m.trace + 4 * pos, 4);
    float t1, t2, sc; memcpy(&t1, &row[1], 4); memcpy(&t2, &row[2], 4); memcpy(&sc, &row[3], 4);
    bool ok = tok == best && best == 777 && hc == 0 && tk == 0 && row[0] == best && t1 == got[best] && t2 == second && t2 == t1 && sc == scale;
    char d[160]; snprintf(d, sizeof d, "token %u argmax %u, trace (%u %g %g %g), counter %u ticket %u", tok, best, row[0], t1, t2, sc, hc, tk);
    verdict("lm head: greedy token, tie, trace", ok, d);
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
  Opts o;
  for (int i = 0; i < 400; i++) k_ffn(g, m, i % g_layers, o);
  CK(cudaStreamSynchronize(st));
}

// One row: `launch(g, l)` for every layer in a graph, alone (no PDL) and back to back (PDL), µs per layer.
template <class Launch> static void row(cudaStream_t st, const char* name, double bytes, Launch launch) {
  float t[2];
  for (int pdl = 0; pdl < 2; pdl++) {
    Launcher g{st, pdl == 1};
    t[pdl] = graph_us(st, 20, [&] { for (unsigned l = 0; l < L; l++) launch(g, l); }) / L;
  }
  printf("  %-24s %6.1f MB  alone %7.2f us %3.0f%% | back-to-back PDL %7.2f us %3.0f%%\n", name, bytes / 1e6, t[0], bytes / t[0] / 1e6 / 4.8 * 100, t[1],
         bytes / t[1] / 1e6 / 4.8 * 100);
}

static void time_kernels(Model& m, unsigned pos, Opts o, bool designs) {
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  warm(m, st);
  printf("kernels at pos %u, splits %u, blocks %u: us per launch (L launches over L layers in a graph)\n", pos, o.splits, o.bblocks);
  Opts flag = o, fused = o, fusedflag = o;
  flag.combo = "flag"; fused.combo = "fused"; fusedflag.combo = "fusedflag";
  double ab = 4.0 * KV * (pos + 1), wq = 2.0 * ROWS * H, wo = 2.0 * H * Q;
  row(st, "llama_qkv", wq, [&](Launcher& g, unsigned l) { k_qkv(g, m, l, pos); });
  row(st, "llama_attn", ab, [&](Launcher& g, unsigned l) { k_attn(g, m, l, pos, o); });
  row(st, "llama_o", wo, [&](Launcher& g, unsigned l) { k_o(g, m, l, o, o.splits); });
  row(st, "llama_ffn_in", 4.0 * F * H, [&](Launcher& g, unsigned l) { k_ffn(g, m, l, o); });
  row(st, "llama_down", 2.0 * H * F, [&](Launcher& g, unsigned l) { k_down(g, m, l, o); });
  row(st, "llama_lm_head", 2.0 * V * H, [&](Launcher& g, unsigned) { k_head(g, m, pos, o); });
  row(st, "ffn_in+down", 6.0 * F * H, [&](Launcher& g, unsigned l) { k_ffn(g, m, l, o); k_down(g, m, l, o); });
  row(st, "attn+o", wo + ab, [&](Launcher& g, unsigned l) { k_attn(g, m, l, pos, o); k_o(g, m, l, o, o.splits); });
  row(st, "qkv+attn+o", wq + wo + ab, [&](Launcher& g, unsigned l) { k_attn_o(g, m, l, pos, o); });
  if (designs) {
    row(st, "attn_flag+o_flag", wo + ab, [&](Launcher& g, unsigned l) { k_attn(g, m, l, pos, flag); k_o(g, m, l, flag, o.splits); });
    row(st, "qkv+attn_flag+o_flag", wq + wo + ab, [&](Launcher& g, unsigned l) { k_attn_o(g, m, l, pos, flag); });
    if (g_fused_fits && H <= 2048) {
      row(st, "qkv_attn+o", wq + wo + ab, [&](Launcher& g, unsigned l) { k_attn_o(g, m, l, pos, fused); });
      row(st, "qkv_attn+o_flag", wq + wo + ab, [&](Launcher& g, unsigned l) { k_attn_o(g, m, l, pos, fusedflag); });
    } else {
      printf("  %-24s n/a: %u blocks do not fit at once, or hidden > 2048\n", "qkv_attn", fused_splits() * NKV);
    }
  }
  unsigned err = 0; CK(cudaMemcpyFromSymbol(&err, lv_error, 4));
  if (err) printf("  FAIL: a counter wait gave up (the variants' rows above are not valid)\n");
  CK(cudaStreamDestroy(st));
}

static void time_step(Model& m, std::vector<unsigned> splits, Opts base, std::vector<std::string> combos, std::vector<unsigned> positions) {
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  warm(m, st);
  double weights = 2.0 * (L * ((double)ROWS * H + H * Q + 2.0 * F * H + H * F + 2.0 * H) + H + (double)V * H);
  for (unsigned pos : positions)
    for (unsigned s : splits)
      for (auto& c : combos) {
        Opts o = base; o.splits = s; o.combo = c;
        if ((c == "fused" || c == "fusedflag") && !(g_fused_fits && H <= 2048)) { printf("step %s: n/a\n", c.c_str()); continue; }
        float t[2];
        for (int pdl = 0; pdl < 2; pdl++) { Launcher g{st, pdl == 1}; t[pdl] = graph_us(st, 30, [&] { step(g, m, pos, o); }); }
        double bytes = weights + 4.0 * L * KV * (pos + 1);
        printf("step %-9s pos %4u splits %2u: PDL %7.1f us (%.2f TB/s, %2.0f%% of 4.8)  no PDL %7.1f us  PDL gain %.3fx\n", c.c_str(), pos,
               c == "fused" || c == "fusedflag" ? fused_splits() : s, t[1], bytes / t[1] / 1e6, bytes / t[1] / 1e6 / 4.8 * 100, t[0], t[0] / t[1]);
      }
  unsigned err = 0; CK(cudaMemcpyFromSymbol(&err, lv_error, 4));
  if (err) printf("step: FAIL: a counter wait gave up (the variants' steps above are not valid)\n");
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
  return v;
}

int main(int argc, char** argv) {
  std::string what = argc > 1 ? argv[1] : "step";
  set_shape(getenv("LLAMA_SHAPE"));
  int sms = 0; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (const void* f : {(const void*)llama_ffn_in, (const void*)llama_down, (const void*)llama_lm_head})
    CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)stream_smem(true)));
  for (const void* f : {(const void*)llama_o, (const void*)llama_o_flag})
    CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)o_smem(LL_MAX_SPLITS)));
  cudaFuncAttributes fa;
  int bulk_occ = 0, fused_occ = 0;
  struct Fn { const char* name; const void* f; int threads; size_t smem; };
  for (auto [name, f, threads, smem] : std::vector<Fn>{
           {"qkv", (const void*)llama_qkv, (int)(32 * qkv_warps()), qkv_smem()}, {"attn", (const void*)llama_attn, 256, attn_smem()},
           {"o", (const void*)llama_o, 256, o_smem(16)}, {"attn_flag", (const void*)llama_attn_flag, 256, attn_smem()},
           {"o_flag", (const void*)llama_o_flag, 256, o_smem(16)}, {"qkv_attn", (const void*)llama_qkv_attn, 256, std::max(qkv_smem(), attn_smem())},
           {"ffn_in", (const void*)llama_ffn_in, LB_THREADS, stream_smem(true)}, {"down", (const void*)llama_down, LB_THREADS, stream_smem(false)},
           {"lm_head", (const void*)llama_lm_head, LB_THREADS, stream_smem(true)}}) {
    CK(cudaFuncGetAttributes(&fa, f));
    int occ = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, f, threads, smem));
    if (std::string(name) == "down") bulk_occ = occ;
    if (std::string(name) == "qkv_attn") fused_occ = occ;
    printf("%-10s regs %3d smem %6zu + %6zu dynamic local %zu blocks/SM %d\n", name, fa.numRegs, fa.sharedSizeBytes, smem, fa.localSizeBytes, occ);
  }
  g_fused_fits = (unsigned)(fused_occ * sms) >= fused_splits() * NKV;
  printf("shape h%u l%u heads %u/%u hd %u ffn %u; bulk: budget %d, %d blocks/SM, static rounds %d; qkv_attn: %u blocks, %s\n", H, L, NH, NKV, HD, F,
         LB_BUDGET, bulk_occ, LB_STATIC_ROUNDS, fused_splits() * NKV, g_fused_fits ? "fit at once" : "do NOT fit at once (not run)");
  if (what == "attrs") return bulk_occ > 0 ? 0 : 1;
  if (what == "sanitize") { g_layers = 1; L = 1; V = 4099; }
  Model m = make_model();
  auto splits = list<unsigned>(argc > 2 ? argv[2] : nullptr, {16});
  Opts base;
  base.bblocks = argc > 3 && atoi(argv[3]) > 0 ? (unsigned)atoi(argv[3]) : (unsigned)std::max(1, bulk_occ * sms);
  auto combos = list<std::string>(argc > 4 ? argv[4] : nullptr, {"base", "flag", "fused", "fusedflag"});
  if (what == "check" || what == "sanitize") {
    std::vector<unsigned> poss = what == "check" ? std::vector<unsigned>{0, 1, 37, 1024, 4095} : std::vector<unsigned>{5, 300};
    for (unsigned s : splits)
      for (unsigned pos : poss)
        for (int rep = 0; rep < 2; rep++) { Opts o = base; o.splits = s; check_layer(m, pos, o, rep); }
    check_head(m, base);
    printf("%s: %d failures\n", what.c_str(), failures);
    return failures ? 1 : 0;
  }
  if (what == "kernels" || what == "designs") {
    Opts o = base; o.splits = splits[0];
    time_kernels(m, 1024, o, what == "designs");
    if (what == "designs") time_step(m, {splits[0]}, base, combos, {128, 1024});
    return 0;
  }
  auto positions = list<unsigned>(argc > 5 ? argv[5] : nullptr, {128, 1024, 4096});
  time_step(m, splits, base, combos, positions);
  return 0;
}
