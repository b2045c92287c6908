// One AdamW step on float master weights with bfloat16 gradients, writing a bfloat16 copy
// of the weights; the hyperparameters come in a struct passed by value.
#include <cuda_bf16.h>

struct AdamParams { float lr, beta1, beta2, eps, weight_decay; int step; };

extern "C" __global__ void adamw_bf16(float* w, __nv_bfloat16* w_bf16, const __nv_bfloat16* g,
                                      float* m, float* v, AdamParams p, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float grad = __bfloat162float(g[i]);
  const float mi = p.beta1 * m[i] + (1.0f - p.beta1) * grad;
  const float vi = p.beta2 * v[i] + (1.0f - p.beta2) * grad * grad;
  const float mhat = mi / (1.0f - powf(p.beta1, (float)p.step));
  const float vhat = vi / (1.0f - powf(p.beta2, (float)p.step));
  const float wi = w[i] - p.lr * (mhat / (sqrtf(vhat) + p.eps) + p.weight_decay * w[i]);
  m[i] = mi;
  v[i] = vi;
  w[i] = wi;
  w_bf16[i] = __float2bfloat16(wi);
}
