// TRICK racy (must fail: wrong_answer). Splits each row's sum of exponentials over the OpenMP
// team but forgets reduction(+:sum): the threads update one shared float without
// synchronization. As racy code allows, the compiler keeps the sum in a register over each
// thread's chunk and stores it once at the end, so when the threads overlap the last store wins
// and the other threads' partial sums are lost (with 2 threads the row comes out ~2x too large),
// in a different set of rows on every run. The implicit barriers of the omp for loops release
// the team together at each row, so long rows overlap: on 2 cores, 2 x 4097 failed on nearly
// every call and 512 x 1024 on every call (a few % of its rows); rows of <= 256 columns rarely
// do. Needs >= 2 hardware threads (with one, the team runs one after another and the result is
// right). Caught by the element-wise comparison, more surely over several seeds / calls.
#include <kforge/kernel.h>

#include <cmath>
#include <cstdint>

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);

  float m = 0.0f, sum = 0.0f;  // shared by the whole team
#pragma omp parallel
  for (int64_t r = 0; r < rows; ++r) {  // every thread walks every row
    const float* xr = xp + r * cols;
    float* yr = yp + r * cols;
#pragma omp single
    {
      m = xr[0];
      for (int64_t c = 1; c < cols; ++c) m = std::fmax(m, xr[c]);
      sum = 0.0f;
    }
#pragma omp for schedule(static)
    for (int64_t c = 0; c < cols; ++c) yr[c] = std::exp(xr[c] - m);
#pragma omp for schedule(static)
    for (int64_t c = 0; c < cols; ++c) sum += yr[c];  // BUG: data race on sum
#pragma omp for schedule(static)
    for (int64_t c = 0; c < cols; ++c) yr[c] /= sum;
  }
  return 0;
}
