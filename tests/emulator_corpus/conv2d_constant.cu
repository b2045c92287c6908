// A 2-D convolution with a (2R+1) x (2R+1) mask in constant memory, zero outside the image.
#define MASK_RADIUS 2
#define MASK_WIDTH (2 * MASK_RADIUS + 1)
__constant__ float c_mask[MASK_WIDTH][MASK_WIDTH];

extern "C" __global__ void conv2d_constant(const float* in, float* out, int rows, int cols) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= rows || col >= cols) return;
  float acc = 0.0f;
  for (int dy = 0; dy < MASK_WIDTH; dy++)
    for (int dx = 0; dx < MASK_WIDTH; dx++) {
      const int r = row + dy - MASK_RADIUS, c = col + dx - MASK_RADIUS;
      if (r >= 0 && r < rows && c >= 0 && c < cols) acc += c_mask[dy][dx] * in[r * cols + c];
    }
  out[row * cols + col] = acc;
}
