/* Opens user_local.c's library with RTLD_LOCAL and runs it (see there). Prints PASS or FAIL. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: app_local LIBUSER FATBIN\n"); return 2; }
  FILE *f = fopen(argv[2], "rb");
  if (!f) { printf("FAIL: no %s\n", argv[2]); return 1; }
  static unsigned char image[1 << 16];
  size_t n = fread(image, 1, sizeof image, f);
  fclose(f);
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { printf("FAIL: %s\n", dlerror()); return 1; }
  int (*run)(const void *, int) = (int (*)(const void *, int))dlsym(lib, "user_run");
  if (!run || n == 0) { printf("FAIL: no user_run or an empty image\n"); return 1; }
  int rc = run(image, 2);
  if (rc != 0) { printf("FAIL: user_run: %d\n", rc); return 1; }
  printf("PASS\n");
  return 0;
}
