// Part of the emulator's runtime (runtime.cpp includes it, in one translation unit): warp-wide
// gathers (wmma) and the shared memory of templates' __shared__ variables.
// A gather: every lane of the warp brings a pointer to what it holds (a wmma fragment and
// its arguments); the lane that arrives last gets all 32 and does the work for the warp
// before any other lane goes on. A lane that returned, or a warp of fewer than 32 threads,
// stops the kernel: these operations belong to a whole warp.
static void gather_complete(const Warp* w, Fiber* base, unsigned members, int kind) {
  (void)kind;
  if (members != 0xffffffffu || w->exists != 0xffffffffu) {
    char missing[160];
    lane_list(~members, missing, sizeof missing);
    const Fiber* f = &base[__builtin_ctz(members)];
    if (w->exists != 0xffffffffu)
      snprintf(g_message, sizeof g_message,
               "kernel %s: %s needs a whole warp of 32 threads, but warp %u of block "
               "(%u,%u,%u) has only lanes 0-%d (the block has %d threads); make the block size "
               "a multiple of 32",
               g_kernel, f->what, f->rank >> 5, blockIdx.x, blockIdx.y, blockIdx.z,
               31 - __builtin_clz(w->exists), g_n);
    else
      snprintf(g_message, sizeof g_message,
               "kernel %s: %s is called by lanes of warp %u in block (%u,%u,%u) while lanes %s "
               "returned first; every lane of the warp must make the call (a fragment belongs to "
               "the whole warp), so guard the work around it with an if instead of returning",
               g_kernel, f->what, f->rank >> 5, blockIdx.x, blockIdx.y, blockIdx.z, missing);
    g_status = 1;
    leave_to_main();
  }
}

extern "C" void __gcemu_fail_message(const char* what) {
  snprintf(g_message, sizeof g_message, "kernel %s: %s", g_kernel, what);
  g_status = 1;
  leave_to_main();
}

extern "C" void* const* __gcemu_warp_gather(void* desc, int op, const char* what) {
  Fiber* f = g_cur;
  Warp* w = &g_warp[f->rank >> 5];
  w->desc[f->rank & 31] = desc;
  g_completer = NULL;
  warp_call(0xffffffffu, WARP_GATHER + op, what);
  return g_completer == f ? (void* const*)w->desc : NULL;
}

// ---------------------------------------------------------------- placed shared memory

// The __shared__ variables of templates, inline functions and lambdas: the host compiler
// keeps such statics out of the "gcshared" section, so emulator/source.py rewrites each
// declaration to ask for its memory here. It lies in the dynamic shared buffer after the
// launch's shared_mem, handed out in the order threads first reach each declaration, fresh
// (poisoned) in every block. A tool may ask for guard bytes around each (the race detector).
enum { MAX_PLACED = 256 };
struct Placed { uintptr_t at; size_t bytes, elem; const char* name; };
static Placed g_placed[MAX_PLACED];
static int g_nplaced;
static size_t g_place_top;
static unsigned long long g_block_serial;
extern "C" {
GCEMU_HIDDEN size_t __gcemu_place_guard;  // guard bytes before and after each (set by a tool)
}

static void place_block_start(unsigned dyn_shared) {
  g_block_serial++;
  g_nplaced = 0;
  g_place_top = ((dyn_shared + 15u) & ~(size_t)15u) + __gcemu_place_guard;
}

static size_t static_shared_bytes(void);
// The static __shared__ bytes of the kernel being launched (Python sets them from the
// library's symbols), or (size_t)-1: the whole section's, every kernel's arrays.
static size_t g_kernel_static_shared = (size_t)-1;
GCEMU_EXPORT void gcemu_set_static_shared(size_t bytes) { g_kernel_static_shared = bytes; }
static size_t kernel_static_shared(void) {
  return g_kernel_static_shared != (size_t)-1 ? g_kernel_static_shared : static_shared_bytes();
}

extern "C" void* __gcemu_shared_place(GcemuSharedSlot* slot, size_t bytes, size_t align,
                                      size_t elem, const char* name) {
  if (slot->block == g_block_serial) return slot->at;
  if (align < 1 || (align & (align - 1))) align = 16;
  const size_t at = (g_place_top + align - 1) & ~(align - 1), end = at + bytes;
  const size_t used = __gcemu_place_guard ? end + __gcemu_place_guard  // a tool's build
                                          : end + kernel_static_shared();
  if (used > (__gcemu_place_guard ? 2u * DYN_SHARED_BYTES : (size_t)DYN_SHARED_BYTES)) {
    snprintf(g_message, sizeof g_message,
             "kernel %s: the __shared__ array `%s` (%zu bytes, in a template or inline function) "
             "does not fit in the 48 KB of shared memory a block may have beside the kernel's "
             "other __shared__ arrays (%zu bytes) and its shared_mem; use smaller tiles",
             g_kernel, name, bytes, kernel_static_shared() + (at - __gcemu_place_guard));
    g_status = 1;
    leave_to_main();
  }
  char* p = __gcemu_dynamic_shared_buf + at;
  memset(p, 0xff, bytes);
  if (g_nplaced < MAX_PLACED) g_placed[g_nplaced++] = Placed{(uintptr_t)p, bytes, elem, name};
  g_place_top = end + __gcemu_place_guard;
  slot->block = g_block_serial;
  slot->at = p;
  return p;
}

// Where `addr` lies among this block's placed variables: 1 in one (its start, size, element
// size and name set), 2 in the guard bytes after or before one (likewise), 0 in neither.
extern "C" int __gcemu_placed_lookup(uintptr_t addr, uintptr_t* at, size_t* bytes, size_t* elem,
                                     const char** name) {
  const size_t g = __gcemu_place_guard;
  for (int k = 0; k < g_nplaced; k++) {
    const Placed& P = g_placed[k];
    const int inside = addr - P.at < P.bytes;
    if (inside || addr - (P.at + P.bytes) < g || P.at - addr - 1 < g) {
      *at = P.at;
      *bytes = P.bytes;
      *elem = P.elem;
      *name = P.name;
      return inside ? 1 : 2;
    }
  }
  return 0;
}

