// Softmax over the last dimension with persistent clusters that prefetch the next row's chunk
// into a second shared-memory buffer while the current row is reduced and written (sm_90):
//   y[r, c] = exp(x[r, c] - m) / sum_c exp(x[r, c] - m),  m = max_c x[r, :].
// The kernel is include/kforge/softmax_cluster_prefetch.cuh (shared with log_softmax); this
// file supplies the output. Parameters: CLUSTER (blocks per row), BLOCK_THREADS.
#include <kforge/softmax_cluster_prefetch.cuh>

namespace {

struct SoftmaxOutput {
  float max, inv;
  __device__ SoftmaxOutput(float row_max, float row_sum) : max(row_max), inv(1.0f / row_sum) {}
  __device__ float operator()(float v) const { return __expf(v - max) * inv; }
};

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  return kf_softmax_prefetch::run<SoftmaxOutput>(args);
}
