// Included (-include) before a kernel in an instrumented build (the profiler, the race
// detector): the emulator's prelude, then wrappers that call GCEMU_ATOMIC_MARK(address,
// size), a function of the tool's hooks, before each atomic operation runs. On the
// emulator an atomic is a plain read and write; without this mark a tool could not tell it
// from ordinary code. The wrapper takes its arguments first, so loads inside them (the
// index of a histogram bin) stay ordinary loads.
#ifndef GPUCOURSE_ATOMIC_MARKS_H
#define GPUCOURSE_ATOMIC_MARKS_H
#include "cuda_emu.h"

#ifndef GCEMU_ATOMIC_MARK
#error "define GCEMU_ATOMIC_MARK as the name of the function that marks an atomic"
#endif
extern "C" GCEMU_HIDDEN void GCEMU_ATOMIC_MARK(const void* address, unsigned size);
// A tool that needs to tell atomicCAS apart (the race detector: a plain read before a CAS
// loop is no race) names its own mark for it.
#ifdef GCEMU_ATOMIC_CAS_MARK
extern "C" GCEMU_HIDDEN void GCEMU_ATOMIC_CAS_MARK(const void* address, unsigned size);
#else
#define GCEMU_ATOMIC_CAS_MARK GCEMU_ATOMIC_MARK
#endif
// Likewise for the block-scoped atomics (atomicAdd_block...), atomic only among the threads
// of one block; a _system atomic is marked as a plain one.
#ifdef GCEMU_ATOMIC_BLOCK_MARK
extern "C" GCEMU_HIDDEN void GCEMU_ATOMIC_BLOCK_MARK(const void* address, unsigned size);
#else
#define GCEMU_ATOMIC_BLOCK_MARK GCEMU_ATOMIC_MARK
#endif
#ifdef GCEMU_ATOMIC_CAS_BLOCK_MARK
extern "C" GCEMU_HIDDEN void GCEMU_ATOMIC_CAS_BLOCK_MARK(const void* address, unsigned size);
#else
#define GCEMU_ATOMIC_CAS_BLOCK_MARK GCEMU_ATOMIC_CAS_MARK
#endif

#define GCEMU_MARK_ATOMIC_WITH(NAME, MARK)                                              \
  template <class T, class... R>                                                        \
  __attribute__((always_inline)) /* the mark's caller is the kernel's line, at -O0 too */ \
  static inline auto __gcemu_marked_##NAME(T* address, R... rest)                       \
      -> decltype(NAME(address, rest...)) {                                             \
    MARK((const void*)address, (unsigned)sizeof(T));                                    \
    return NAME(address, rest...);                                                      \
  }
// Each atomic in its three scopes: the device's (NAME), NAME_system and NAME_block.
#define GCEMU_MARK_ATOMIC(NAME, MARK, BLOCK_MARK) \
  GCEMU_MARK_ATOMIC_WITH(NAME, MARK)              \
  GCEMU_MARK_ATOMIC_WITH(NAME##_system, MARK)     \
  GCEMU_MARK_ATOMIC_WITH(NAME##_block, BLOCK_MARK)
#define GCEMU_MARK_PLAIN(NAME) GCEMU_MARK_ATOMIC(NAME, GCEMU_ATOMIC_MARK, GCEMU_ATOMIC_BLOCK_MARK)
GCEMU_MARK_PLAIN(atomicAdd)
GCEMU_MARK_PLAIN(atomicSub)
GCEMU_MARK_PLAIN(atomicExch)
GCEMU_MARK_PLAIN(atomicMax)
GCEMU_MARK_PLAIN(atomicMin)
GCEMU_MARK_PLAIN(atomicAnd)
GCEMU_MARK_PLAIN(atomicOr)
GCEMU_MARK_PLAIN(atomicXor)
GCEMU_MARK_PLAIN(atomicInc)
GCEMU_MARK_PLAIN(atomicDec)
GCEMU_MARK_ATOMIC(atomicCAS, GCEMU_ATOMIC_CAS_MARK, GCEMU_ATOMIC_CAS_BLOCK_MARK)
#undef GCEMU_MARK_PLAIN
#undef GCEMU_MARK_ATOMIC
#undef GCEMU_MARK_ATOMIC_WITH

// Defined after the wrappers, so that the wrappers still call the prelude's functions.
#define atomicAdd(...) __gcemu_marked_atomicAdd(__VA_ARGS__)
#define atomicAdd_system(...) __gcemu_marked_atomicAdd_system(__VA_ARGS__)
#define atomicAdd_block(...) __gcemu_marked_atomicAdd_block(__VA_ARGS__)
#define atomicSub(...) __gcemu_marked_atomicSub(__VA_ARGS__)
#define atomicSub_system(...) __gcemu_marked_atomicSub_system(__VA_ARGS__)
#define atomicSub_block(...) __gcemu_marked_atomicSub_block(__VA_ARGS__)
#define atomicExch(...) __gcemu_marked_atomicExch(__VA_ARGS__)
#define atomicExch_system(...) __gcemu_marked_atomicExch_system(__VA_ARGS__)
#define atomicExch_block(...) __gcemu_marked_atomicExch_block(__VA_ARGS__)
#define atomicMax(...) __gcemu_marked_atomicMax(__VA_ARGS__)
#define atomicMax_system(...) __gcemu_marked_atomicMax_system(__VA_ARGS__)
#define atomicMax_block(...) __gcemu_marked_atomicMax_block(__VA_ARGS__)
#define atomicMin(...) __gcemu_marked_atomicMin(__VA_ARGS__)
#define atomicMin_system(...) __gcemu_marked_atomicMin_system(__VA_ARGS__)
#define atomicMin_block(...) __gcemu_marked_atomicMin_block(__VA_ARGS__)
#define atomicAnd(...) __gcemu_marked_atomicAnd(__VA_ARGS__)
#define atomicAnd_system(...) __gcemu_marked_atomicAnd_system(__VA_ARGS__)
#define atomicAnd_block(...) __gcemu_marked_atomicAnd_block(__VA_ARGS__)
#define atomicOr(...) __gcemu_marked_atomicOr(__VA_ARGS__)
#define atomicOr_system(...) __gcemu_marked_atomicOr_system(__VA_ARGS__)
#define atomicOr_block(...) __gcemu_marked_atomicOr_block(__VA_ARGS__)
#define atomicXor(...) __gcemu_marked_atomicXor(__VA_ARGS__)
#define atomicXor_system(...) __gcemu_marked_atomicXor_system(__VA_ARGS__)
#define atomicXor_block(...) __gcemu_marked_atomicXor_block(__VA_ARGS__)
#define atomicInc(...) __gcemu_marked_atomicInc(__VA_ARGS__)
#define atomicInc_system(...) __gcemu_marked_atomicInc_system(__VA_ARGS__)
#define atomicInc_block(...) __gcemu_marked_atomicInc_block(__VA_ARGS__)
#define atomicDec(...) __gcemu_marked_atomicDec(__VA_ARGS__)
#define atomicDec_system(...) __gcemu_marked_atomicDec_system(__VA_ARGS__)
#define atomicDec_block(...) __gcemu_marked_atomicDec_block(__VA_ARGS__)
#define atomicCAS(...) __gcemu_marked_atomicCAS(__VA_ARGS__)
#define atomicCAS_system(...) __gcemu_marked_atomicCAS_system(__VA_ARGS__)
#define atomicCAS_block(...) __gcemu_marked_atomicCAS_block(__VA_ARGS__)

#endif  // GPUCOURSE_ATOMIC_MARKS_H
