/* A driver that is a table, for the interposer's end-to-end test without a GPU (run.sh): it
 * answers cuGetProcAddress like libcuda does and holds one graph, a memset and the fixture's
 * `scale` kernel joined by a programmatic edge. */
#include <stdint.h>
#include <string.h>
#include <stddef.h>

typedef int CUresult;
typedef void *H;
typedef struct { H func; unsigned grid[3], block[3], shared; void **params, **extra; H kern, ctx; } KParams;
typedef struct { unsigned char from_port, to_port, type, reserved[5]; } EdgeData;
typedef struct { uint64_t dst; size_t pitch; unsigned value, element_size; size_t width, height; } MemsetParams;

#define GRAPH ((H)0x9000)
#define KNODE ((H)0x10)
#define MNODE ((H)0x20)
#define FUNC ((H)0xf1)
#define MODULE ((H)0x500)
static const uint64_t OUT = 0x7f0000000000ull, IN = 0x7f0000100000ull;
static uint64_t p_out = 0x7f0000000000ull, p_in = 0x7f0000100040ull;
static float p_a = 2.0f;
static int p_n = 256;
static void *params[4] = {&p_out, &p_in, &p_a, &p_n};
int launches = 0, instantiated = 0, loaded = 0, capture_exchanges = 0;

CUresult f_instantiate(H *exec, H graph, unsigned long long flags) { (void)flags; *exec = (char *)graph + 1; instantiated++; return 0; }
CUresult f_launch(H exec, H stream) { (void)exec; (void)stream; launches++; return 0; }
CUresult f_destroy(H exec) { (void)exec; return 0; }
CUresult f_load(H *module, const void *image) { (void)image; *module = MODULE; loaded++; return 0; }
CUresult f_nodes(H g, H *nodes, size_t *n) {
  if (g != GRAPH) return 400;
  if (nodes) { nodes[0] = MNODE; nodes[1] = KNODE; }
  *n = 2;
  return 0;
}
CUresult f_edges(H g, H *from, H *to, EdgeData *data, size_t *n) {
  if (g != GRAPH) return 400;
  if (from) { from[0] = MNODE; to[0] = KNODE; memset(&data[0], 0, sizeof data[0]); data[0].from_port = 1; data[0].type = 1; }
  *n = 1;
  return 0;
}
CUresult f_type(H node, unsigned *t) { *t = node == KNODE ? 0 : 2; return 0; }
CUresult f_kparams(H node, KParams *p) {
  if (node != KNODE) return 1;
  memset(p, 0, sizeof *p);
  p->func = FUNC; p->grid[0] = 2; p->grid[1] = p->grid[2] = 1; p->block[0] = 128; p->block[1] = p->block[2] = 1;
  p->params = params;
  return 0;
}
CUresult f_mparams(H node, MemsetParams *p) { (void)node; memset(p, 0, sizeof *p); p->dst = OUT; p->element_size = 4; p->width = 256; p->height = 1; return 0; }
CUresult f_name(const char **name, H f) { if (f != FUNC) return 400; *name = "scale"; return 0; }
CUresult f_module(H *m, H f) { if (f != FUNC) return 400; *m = MODULE; return 0; }
CUresult f_param_info(H f, size_t i, size_t *off, size_t *size) {
  static const size_t offs[4] = {0, 8, 16, 20}, sizes[4] = {8, 8, 4, 4};
  if (f != FUNC || i >= 4) return 1;
  *off = offs[i]; *size = sizes[i];
  return 0;
}
CUresult f_range(uint64_t *base, size_t *size, uint64_t p) {
  if (p >= OUT && p < OUT + 1024) { *base = OUT; *size = 1024; return 0; }
  if (p >= IN && p < IN + 4096) { *base = IN; *size = 4096; return 0; }
  return 1;
}
CUresult f_exchange(int *mode) { capture_exchanges++; int old = 0; *mode = old; return 0; }
CUresult f_ctx_device(int *dev) { *dev = 0; return 0; }
CUresult f_attr(int *v, int attr, int dev) { (void)dev; *v = attr == 75 ? 9 : 0; return 0; }

struct { const char *name; void *fn; } table[] = {
  {"cuGraphInstantiateWithFlags", f_instantiate}, {"cuGraphLaunch", f_launch}, {"cuGraphExecDestroy", f_destroy},
  {"cuModuleLoadData", f_load}, {"cuGraphGetNodes", f_nodes}, {"cuGraphGetEdges", f_edges},
  {"cuGraphNodeGetType", f_type}, {"cuGraphKernelNodeGetParams", f_kparams}, {"cuGraphMemsetNodeGetParams", f_mparams},
  {"cuFuncGetName", f_name}, {"cuFuncGetModule", f_module}, {"cuFuncGetParamInfo", f_param_info},
  {"cuMemGetAddressRange", f_range}, {"cuThreadExchangeStreamCaptureMode", f_exchange},
  {"cuCtxGetDevice", f_ctx_device}, {"cuDeviceGetAttribute", f_attr},
};

CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int version, uint64_t flags, int *status);
CUresult cuGetProcAddress(const char *sym, void **pfn, int version, uint64_t flags) {
  return cuGetProcAddress_v2(sym, pfn, version, flags, 0);
}
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int version, uint64_t flags, int *status) {
  (void)version; (void)flags;
  if (status) *status = 0;
  if (!strcmp(sym, "cuGetProcAddress")) { *pfn = (void *)cuGetProcAddress_v2; return 0; }
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (!strcmp(sym, table[i].name)) { *pfn = table[i].fn; return 0; }
  *pfn = 0;
  if (status) *status = 1;
  return 500;
}

/* The same entry points under their own names, for a program linked to the driver (app_linked.c). */
CUresult cuModuleLoadData(H *module, const void *image) { return f_load(module, image); }
CUresult cuGraphInstantiateWithFlags(H *exec, H graph, unsigned long long flags) { return f_instantiate(exec, graph, flags); }
CUresult cuGraphLaunch(H exec, H stream) { return f_launch(exec, stream); }
CUresult cuGraphExecDestroy(H exec) { return f_destroy(exec); }
