// y = x * scale + shift with float4 loads and stores, the scalar tail (n % 4) one by one;
// scale and shift come as float2 values (x: the first, y: the second half of the array).
extern "C" __global__ void vector_float4(const float* x, float* y, float2 scale, float2 shift, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x, quads = n / 4;
  if (i < quads) {
    float4 v = reinterpret_cast<const float4*>(x)[i];
    const bool first = 4 * i < n / 2;
    const float s = first ? scale.x : scale.y, t = first ? shift.x : shift.y;
    v.x = v.x * s + t; v.y = v.y * s + t; v.z = v.z * s + t; v.w = v.w * s + t;
    reinterpret_cast<float4*>(y)[i] = v;
  }
  const int tail = 4 * quads + i;
  if (i < n - 4 * quads) y[tail] = x[tail] * (tail < n / 2 ? scale.x : scale.y) + (tail < n / 2 ? shift.x : shift.y);
}
