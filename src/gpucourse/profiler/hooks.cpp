// Hooks of the course's memory-traffic profiler, linked into a profiling build of a kernel.
//
// The kernel's translation unit is compiled with -fsanitize=thread, so the compiler turns
// every load and store into a call of __tsan_readN / __tsan_writeN (defined here, not by the
// sanitizer's runtime), and with -fsanitize-coverage=trace-pc, so every basic block starts
// with a call of __sanitizer_cov_trace_pc. Atomics are marked by profile_prelude.h. The
// return address of each call names the instruction (an "id" here; Python maps it to a line
// of the .cu file with the debug information).
//
// Warp requests: the lanes of a warp run one after another (fibers), so the k-th time lane
// L executes instruction I belongs to the same warp-level request as the k-th time lane M
// executes it, counted from the last __syncthreads (the "epoch": no thread passes a barrier
// before all arrive). Accesses are collected per (warp, instruction, k) and each request is
// measured when its epoch ends: 32-byte sectors and 128-byte lines for global memory, bank
// conflicts for shared memory, same-address lanes for atomics. Basic blocks only count how
// many lanes executed each occurrence, which gives the active lanes per warp-level block.
//
// Addresses inside a kernel argument are measured from the array's start placed on a
// 256-byte boundary, as cudaMalloc places it; host allocators give other alignments.
#include "cuda_emu.h"
#undef printf
#undef assert

#include <dlfcn.h>
#include <sys/mman.h>

#define GCPROF_LIKELY(x) __builtin_expect(!!(x), 1)
#define GCPROF_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define GCPROF_API extern "C" __attribute__((visibility("default")))
#define GCPROF_HOOK extern "C" __attribute__((visibility("hidden")))

enum { MAX_THREADS = 1024, MAX_WARPS = 32, MAX_IDS = 4096, CACHE_SLOTS = 8192,
       DYN_SHARED_BYTES = 48 * 1024, MAX_RANGES = 64,
       // Counters of one instruction per thread, padded: rows 8 KB apart would all fall
       // in the same sets of the L1 cache.
       COUNT_ROW = MAX_THREADS + 24 };
enum Kind : uint8_t { K_READ = 0, K_WRITE = 1, K_ATOMIC = 2, K_BLOCK = 3 };

// Per-instruction counters, read by Python in this order (keep in step with profiler/__init__.py).
enum Stat {
  S_G_REQUESTS, S_G_LANES, S_G_SECTORS, S_G_LINES, S_G_BYTES,    // global memory
  S_S_REQUESTS, S_S_LANES, S_S_WAVEFRONTS, S_S_PHASES, S_S_WAYS_SUM, S_S_WAYS_MAX,  // shared
  S_LOCAL_LANES,                                                  // a thread's own stack
  S_DISTINCT_SUM, S_SAME_SUM, S_SAME_MAX,                        // addresses per request
  S_B_GROUPS, S_B_LANES,                                          // basic blocks
  NSTAT
};
// Launch-wide totals, same order as TOTALS in profiler/__init__.py.
enum Total { T_BLOCKS, T_BARRIERS, T_WARP_BARRIERS, T_ATOMIC_HOT, T_OVERFLOW, T_GROUPS_MIXED, NTOTAL };

extern "C" {
extern char __gcemu_dynamic_shared_buf[] __attribute__((visibility("hidden")));
extern char __start_gcshared[] __attribute__((weak, visibility("hidden")));
extern char __stop_gcshared[] __attribute__((weak, visibility("hidden")));
int __real___gcemu_block_barrier(int pred) __attribute__((visibility("hidden")));
}

struct Slot { uintptr_t pc; uint32_t id; uint32_t skip; };   // direct-mapped pc -> id cache
struct Count { uint32_t epoch, n; };                          // occurrences in this epoch
struct Group { uint32_t mask, pad; uintptr_t addr[32]; };     // one warp-level request
struct Groups { uint32_t epoch, n, cap, pad; Group* g; };     // a warp's requests of one id
struct Range { uintptr_t lo, hi, shift; uint64_t* bits; size_t nbits; };

