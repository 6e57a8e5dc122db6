// Decode-shaped workload kernels (f32, plain). Same signatures and semantics as the host backend's
// `decode` kernels; summation order differs, so results agree within the stated f32 tolerance.
// Each waits (griddepcontrol.wait) before touching memory: PDL-capable.

// rmsnorm(out, x, w, n, eps): one block; block-wide sum of squares.
extern "C" __global__ void rmsnorm(float* out, const float* x, const float* w, unsigned n, float eps) {
  OST_ENTRY();
  __shared__ float partial[32];
  float s = 0.0f;
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) { float v = x[i]; s += v * v; }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    float t = threadIdx.x < (blockDim.x + 31) / 32 ? partial[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) t += __shfl_down_sync(0xffffffffu, t, o);
    if (threadIdx.x == 0) partial[0] = t;
  }
  __syncthreads();
  float scale = rsqrtf(partial[0] / (float)n + eps);
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) out[i] = x[i] * scale * w[i];
  OST_EXIT();
}

// gemv(y, w, x, m, k): y = W x, W row-major m×k; one warp per row.
extern "C" __global__ void gemv(float* y, const float* w, const float* x, unsigned m, unsigned k) {
  OST_ENTRY();
  unsigned warps = (gridDim.x * blockDim.x) >> 5;
  unsigned lane = threadIdx.x & 31;
  for (unsigned row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; row < m; row += warps) {
    const float* wr = w + (unsigned long long)row * k;
    float acc = 0.0f;
    if ((k & 3u) == 0) {
      const float4* w4 = (const float4*)wr;
      const float4* x4 = (const float4*)x;
      for (unsigned j = lane; j < k / 4; j += 32) {
        float4 a = w4[j], b = x4[j];
        acc += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
      }
    } else {
      for (unsigned j = lane; j < k; j += 32) acc += wr[j] * x[j];
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (lane == 0) y[row] = acc;
  }
  OST_EXIT();
}

// rope(qk, pos, heads, head_dim): rotate each (2i, 2i+1) pair by pos * 10000^(-2i/head_dim).
extern "C" __global__ void rope(float* qk, unsigned pos, unsigned heads, unsigned head_dim) {
  OST_ENTRY();
  unsigned half = head_dim / 2;
  OST_GRID_STRIDE(t, (unsigned long long)heads * half) {
    unsigned h = (unsigned)(t / half), i = (unsigned)(t % half);
    float theta = (float)pos * powf(10000.0f, -2.0f * (float)i / (float)head_dim);
    float s, c;
    sincosf(theta, &s, &c);
    unsigned a = h * head_dim + 2 * i;
    float x0 = qk[a], x1 = qk[a + 1];
    qk[a] = x0 * c - x1 * s;
    qk[a + 1] = x0 * s + x1 * c;
  }
  OST_EXIT();
}

// kv_store(kcache, vcache, k, v, pos, kv): row `pos` of both caches.
extern "C" __global__ void kv_store(float* kcache, float* vcache, const float* k, const float* v, unsigned pos, unsigned kv) {
  OST_ENTRY();
  OST_GRID_STRIDE(i, kv) {
    kcache[(unsigned long long)pos * kv + i] = k[i];
    vcache[(unsigned long long)pos * kv + i] = v[i];
  }
  OST_EXIT();
}

// attention(out, q, kcache, vcache, pos, heads, kv_heads, head_dim): one block per head; scores for
// rows 0..=pos in dynamic shared memory (the launch reserves max_seq floats).
extern "C" __global__ void attention(float* out, const float* q, const float* kcache, const float* vcache,
                                     unsigned pos, unsigned heads, unsigned kv_heads, unsigned head_dim) {
  OST_ENTRY();
  extern __shared__ float scores[];
  __shared__ float red[32];
  unsigned h = blockIdx.x;
  if (h >= heads) return;
  unsigned kvo = (h / (heads / kv_heads)) * head_dim;
  unsigned stride = kv_heads * head_dim;
  float scale = rsqrtf((float)head_dim);
  for (unsigned t = threadIdx.x; t <= pos; t += blockDim.x) {
    float d = 0.0f;
    for (unsigned i = 0; i < head_dim; i++) d += q[h * head_dim + i] * kcache[(unsigned long long)t * stride + kvo + i];
    scores[t] = d * scale;
  }
  __syncthreads();
  float m = -3.402823466e38f;
  for (unsigned t = threadIdx.x; t <= pos; t += blockDim.x) m = fmaxf(m, scores[t]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    float mm = red[0];
    for (unsigned w = 1; w < (blockDim.x + 31) / 32; w++) mm = fmaxf(mm, red[w]);
    red[0] = mm;
  }
  __syncthreads();
  m = red[0];
  __syncthreads();
  float s = 0.0f;
  for (unsigned t = threadIdx.x; t <= pos; t += blockDim.x) { float e = __expf(scores[t] - m); scores[t] = e; s += e; }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float ss = 0.0f;
    for (unsigned w = 0; w < (blockDim.x + 31) / 32; w++) ss += red[w];
    red[0] = ss;
  }
  __syncthreads();
  float inv = 1.0f / red[0];
  for (unsigned i = threadIdx.x; i < head_dim; i += blockDim.x) {
    float acc = 0.0f;
    for (unsigned t = 0; t <= pos; t++) acc += scores[t] * vcache[(unsigned long long)t * stride + kvo + i];
    out[h * head_dim + i] = acc * inv;
  }
  OST_EXIT();
}

// add(x, y, n): x += y.
extern "C" __global__ void add(float* x, const float* y, unsigned n) {
  OST_ENTRY();
  OST_GRID_STRIDE(i, n) { x[i] += y[i]; }
  OST_EXIT();
}

// silu_mul(out, gate_up, n): out = silu(gate) * up.
extern "C" __global__ void silu_mul(float* out, const float* gate_up, unsigned n) {
  OST_ENTRY();
  OST_GRID_STRIDE(i, n) { float g = gate_up[i]; out[i] = g / (1.0f + __expf(-g)) * gate_up[n + i]; }
  OST_EXIT();
}
