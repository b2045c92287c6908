// Hooks of the emulator's hazard detector (race_check), linked into an instrumented build of
// a kernel.
//
// The kernel's translation unit is compiled with -fsanitize=thread, so every load and store
// calls __tsan_readN / __tsan_writeN (defined here, not by the sanitizer's runtime); atomics
// are marked by atomic_marks.h, and their own read and write are left uninstrumented. The
// runtime calls on_sync when a block starts, when a __syncthreads() completes and when a
// warp-level call completes: a __syncwarp, which orders memory among its lanes, or a shuffle
// or vote, which does not (the CUDA Programming Guide promises ordering only for __syncwarp).
//
// Shadow memory: one cell per 4-byte word of the launch's arrays and of shared memory holds
// the last plain write, up to two atomics and up to two plain reads since it. An access
// records its thread, the number of __syncthreads() its block had completed, its lane's
// own entry of its vector clock, and its instruction. Two accesses of different threads
// are ordered when a __syncthreads() completed between them (same block), or when their
// lanes met in a __syncwarp in between (same warp: a vector clock per lane over the 32
// lanes of its warp). Threads of different blocks are never ordered: on a GPU they run at
// the same time. Shared memory left by an earlier block is stale, not shared.
//
// A plain write conflicts with every unordered access of another thread to the same bytes,
// a plain read with unordered writes and atomics, an atomic with unordered plain accesses.
// Two atomics conflict only where one is block-scoped (atomicAdd_block...: atomic among the
// threads of its block alone) and they come from different blocks; a _system atomic is a
// plain atomic here. The first conflict is kept for Python to report; an access to
// dynamic shared memory beyond the launch's shared_mem is reported the same way, and so is
// an access outside every array argument but inside the memory around one (Python places
// each array between inaccessible pages): an index out of bounds. An index out of bounds
// comes before a race found earlier, and is still looked for after one; gcrace_reset's
// `races` = 0 looks for nothing else (the bounds check of a launch that faulted).
#include "cuda_emu.h"
#undef printf
#undef assert

#include <dlfcn.h>
#include <sys/mman.h>

#define GCRACE_LIKELY(x) __builtin_expect(!!(x), 1)
#define GCRACE_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define GCRACE_API extern "C" __attribute__((visibility("default")))
#define GCRACE_HOOK extern "C" __attribute__((visibility("hidden")))

enum { MAX_THREADS = 1024, DYN_SHARED_BYTES = 48 * 1024, MAX_RANGES = 66, MAX_BOUNDS = 64 };
// Kinds of access, and of range: keep in step with emulator/racecheck.py.
// K_CAS and K_BLOCK_CAS are for the hooks only: they are kept as K_ATOMIC, K_BLOCK_ATOMIC.
enum Kind : uint8_t {
  K_READ = 1, K_WRITE = 2, K_ATOMIC = 3, K_CAS = 4, K_BLOCK_ATOMIC = 5, K_BLOCK_CAS = 6
};
enum Space : uint8_t {
  GLOBAL = 0, SHARED = 1, DYNAMIC = 2, OUTSIDE = 3, SHARED_GUARD = 4, PLACED_GUARD = 5,
  CONSTANT_GUARD = 6
};
// What gcrace_result's first word says was found.
enum Found { F_NONE = 0, F_RACE = 1, F_BOUNDS = 2, F_UNINITIALIZED = 3 };
// Guard bytes around each placed __shared__ variable (runtime.cpp), as after static ones.
enum { PLACE_GUARD_BYTES = 256 };

extern "C" {
extern char __gcemu_dynamic_shared_buf[] __attribute__((visibility("hidden")));
extern size_t __gcemu_place_guard __attribute__((visibility("hidden")));
int __gcemu_placed_lookup(uintptr_t addr, uintptr_t* at, size_t* bytes, size_t* elem,
                          const char** name) __attribute__((visibility("hidden")));
extern char __start_gcshared[] __attribute__((weak, visibility("hidden")));
extern char __stop_gcshared[] __attribute__((weak, visibility("hidden")));
}

