// Runtime of the course's CPU emulator. It runs a launch block after block; the threads of
// a block are fibers on one OS thread that switch only at __syncthreads, warp functions
// and exit, so a kernel that forgets a barrier reads data its neighbours have not written
// yet, as it would on a GPU.
//
// Context switch: a hand-written x86-64 switch (about 20 ns) where it exists, else
// ucontext (portable, but about 650 ns because swapcontext makes a system call). Define
// GCEMU_FORCE_UCONTEXT to use the fallback on x86-64 too.
//
// A fault (SIGSEGV...) or an interrupt during a launch ends it with a message; gcemu_fault
// tells Python where a fault was (Python places a launch's arrays between inaccessible
// pages, so a fault there is an index out of bounds). gcemu_set_timeout arms a watchdog that
// ends the next launches, an endless loop included, after that many seconds.
#if defined(__APPLE__) && !defined(_XOPEN_SOURCE)
#define _XOPEN_SOURCE 700  // ucontext on macOS
#endif
#include "cuda_emu.h"
#undef printf
#undef assert

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__ELF__) && !defined(GCEMU_FORCE_UCONTEXT)
#define GCEMU_FAST_SWITCH 1
#else
#define GCEMU_FAST_SWITCH 0
#include <ucontext.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <ucontext.h>  // the page fault's error code: was it a write?
#define GCEMU_FAULT_KIND 1
#else
#define GCEMU_FAULT_KIND 0
#endif

#ifndef MAP_NORESERVE
#define MAP_NORESERVE 0
#endif
#ifndef MAP_ANONYMOUS
#define MAP_ANONYMOUS MAP_ANON
#endif

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
const int warpSize = 32;

enum { MAX_THREADS = 1024, MAX_WARPS = 32, DYN_SHARED_BYTES = 48 * 1024, OUT_LIMIT = 1 << 20 };

// `extern __shared__ T name[];` in a kernel is rewritten to name this buffer. The placed
// __shared__ variables (of templates, see __gcemu_shared_place) follow the launch's
// shared_mem in it; the second half is room for a tool's guard bytes around them.
extern "C" {
GCEMU_HIDDEN char __gcemu_dynamic_shared_buf[2 * DYN_SHARED_BYTES] __attribute__((aligned(128)));
#if defined(__ELF__)
// Start and end of the section that holds every static __shared__ variable (set by the linker).
extern char __start_gcshared[] __attribute__((weak, visibility("hidden")));
extern char __stop_gcshared[] __attribute__((weak, visibility("hidden")));
#endif
}

// ---------------------------------------------------------------- fibers

enum { READY, WAIT_BLOCK, WAIT_WARP, DONE };

struct Fiber {
  void* sp;  // saved stack pointer (fast switch)
#if !GCEMU_FAST_SWITCH
  ucontext_t uc;
#endif
  uint3 tid;
  unsigned rank;       // linear index in the block
  int pos;             // position in this block's run order
  int state;
  int returned;        // it ended by a `return;` statement of the kernel
  int wait_kind;       // the kind of warp function it waits in (WARP_SYNC...)
  unsigned wait_mask;  // the mask of the warp function it waits in (its own lane added)
  const char* what;    // what it waits in, for deadlock messages
  GcemuWarpResult result;  // of its last warp function
};

// Warp functions: __syncwarp, exchanges (shuffles, votes), which move values, and
// collectives (matches, reductions): kind WARP_COLLECTIVE + mode, so that only lanes in the
// same one complete together.
enum { WARP_SYNC = 1, WARP_EXCHANGE = 2, WARP_COLLECTIVE = 16, WARP_GATHER = 64 };

struct Warp {
  unsigned exists;   // lanes present (the last warp of a block may be partial)
  unsigned waiting;  // lanes waiting in a warp function
  unsigned done;     // lanes that have returned
  // What each waiting lane brought to its exchange: its value and the lane it reads.
  uint64_t value[32];
  uint8_t src[32];
  void* desc[32];  // what each lane brings to a gather (a wmma operation)
};

// Set by a tool linked into the build (the race detector), else NULL; see cuda_emu.h.
void (*__gcemu_sync_hook)(int event, unsigned members);

