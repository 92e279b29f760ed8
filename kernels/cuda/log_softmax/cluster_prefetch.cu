// Log-softmax over the last dimension with persistent clusters that prefetch the next row's
// chunk into a second shared-memory buffer while the current row is reduced and written (sm_90):
//   y[r, c] = x[r, c] - m - log(sum_c exp(x[r, c] - m)),  m = max_c x[r, :].
// The kernel is include/kforge/softmax_cluster_prefetch.cuh (shared with softmax); this file
// supplies the output. Parameters: CLUSTER (blocks per row), BLOCK_THREADS.
#include <kforge/softmax_cluster_prefetch.cuh>

namespace {

// (x - m) first, then - log(s): folding m + log(s) into one shift rounds log(s) away when
// |m| >> log(s) (seen on the H200: heavy-tailed rows off by 1.4e-5 at y ~ -1.7e-4).
struct LogSoftmaxOutput {
  float max, log_sum;
  __device__ LogSoftmaxOutput(float row_max, float row_sum)
      : max(row_max), log_sum(logf(row_sum)) {}
  __device__ float operator()(float v) const { return (v - max) - log_sum; }
};

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  return kf_softmax_prefetch::run<LogSoftmaxOutput>(args);
}
