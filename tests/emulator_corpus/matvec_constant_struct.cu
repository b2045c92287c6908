// y = alpha A x + beta y, the sizes and coefficients in a __constant__ struct that Python
// sets with get_global before the launch.
struct MatVecParams { int rows, cols; float alpha, beta; };
__constant__ MatVecParams c_params;

extern "C" __global__ void matvec_constant_struct(const float* A, const float* x, float* y) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= c_params.rows) return;
  float acc = 0.0f;
  for (int c = 0; c < c_params.cols; c++) acc += A[(size_t)r * c_params.cols + c] * x[c];
  y[r] = c_params.alpha * acc + c_params.beta * y[r];
}