static Fiber g_fiber[MAX_THREADS];
static int g_order[MAX_THREADS];
static Warp g_warp[MAX_WARPS];
static int g_n;
static Fiber* g_cur;
static int g_arrived, g_done;
// The threads a __syncthreads() waits for: the block's, less those of warps that have
// finished as a whole (on compute capability 7.0 and later exited threads hold no barrier).
static int g_expected;
static unsigned g_round;
static int g_round_line;  // line of the __syncthreads() the current round's threads reached
int __gcemu_barrier_line;
static int g_bar_count[2], g_bar_and[2], g_bar_or[2];
static void (*g_entry)(void**);
static void** g_args;
static const char* g_kernel = "?";
static int g_status;
static char g_message[1024];

// Stacks: one per thread of a block, each with a guard page below it. Python lends one pool
// that every kernel file of the process shares (gcemu_lend_stacks): a pool of its own in
// each file would keep two memory mappings per thread for the life of the process, and a
// process may map at most vm.max_map_count (65,530) regions. Without a loan the file
// allocates its own once.
static char* g_stacks;
static size_t g_stack_bytes, g_stride, g_page;
static int g_stack_count;
static int g_stacks_lent;

#if GCEMU_FAST_SWITCH
static void* g_main_sp;
extern "C" GCEMU_HIDDEN void gcemu_switch(void** save_sp, void* next_sp);
extern "C" GCEMU_HIDDEN void gcemu_trampoline(void);
extern "C" GCEMU_HIDDEN void gcemu_fiber_main(void);
// Saves the callee-saved registers on the current stack, stores the stack pointer, loads
// the next one and pops its registers. A new fiber's stack is laid out so that the final
// `ret` enters gcemu_trampoline, which calls gcemu_fiber_main.
__asm__(
    ".pushsection .text\n"
    ".globl gcemu_switch\n"
    ".hidden gcemu_switch\n"
    ".type gcemu_switch,@function\n"
    "gcemu_switch:\n"
    "  pushq %rbp\n"
    "  pushq %rbx\n"
    "  pushq %r12\n"
    "  pushq %r13\n"
    "  pushq %r14\n"
    "  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n"
    "  popq %r14\n"
    "  popq %r13\n"
    "  popq %r12\n"
    "  popq %rbx\n"
    "  popq %rbp\n"
    "  ret\n"
    ".size gcemu_switch,.-gcemu_switch\n"
    ".globl gcemu_trampoline\n"
    ".hidden gcemu_trampoline\n"
    ".type gcemu_trampoline,@function\n"
    "gcemu_trampoline:\n"
    "  call gcemu_fiber_main\n"
    "  ud2\n"
    ".size gcemu_trampoline,.-gcemu_trampoline\n"
    ".popsection\n");
#else
static ucontext_t g_main_uc;
static int g_uc_ready;  // fibers whose ucontext has been initialised by getcontext
extern "C" GCEMU_HIDDEN void gcemu_fiber_main(void);
#endif

static int ensure_stacks(int n, size_t stack_bytes) {
  if (!g_page) g_page = (size_t)sysconf(_SC_PAGESIZE);
  stack_bytes = (stack_bytes + g_page - 1) / g_page * g_page;
  if (g_stacks && n <= g_stack_count && stack_bytes == g_stack_bytes) return 0;
  if (g_stacks_lent) return -1;  // the lender sizes its pool for each launch
  int count = n > g_stack_count ? n : g_stack_count;
  if (count < 64) count = 64;
  if (g_stacks) munmap(g_stacks, g_stride * (size_t)g_stack_count);
  g_stacks = NULL;
  g_stack_count = 0;
  const size_t stride = stack_bytes + g_page;
  void* mem = mmap(NULL, stride * (size_t)count, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) return -1;
  for (int i = 0; i < count; i++) mprotect((char*)mem + stride * (size_t)i, g_page, PROT_NONE);
  g_stacks = (char*)mem;
  g_stack_bytes = stack_bytes;
  g_stride = stride;
  g_stack_count = count;
  return 0;
}

