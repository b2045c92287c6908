// y = A x for a CSR matrix passed by value as a struct of device pointers and sizes; one
// warp per row, the row's partial sums combined with shuffles.
struct CSRMatrix {
  const int* row_ptr;
  const int* col_idx;
  const float* values;
  int rows, cols;
};

extern "C" __global__ void spmv_csr_struct(CSRMatrix A, const float* x, float* y) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (warp >= A.rows) return;
  float acc = 0.0f;
  for (int k = A.row_ptr[warp] + lane; k < A.row_ptr[warp + 1]; k += 32) acc += A.values[k] * x[A.col_idx[k]];
  for (int o = 16; o > 0; o /= 2) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if (lane == 0) y[warp] = acc;
}