struct Access {         // one thread's access to one word; block 0: none
  uint32_t block;       // linear block index + 1
  uint32_t pc;          // the instruction, as an offset from the library's base
  uint32_t epoch;       // __syncthreads() its block had completed
  uint32_t lane_epoch;  // its lane's own entry of its warp vector clock
  uint16_t rank;        // the thread's linear index in its block
  uint8_t kind;
  uint8_t bytes;        // the bytes of the word it touched, as bits
};
struct Cell { Access write, atomic[2], read[2]; };
static_assert(sizeof(Cell) == 100, "racecheck.py's CELL_BYTES is sizeof(Cell)");
// A range of memory watched: its shadow cells, and for shared memory the block that last
// wrote each byte (`written`, for reads of memory no thread of the block has written).
struct Range { uintptr_t lo, hi; Cell* cells; size_t ncells; uint32_t* written; uint8_t space; };

static Range g_range[MAX_RANGES];
static int g_nranges, g_last;
// Each array argument [lo, hi) and the allocation around it [zlo, zhi).
struct Bound { uintptr_t lo, hi, zlo, zhi; };
static Bound g_bound[MAX_BOUNDS];
static int g_nbounds;
// The guard bytes after each static __shared__ array (GCEMU_SHARED_ARRAY in cuda_emu.h).
struct Guard { uintptr_t lo, hi; };
static Guard g_guard[MAX_BOUNDS];
static int g_nguards;
// The guard bytes around each __constant__ variable of the detector's build.
static Guard g_cguard[MAX_BOUNDS];
static int g_ncguards;

static inline const Guard* in_cguard(uintptr_t a) {
  for (int i = 0; i < g_ncguards; i++)
    if (a - g_cguard[i].lo < g_cguard[i].hi - g_cguard[i].lo) return &g_cguard[i];
  return NULL;
}

static inline const Guard* in_guard(uintptr_t a) {
  for (int i = 0; i < g_nguards; i++)
    if (a - g_guard[i].lo < g_guard[i].hi - g_guard[i].lo) return &g_guard[i];
  return NULL;
}
static int g_active;
static int g_races;  // looking for races, not only for indices out of bounds
static uintptr_t g_base;
static uintptr_t g_dyn_end;  // end of the dynamic shared memory the launch asked for
static uint32_t g_block, g_epoch;
static uint32_t g_vc[MAX_THREADS][32];  // per thread: the warp-sync epochs of its warp's lanes it has seen

// The first conflict: what Python reads with gcrace_result.
struct Hazard {
  int found;  // a Found
  uintptr_t addr;
  uint8_t space;
  Access first, second;
  const char* name;  // a placed __shared__ variable's name, or NULL
  uintptr_t start;   // where that variable starts
  size_t bytes;      // its bytes
  size_t elem;       // the bytes of its element
};
static Hazard g_hazard;
// The first read of shared memory that no thread of its block had written: reported at the
// end of the launch unless a race or an access out of bounds came first (a read before the
// neighbour's write is often a missing barrier, which the race check names better).
static Hazard g_uninit;

// A plain read of a word that other threads update atomically is held back, not reported:
// it is the first step of a compare-and-swap loop (read, then atomicCAS until no other
// thread got in between), correct on a GPU, where a stale read costs one more trip. It is
// dropped when the same thread's next access to that word is an atomicCAS, and reported
// otherwise (or when the thread's block ends).
struct Pending { uint32_t block; uint8_t space; uintptr_t word; Access first, second; };
static Pending g_pending[MAX_THREADS];  // per thread of the block; block 0: none held
static int g_npending;
static uint32_t g_pending_block;  // the block they were held in

// ---------------------------------------------------------------- ordering

static inline int same_thread(const Access& p, const Access& c) {
  return p.block == c.block && p.rank == c.rank;
}

// Whether p (earlier, not empty) needs no check against c: the same thread, ordered before
// it, or stale (shared memory of an earlier block).
static inline int ordered(const Access& p, const Access& c, uint8_t space) {
  if (p.block != c.block) return space != GLOBAL;
  if (p.rank == c.rank || p.epoch != c.epoch) return 1;
  if ((p.rank >> 5) != (c.rank >> 5)) return 0;
  return g_vc[c.rank][p.rank & 31] >= p.lane_epoch;
}

static inline int races(const Access& p, const Access& c, uint8_t space) {
  return p.block && (p.bytes & c.bytes) && !ordered(p, c, space);
}

static inline int is_atomic(uint8_t kind) { return kind == K_ATOMIC || kind == K_BLOCK_ATOMIC; }

// Whether two atomics conflict: one is block-scoped and they come from different blocks.
static inline int atomics_race(const Access& p, const Access& c, uint8_t space) {
  return (p.kind == K_BLOCK_ATOMIC || c.kind == K_BLOCK_ATOMIC) && p.block != c.block &&
         races(p, c, space);
}