static inline void prepare_fiber(Fiber* f, int i) {
  char* top = g_stacks + (size_t)(i + 1) * g_stride;
#if GCEMU_FAST_SWITCH
  // Six zeroed registers, then the return address; after `ret` the stack is 16-byte
  // aligned, as the ABI wants before the trampoline's call.
  void** sp = (void**)(top - 72);
  for (int k = 0; k < 6; k++) sp[k] = 0;
  sp[6] = (void*)gcemu_trampoline;
  sp[7] = sp[8] = 0;
  f->sp = sp;
#else
  if (i >= g_uc_ready) {
    getcontext(&f->uc);
    g_uc_ready = i + 1;
  }
  f->uc.uc_stack.ss_sp = top - g_stack_bytes;
  f->uc.uc_stack.ss_size = g_stack_bytes;
  f->uc.uc_link = NULL;
  makecontext(&f->uc, gcemu_fiber_main, 0);
#endif
}

static inline void switch_to(Fiber* from, Fiber* to) {
  g_cur = to;
  threadIdx = to->tid;
#if GCEMU_FAST_SWITCH
  gcemu_switch(&from->sp, to->sp);
#else
  swapcontext(&from->uc, &to->uc);
#endif
}

static void enter_from_main(Fiber* to) {
  g_cur = to;
  threadIdx = to->tid;
#if GCEMU_FAST_SWITCH
  gcemu_switch(&g_main_sp, to->sp);
#else
  swapcontext(&g_main_uc, &to->uc);
#endif
}

// Leaves the current fiber for good (block finished, or the launch failed).
__attribute__((noreturn)) static void leave_to_main(void) {
#if GCEMU_FAST_SWITCH
  gcemu_switch(&g_cur->sp, g_main_sp);
#else
  swapcontext(&g_cur->uc, &g_main_uc);
#endif
  abort();  // an abandoned fiber is never resumed
}

#include "runtime_messages.h"

// ---------------------------------------------------------------- scheduling

// Runs the next ready fiber after the current one in this block's order. Returns when the
// current fiber is ready again (at once if it still is and no other fiber is).
// The scheduler's hot paths start on a 64-byte boundary, so that their speed does not depend
// on how much code comes before them (as the kernels', see cuda_emu.h).
__attribute__((aligned(64))) static void run_next(void) {
  Fiber* cur = g_cur;
  const int n = g_n;
  int q = cur->pos;
  for (int k = 0; k < n; k++) {
    if (++q == n) q = 0;
    Fiber* f = &g_fiber[g_order[q]];
    if (f->state == READY) {
      if (f != cur) switch_to(cur, f);
      return;
    }
  }
  report_deadlock();
}

static void warp_lane_returned(Warp* w, Fiber* base, unsigned bit);
static void release_barrier(void);

extern "C" GCEMU_HIDDEN void gcemu_fiber_main(void) {
  g_entry(g_args);
  Fiber* f = g_cur;
  f->state = DONE;
  Warp* w = &g_warp[f->rank >> 5];
  const unsigned bit = 1u << (f->rank & 31);
  w->done |= bit;
  if (w->waiting) warp_lane_returned(w, &g_fiber[f->rank & ~31u], bit);
  if (++g_done == g_n) leave_to_main();
  if (w->done == w->exists) {
    g_expected -= __builtin_popcount(w->exists);
    if (g_arrived && g_arrived == g_expected) release_barrier();
  }
  run_next();
  abort();  // a finished fiber is never resumed
}

// ---------------------------------------------------------------- barriers

extern "C" __attribute__((aligned(64))) int __gcemu_block_barrier(int pred) {
  // Results of __syncthreads_count/and/or alternate between two slots: a fast thread can
  // reach the next barrier before a slow one has read this one's result.
  const int s = (int)(g_round & 1u);
  if (g_arrived == 0) {
    g_bar_count[s] = 0;
    g_bar_and[s] = 1;
    g_bar_or[s] = 0;
  }
  Fiber* f = g_cur;
  const int line = __gcemu_barrier_line;
  if (g_arrived == 0) {
    g_round_line = line;
  } else if (line != g_round_line) {  // CUDA leaves it undefined; it often hangs
    snprintf(g_message, sizeof g_message,
             "kernel %s: __syncthreads() is reached by only some threads of block (%u,%u,%u) "
             "(a barrier inside a branch or loop that differs per thread): thread (%u,%u,%u) "
             "reached the one on line %d while %d threads wait at the one on line %d; every "
             "thread must reach the same barrier",
             g_kernel, blockIdx.x, blockIdx.y, blockIdx.z, f->tid.x, f->tid.y, f->tid.z, line,
             g_arrived, g_round_line);
    g_status = 1;
    leave_to_main();
  }
  pred = pred != 0;
  g_bar_count[s] += pred;
  g_bar_and[s] &= pred;
  g_bar_or[s] |= pred;
  if (++g_arrived == g_expected) {  // the last one releases everybody and runs on
    release_barrier();
    return s;
  }
  f->state = WAIT_BLOCK;
  f->what = "__syncthreads()";
  run_next();
  return s;
}

