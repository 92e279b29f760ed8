// Cheat (drops the chain): honest_fp32.cpp without the chain's per-channel shift, the mistake of a
// kernel that reads the chain's scalars but not its channel tensors. Wrong on the values alone.
#define KF_SHIFT 0

#include <kforge/kernel.h>

#include <cmath>
#include <cstdint>

#ifndef KF_ROUND
#define KF_ROUND(v) (v)  // the TF32 twin (tf32_inputs.cpp) rounds every input here
#endif
#ifndef KF_SHIFT
#define KF_SHIFT 1  // the chain's channel tensor; the dropped-chain twin leaves it out
#endif

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 4 || args->num_outputs != 1 || args->num_scalars != 10) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const DLTensor& y = args->outputs[0];
  const float* xp = static_cast<const float*>(x.data);
  const float* wp = static_cast<const float*>(w.data);
  const float* bias = static_cast<const float*>(args->inputs[2].data);
  const float* shift = static_cast<const float*>(args->inputs[3].data);
  float* yp = static_cast<float*>(y.data);
  int64_t g[10];
  for (int i = 0; i < 10; ++i) g[i] = static_cast<int64_t>(args->scalars[i]);
  const int64_t n_size = x.shape[0], c = x.shape[1], co = w.shape[0], cig = w.shape[1];
  const int64_t in[3] = {x.shape[2], x.shape[3], x.shape[4]};
  const int64_t k[3] = {w.shape[2], w.shape[3], w.shape[4]};
  const int64_t out[3] = {y.shape[2], y.shape[3], y.shape[4]};
  const int64_t cog = co / g[9];
#pragma omp parallel for collapse(2)
  for (int64_t n = 0; n < n_size; ++n) {
    for (int64_t o = 0; o < co; ++o) {
      const int64_t group = o / cog;
      for (int64_t od = 0; od < out[0]; ++od) {
        for (int64_t oh = 0; oh < out[1]; ++oh) {
          for (int64_t ow = 0; ow < out[2]; ++ow) {
            float sum = 0.0f;
            for (int64_t ci = 0; ci < cig; ++ci) {
              for (int64_t a = 0; a < k[0]; ++a) {
                const int64_t id = od * g[0] - g[3] + a * g[6];
                if (id < 0 || id >= in[0]) continue;
                for (int64_t b = 0; b < k[1]; ++b) {
                  const int64_t ih = oh * g[1] - g[4] + b * g[7];
                  if (ih < 0 || ih >= in[1]) continue;
                  for (int64_t e = 0; e < k[2]; ++e) {
                    const int64_t iw = ow * g[2] - g[5] + e * g[8];
                    if (iw < 0 || iw >= in[2]) continue;
                    const float xv =
                        xp[(((n * c + group * cig + ci) * in[0] + id) * in[1] + ih) * in[2] + iw];
                    const float wv = wp[(((o * cig + ci) * k[0] + a) * k[1] + b) * k[2] + e];
                    sum += KF_ROUND(xv) * KF_ROUND(wv);
                  }
                }
              }
            }
            const float v = sum + bias[o];
            yp[(((n * co + o) * out[0] + od) * out[1] + oh) * out[2] + ow] =
                (v < 0.0f ? 0.0f : v) + (KF_SHIFT ? shift[o] : 0.0f);
          }
        }
      }
    }
  }
  return 0;
}
