// Part of the emulator's runtime (runtime.cpp includes it, in one translation unit): kernel
// printf output, faults and interrupts during a launch, and the watchdog of its time limit.
// ---------------------------------------------------------------- printf

static char* g_out;
static size_t g_out_len, g_out_cap;
static int g_out_truncated;

extern "C" int __gcemu_printf(const char* fmt, ...) {
  char local[256];
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(local, sizeof local, fmt, ap);
  va_end(ap);
  if (n < 0) return n;
  if (g_out_len + (size_t)n > OUT_LIMIT) {  // as on a GPU, a full printf buffer drops output
    g_out_truncated = 1;
    return n;
  }
  if (g_out_len + (size_t)n + 1 > g_out_cap) {
    size_t cap = g_out_cap ? g_out_cap : 4096;
    while (cap < g_out_len + (size_t)n + 1) cap *= 2;
    char* grown = (char*)realloc(g_out, cap);
    if (!grown) return -1;
    g_out = grown;
    g_out_cap = cap;
  }
  if ((size_t)n < sizeof local) {
    memcpy(g_out + g_out_len, local, (size_t)n + 1);
  } else {
    va_start(ap, fmt);
    vsnprintf(g_out + g_out_len, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  g_out_len += (size_t)n;
  return n;
}

// Copies up to `cap` bytes of the collected printf output; returns its full length.
GCEMU_EXPORT size_t gcemu_output(char* dst, size_t cap) {
  if (dst && g_out_len) memcpy(dst, g_out, g_out_len < cap ? g_out_len : cap);
  return g_out_len;
}

GCEMU_EXPORT int gcemu_output_clear(void) {
  const int truncated = g_out_truncated;
  g_out_len = 0;
  g_out_truncated = 0;
  return truncated;
}

// ---------------------------------------------------------------- faults

static sigjmp_buf g_jmp;
static volatile sig_atomic_t g_signal;
static void* volatile g_fault_addr;
static volatile int g_fault_code;
static pthread_t g_thread;
static const int k_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGINT};
enum { NSIG_HANDLED = sizeof(k_signals) / sizeof(k_signals[0]), ALT_BYTES = 64 * 1024 };
static struct sigaction g_old_action[NSIG_HANDLED];
static stack_t g_old_alt;
static char* g_alt_stack;

// The last fault of a launch, for gcemu_fault.
static volatile int g_fault_write;  // 0 unknown, 1 a read, 2 a write
static uint3 g_fault_tid, g_fault_block;
static volatile int g_fault_in_thread;
// Watchdog (gcemu_set_timeout): it interrupts the launch with SIGINT and says so here.
static double g_timeout_s;
static volatile sig_atomic_t g_timed_out;

static void on_signal(int sig, siginfo_t* info, void* context) {
  (void)context;
  if (!pthread_equal(pthread_self(), g_thread)) {
    if (sig == SIGINT) {
      pthread_kill(g_thread, SIGINT);  // an interrupt is for the launch
      return;
    }
    // Another thread's fault is not ours: give it back to the previous handler.
    for (int i = 0; i < NSIG_HANDLED; i++)
      if (k_signals[i] == sig) sigaction(sig, &g_old_action[i], NULL);
    return;
  }
  g_signal = sig;
  g_fault_addr = info ? info->si_addr : NULL;
  g_fault_code = info ? info->si_code : 0;
  g_fault_write = 0;
#if GCEMU_FAULT_KIND
  if (context && sig == SIGSEGV)  // bit 1 of the page fault's error code: a write
    g_fault_write = (((ucontext_t*)context)->uc_mcontext.gregs[REG_ERR] & 2) ? 2 : 1;
#endif
  siglongjmp(g_jmp, 1);
}

static void install_handlers(void) {
  g_thread = pthread_self();
  if (!g_alt_stack) {
    void* m = mmap(NULL, ALT_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    g_alt_stack = m == MAP_FAILED ? NULL : (char*)m;
  }
  if (g_alt_stack) {
    stack_t ss;
    ss.ss_sp = g_alt_stack;
    ss.ss_size = ALT_BYTES;
    ss.ss_flags = 0;
    sigaltstack(&ss, &g_old_alt);
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < NSIG_HANDLED; i++) sigaction(k_signals[i], &sa, &g_old_action[i]);
}

static void remove_handlers(void) {
  for (int i = 0; i < NSIG_HANDLED; i++) sigaction(k_signals[i], &g_old_action[i], NULL);
  if (g_alt_stack) sigaltstack(&g_old_alt, NULL);
}

static int fault_message(void) {
  char at[96];
  where(at, sizeof at);
  g_fault_in_thread = g_cur != NULL;
  if (g_cur) g_fault_tid = g_cur->tid;
  g_fault_block = blockIdx;
  const int sig = g_signal;
  const char* addr = (const char*)g_fault_addr;
  if (sig == SIGINT && g_timed_out) {
    snprintf(g_message, sizeof g_message,
             "kernel %s did not finish within %g s (an endless loop, e.g. a loop whose index "
             "never advances, or a launch too large for the emulator: then pass a larger "
             "timeout=)",
             g_kernel, g_timeout_s);
    return 2;
  }
  if (sig == SIGINT) {
    snprintf(g_message, sizeof g_message, "kernel %s was interrupted", g_kernel);
    return 3;
  }
  if ((sig == SIGSEGV || sig == SIGBUS) && g_stacks && addr >= g_stacks &&
      addr < g_stacks + g_stride * (size_t)g_stack_count &&
      (size_t)(addr - g_stacks) % g_stride < g_page) {
    snprintf(g_message, sizeof g_message,
             "kernel %s: %s overflowed its %zu KB stack (deep recursion or large local "
             "arrays); set the environment variable GPUCOURSE_EMU_STACK_KB to give each "
             "thread more",
             g_kernel, at, g_stack_bytes / 1024);
  } else if ((sig == SIGSEGV && g_fault_code == SI_KERNEL) ||
             (sig == SIGBUS && g_fault_code == BUS_ADRALN)) {
    // x86-64 raises a general protection fault, with no address, for a misaligned 16-byte
    // (SSE) access and for a non-canonical address.
    snprintf(g_message, sizeof g_message,
             "kernel %s crashed: %s made a misaligned vector access (a float4 or double2 needs "
             "a 16-byte aligned address) or used a pointer far outside memory",
             g_kernel, at);
  } else if (sig == SIGSEGV || sig == SIGBUS) {
    snprintf(g_message, sizeof g_message,
             "kernel %s crashed: %s accessed invalid memory at address %p (an index out of "
             "bounds, or a pointer that does not point into an array passed to the kernel?)",
             g_kernel, at, (void*)addr);
  } else if (sig == SIGFPE) {
    snprintf(g_message, sizeof g_message, "kernel %s: %s divided an integer by zero",
             g_kernel, at);
  } else {
    snprintf(g_message, sizeof g_message,
             "kernel %s: %s stopped at a trap or an illegal instruction", g_kernel, at);
  }
  return 2;
}

// ---------------------------------------------------------------- watchdog

static pthread_mutex_t g_wd_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_wd_cond = PTHREAD_COND_INITIALIZER;
static int g_wd_armed;  // a launch is running under the watchdog (guarded by g_wd_mutex)
static pthread_t g_wd_thread;
static struct timespec g_wd_deadline;  // CLOCK_REALTIME, as pthread_cond_timedwait wants
static volatile int g_wd_started;      // a watchdog thread runs for this launch

static void* watchdog(void*) {
  pthread_mutex_lock(&g_wd_mutex);
  while (g_wd_armed) {
    if (pthread_cond_timedwait(&g_wd_cond, &g_wd_mutex, &g_wd_deadline) == ETIMEDOUT &&
        g_wd_armed) {
      // Only while the launch runs: it clears g_wd_armed under this mutex before it stops
      // listening for SIGINT.
      g_timed_out = 1;
      pthread_kill(g_thread, SIGINT);
      break;
    }
  }
  pthread_mutex_unlock(&g_wd_mutex);
  return NULL;
}

static int start_watchdog(void) {
  g_timed_out = 0;
  if (!(g_timeout_s > 0)) return 0;
  clock_gettime(CLOCK_REALTIME, &g_wd_deadline);
  const double whole = (double)(long long)g_timeout_s;
  g_wd_deadline.tv_sec += (time_t)whole;
  g_wd_deadline.tv_nsec += (long)((g_timeout_s - whole) * 1e9);
  if (g_wd_deadline.tv_nsec >= 1000000000L) {
    g_wd_deadline.tv_sec++;
    g_wd_deadline.tv_nsec -= 1000000000L;
  }
  g_wd_armed = 1;
  // SIGINT waits until the thread's id is stored (a jump out of pthread_create would lose
  // it); the watchdog inherits the mask, so an interrupt from outside never lands there.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  g_wd_started = pthread_create(&g_wd_thread, NULL, watchdog, NULL) == 0;
  if (!g_wd_started) g_wd_armed = 0;  // no watchdog: the launch runs without a time limit
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return g_wd_started;
}

// Stops the watchdog with SIGINT blocked, so that its signal cannot land later in Python;
// one it sent in the meantime is taken off the queue here.
static void stop_watchdog(void) {
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  pthread_mutex_lock(&g_wd_mutex);
  g_wd_armed = 0;
  pthread_cond_signal(&g_wd_cond);
  pthread_mutex_unlock(&g_wd_mutex);
  pthread_join(g_wd_thread, NULL);
  g_wd_started = 0;
  sigset_t pending;
  if (sigpending(&pending) == 0 && sigismember(&pending, SIGINT)) {
    int sig;
    sigwait(&block, &sig);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

// Time limit of the launches that follow, in seconds (0: none). A launch that takes longer
// stops with "did not finish within ... s".
GCEMU_EXPORT void gcemu_set_timeout(double seconds) { g_timeout_s = seconds > 0 ? seconds : 0; }

// The fault that ended the last launch: signal (0: none), address, 1 for a read or 2 for a
// write (0: unknown), whether a thread ran, then its threadIdx and blockIdx.
GCEMU_EXPORT void gcemu_fault(uint64_t* out) {
  out[0] = (uint64_t)g_signal;
  out[1] = (uint64_t)(uintptr_t)g_fault_addr;
  out[2] = (uint64_t)g_fault_write;
  out[3] = (uint64_t)g_fault_in_thread;
  out[4] = g_fault_tid.x;
  out[5] = g_fault_tid.y;
  out[6] = g_fault_tid.z;
  out[7] = g_fault_block.x;
  out[8] = g_fault_block.y;
  out[9] = g_fault_block.z;
}
