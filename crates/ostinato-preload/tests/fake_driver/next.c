/* Two libraries defining one symbol: `next_of_shared` in the first asks dlsym(RTLD_NEXT) for the
 * second's (the answer depends on the caller, which an interposed dlsym must keep). */
#include <dlfcn.h>
#ifdef FIRST
int shared_sym(void) { return 1; }
int next_of_shared(void) {
  int (*f)(void) = (int (*)(void))dlsym(RTLD_NEXT, "shared_sym");
  return f ? f() : -1;
}
#else
int shared_sym(void) { return 2; }
#endif