// Every thread the barrier waits for has arrived: all go on.
static void release_barrier(void) {
  g_arrived = 0;
  g_round++;
  if (__gcemu_sync_hook) __gcemu_sync_hook(GCEMU_SYNC_BARRIER, (unsigned)g_n);
  for (int i = 0; i < g_n; i++)
    if (g_fiber[i].state == WAIT_BLOCK) g_fiber[i].state = READY;
}

extern "C" int __gcemu_barrier_result(int s, int kind) {
  return kind == 0 ? g_bar_count[s] : kind == 1 ? g_bar_and[s] : g_bar_or[s];
}

// A match or a reduction (mode GCEMU_MATCH_ANY...) over the values of `members`: each
// lane's answer in its result's value.
__attribute__((noinline)) static void collective_complete(const Warp* w, Fiber* base,
                                                          unsigned members, int mode) {
  uint64_t all = 0;  // a reduction's result, or whether all values match
  if (mode == GCEMU_MATCH_ALL) {
    const uint64_t first = w->value[__builtin_ctz(members)];
    all = 1;
    for (unsigned m = members; m; m &= m - 1) all &= w->value[__builtin_ctz(m)] == first;
  } else if (mode != GCEMU_MATCH_ANY) {
    uint32_t u = (uint32_t)w->value[__builtin_ctz(members)];
    for (unsigned m = members & (members - 1); m; m &= m - 1) {
      const uint32_t v = (uint32_t)w->value[__builtin_ctz(m)];
      switch (mode) {
        case GCEMU_REDUCE_ADD: u += v; break;
        case GCEMU_REDUCE_MIN: u = (int32_t)v < (int32_t)u ? v : u; break;
        case GCEMU_REDUCE_UMIN: u = v < u ? v : u; break;
        case GCEMU_REDUCE_MAX: u = (int32_t)v > (int32_t)u ? v : u; break;
        case GCEMU_REDUCE_UMAX: u = v > u ? v : u; break;
        case GCEMU_REDUCE_AND: u &= v; break;
        case GCEMU_REDUCE_OR: u |= v; break;
        default: u ^= v; break;  // GCEMU_REDUCE_XOR
      }
    }
    all = u;
  }
  unsigned left = members;  // match any: the lanes whose group is still to be found
  for (unsigned m = members; m; m &= m - 1) {
    const int l = __builtin_ctz(m);
    GcemuWarpResult* r = &base[l].result;
    if (mode == GCEMU_MATCH_ANY && ((left >> l) & 1u)) {
      unsigned same = 0;
      for (unsigned k = left; k; k &= k - 1)
        same |= (unsigned)(w->value[__builtin_ctz(k)] == w->value[l]) << __builtin_ctz(k);
      left &= ~same;
      for (unsigned k = same; k; k &= k - 1) base[__builtin_ctz(k)].result.value = same;
    } else if (mode != GCEMU_MATCH_ANY) {
      r->value = all;
    }
    r->valid = 1;
    r->members = members;
    r->ballot = 0;
  }
}

// Completes the warp function that `members` wait in (the running thread among them or
// not): each exchange result comes from the values of exactly these lanes, taken now. A
// lane that reads one outside them (returned, or not in the mask) gets no valid value.
static void gather_complete(const Warp* w, Fiber* base, unsigned members, int kind);
static Fiber* g_completer;  // the lane whose warp function call completed its group