__attribute__((noinline)) static void found(uintptr_t addr, uint8_t space, const Access& p,
                                            const Access& c) {
  if (g_hazard.found) return;
  g_hazard.found = 1;
  g_hazard.addr = addr + (p.block ? __builtin_ctz(p.bytes & c.bytes) : 0);  // the first byte both touched
  g_hazard.space = space;
  g_hazard.first = p;
  g_hazard.second = c;
  g_hazard.name = NULL;
  g_races = 0;  // the first race is the one reported; only bounds are watched from here
}

// Keeps c in one of two slots: one whose access is empty, the same thread's, or needs no
// check any more; else the second slot, so that the first keeps an older unordered one.
static inline void keep(Access* slot, Access c, uint8_t space) {
  for (int i = 0; i < 2; i++) {
    Access& s = slot[i];
    if (s.block && same_thread(s, c)) {
      c.bytes |= s.bytes;
      s = c;
      return;
    }
    if (!s.block || ordered(s, c, space)) {
      s = c;
      return;
    }
  }
  slot[1] = c;
}

// Forgets the accesses that c covers (c follows them or the check above would have fired).
static inline void forget(Access* slot, const Access& c) {
  for (int i = 0; i < 2; i++)
    if (!(slot[i].bytes & ~c.bytes)) slot[i].block = 0;
}

// Reports the first conflict held back (a read no atomicCAS followed).
__attribute__((noinline)) static void report_pending(void) {
  for (int r = 0; r < MAX_THREADS; r++)
    if (g_pending[r].block) {
      found(g_pending[r].word, g_pending[r].space, g_pending[r].first, g_pending[r].second);
      break;
    }
  memset(g_pending, 0, sizeof g_pending);
  g_npending = 0;
}

static inline int check_word(Cell& cell, const Access& c, uintptr_t word, uint8_t space) {
  const Access* prev = NULL;
  if (races(cell.write, c, space)) prev = &cell.write;
  if (!prev && is_atomic(c.kind)) {
    if (atomics_race(cell.atomic[0], c, space)) prev = &cell.atomic[0];
    else if (atomics_race(cell.atomic[1], c, space)) prev = &cell.atomic[1];
  } else if (!prev) {
    if (races(cell.atomic[0], c, space)) prev = &cell.atomic[0];
    else if (races(cell.atomic[1], c, space)) prev = &cell.atomic[1];
    if (prev && c.kind == K_READ) {  // perhaps a CAS loop's first read: hold it back
      Pending& p = g_pending[c.rank];
      if (!p.block) {
        p = Pending{c.block, space, word, *prev, c};
        g_npending++;
        g_pending_block = c.block;
      }
      prev = NULL;
    }
  }
  if (!prev && c.kind != K_READ) {
    if (races(cell.read[0], c, space)) prev = &cell.read[0];
    else if (races(cell.read[1], c, space)) prev = &cell.read[1];
  }
  if (GCRACE_UNLIKELY(prev != NULL)) {
    found(word, space, *prev, c);
    return 1;
  }
  switch (c.kind) {
    case K_READ:
      keep(cell.read, c, space);
      break;
    case K_WRITE:
      forget(cell.read, c);
      forget(cell.atomic, c);
      cell.write = c;
      break;
    default:  // an atomic: a later atomic of another thread is no conflict, a plain access is
      forget(cell.read, c);
      keep(cell.atomic, c, space);
      break;
  }
  return 0;
}

// ---------------------------------------------------------------- the hot path

static inline Range* range_of(uintptr_t a) {
  Range* R = &g_range[g_last];
  if (GCRACE_LIKELY(a - R->lo < R->hi - R->lo)) return R;
  for (int r = 0; r < g_nranges; r++)
    if (a - g_range[r].lo < g_range[r].hi - g_range[r].lo) {
      g_last = r;
      return &g_range[r];
    }
  return NULL;
}

// Whether addr lies outside every array argument but in the allocation around one.
static inline int outside_arrays(uintptr_t addr) {
  int near = 0;
  for (int b = 0; b < g_nbounds; b++) {
    const Bound& B = g_bound[b];
    if (addr - B.lo < B.hi - B.lo) return 0;
    near |= addr - B.zlo < B.zhi - B.zlo;
  }
  return near;
}