static Slot g_cache[CACHE_SLOTS];
static uintptr_t g_pc[MAX_IDS];
static uint8_t g_kind[MAX_IDS], g_skip[MAX_IDS];
static uint32_t g_size[MAX_IDS];
static uint32_t g_nids = 1;  // id 0: instructions beyond MAX_IDS, never counted
static uint64_t g_stat[MAX_IDS][NSTAT];
static uint64_t g_total[NTOTAL];
// Indexed by instruction first: consecutive threads run one after another, so their
// counters of one instruction should share cache lines and pages.
static Count* g_count;    // [MAX_IDS][COUNT_ROW]
static Groups* g_groups;  // [MAX_IDS][MAX_WARPS]
static uint32_t* g_pending;  // (warp, id) pairs with requests in this epoch
static uint32_t g_npending;
static uint32_t g_block_epoch[MAX_IDS];      // basic blocks executed in this epoch
static uint32_t g_blocks_touched[MAX_IDS];
static uint32_t g_nblocks_touched;
static uint32_t g_epoch = 1;
// An optional log of every counted access, for the access pictures (gpucourse.draw):
// address, instruction id, thread rank, block (linear) and epoch, in the order they ran.
struct TraceRec { uint64_t addr; uint32_t id, rank, block, epoch; };
static TraceRec* g_trace;
static uint64_t g_trace_cap, g_trace_n;
static uint64_t g_block = ~0ull;
static int g_threads, g_arrived;
static int g_depth[MAX_THREADS];
static uintptr_t g_stack_bytes = 32 * 1024;
static Range g_range[MAX_RANGES];
static int g_nranges, g_last_range;
static uintptr_t g_sh_lo, g_sh_hi;  // static __shared__ section

// Same-address counts of global atomics over the launch (open addressing, key 0 = empty).
static uint64_t* g_hot_key;
static uint64_t* g_hot_val;
static size_t g_hot_cap, g_hot_used;