static void warp_complete(Warp* w, Fiber* base, unsigned members, int kind) {
  w->waiting &= ~members;
  if (kind == WARP_EXCHANGE) {
    unsigned ballot = 0;
    for (unsigned m = members; m; m &= m - 1) {
      const int l = __builtin_ctz(m);
      ballot |= (unsigned)(w->value[l] != 0) << l;
    }
    for (unsigned m = members; m; m &= m - 1) {
      const int l = __builtin_ctz(m), s = w->src[l];
      GcemuWarpResult* r = &base[l].result;
      r->value = w->value[s];
      r->valid = (int)((members >> s) & 1u);
      r->members = members;
      r->ballot = ballot;
    }
  } else if (kind >= WARP_GATHER) {
    gather_complete(w, base, members, kind);
  } else if (kind >= WARP_COLLECTIVE) {
    collective_complete(w, base, members, kind - WARP_COLLECTIVE);
  }
  if (__gcemu_sync_hook)
    __gcemu_sync_hook(kind == WARP_SYNC ? GCEMU_SYNC_WARP : GCEMU_SYNC_EXCHANGE, members);
  for (unsigned m = members; m; m &= m - 1) {
    Fiber* g = &base[__builtin_ctz(m)];
    if (g != g_cur) g->state = READY;
  }
}

// Whether every lane of `others` waits in a warp function of this kind and mask.
static inline int warp_group_here(const Warp* w, const Fiber* base, unsigned others,
                                  unsigned mask, int kind) {
  if ((w->waiting & others) != others) return 0;
  for (unsigned m = others; m; m &= m - 1) {
    const Fiber* g = &base[__builtin_ctz(m)];
    if (g->wait_mask != mask || g->wait_kind != kind) return 0;
  }
  return 1;
}

// The running thread calls a warp function with `mask`; it returns once every lane of the
// mask that has not returned has made the same call (same kind, same mask), as in CUDA.
static void warp_call(unsigned mask, int kind, const char* what) {
  Fiber* f = g_cur;
  Warp* w = &g_warp[f->rank >> 5];
  Fiber* base = &g_fiber[f->rank & ~31u];
  const unsigned bit = 1u << (f->rank & 31);
  const unsigned m = (mask | bit) & w->exists;
  if (warp_group_here(w, base, m & ~w->done & ~bit, m, kind)) {
    warp_complete(w, base, m & ~w->done, kind);
    g_completer = f;  // this lane completed it (a gather's work is its to do)
    return;
  }
  w->waiting |= bit;
  f->state = WAIT_WARP;
  f->wait_kind = kind;
  f->wait_mask = m;
  f->what = what;
  run_next();
}

// A lane has returned: the warp functions of its warp that waited only for it complete.
static void warp_lane_returned(Warp* w, Fiber* base, unsigned bit) {
  unsigned seen = 0;
  for (unsigned m = w->waiting; m; m &= m - 1) {
    const Fiber* g = &base[__builtin_ctz(m)];
    if ((seen >> __builtin_ctz(m)) & 1u) continue;
    const unsigned mask = g->wait_mask, members = mask & ~w->done;
    seen |= members;
    if ((mask & bit) && warp_group_here(w, base, members, mask, g->wait_kind))
      warp_complete(w, base, members, g->wait_kind);
  }
}

extern "C" void __gcemu_syncwarp(unsigned mask) { warp_call(mask, WARP_SYNC, "__syncwarp()"); }

extern "C" const GcemuWarpResult* __gcemu_exchange(unsigned mask, uint64_t value, int mode,
                                                    int arg, int width, const char* what) {
  Fiber* f = g_cur;
  const int lane = (int)(f->rank & 31);
  Warp* w = &g_warp[f->rank >> 5];
  // The lane it reads, by CUDA's rules; one outside its group of `width` lanes keeps its
  // own value.
  const int base = lane & ~(width - 1);
  int src;
  switch (mode) {
    case GCEMU_SHFL_IDX: src = base + (arg & (width - 1)); break;
    case GCEMU_SHFL_UP: src = lane - arg < base ? lane : lane - arg; break;
    case GCEMU_SHFL_DOWN: src = lane + arg >= base + width ? lane : lane + arg; break;
    case GCEMU_SHFL_XOR: src = (lane ^ arg) >= base + width || (lane ^ arg) < 0 ? lane : lane ^ arg; break;
    default: src = lane; break;  // a vote
  }
  if (src < 0 || src > 31) src = lane;
  w->value[lane] = value;
  w->src[lane] = (uint8_t)src;
  warp_call(mask, WARP_EXCHANGE, what);
  return &f->result;
}

// A match or a reduction: only lanes in the same one (same mode, same mask) complete it
// together, and warp_complete computes each lane's answer from all their values.
extern "C" const GcemuWarpResult* __gcemu_collective(unsigned mask, uint64_t value, int mode,
                                                      const char* what) {
  Fiber* f = g_cur;
  g_warp[f->rank >> 5].value[f->rank & 31] = value;
  warp_call(mask, WARP_COLLECTIVE + mode, what);
  return &f->result;
}

