// Part of the emulator's runtime (runtime.cpp includes it, in one translation unit): the
// messages of a launch that cannot go on (where a thread is, which lanes, deadlocks).
// ---------------------------------------------------------------- messages

static void where(char* buf, size_t len) {
  const Fiber* f = g_cur;
  if (f)
    snprintf(buf, len, "thread (%u,%u,%u) of block (%u,%u,%u)", f->tid.x, f->tid.y, f->tid.z,
             blockIdx.x, blockIdx.y, blockIdx.z);
  else
    snprintf(buf, len, "block (%u,%u,%u)", blockIdx.x, blockIdx.y, blockIdx.z);
}

static void lane_list(unsigned mask, char* buf, size_t len) {
  size_t used = 0;
  buf[0] = 0;
  for (int i = 0; i < 32 && used < len;) {
    if (!((mask >> i) & 1u)) { i++; continue; }
    int j = i;
    while (j + 1 < 32 && ((mask >> (j + 1)) & 1u)) j++;
    int w = j > i ? snprintf(buf + used, len - used, "%s%d-%d", used ? ", " : "", i, j)
                  : snprintf(buf + used, len - used, "%s%d", used ? ", " : "", i);
    if (w < 0) break;
    used += (size_t)w;
    i = j + 1;
  }
}

__attribute__((noreturn)) static void report_deadlock(void) {
  int nb = 0, nw = 0;
  const Fiber* fw = NULL;
  for (int i = 0; i < g_n; i++) {
    if (g_fiber[i].state == WAIT_BLOCK) nb++;
    if (g_fiber[i].state == WAIT_WARP) {
      nw++;
      if (!fw) fw = &g_fiber[i];
    }
  }
  if (nw == 0) {
    // Threads that finished in warps whose other lanes wait: a warp that has finished as a
    // whole holds no barrier (compute capability 7.0 and later), so it is not counted.
    int returned = 0, finished = 0;
    for (int i = 0; i < g_n; i++) {
      const Warp* w = &g_warp[g_fiber[i].rank >> 5];
      if (g_fiber[i].state != DONE || w->done == w->exists) continue;
      finished++;
      returned += g_fiber[i].returned;
    }
    if (returned)
      snprintf(g_message, sizeof g_message,
               "kernel %s: %d thread%s of block (%u,%u,%u) wait%s at __syncthreads() on line %d "
               "that %d thread%s never reached (they returned first, while other lanes of their "
               "warps wait there); a warp that returns as a whole holds no barrier, but within a "
               "warp every thread must reach each __syncthreads(), so guard the work with an if "
               "instead of returning early",
               g_kernel, nb, nb == 1 ? "" : "s", blockIdx.x, blockIdx.y, blockIdx.z,
               nb == 1 ? "s" : "", g_round_line, finished, finished == 1 ? "" : "s");
    else
      snprintf(g_message, sizeof g_message,
               "kernel %s: __syncthreads() is reached by only some threads of block (%u,%u,%u) "
               "(a barrier inside a branch or loop that differs per thread): %d thread%s wait%s at "
               "the one on line %d while %d thread%s of their warps ha%s finished the kernel; "
               "every thread must reach the same barrier",
               g_kernel, blockIdx.x, blockIdx.y, blockIdx.z, nb, nb == 1 ? "" : "s",
               nb == 1 ? "s" : "", g_round_line, finished, finished == 1 ? "" : "s",
               finished == 1 ? "s" : "ve");
  } else if (nb == 0) {
    const unsigned wi = fw->rank >> 5;
    const Fiber* base = &g_fiber[wi * 32];
    unsigned group = 0;  // the lanes waiting in the same call as fw
    for (unsigned m = g_warp[wi].waiting; m; m &= m - 1) {
      const Fiber* g = &base[__builtin_ctz(m)];
      if (g->wait_mask == fw->wait_mask && g->wait_kind == fw->wait_kind)
        group |= 1u << __builtin_ctz(m);
    }
    char missing[160];
    lane_list(fw->wait_mask & ~group & ~g_warp[wi].done, missing, sizeof missing);
    snprintf(g_message, sizeof g_message,
             "kernel %s: %d lanes of warp %u in block (%u,%u,%u) wait in %s for lanes %s, which "
             "wait in another call or with another mask; every lane named in the mask that has "
             "not returned must make the same call with the same mask",
             g_kernel, __builtin_popcount(group), wi, blockIdx.x, blockIdx.y, blockIdx.z,
             fw->what, missing);
  } else {
    snprintf(g_message, sizeof g_message,
             "kernel %s: in block (%u,%u,%u), %d threads wait at __syncthreads() while %d wait in "
             "%s: a barrier inside a branch that not all threads of the block take",
             g_kernel, blockIdx.x, blockIdx.y, blockIdx.z, nb, nw, fw->what);
  }
  g_status = 1;
  leave_to_main();
}