// An access to memory the thread may not touch: reported alone (no earlier access), before
// any race. The launch then runs on unobserved (Python's placement makes the access fault,
// or land in bytes no array owns).
__attribute__((noinline)) static void bad_address(uintptr_t addr, uint8_t space, Access c) {
  c.bytes = 0xF;
  g_hazard.found = 0;
  found(addr, space, Access{}, c);
  g_hazard.found = F_BOUNDS;
  g_active = 0;
  if (space == PLACED_GUARD)
    __gcemu_placed_lookup(addr, &g_hazard.start, &g_hazard.bytes, &g_hazard.elem, &g_hazard.name);
}

// Shared memory: a write marks its bytes written by this block; a read (or an atomic) of a
// byte no thread of the block has written is kept as the launch's first uninitialized read.
// Block copies (a struct with padding) are not checked. g++ does not instrument a store of a
// call's result (`s[i] = __float2half(x)`, `s[i] = make_float2(a, b)`), so a byte that no
// longer holds the runtime's poison (0xFF) counts as written.
static inline void watch_written(Range* R, uintptr_t addr, uintptr_t end, const Access& c,
                                 int checked) {
  uint32_t* w = R->written + (addr - R->lo);
  const size_t n = end - addr;
  if (c.kind != K_WRITE && checked && !g_uninit.found) {
    for (size_t k = 0; k < n; k++)
      if (w[k] != g_block && ((const unsigned char*)addr)[k] != 0xFF) w[k] = g_block;
    for (size_t k = 0; k < n; k++)
      if (w[k] != g_block) {
        g_uninit.found = F_UNINITIALIZED;
        g_uninit.addr = addr + k;
        g_uninit.space = R->space;
        g_uninit.second = c;
        g_uninit.name = NULL;
        if (R->space == DYNAMIC &&
            __gcemu_placed_lookup(addr + k, &g_uninit.start, &g_uninit.bytes, &g_uninit.elem,
                                  &g_uninit.name) != 1)
          g_uninit.name = NULL;
        break;
      }
  }
  if (c.kind != K_READ)
    for (size_t k = 0; k < n; k++) w[k] = g_block;
}

__attribute__((noinline)) static void access(uintptr_t pc, uintptr_t addr, uint32_t size, uint8_t kind,
                                             int whole = 1) {
  const int cas = kind == K_CAS || kind == K_BLOCK_CAS;
  if (cas) kind = kind == K_CAS ? K_ATOMIC : K_BLOCK_ATOMIC;
  Range* R = range_of(addr);
  const uint32_t r = __gcemu_thread_rank();
  if (GCRACE_UNLIKELY(g_npending) && g_races) {
    Pending& p = g_pending[r];
    if (g_pending_block != g_block) {
      report_pending();  // held back in a block that has ended
      return;
    }
    if (p.block && (addr & ~(uintptr_t)3) == p.word) {
      if (!cas) {  // the same thread touched the word again, and not with its CAS
        found(p.word, p.space, p.first, p.second);
        return;
      }
      p.block = 0;
      g_npending--;
    }
  }
  Access c = {g_block, (uint32_t)(pc - g_base), g_epoch, g_vc[r][r & 31], (uint16_t)r, kind, 0};
  const uintptr_t end = addr + (size ? size : 1), last = end - 1;
  // Out of bounds: the first byte, or the last of a wide access (a float4 load that starts
  // on an array's last element and runs past it).
  if (GCRACE_UNLIKELY(g_nbounds)) {
    if (!R && outside_arrays(addr)) return bad_address(addr, OUTSIDE, c);
    if (last != addr && outside_arrays(last)) return bad_address(last, OUTSIDE, c);
  }
  if (!R) {  // a read-only array, a thread's own stack, a built-in variable, a constant
    if (GCRACE_UNLIKELY(g_ncguards)) {
      if (in_cguard(addr)) return bad_address(addr, CONSTANT_GUARD, c);
      if (in_cguard(last)) return bad_address(last, CONSTANT_GUARD, c);
    }
    return;
  }
  if (GCRACE_UNLIKELY(g_nguards && R->space == SHARED)) {  // past a shared array's end
    if (in_guard(addr)) return bad_address(addr, SHARED_GUARD, c);
    if (in_guard(last)) return bad_address(last, SHARED_GUARD, c);
  }
  if (GCRACE_UNLIKELY(R->space == DYNAMIC && end > g_dyn_end)) {
    // Past the launch's shared_mem: a placed __shared__ variable, its guard bytes, or
    // nothing the launch asked for.
    uintptr_t at;
    size_t bytes, elem;
    const char* name;
    const uintptr_t first = addr < g_dyn_end ? g_dyn_end : addr;
    const int where = __gcemu_placed_lookup(first, &at, &bytes, &elem, &name);
    if (where == 2 || (where == 1 && end > at + bytes))
      return bad_address(where == 2 ? first : at + bytes, PLACED_GUARD, c);
    if (where == 0) return bad_address(addr, DYNAMIC, c);
  }
  if (!g_races) return;
  if (R->written) watch_written(R, addr, end, c, whole);
  for (uintptr_t word = addr & ~(uintptr_t)3; word < end; word += 4) {
    const size_t i = (word - R->lo) >> 2;
    if (i >= R->ncells) return;  // past the end of the range
    const uintptr_t from = addr > word ? addr : word, to = end < word + 4 ? end : word + 4;
    c.bytes = (uint8_t)(((1u << (to - from)) - 1u) << (from - word));
    if (check_word(R->cells[i], c, word, R->space)) return;
  }
}

