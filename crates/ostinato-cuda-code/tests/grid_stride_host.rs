//! The kernel header's `OST_GRID_STRIDE` (two passes: a thread's first element, then the rest) takes
//! exactly the elements, in the order, of the one-loop grid-stride form it replaced — with `continue`,
//! `break` and a body that changes the count — on 1-, 2- and 3-D grids and counts that give a thread no,
//! one or several elements. The header is compiled as host C++ by the system's `c++` with the CUDA
//! built-ins as plain variables, and every thread of every launch is run in turn. Skips where no `c++`
//! is found.

use std::io::Write;
use std::process::Command;

/// The CUDA names the header uses, as host C++; the two loops under test record each element a
/// thread takes.
const PRELUDE: &str = r#"
#include <cstdio>
#include <vector>
#define __device__
#define __forceinline__ inline
struct ost_dim3 { unsigned x, y, z; };
static ost_dim3 blockIdx, threadIdx, gridDim, blockDim;
"#;

const PROGRAM: &str = r#"
// The body: skips multiples of `skip`, stops at `stop`, halves the count at `shrink`.
#define BODY(i)                                  \
  {                                              \
    if (i % skip == 0) continue;                 \
    if (i == stop) break;                        \
    if (i == shrink) n = n / 2;                  \
    taken.push_back(i);                          \
  }

static std::vector<unsigned long long> one_loop(unsigned long long n, unsigned long long skip, unsigned long long stop, unsigned long long shrink) {
  std::vector<unsigned long long> taken;
  for (unsigned long long i = ost_linear_thread(), s = ost_grid_threads(); i < n; i += s) BODY(i)
  return taken;
}

static std::vector<unsigned long long> header_loop(unsigned long long n, unsigned long long skip, unsigned long long stop, unsigned long long shrink) {
  std::vector<unsigned long long> taken;
  OST_GRID_STRIDE(i, n) BODY(i)
  return taken;
}

int main() {
  const ost_dim3 grids[] = {{1, 1, 1}, {3, 1, 1}, {2, 3, 1}, {2, 2, 2}};
  const ost_dim3 blocks[] = {{1, 1, 1}, {32, 1, 1}, {4, 3, 1}, {2, 2, 3}};
  const unsigned long long counts[] = {0, 1, 7, 12, 96, 97, 1000};
  const unsigned long long skips[] = {1000000, 5}, stops[] = {~0ull, 0, 13, 200}, shrinks[] = {~0ull, 3, 150};
  unsigned long long cases = 0, elements = 0;
  for (ost_dim3 g : grids) for (ost_dim3 b : blocks) for (unsigned long long n : counts)
    for (unsigned long long skip : skips) for (unsigned long long stop : stops) for (unsigned long long shrink : shrinks) {
      gridDim = g; blockDim = b;
      for (unsigned bz = 0; bz < g.z; ++bz) for (unsigned by = 0; by < g.y; ++by) for (unsigned bx = 0; bx < g.x; ++bx)
        for (unsigned tz = 0; tz < b.z; ++tz) for (unsigned ty = 0; ty < b.y; ++ty) for (unsigned tx = 0; tx < b.x; ++tx) {
          blockIdx = {bx, by, bz}; threadIdx = {tx, ty, tz};
          std::vector<unsigned long long> want = one_loop(n, skip, stop, shrink), got = header_loop(n, skip, stop, shrink);
          if (want != got) {
            std::printf("differs: grid %u,%u,%u block %u,%u,%u thread %u,%u,%u of block %u,%u,%u, n %llu skip %llu stop %llu shrink %llu: %zu elements against %zu\n",
                        g.x, g.y, g.z, b.x, b.y, b.z, tx, ty, tz, bx, by, bz, n, skip, stop, shrink, got.size(), want.size());
            return 1;
          }
          elements += want.size();
        }
      ++cases;
    }
  std::printf("the same elements in %llu launches (%llu elements)\n", cases, elements);
  return 0;
}
"#;

#[test]
fn the_header_grid_stride_loop_takes_the_one_loop_elements_with_continue_break_and_a_changing_count() {
    if Command::new("c++").arg("--version").output().is_err() {
        // On the real stderr: the harness swallows `eprintln!` of a passing test, and a skip must show.
        let _ = writeln!(std::io::stderr(), "SKIP the_header_grid_stride_loop_takes_the_one_loop_elements: no `c++` found");
        return;
    }
    let dir = std::env::temp_dir().join(format!("ostinato-grid-stride-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let source = dir.join("grid_stride.cpp");
    let exe = dir.join("grid_stride");
    std::fs::write(&source, format!("{PRELUDE}\n{}\n{PROGRAM}", ostinato_cuda_code::compile::KERNEL_HEADER)).expect("writes the source");
    let built = Command::new("c++").args(["-std=c++17", "-O1", "-Wno-unknown-pragmas", "-o"]).arg(&exe).arg(&source).output().expect("c++ runs");
    assert!(built.status.success(), "c++ compiles the header: {}", String::from_utf8_lossy(&built.stderr));
    let ran = Command::new(&exe).output().expect("the program runs");
    let out = String::from_utf8_lossy(&ran.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ran.status.success(), "{out}");
    assert!(out.contains("the same elements in 2688 launches"), "{out}");
}