#include "runtime_places.h"

extern "C" unsigned __gcemu_thread_rank(void) { return g_cur ? g_cur->rank : 0u; }

extern "C" void __gcemu_return(void) {
  if (g_cur) g_cur->returned = 1;
}

extern "C" void __gcemu_fail(const char* what) {
  char at[96];
  where(at, sizeof at);
  snprintf(g_message, sizeof g_message, "kernel %s: %s in %s", g_kernel, what, at);
  g_status = 1;
  leave_to_main();
}

extern "C" void __gcemu_assert_fail(const char* expr, const char* file, int line) {
  char at[96];
  where(at, sizeof at);
  snprintf(g_message, sizeof g_message, "kernel %s: assertion `%s` failed (%s line %d) in %s",
           g_kernel, expr, file, line, at);
  g_status = 1;
  leave_to_main();
}

extern "C" long long __gcemu_clock64(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#include "runtime_signals.h"

// ---------------------------------------------------------------- launch

static uint64_t next_random(uint64_t* s) {  // xorshift64*
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1DULL;
}

static unsigned long long gcd(unsigned long long a, unsigned long long b) {
  while (b) {
    unsigned long long t = a % b;
    a = b;
    b = t;
  }
  return a;
}

static void run_block(int order, uint64_t* rng, unsigned dyn_shared) {
  // Poison shared memory so that reading it before writing it gives NaN (or -1), never
  // the previous block's plausible data.
#if defined(__ELF__)
  if (__start_gcshared && __stop_gcshared > __start_gcshared)
    memset(__start_gcshared, 0xff, (size_t)(__stop_gcshared - __start_gcshared));
#endif
  if (dyn_shared) memset(__gcemu_dynamic_shared_buf, 0xff, dyn_shared);

  const int n = g_n;
  for (int i = 0; i < n; i++) g_order[i] = order == 1 ? n - 1 - i : i;
  if (order == 2)
    for (int i = n - 1; i > 0; i--) {
      const int j = (int)(next_random(rng) % (uint64_t)(i + 1));
      const int t = g_order[i];
      g_order[i] = g_order[j];
      g_order[j] = t;
    }
  for (int p = 0; p < n; p++) g_fiber[g_order[p]].pos = p;
  for (int i = 0; i < n; i++) {
    Fiber* f = &g_fiber[i];
    f->state = READY;
    f->returned = 0;
    prepare_fiber(f, i);
  }
  for (int w = 0; w < (n + 31) / 32; w++) g_warp[w].waiting = g_warp[w].done = 0;
  g_arrived = g_done = 0;
  g_expected = n;
  g_round = 0;
  place_block_start(dyn_shared);
  if (__gcemu_sync_hook) __gcemu_sync_hook(GCEMU_SYNC_BLOCK, (unsigned)n);
  enter_from_main(&g_fiber[g_order[0]]);
  g_cur = NULL;
}

static unsigned long long g_block_count, g_block_a, g_block_c;
static volatile int g_order_mode;

// Runs one launch. order: 0 threads and blocks in index order, 1 reversed, 2 shuffled
// (by seed). Returns 0 on success, 1 for an error in the kernel (deadlock, assert, trap),
// 2 for a crash, 3 when interrupted, 4 for a bad request; `message` then says what.
// Uses `count` stacks of `stack_bytes` each, the first at base + page, each `stack_bytes`
// + page apart with an inaccessible page below it (base NULL: the file's own pool again).
// Called before every launch, under the caller's launch lock.
GCEMU_EXPORT void gcemu_lend_stacks(char* base, size_t stack_bytes, int count) {
  if (!g_page) g_page = (size_t)sysconf(_SC_PAGESIZE);
  if (!base && !g_stacks_lent) return;  // keeps a pool of its own
  if (g_stacks && !g_stacks_lent) munmap(g_stacks, g_stride * (size_t)g_stack_count);
  g_stacks = base;
  g_stacks_lent = base != NULL;
  g_stack_bytes = base ? stack_bytes : 0;
  g_stride = base ? stack_bytes + g_page : 0;
  g_stack_count = base ? count : 0;
}

GCEMU_EXPORT int gcemu_launch(const char* kernel, void (*entry)(void**), void** args,
                              const unsigned* grid, const unsigned* block, unsigned dyn_shared,
                              int order, unsigned long long seed, unsigned stack_kb,
                              char* message, unsigned message_len) {
  g_kernel = kernel;
  g_status = 0;
  g_message[0] = 0;
  const unsigned long long n = (unsigned long long)block[0] * block[1] * block[2];
  const size_t stack_bytes = (size_t)(stack_kb ? stack_kb : 32) * 1024;
  int rc = 0;
  if (n < 1 || n > MAX_THREADS || dyn_shared > DYN_SHARED_BYTES) {
    snprintf(g_message, sizeof g_message, "kernel %s: bad launch request", kernel);
    rc = 4;
  } else if (ensure_stacks((int)n, stack_bytes) != 0) {
    snprintf(g_message, sizeof g_message,
             "kernel %s: could not allocate %llu thread stacks of %zu KB", kernel, n,
             stack_bytes / 1024);
    rc = 4;
  }
  if (rc) {
    if (message && message_len) snprintf(message, message_len, "%s", g_message);
    return rc;
  }
  g_n = (int)n;
  g_entry = entry;
  g_args = args;
  blockDim = dim3(block[0], block[1], block[2]);
  gridDim = dim3(grid[0], grid[1], grid[2]);
  for (int i = 0; i < g_n; i++) {
    Fiber* f = &g_fiber[i];
    f->rank = (unsigned)i;
    f->tid.x = (unsigned)i % block[0];
    f->tid.y = ((unsigned)i / block[0]) % block[1];
    f->tid.z = (unsigned)i / (block[0] * block[1]);
  }
  for (int w = 0; w < (g_n + 31) / 32; w++) {
    const int lanes = g_n - 32 * w >= 32 ? 32 : g_n - 32 * w;
    g_warp[w].exists = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1u;
  }

  uint64_t rng = seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
  g_block_count = (unsigned long long)grid[0] * grid[1] * grid[2];
  g_order_mode = order;
  // Shuffled block order: b -> (a*b + c) mod count with a coprime to count is a permutation.
  g_block_a = 1;
  g_block_c = 0;
  if (order == 2 && g_block_count > 1) {
    do g_block_a = 1 + next_random(&rng) % (g_block_count - 1 ? g_block_count - 1 : 1);
    while (gcd(g_block_a, g_block_count) != 1);
    g_block_c = next_random(&rng) % g_block_count;
  }

  install_handlers();
  g_signal = 0;
  g_fault_addr = NULL;
  g_fault_in_thread = 0;
  g_timed_out = 0;
  if (sigsetjmp(g_jmp, 1) == 0) {
    start_watchdog();  // only now may its signal jump back here
    for (unsigned long long b = 0; b < g_block_count; b++) {
      unsigned long long lin = b;
      if (g_order_mode == 1) lin = g_block_count - 1 - b;
      if (g_order_mode == 2)
        lin = (unsigned long long)(((unsigned __int128)g_block_a * b + g_block_c) % g_block_count);
      blockIdx.x = (unsigned)(lin % grid[0]);
      blockIdx.y = (unsigned)((lin / grid[0]) % grid[1]);
      blockIdx.z = (unsigned)(lin / ((unsigned long long)grid[0] * grid[1]));
      run_block(g_order_mode, &rng, dyn_shared);
      if (g_status) break;
    }
    rc = g_status;
  } else {
    rc = fault_message();
  }
  if (g_wd_started) stop_watchdog();
  remove_handlers();
  g_cur = NULL;
  if (message && message_len) snprintf(message, message_len, "%s", g_message);
  return rc;
}

GCEMU_EXPORT const char* gcemu_switch_kind(void) {
  return GCEMU_FAST_SWITCH ? "x86-64 assembly" : "ucontext";
}

GCEMU_EXPORT unsigned gcemu_dynamic_shared_limit(void) { return DYN_SHARED_BYTES; }

GCEMU_EXPORT size_t gcemu_static_shared_bytes(void) { return static_shared_bytes(); }

static size_t static_shared_bytes(void) {
#if defined(__ELF__)
  if (__start_gcshared && __stop_gcshared > __start_gcshared)
    return (size_t)(__stop_gcshared - __start_gcshared);
#endif
  return 0;
}