static inline void observe(uintptr_t pc, void* a, uint32_t size, uint8_t kind) {
  if (GCRACE_LIKELY(g_active)) access(pc, (uintptr_t)a, size, kind);
}

#define GCRACE_RA ((uintptr_t)__builtin_return_address(0))
#define GCRACE_ACCESS(N)                                                                          \
  GCRACE_HOOK void __tsan_read##N(void* a) { observe(GCRACE_RA, a, N, K_READ); }                    \
  GCRACE_HOOK void __tsan_write##N(void* a) { observe(GCRACE_RA, a, N, K_WRITE); }                  \
  GCRACE_HOOK void __tsan_unaligned_read##N(void* a) { observe(GCRACE_RA, a, N, K_READ); }          \
  GCRACE_HOOK void __tsan_unaligned_write##N(void* a) { observe(GCRACE_RA, a, N, K_WRITE); }        \
  GCRACE_HOOK void __tsan_volatile_read##N(void* a) { observe(GCRACE_RA, a, N, K_READ); }           \
  GCRACE_HOOK void __tsan_volatile_write##N(void* a) { observe(GCRACE_RA, a, N, K_WRITE); }         \
  GCRACE_HOOK void __tsan_unaligned_volatile_read##N(void* a) { observe(GCRACE_RA, a, N, K_READ); } \
  GCRACE_HOOK void __tsan_unaligned_volatile_write##N(void* a) { observe(GCRACE_RA, a, N, K_WRITE); }
GCRACE_ACCESS(1)
GCRACE_ACCESS(2)
GCRACE_ACCESS(4)
GCRACE_ACCESS(8)
GCRACE_ACCESS(16)
#undef GCRACE_ACCESS

// Block copies (struct assignment, memcpy), memset: every word of the copy.
static inline void observe_range(uintptr_t pc, void* a, unsigned long n, uint8_t kind) {
  for (unsigned long k = 0; k < n && g_active; k += 16)
    access(pc, (uintptr_t)a + k, (uint32_t)(n - k < 16 ? n - k : 16), kind, 0);
}
GCRACE_HOOK void __tsan_read_range(void* a, unsigned long n) { observe_range(GCRACE_RA, a, n, K_READ); }
GCRACE_HOOK void __tsan_write_range(void* a, unsigned long n) { observe_range(GCRACE_RA, a, n, K_WRITE); }
GCRACE_HOOK void* __tsan_memcpy(void* d, const void* s, unsigned long n) {
  observe_range(GCRACE_RA, (void*)s, n, K_READ);
  observe_range(GCRACE_RA, d, n, K_WRITE);
  return memcpy(d, s, n);
}
GCRACE_HOOK void* __tsan_memmove(void* d, const void* s, unsigned long n) {
  observe_range(GCRACE_RA, (void*)s, n, K_READ);
  observe_range(GCRACE_RA, d, n, K_WRITE);
  return memmove(d, s, n);
}
GCRACE_HOOK void* __tsan_memset(void* d, int c, unsigned long n) {
  observe_range(GCRACE_RA, d, n, K_WRITE);
  return memset(d, c, n);
}

