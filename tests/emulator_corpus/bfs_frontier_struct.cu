// One level of a breadth-first search: each thread takes a vertex of the frontier and
// claims its unvisited neighbours for the next frontier. The graph and the frontier come as
// structs of device pointers (inputs); what the launch writes comes as array arguments.
struct Graph { const int* row_ptr; const int* adj; int vertices; };
struct Frontier { const int* vertices; int size; int level; };

extern "C" __global__ void bfs_frontier_struct(Graph g, Frontier f, int* depth, int* next,
                                               int* next_size) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= f.size) return;
  const int v = f.vertices[i];
  for (int k = g.row_ptr[v]; k < g.row_ptr[v + 1]; k++) {
    const int u = g.adj[k];
    if (atomicCAS(&depth[u], -1, f.level + 1) == -1) next[atomicAdd(next_size, 1)] = u;
  }
}
