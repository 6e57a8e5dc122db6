// Ostinato's kernel header: the macros with which a kernel places its `griddepcontrol` so that
// Ostinato can build it in each trigger variant and certify it for programmatic (PDL) edges. Every
// NVRTC compile by Ostinato can `#include "ostinato.cuh"`; a kernel written with OST_ENTRY() before its
// first global-memory access and OST_EXIT() after its last write is built three times (the main
// trigger, triggering at entry, and with no griddepcontrol at all) and each node runs the build its
// edges call for (docs/fences.md).
//
// OST_TRIGGER picks where a kernel lets its dependents launch: 0 never (they launch at its completion),
// 1 at entry (before its own wait: dependents can cascade down a chain), 2 after its last write,
// 3 right after its own wait (one kernel ahead at most). OST_NO_PDL builds without griddepcontrol.
#ifndef OSTINATO_CUH
#define OSTINATO_CUH

#ifndef OST_TRIGGER
#define OST_TRIGGER 1
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(OST_NO_PDL)
#define OST_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#define OST_LAUNCH_DEPENDENTS() asm volatile("griddepcontrol.launch_dependents;" :::)
#else
#define OST_WAIT() do {} while (0)
#define OST_LAUNCH_DEPENDENTS() do {} while (0)
#endif

#define OST_ENTRY() do { if (OST_TRIGGER == 1) OST_LAUNCH_DEPENDENTS(); OST_WAIT(); if (OST_TRIGGER == 3) OST_LAUNCH_DEPENDENTS(); } while (0)
#define OST_EXIT() do { if (OST_TRIGGER == 2) OST_LAUNCH_DEPENDENTS(); } while (0)

#define OST_GRID_STRIDE(i, n) \
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
       i += (unsigned long long)gridDim.x * blockDim.x)

#endif  // OSTINATO_CUH