// Called by the wrappers of atomic_marks.h before the atomic itself runs.
GCRACE_HOOK void __gcrace_atomic(const void* a, unsigned size) {
  observe(GCRACE_RA, (void*)a, size, K_ATOMIC);
}
GCRACE_HOOK void __gcrace_atomic_cas(const void* a, unsigned size) {
  observe(GCRACE_RA, (void*)a, size, K_CAS);
}
GCRACE_HOOK void __gcrace_atomic_block(const void* a, unsigned size) {
  observe(GCRACE_RA, (void*)a, size, K_BLOCK_ATOMIC);
}
GCRACE_HOOK void __gcrace_atomic_cas_block(const void* a, unsigned size) {
  observe(GCRACE_RA, (void*)a, size, K_BLOCK_CAS);
}

GCRACE_HOOK void __tsan_func_entry(void*) {}
GCRACE_HOOK void __tsan_func_exit(void) {}
GCRACE_HOOK void __tsan_init(void) {}
GCRACE_HOOK void __tsan_vptr_update(void*, void*) {}
GCRACE_HOOK void __tsan_vptr_read(void*) {}

// ---------------------------------------------------------------- blocks and syncs

static void on_sync(int event, unsigned members) {
  if (event == GCEMU_SYNC_BLOCK) {  // members: the block's threads
    g_block = 1u + (uint32_t)(blockIdx.x + (uint64_t)gridDim.x * (blockIdx.y + (uint64_t)gridDim.y * blockIdx.z));
    g_epoch = 0;
    memset(g_vc, 0, sizeof g_vc[0] * members);
    for (unsigned t = 0; t < members; t++) g_vc[t][t & 31] = 1;
  } else if (event == GCEMU_SYNC_BARRIER) {
    g_epoch++;
  } else if (event == GCEMU_SYNC_WARP) {
    // A __syncwarp(): its lanes see what each other has seen, then start anew. Shuffles and
    // votes (GCEMU_SYNC_EXCHANGE) order no memory, so they join nothing.
    uint32_t(*lane)[32] = &g_vc[__gcemu_thread_rank() & ~31u];
    uint32_t join[32] = {0};
    for (unsigned m = members; m; m &= m - 1) {
      const uint32_t* v = lane[__builtin_ctz(m)];
      for (int k = 0; k < 32; k++) join[k] = v[k] > join[k] ? v[k] : join[k];
    }
    for (unsigned m = members; m; m &= m - 1) {
      const int l = __builtin_ctz(m);
      memcpy(lane[l], join, sizeof join);
      lane[l][l] = join[l] + 1;
    }
  }
}

// ---------------------------------------------------------------- Python's side

static void release(void) {
  for (int r = 0; r < g_nranges; r++) {
    if (g_range[r].cells) munmap(g_range[r].cells, sizeof(Cell) * g_range[r].ncells);
    if (g_range[r].written) munmap(g_range[r].written, 4 * (g_range[r].hi - g_range[r].lo));
  }
  g_nranges = 0;
  g_last = 0;
  g_nbounds = 0;
  g_nguards = 0;
  g_ncguards = 0;
  g_active = 0;
}