static void* zeroed(size_t bytes) {  // lazily committed, zero-filled
  void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static int ensure_tables(void) {
  if (g_count) return 0;
  g_count = (Count*)zeroed(sizeof(Count) * (size_t)COUNT_ROW * MAX_IDS);
  g_groups = (Groups*)zeroed(sizeof(Groups) * (size_t)MAX_WARPS * MAX_IDS);
  g_pending = (uint32_t*)zeroed(sizeof(uint32_t) * (size_t)MAX_WARPS * MAX_IDS);
  return g_count && g_groups && g_pending ? 0 : -1;
}

// ---------------------------------------------------------------- instruction ids

static inline uint32_t cache_index(uintptr_t pc) { return (uint32_t)((pc ^ (pc >> 13)) & (CACHE_SLOTS - 1)); }

static int builtin_variable(uintptr_t a) {  // threadIdx and friends live in the runtime
  return (a - (uintptr_t)&threadIdx < sizeof threadIdx) || (a - (uintptr_t)&blockIdx < sizeof blockIdx) ||
         (a - (uintptr_t)&blockDim < sizeof blockDim) || (a - (uintptr_t)&gridDim < sizeof gridDim);
}

__attribute__((noinline)) static uint32_t new_id(uintptr_t pc, uint8_t kind, uint32_t size, uintptr_t addr) {
  if (!g_count) return 0;  // before the first launch (the library's constructor runs code)
  uint32_t id = 0;
  for (uint32_t i = 1; i < g_nids; i++)  // a cache collision: the id exists already
    if (g_pc[i] == pc) { id = i; break; }
  if (!id) {
    if (g_nids >= MAX_IDS) {
      g_total[T_OVERFLOW] = 1;
      return 0;
    }
    id = g_nids++;
    g_pc[id] = pc;
    g_kind[id] = kind;
    g_size[id] = size;
    // An instruction reads one variable: if it is a built-in, it is never worth counting.
    if (kind != K_BLOCK && builtin_variable(addr)) g_skip[id] = 1;
  }
  Slot& s = g_cache[cache_index(pc)];
  s.pc = pc;
  s.id = id;
  s.skip = g_skip[id];
  return id;
}

// The id of the instruction at pc, or 0 if it is not to be counted.
static inline uint32_t lookup(uintptr_t pc, uint8_t kind, uint32_t size, uintptr_t addr) {
  const Slot& s = g_cache[cache_index(pc)];
  if (GCPROF_LIKELY(s.pc == pc)) return s.skip ? 0 : s.id;
  const uint32_t id = new_id(pc, kind, size, addr);
  return g_skip[id] ? 0 : id;
}

// ---------------------------------------------------------------- measuring one request

static inline int shared_address(uintptr_t a) {
  return (a >= g_sh_lo && a < g_sh_hi) ||
         (a - (uintptr_t)__gcemu_dynamic_shared_buf < (uintptr_t)DYN_SHARED_BYTES);
}

// The array argument holding address a, or NULL.
static inline const Range* range_of(uintptr_t a) {
  int r = g_last_range;
  if (r >= g_nranges || a < g_range[r].lo || a >= g_range[r].hi) {
    for (r = 0; r < g_nranges; r++)
      if (a >= g_range[r].lo && a < g_range[r].hi) break;
    if (r == g_nranges) return NULL;
    g_last_range = r;
  }
  return &g_range[r];
}

// Marks sectors s0..s1 of R (device addresses >> 5) in its map of sectors touched.
static inline void mark_sectors(const Range* R, uintptr_t s0, uintptr_t s1) {
  if (!R || !R->nbits) return;
  const uintptr_t first = (R->lo + R->shift) >> 5;
  uint64_t* bits = R->bits;
  for (uintptr_t s = s0 - first; s <= s1 - first && s < R->nbits; s++) bits[s >> 6] |= 1ull << (s & 63);
}

static inline void sort_small(uintptr_t* v, int n) {  // insertion sort: lanes are mostly in order
  for (int i = 1; i < n; i++) {
    const uintptr_t x = v[i];
    int j = i - 1;
    if (v[j] <= x) continue;
    while (j >= 0 && v[j] > x) { v[j + 1] = v[j]; j--; }
    v[j + 1] = x;
  }
}

static void hot_add(uint64_t key, uint64_t n) {
  if (2 * (g_hot_used + 1) > g_hot_cap) {
    const size_t cap = g_hot_cap ? 2 * g_hot_cap : 1024;
    uint64_t* k = (uint64_t*)calloc(cap, sizeof(uint64_t));
    uint64_t* v = (uint64_t*)calloc(cap, sizeof(uint64_t));
    if (!k || !v) { free(k); free(v); return; }
    for (size_t i = 0; i < g_hot_cap; i++)
      if (g_hot_key[i]) {
        size_t j = (g_hot_key[i] * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
        while (k[j]) j = (j + 1) & (cap - 1);
        k[j] = g_hot_key[i];
        v[j] = g_hot_val[i];
      }
    free(g_hot_key);
    free(g_hot_val);
    g_hot_key = k;
    g_hot_val = v;
    g_hot_cap = cap;
  }
  key |= 1ull << 63;  // never 0
  size_t j = (key * 0x9E3779B97F4A7C15ull >> 20) & (g_hot_cap - 1);
  while (g_hot_key[j] && g_hot_key[j] != key) j = (j + 1) & (g_hot_cap - 1);
  if (!g_hot_key[j]) {
    g_hot_key[j] = key;
    g_hot_used++;
  }
  g_hot_val[j] += n;
  if (g_hot_val[j] > g_total[T_ATOMIC_HOT]) g_total[T_ATOMIC_HOT] = g_hot_val[j];
}

// Distinct addresses and the most lanes on one address, from sorted addresses.
// (Atomics only: for them the same address means operations one after another.)
static inline void same_address(uint64_t* st, const uintptr_t* v, int n, int global_atomic) {
  int distinct = 0, most = 0;
  for (int i = 0; i < n;) {
    int j = i + 1;
    while (j < n && v[j] == v[i]) j++;
    distinct++;
    if (j - i > most) most = j - i;
    if (global_atomic) hot_add((uint64_t)v[i], (uint64_t)(j - i));
    i = j;
  }
  st[S_DISTINCT_SUM] += (uint64_t)distinct;
  st[S_SAME_SUM] += (uint64_t)most;
  if ((uint64_t)most > st[S_SAME_MAX]) st[S_SAME_MAX] = (uint64_t)most;
}

struct Traffic { uint64_t sectors, lines, bytes; };

// Sectors, lines and distinct bytes of sorted device addresses, each access `size` bytes.
// The sectors are marked in R's map of sectors touched (R: the argument, or NULL).
static inline Traffic traffic(const uintptr_t* v, int n, uint32_t size, const Range* R) {
  Traffic t = {0, 0, 0};
  uintptr_t any = 0;
  for (int i = 0; i < n; i++) any |= v[i];
  if (size <= 32 && !(size & (size - 1)) && !(any & (size - 1))) {
    // Aligned to its size (the usual case): each lane in one sector and one line, and two
    // lanes overlap only at the same address.
    const uintptr_t first = R ? (R->lo + R->shift) >> 5 : 0;
    uintptr_t last_a = ~(uintptr_t)0, last_s = ~(uintptr_t)0, last_l = ~(uintptr_t)0;
    for (int i = 0; i < n; i++) {
      const uintptr_t a = v[i], sec = a >> 5, line = a >> 7;
      if (a != last_a) { t.bytes += size; last_a = a; }
      if (sec != last_s) {
        t.sectors++;
        last_s = sec;
        if (R && sec - first < R->nbits) R->bits[(sec - first) >> 6] |= 1ull << ((sec - first) & 63);
      }
      if (line != last_l) { t.lines++; last_l = line; }
    }
    return t;
  }
  // In general: with starts in order and one size, ends are in order too, so a sector
  // (line) is new exactly when it lies past the last one counted.
  uintptr_t last_sector = 0, last_line = 0, covered_to = 0;
  for (int i = 0; i < n; i++) {
    const uintptr_t a = v[i], e = a + size;
    uintptr_t s0 = a >> 5, s1 = (e - 1) >> 5, l0 = a >> 7, l1 = (e - 1) >> 7;
    if (i && s0 <= last_sector) s0 = last_sector + 1;
    if (s0 <= s1) {
      t.sectors += s1 - s0 + 1;
      last_sector = s1;
      mark_sectors(R, s0, s1);
    }
    if (i && l0 <= last_line) l0 = last_line + 1;
    if (l0 <= l1) { t.lines += l1 - l0 + 1; last_line = l1; }
    const uintptr_t from = (i && a < covered_to) ? covered_to : a;
    if (e > from) { t.bytes += e - from; covered_to = e; }
  }
  return t;
}

static void measure_global(uint64_t* st, uintptr_t* v, int n, uint32_t size, int atomic) {
  sort_small(v, n);
  // Device addresses: an instruction nearly always accesses one argument, so one shift
  // (to the array's 256-byte aligned start) applies to every lane; else lane by lane.
  const Range* R = range_of(v[0]);
  if (R && v[n - 1] < R->hi) {
    for (int i = 0; i < n; i++) v[i] += R->shift;
  } else {
    for (int i = 0; i < n; i++) {
      const Range* L = range_of(v[i]);
      v[i] += L ? L->shift : 0;
      mark_sectors(L, v[i] >> 5, (v[i] + size - 1) >> 5);
    }
    sort_small(v, n);
    R = NULL;  // marked above
  }
  const Traffic t = traffic(v, n, size, R);
  st[S_G_REQUESTS]++;
  st[S_G_LANES] += (uint64_t)n;
  st[S_G_SECTORS] += t.sectors;
  st[S_G_LINES] += t.lines;
  st[S_G_BYTES] += t.bytes;
  if (atomic) same_address(st, v, n, 1);
}

// Bank conflicts as gpucourse.models.bank_conflicts counts them: lanes in groups of
// 128 bytes / access width, each group served in as many wavefronts as the most distinct
// 4-byte words in one bank (the same word is a broadcast). Same-address atomics do not
// broadcast: there every lane counts.
static void measure_shared(uint64_t* st, const uintptr_t* a, int n, uint32_t size, int atomic) {
  const uint32_t width = size < 4 ? 4 : size;
  const int per_phase = width >= 128 ? 1 : (int)(128 / width) > 32 ? 32 : (int)(128 / width);
  uint64_t wavefronts = 0, phases = 0, ways = 0;
  for (int start = 0; start < n; start += per_phase) {
    uintptr_t words[32 * 4 + 8];
    int nw = 0;
    const int end = start + per_phase < n ? start + per_phase : n;
    for (int i = start; i < end; i++)
      for (uintptr_t w = a[i] >> 2; w <= (a[i] + size - 1) >> 2 && nw < (int)(sizeof words / sizeof *words); w++)
        words[nw++] = w;
    sort_small(words, nw);
    int per_bank[32] = {0};
    for (int i = 0; i < nw; i++)
      if (atomic || i == 0 || words[i] != words[i - 1]) per_bank[words[i] & 31]++;
    int most = 0;
    for (int b = 0; b < 32; b++) most = per_bank[b] > most ? per_bank[b] : most;
    wavefronts += (uint64_t)most;
    phases++;
    if ((uint64_t)most > ways) ways = (uint64_t)most;
  }
  st[S_S_REQUESTS]++;
  st[S_S_LANES] += (uint64_t)n;
  st[S_S_WAVEFRONTS] += wavefronts;
  st[S_S_PHASES] += phases;
  st[S_S_WAYS_SUM] += ways;
  if (ways > st[S_S_WAYS_MAX]) st[S_S_WAYS_MAX] = ways;
  if (atomic) {
    uintptr_t v[32];
    for (int i = 0; i < n; i++) v[i] = a[i];
    sort_small(v, n);
    same_address(st, v, n, 0);
  }
}

static void measure(uint32_t id, const Group& g) {
  uintptr_t glob[32], shar[32];
  int ng = 0, ns = 0;
  const uint32_t size = g_size[id];
  for (uint32_t m = g.mask; m; m &= m - 1) {
    const uintptr_t a = g.addr[__builtin_ctz(m)];
    if (shared_address(a)) shar[ns++] = a;
    else glob[ng++] = a;
  }
  uint64_t* st = g_stat[id];
  const int atomic = g_kind[id] == K_ATOMIC;
  if (ng) measure_global(st, glob, ng, size, atomic);
  if (ns) measure_shared(st, shar, ns, size, atomic);
  if (ng && ns) g_total[T_GROUPS_MIXED]++;
}

// Basic blocks of the epoch that ends now: a warp executed block b as often as its busiest
// lane did, each time with the lanes that had not yet run out of occurrences.
static void finish_blocks(void) {
  const uint32_t threads = (uint32_t)g_threads;
  for (uint32_t t = 0; t < g_nblocks_touched; t++) {
    const uint32_t id = g_blocks_touched[t];
    const Count* c = &g_count[(size_t)id * COUNT_ROW];
    uint64_t groups = 0, lanes = 0;
    for (uint32_t w = 0; w < threads; w += 32) {
      uint32_t most = 0;
      const uint32_t end = w + 32 < threads ? w + 32 : threads;
      for (uint32_t r = w; r < end; r++)
        if (c[r].epoch == g_epoch) {
          lanes += c[r].n;
          most = c[r].n > most ? c[r].n : most;
        }
      groups += most;
    }
    g_stat[id][S_B_GROUPS] += groups;
    g_stat[id][S_B_LANES] += lanes;
  }
  g_nblocks_touched = 0;
}

// Measures every request of the epoch that ends now.
static void finish_epoch(void) {
  finish_blocks();
  for (uint32_t p = 0; p < g_npending; p++) {
    Groups& gs = g_groups[g_pending[p]];
    const uint32_t id = g_pending[p] / MAX_WARPS;
    for (uint32_t k = 0; k < gs.n; k++) measure(id, gs.g[k]);
    gs.n = 0;
  }
  g_npending = 0;
  g_epoch++;
}

// ---------------------------------------------------------------- the hot paths

// One lane's access of a counted instruction: into the k-th request of its warp.
__attribute__((noinline)) static void record(uint32_t id, uintptr_t addr, uintptr_t frame) {
  // A thread's own stack (local arrays) lies just above the hook's frame.
  if (GCPROF_UNLIKELY(addr - frame < g_stack_bytes)) {
    g_stat[id][S_LOCAL_LANES]++;
    return;
  }
  const uint32_t r = __gcemu_thread_rank();
  if (GCPROF_UNLIKELY(g_trace != NULL)) {
    if (g_trace_n < g_trace_cap) g_trace[g_trace_n] = {(uint64_t)addr, id, r, (uint32_t)g_block, g_epoch};
    g_trace_n++;
  }
  Count& c = g_count[(size_t)id * COUNT_ROW + r];
  if (c.epoch != g_epoch) { c.epoch = g_epoch; c.n = 0; }
  const uint32_t k = c.n++;
  const uint32_t key = id * MAX_WARPS + (r >> 5);
  Groups& gs = g_groups[key];
  if (gs.epoch != g_epoch) {
    gs.epoch = g_epoch;
    gs.n = 0;
    g_pending[g_npending++] = key;
  }
  if (k == gs.n) {
    if (GCPROF_UNLIKELY(gs.n == gs.cap)) {
      const uint32_t cap = gs.cap ? 2 * gs.cap : 16;
      Group* grown = (Group*)realloc(gs.g, sizeof(Group) * cap);
      if (!grown) {  // out of memory: this access goes uncounted
        c.n = k;
        return;
      }
      gs.g = grown;
      gs.cap = cap;
    }
    gs.g[gs.n++].mask = 0;
  }
  Group& g = gs.g[k];
  g.mask |= 1u << (r & 31);
  g.addr[r & 31] = addr;
}

// Kept small so that the many accesses not counted (launch arguments, built-in
// variables) cost a compare and a return.
static inline void access(uintptr_t pc, uintptr_t addr, uint32_t size, uint8_t kind) {
  const Slot& s = g_cache[cache_index(pc)];
  uint32_t id;
  if (GCPROF_LIKELY(s.pc == pc)) {
    if (s.skip) return;
    id = s.id;
  } else {
    id = new_id(pc, kind, size, addr);
    if (!id || g_skip[id]) return;
  }
  record(id, addr, (uintptr_t)__builtin_frame_address(0));
}

#define GCPROF_RA ((uintptr_t)__builtin_return_address(0))
#define GCPROF_ACCESS(N)                                                                        \
  GCPROF_HOOK void __tsan_read##N(void* a) { access(GCPROF_RA, (uintptr_t)a, N, K_READ); }        \
  GCPROF_HOOK void __tsan_write##N(void* a) { access(GCPROF_RA, (uintptr_t)a, N, K_WRITE); }      \
  GCPROF_HOOK void __tsan_unaligned_read##N(void* a) { access(GCPROF_RA, (uintptr_t)a, N, K_READ); } \
  GCPROF_HOOK void __tsan_unaligned_write##N(void* a) { access(GCPROF_RA, (uintptr_t)a, N, K_WRITE); } \
  GCPROF_HOOK void __tsan_volatile_read##N(void* a) { access(GCPROF_RA, (uintptr_t)a, N, K_READ); } \
  GCPROF_HOOK void __tsan_volatile_write##N(void* a) { access(GCPROF_RA, (uintptr_t)a, N, K_WRITE); } \
  GCPROF_HOOK void __tsan_unaligned_volatile_read##N(void* a) { access(GCPROF_RA, (uintptr_t)a, N, K_READ); } \
  GCPROF_HOOK void __tsan_unaligned_volatile_write##N(void* a) { access(GCPROF_RA, (uintptr_t)a, N, K_WRITE); }
GCPROF_ACCESS(1)
GCPROF_ACCESS(2)
GCPROF_ACCESS(4)
GCPROF_ACCESS(8)
GCPROF_ACCESS(16)
#undef GCPROF_ACCESS

// Block copies (struct assignment, memcpy): one access of the copy's length.
GCPROF_HOOK void __tsan_read_range(void* a, unsigned long n) {
  if (n) access(GCPROF_RA, (uintptr_t)a, (uint32_t)(n < 128 ? n : 128), K_READ);
}
GCPROF_HOOK void __tsan_write_range(void* a, unsigned long n) {
  if (n) access(GCPROF_RA, (uintptr_t)a, (uint32_t)(n < 128 ? n : 128), K_WRITE);
}

// clang replaces memcpy/memset/memmove in instrumented code by these. The write is a
// second instruction one byte on, so that it gets its own id but the same source line.
GCPROF_HOOK void* __tsan_memcpy(void* d, const void* s, unsigned long n) {
  if (n) {
    access(GCPROF_RA, (uintptr_t)s, (uint32_t)(n < 128 ? n : 128), K_READ);
    access(GCPROF_RA + 1, (uintptr_t)d, (uint32_t)(n < 128 ? n : 128), K_WRITE);
  }
  return memcpy(d, s, n);
}
GCPROF_HOOK void* __tsan_memmove(void* d, const void* s, unsigned long n) {
  if (n) {
    access(GCPROF_RA, (uintptr_t)s, (uint32_t)(n < 128 ? n : 128), K_READ);
    access(GCPROF_RA + 1, (uintptr_t)d, (uint32_t)(n < 128 ? n : 128), K_WRITE);
  }
  return memmove(d, s, n);
}
GCPROF_HOOK void* __tsan_memset(void* d, int c, unsigned long n) {
  if (n) access(GCPROF_RA, (uintptr_t)d, (uint32_t)(n < 128 ? n : 128), K_WRITE);
  return memset(d, c, n);
}

// Called by the atomic wrappers of profile_prelude.h before the atomic itself runs.
GCPROF_HOOK void __gcprof_atomic(const void* a, unsigned size) {
  access(GCPROF_RA, (uintptr_t)a, size, K_ATOMIC);
}

GCPROF_HOOK void __sanitizer_cov_trace_pc(void) {
  const uint32_t id = lookup(GCPROF_RA, K_BLOCK, 0, 0);
  if (!id) return;
  const uint32_t r = __gcemu_thread_rank();
  Count& c = g_count[(size_t)id * COUNT_ROW + r];
  if (GCPROF_UNLIKELY(c.epoch != g_epoch)) {
    c.epoch = g_epoch;
    c.n = 0;
    if (g_block_epoch[id] != g_epoch) {  // counted at the end of the epoch
      g_block_epoch[id] = g_epoch;
      g_blocks_touched[g_nblocks_touched++] = id;
    }
  }
  c.n++;
}

// A thread starts when the kernel's entry point is entered at depth 0; a new block index
// then ends the previous block.
GCPROF_HOOK void __tsan_func_entry(void*) {
  const uint32_t r = __gcemu_thread_rank();
  if (g_depth[r]++ == 0) {
    const uint64_t b = blockIdx.x + (uint64_t)gridDim.x * (blockIdx.y + (uint64_t)gridDim.y * blockIdx.z);
    if (b != g_block) {
      finish_epoch();
      g_block = b;
      g_total[T_BLOCKS]++;
      g_threads = (int)(blockDim.x * blockDim.y * blockDim.z);
      g_arrived = 0;
    }
  }
}
GCPROF_HOOK void __tsan_func_exit(void) {
  const uint32_t r = __gcemu_thread_rank();
  if (g_depth[r] > 0) g_depth[r]--;
}
GCPROF_HOOK void __tsan_init(void) {}
GCPROF_HOOK void __tsan_vptr_update(void*, void*) {}
GCPROF_HOOK void __tsan_vptr_read(void*) {}

// __syncthreads (linked with --wrap): the last thread to arrive ends the epoch.
GCPROF_HOOK int __wrap___gcemu_block_barrier(int pred) {
  if (++g_arrived == g_threads) {
    g_arrived = 0;
    finish_epoch();
    g_total[T_BARRIERS]++;
    g_total[T_WARP_BARRIERS] += (uint64_t)((g_threads + 31) / 32);
  }
  return __real___gcemu_block_barrier(pred);
}

// ---------------------------------------------------------------- Python's side

// Starts a launch: ranges holds (start, end, 256-byte-alignment shift) of each array argument.
GCPROF_API int gcprof_reset(const uint64_t* ranges, int nranges, uint64_t stack_bytes) {
  if (ensure_tables() != 0) return -1;
  memset(g_stat, 0, sizeof g_stat);
  memset(g_total, 0, sizeof g_total);
  memset(g_depth, 0, sizeof g_depth);
  for (int r = 0; r < g_nranges; r++) free(g_range[r].bits);
  g_nranges = 0;
  g_last_range = 0;
  for (int r = 0; r < nranges && r < MAX_RANGES; r++) {
    Range& R = g_range[g_nranges];
    R.lo = ranges[3 * r];
    R.hi = ranges[3 * r + 1];
    R.shift = ranges[3 * r + 2];
    R.bits = NULL;
    R.nbits = 0;
    g_nranges++;
    if (R.hi <= R.lo) continue;  // an empty array: kept so that indices match Python's
    R.nbits = (size_t)((((R.hi - 1 + R.shift) >> 5) - ((R.lo + R.shift) >> 5)) + 1);
    R.bits = (uint64_t*)calloc((R.nbits + 63) / 64, sizeof(uint64_t));
    if (!R.bits) return -1;
  }
  if (__start_gcshared && __stop_gcshared > __start_gcshared) {
    g_sh_lo = (uintptr_t)__start_gcshared;
    g_sh_hi = (uintptr_t)__stop_gcshared;
  }
  free(g_hot_key);
  free(g_hot_val);
  g_hot_key = g_hot_val = NULL;
  g_hot_cap = g_hot_used = 0;
  g_stack_bytes = (uintptr_t)stack_bytes;
  g_npending = 0;
  g_nblocks_touched = 0;
  g_epoch++;
  g_block = ~0ull;
  g_arrived = 0;
  return 0;
}

// Measures what the last block left open; call after the launch.
GCPROF_API void gcprof_finish(void) { finish_epoch(); }

// Instructions not to count (emulator internals), as offsets from the library's base.
GCPROF_API void gcprof_skip(const uint64_t* offsets, int n) {
  Dl_info info;
  if (ensure_tables() != 0 || !dladdr((void*)&gcprof_skip, &info)) return;
  for (int i = 0; i < n; i++) {
    const uintptr_t pc = (uintptr_t)info.dli_fbase + offsets[i];
    const uint32_t id = new_id(pc, K_READ, 0, 0);
    if (id) {
      g_skip[id] = 1;
      g_cache[cache_index(pc)].skip = 1;
    }
  }
}

GCPROF_API uint64_t gcprof_base(void) {
  Dl_info info;
  return dladdr((void*)&gcprof_base, &info) ? (uint64_t)(uintptr_t)info.dli_fbase : 0;
}

GCPROF_API int gcprof_count(void) { return (int)g_nids; }

// Copies each id's pc, kind, access size, skip flag and counters (NSTAT per id).
GCPROF_API int gcprof_read(uint64_t* pcs, uint8_t* kinds, uint32_t* sizes, uint8_t* skips,
                           uint64_t* stats, int n) {
  if (n > (int)g_nids) n = (int)g_nids;
  for (int i = 0; i < n; i++) {
    pcs[i] = g_pc[i];
    kinds[i] = g_kind[i];
    sizes[i] = g_size[i];
    skips[i] = g_skip[i];
    memcpy(stats + (size_t)i * NSTAT, g_stat[i], sizeof g_stat[i]);
  }
  return n;
}

GCPROF_API int gcprof_nstat(void) { return NSTAT; }

// Logs each counted access of the next launches into buf (cap records; NULL: stop logging).
GCPROF_API void gcprof_trace(void* buf, uint64_t cap) {
  g_trace = (TraceRec*)buf;
  g_trace_cap = buf ? cap : 0;
  g_trace_n = 0;
}

// Accesses logged since gcprof_trace (more than its cap when the log overflowed).
GCPROF_API uint64_t gcprof_trace_count(void) { return g_trace_n; }

// Where shared memory lies: the static __shared__ section and the dynamic buffer.
GCPROF_API void gcprof_shared_range(uint64_t* out) {
  out[0] = (uint64_t)(uintptr_t)__start_gcshared;
  out[1] = (uint64_t)(uintptr_t)__stop_gcshared;
  out[2] = (uint64_t)(uintptr_t)__gcemu_dynamic_shared_buf;
}


GCPROF_API void gcprof_totals(uint64_t* out) { memcpy(out, g_total, sizeof g_total); }

GCPROF_API int gcprof_ntotal(void) { return NTOTAL; }

// Sectors of each array argument touched at least once during the launch.
GCPROF_API void gcprof_unique_sectors(uint64_t* out) {
  for (int r = 0; r < g_nranges; r++) {
    uint64_t n = 0;
    for (size_t w = 0; w < (g_range[r].nbits + 63) / 64; w++) n += (uint64_t)__builtin_popcountll(g_range[r].bits[w]);
    out[r] = n;
  }
}
