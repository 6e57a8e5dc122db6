/* A program linked to the table driver (-lfake), calling its entry points by name as a program
 * built with -lcuda does — no cuGetProcAddress — and once through dlsym on the driver's handle, as a
 * library that opens the driver itself does; under the interposer, asks for its explanation of the
 * graph (ostinato_preload_explain). Prints PASS or FAIL. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef void *H;
int cuModuleLoadData(H *module, const void *image);
int cuGraphInstantiateWithFlags(H *exec, H graph, unsigned long long flags);
int cuGraphLaunch(H exec, H stream);
int cuGraphExecDestroy(H exec);
extern int launches;

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: app_linked LIBFAKE FATBIN\n"); return 2; }
  FILE *f = fopen(argv[2], "rb");
  if (!f) { printf("FAIL: no %s\n", argv[2]); return 1; }
  static unsigned char image[1 << 16];
  size_t n = fread(image, 1, sizeof image, f);
  fclose(f);
  if (n == 0) { printf("FAIL: empty image\n"); return 1; }
  H module = 0, exec = 0;
  if (cuModuleLoadData(&module, image) != 0) { printf("FAIL: load\n"); return 1; }
  if (cuGraphInstantiateWithFlags(&exec, (H)0x9000, 0) != 0) { printf("FAIL: instantiate\n"); return 1; }
  for (int i = 0; i < 2; i++) cuGraphLaunch(exec, 0);
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
  int (*launch)(H, H) = lib ? (int (*)(H, H))dlsym(lib, "cuGraphLaunch") : 0;
  if (!launch) { printf("FAIL: dlsym(cuGraphLaunch)\n"); return 1; }
  launch(exec, 0);
  if (dlsym(RTLD_DEFAULT, "cuGraphUpload")) { printf("FAIL: dlsym found cuGraphUpload, which the driver lacks\n"); return 1; }
  /* Under the interposer: its explanation of the executable graph (what ostinato.adopt reads). */
  long (*explain)(unsigned long long, char *, size_t) = (long (*)(unsigned long long, char *, size_t))dlsym(RTLD_DEFAULT, "ostinato_preload_explain");
  if (explain) {
    static char text[1 << 16], small[8];
    long n = explain((unsigned long long)(size_t)exec, 0, 0);
    if (n <= 0 || n >= (long)sizeof text) { printf("FAIL: explain length %ld\n", n); return 1; }
    if (explain((unsigned long long)(size_t)exec, text, sizeof text) != n || strlen(text) != (size_t)n ||
        !strstr(text, "\"verdict\":\"adoptable\"") || !strstr(text, "\"captured\":[[0,1,true]]")) {
      printf("FAIL: explain: %s\n", text);
      return 1;
    }
    if (explain((unsigned long long)(size_t)exec, small, sizeof small) != n || strlen(small) != sizeof small - 1) { printf("FAIL: a short buffer\n"); return 1; }
  }
  cuGraphExecDestroy(exec);
  if (explain && explain((unsigned long long)(size_t)exec, 0, 0) != -1) { printf("FAIL: a destroyed graph is still explained\n"); return 1; }
  if (launches != 3 || exec != (H)0x9001) { printf("FAIL: launches %d exec %p\n", launches, exec); return 1; }
  printf("PASS\n");
  return 0;
}