static int add_range(uintptr_t lo, uintptr_t hi, uint8_t space) {
  if (hi <= lo || g_nranges >= MAX_RANGES) return 0;
  Range& R = g_range[g_nranges];
  R.lo = lo & ~(uintptr_t)3;
  R.hi = hi;
  R.space = space;
  R.ncells = (hi - R.lo + 3) / 4;
  void* p = mmap(NULL, sizeof(Cell) * R.ncells, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);  // zero-filled, lazily
  if (p == MAP_FAILED) return -1;
  R.cells = (Cell*)p;
  R.written = NULL;
  if (space != GLOBAL) {
    void* w = mmap(NULL, 4 * (hi - R.lo), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (w == MAP_FAILED) {
      munmap(p, sizeof(Cell) * R.ncells);
      return -1;
    }
    R.written = (uint32_t*)w;
  }
  g_nranges++;
  return 0;
}

// Starts observing: ranges holds (start, end) of each array argument, not overlapping;
// races = 0 watches bounds only.
GCRACE_API int gcrace_reset(const uint64_t* ranges, int nranges, unsigned dyn_shared, int races) {
  release();
  memset(&g_hazard, 0, sizeof g_hazard);
  memset(&g_uninit, 0, sizeof g_uninit);
  __gcemu_place_guard = PLACE_GUARD_BYTES;
  memset(g_pending, 0, sizeof g_pending);
  g_npending = 0;
  Dl_info info;
  g_base = dladdr((void*)&gcrace_reset, &info) ? (uintptr_t)info.dli_fbase : 0;
  int rc = 0;
  if (__start_gcshared && __stop_gcshared > __start_gcshared)
    rc |= add_range((uintptr_t)__start_gcshared, (uintptr_t)__stop_gcshared, SHARED);
  const uintptr_t dyn = (uintptr_t)__gcemu_dynamic_shared_buf;
  rc |= add_range(dyn, dyn + 2 * DYN_SHARED_BYTES, DYNAMIC);  // placed variables follow
  g_dyn_end = dyn + dyn_shared;
  for (int r = 0; r < nranges && rc == 0; r++) rc |= add_range(ranges[2 * r], ranges[2 * r + 1], GLOBAL);
  if (rc) {
    release();
    return -1;
  }
  g_block = g_epoch = 0;
  __gcemu_sync_hook = on_sync;
  g_races = races;
  g_active = 1;
  return 0;
}

// Bounds of the array arguments, after gcrace_reset: (lo, hi, zlo, zhi) of each, where
// [zlo, zhi) is the allocation around [lo, hi) whose other bytes no argument may touch.
GCRACE_API void gcrace_bounds(const uint64_t* bounds, int n) {
  g_nbounds = 0;
  for (int b = 0; b < n && b < MAX_BOUNDS; b++, g_nbounds++)
    g_bound[b] = Bound{bounds[4 * b], bounds[4 * b + 1], bounds[4 * b + 2], bounds[4 * b + 3]};
}

// Guard bytes of the static shared arrays, after gcrace_reset: (start, end) of each as
// offsets from the library's base (symbol values).
GCRACE_API void gcrace_guards(const uint64_t* guards, int n) {
  g_nguards = 0;
  for (int i = 0; i < n && i < MAX_BOUNDS; i++, g_nguards++)
    g_guard[i] = Guard{g_base + (uintptr_t)guards[2 * i], g_base + (uintptr_t)guards[2 * i + 1]};
}

// Guard bytes around the __constant__ variables, after gcrace_reset: (start, end) of each
// as addresses.
GCRACE_API void gcrace_constant_guards(const uint64_t* guards, int n) {
  g_ncguards = 0;
  for (int i = 0; i < n && i < MAX_BOUNDS; i++, g_ncguards++)
    g_cguard[i] = Guard{(uintptr_t)guards[2 * i], (uintptr_t)guards[2 * i + 1]};
}

// Stops observing and frees the shadow memory; call after the launch.
GCRACE_API void gcrace_finish(void) { release(); }

// The first conflict: found, address, space, then kind, block, rank and instruction of the
// earlier access and of the later one; then the name, start and element bytes of the placed
// __shared__ variable it concerns (0 where none).
GCRACE_API void gcrace_result(uint64_t* out) {
  if (!g_hazard.found && g_npending && g_races) report_pending();  // held in the launch's last block
  if (!g_hazard.found && g_uninit.found) g_hazard = g_uninit;
  const Access* a[2] = {&g_hazard.first, &g_hazard.second};
  out[0] = (uint64_t)g_hazard.found;
  out[1] = (uint64_t)g_hazard.addr;
  out[2] = g_hazard.space;
  for (int i = 0; i < 2; i++) {
    out[3 + 4 * i] = a[i]->kind;
    out[4 + 4 * i] = a[i]->block ? a[i]->block - 1u : 0u;
    out[5 + 4 * i] = a[i]->rank;
    out[6 + 4 * i] = a[i]->pc;
  }
  out[11] = (uint64_t)(uintptr_t)g_hazard.name;
  out[12] = g_hazard.name ? (uint64_t)g_hazard.start : 0;
  out[13] = g_hazard.name ? (uint64_t)g_hazard.bytes : 0;
  out[14] = g_hazard.name ? (uint64_t)g_hazard.elem : 0;
}

// Where dynamic and static shared memory start, and the library's base, for messages.
GCRACE_API void gcrace_shared(uint64_t* out) {
  out[0] = (uint64_t)(uintptr_t)__gcemu_dynamic_shared_buf;
  out[1] = __start_gcshared ? (uint64_t)(uintptr_t)__start_gcshared : 0;
  out[2] = (uint64_t)g_base;  // the library's base, that symbol values count from
}
