/* Drives the table driver the way cudart drives libcuda: dlopen, dlsym(cuGetProcAddress_v2), then
 * every entry point through it. Prints PASS or FAIL. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*Gpa)(const char *, void **, int, uint64_t, int *);
typedef int (*Inst)(void **, void *, unsigned long long);
typedef int (*Launch)(void *, void *);
typedef int (*Destroy)(void *);
typedef int (*Load)(void **, const void *);
int next_of_shared(void);

static void *get(Gpa gpa, const char *name, int version) {
  void *p = 0;
  int status = 0;
  if (gpa(name, &p, version, 0, &status) != 0 || !p) { printf("FAIL: %s not found\n", name); exit(1); }
  return p;
}

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: app LIBFAKE FATBIN\n"); return 2; }
  if (next_of_shared() != 2) { printf("FAIL: dlsym(RTLD_NEXT) answered for the wrong caller\n"); return 1; }
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { printf("FAIL: %s\n", dlerror()); return 1; }
  Gpa gpa = (Gpa)dlsym(lib, "cuGetProcAddress_v2");
  Gpa self = (Gpa)get(gpa, "cuGetProcAddress", 12000);
  int *launches = (int *)dlsym(lib, "launches");
  FILE *f = fopen(argv[2], "rb");
  if (!f) { printf("FAIL: no %s\n", argv[2]); return 1; }
  static unsigned char image[1 << 16];
  size_t n = fread(image, 1, sizeof image, f);
  fclose(f);
  if (n == 0) { printf("FAIL: empty image\n"); return 1; }
  void *module = 0, *exec = 0;
  if (((Load)get(self, "cuModuleLoadData", 2000))(&module, image) != 0) { printf("FAIL: load\n"); return 1; }
  if (((Inst)get(gpa, "cuGraphInstantiateWithFlags", 11040))(&exec, (void *)0x9000, 0) != 0) { printf("FAIL: instantiate\n"); return 1; }
  Launch launch = (Launch)get(gpa, "cuGraphLaunch", 10000);
  for (int i = 0; i < 3; i++) launch(exec, 0);
  ((Destroy)get(gpa, "cuGraphExecDestroy", 10000))(exec);
  if (*launches != 3 || exec != (void *)0x9001) { printf("FAIL: launches %d exec %p\n", *launches, exec); return 1; }
  printf("PASS\n");
  return 0;
}
